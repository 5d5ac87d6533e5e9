"""MERGE: upserts and friends, with deletion vectors for the target rows they change (copy-on-write when off).

How it runs (delta-spark's MergeIntoCommand, restated for DataFrames):

- **Insert-only** (only NOT MATCHED clauses): source left-anti-join target on the ON condition,
  the insert clauses applied, new files added. No target file is touched, no DV written.
- Otherwise the source is **materialized** once (``localCheckpoint``) with a row id, so every later
  step sees the same rows even when the source is non-deterministic or changes underneath.
  1. *Matches*: source ⋈ target (live rows, each with its file position and row index) on ON,
     materialized. A target row matched by several source rows raises
     ``DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`` here, before anything is written
     (except with a lone unconditional ``WHEN MATCHED THEN DELETE``, where duplicates are harmless).
  2. *Changes*: the matched pairs through the MATCHED clauses, the unmatched source rows (anti join on
     the row id) through the NOT MATCHED clauses, the unmatched target rows (anti join on file and row)
     through the NOT MATCHED BY SOURCE clauses; the first clause whose condition holds wins.
  3. Target rows updated or deleted are marked in DVs by the code DELETE uses (``dv_marking.py``);
     with DVs off their files are rewritten with the untouched rows copied. Updated and inserted rows
     go to new files. One commit.
- Both sides are wrapped in one struct column each, named by the aliases (``t``/``s``), so ``s.id``
  and ``t.id`` resolve as field accesses, and names unique to one side also resolve unqualified. The
  bookkeeping columns get a random suffix per command, so no user column can collide with them.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.commands.api_args import check_condition, check_mapping
from dvlake.commands.cdc_write import cdf_enabled, check_no_reserved_columns, write_change_files
from dvlake.commands.common import SKIP_EMPTY_COMMITS_CONF, records_empty_commits
from dvlake.commands.dml import (
    Committed,
    as_column,
    assigned_columns,
    resolve_assignments,
    run_row_level,
    split_name,
    sub_plan,
    unique_name,
    use_dvs,
    write_rows,
)
from dvlake.commands.dv_marking import counted, driver_room, dv_counts, mark_rows
from dvlake.commands.dv_pairs import PairWatch, watch_pairs
from dvlake.commands.merge_names import BOTH, SOURCE_ONLY, TARGET_ONLY, MergeNames, checked
from dvlake.commands.merge_pruning import target_only
from dvlake.commands.merge_source import materializes
from dvlake.commands.store_assign import Casting, cast_if_needed, casting
from dvlake.commands.write_options import AUTO_MERGE_CONF
from dvlake.config import (
    DEFAULT_MERGE_BROADCAST_SOURCE_ROWS,
    MERGE_BROADCAST_SOURCE_MAX_BYTES,
    MERGE_BROADCAST_SOURCE_ROWS,
    MERGE_DVS_PERSISTENT,
    MERGE_INSERT_ONLY_FAST_PATH,
)
from dvlake.errors import (
    DeltaAnalysisException,
    MergeUnresolvedExpressionError,
    MultipleSourceRowMatchingTargetRowError,
    NestedFieldUpdateError,
    NonLastClauseOmitConditionError,
)
from dvlake.log import features
from dvlake.log.actions import Action, AddCDCFile, Metadata
from dvlake.log.cdf_plan import CHANGE_TYPE_COL, DELETE, INSERT, UPDATE_POSTIMAGE, UPDATE_PREIMAGE
from dvlake.log.condition import Condition
from dvlake.log.condition import display_text as condition_text
from dvlake.log.schema import MAX_COLUMN_ID_KEY, assign_column_mapping, schema_json
from dvlake.log.snapshot import Snapshot
from dvlake.log.sql_dialect import quote_identifier
from dvlake.log.stats import num_records_of
from dvlake.spark import row_tracking
from dvlake.spark.dv_build import Kinds
from dvlake.spark.layout import logical_struct
from dvlake.spark.scan import ScanPlan, logical_frame, plan_scan, prune_plan
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE = "matched", "notMatched", "notMatchedBySource"
# the side(s) a clause's expressions see: no target row for NOT MATCHED, no source row for NOT MATCHED BY SOURCE
_SCOPE = {MATCHED: BOTH, NOT_MATCHED: SOURCE_ONLY, NOT_MATCHED_BY_SOURCE: TARGET_ONLY}
# kind codes of a change row
_NOOP, _M_UPDATE, _M_DELETE, _INSERT, _S_UPDATE, _S_DELETE = 0, 1, 2, 3, 4, 5
_MARKED = (_M_UPDATE, _M_DELETE, _S_UPDATE, _S_DELETE)
_WRITTEN = (_M_UPDATE, _INSERT, _S_UPDATE)

RESULT_SCHEMA = "num_affected_rows long, num_updated_rows long, num_deleted_rows long, num_inserted_rows long"


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause: its kind, action (update/delete/insert), optional condition and assignments (None = ``*``)."""

    kind: str
    action: str
    condition: str | Column | None = None
    assignments: dict[str, str | Column] | None = None


@dataclass
class MergeSpec:
    """Everything a MERGE needs, independent of the table version it runs on."""

    source: DataFrame
    condition: str | Column
    clauses: list[MergeClause]
    target_alias: str | None = None
    source_alias: str | None = None
    schema_evolution: bool = False
    _checked: bool = field(default=False, repr=False)


class DeltaMergeBuilder:
    """delta-spark's DeltaMergeBuilder: ``dt.alias("t").merge(src.alias("s"), "t.id = s.id")…execute()``."""

    def __init__(self, spark: SparkSession, path: str, target_alias: str | None, source: DataFrame,
                 condition: str | Column, source_alias: str | None = None, *,
                 on_schema_evolution: Callable[[], None] | None = None) -> None:
        self._spark = spark
        self._path = path
        self._on_schema_evolution = on_schema_evolution  # after an evolving MERGE (a name's catalog columns follow)
        self._spec = MergeSpec(source, condition, [], target_alias, source_alias)

    def _add(self, clause: MergeClause) -> DeltaMergeBuilder:
        self._spec.clauses.append(clause)
        return self

    def whenMatchedUpdate(self, condition: str | Column | None = None,
                          set: dict[str, str | Column] | None = None) -> DeltaMergeBuilder:  # noqa: A002
        mapping = check_mapping(set, "'set' in whenMatchedUpdate")
        check_condition(condition)
        return self._add(MergeClause(MATCHED, "update", condition, dict(mapping)))

    def whenMatchedUpdateAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause(MATCHED, "update", condition, None))

    def whenMatchedDelete(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause(MATCHED, "delete", condition))

    def whenNotMatchedInsert(self, condition: str | Column | None = None,
                             values: dict[str, str | Column] | None = None) -> DeltaMergeBuilder:
        mapping = check_mapping(values, "'values' in whenNotMatchedInsert")
        check_condition(condition)
        return self._add(MergeClause(NOT_MATCHED, "insert", condition, dict(mapping)))

    def whenNotMatchedInsertAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause(NOT_MATCHED, "insert", condition, None))

    def whenNotMatchedBySourceUpdate(self, condition: str | Column | None = None,
                                     set: dict[str, str | Column] | None = None) -> DeltaMergeBuilder:  # noqa: A002
        mapping = check_mapping(set, "'set' in whenNotMatchedBySourceUpdate")
        check_condition(condition)
        return self._add(MergeClause(NOT_MATCHED_BY_SOURCE, "update", condition, dict(mapping)))

    def whenNotMatchedBySourceDelete(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause(NOT_MATCHED_BY_SOURCE, "delete", condition))

    def withSchemaEvolution(self) -> DeltaMergeBuilder:
        """With ``*`` clauses, the source's new columns and new nested struct fields are added to the table (as does
        ``spark.databricks.delta.schema.autoMerge.enabled``), and struct values may lack fields of their column."""
        self._spec.schema_evolution = True
        return self

    def execute(self) -> DataFrame:
        """Run the MERGE; returns delta-spark's one-row result (affected, updated, deleted, inserted)."""
        metrics = merge(self._spark, self._path, self._spec)
        if self._on_schema_evolution is not None and evolves(self._spark, self._spec):
            self._on_schema_evolution()
        return result_frame(self._spark, metrics)


def result_frame(spark: SparkSession, metrics: dict[str, Any]) -> DataFrame:
    upd, dele, ins = (int(metrics.get(k, 0)) for k in ("numTargetRowsUpdated", "numTargetRowsDeleted",
                                                         "numTargetRowsInserted"))
    return spark.createDataFrame([(upd + dele + ins, upd, dele, ins)], RESULT_SCHEMA)


_OMIT_CONDITION_CLASS = {MATCHED: ("MATCHED", "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION"),
                         NOT_MATCHED: ("NOT MATCHED [BY TARGET]", "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION"),
                         NOT_MATCHED_BY_SOURCE: ("NOT MATCHED BY SOURCE",
                                                 "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION")}


def _check_clauses(clauses: list[MergeClause]) -> None:
    if not clauses:
        raise DeltaAnalysisException("There must be at least one WHEN clause in a MERGE statement: add WHEN MATCHED, "
                                     "WHEN NOT MATCHED or WHEN NOT MATCHED BY SOURCE.", "DELTA_MERGE_MISSING_WHEN")
    for kind, (label, error_class) in _OMIT_CONDITION_CLASS.items():
        of_kind = [c for c in clauses if c.kind == kind]
        if any(c.condition is None for c in of_kind[:-1]):
            raise NonLastClauseOmitConditionError(
                f"When there are more than one {label} clauses in a MERGE statement, only the last {label} clause can "
                "omit the condition (the clauses are tried in order, so the ones after it could never run).",
                error_class)


def merge(spark: SparkSession, path: str, spec: MergeSpec) -> dict[str, Any]:
    """Run a MERGE described by ``spec``; returns the commit's operationMetrics."""
    _check_clauses(spec.clauses)
    for what, condition in [("search", spec.condition), *[(c.kind.upper(), c.condition) for c in spec.clauses]]:
        parsed = Condition.of(condition)
        if parsed is not None:
            parsed.refuse_subqueries(f"{what} condition of MERGE operation")
    root = normalize_table_root(path)
    return run_row_level(spark, root, "MERGE", lambda snapshot: merge_once(spark, snapshot, spec))


# --- names and frames ---------------------------------------------------------------------------------


_QUALIFIER = re.compile(r"(?<![\w.`])(`[^`]+`|[A-Za-z_]\w*)\s*\.\s*(?:`|[A-Za-z_])")


def _texts(spec: MergeSpec) -> list[str]:
    out = [condition_text(spec.condition) or ""]
    for c in spec.clauses:
        out.append(condition_text(c.condition) or "")
        out += [condition_text(v) or "" for v in (c.assignments or {}).values()]
    return [re.sub(r"'(?:[^'\\]|\\.)*'", "''", t) for t in out]


def _source_alias(spec: MergeSpec, target_columns: list[str]) -> str | None:
    """The alias the source was given (``source.alias("s")``): the qualifier the expressions use that the
    source DataFrame answers to. PySpark does not expose a DataFrame's alias, so it is probed."""
    if spec.source_alias:
        return spec.source_alias
    taken: set[str] = set()
    if spec.target_alias:
        taken.add(spec.target_alias.lower())
    seen: list[str] = []
    for text in _texts(spec):
        for q in _QUALIFIER.findall(text):
            q = q.strip("`")
            if q.lower() not in taken and q not in seen:
                seen.append(q)
    expected = list(spec.source.columns)
    for q in seen:
        try:
            if spec.source.select(F.col(f"`{q}`.*")).columns == expected:  # a struct column's fields would differ
                return q
        except Exception:  # noqa: BLE001 - not an alias of the source
            continue
    return None


@dataclass
class _Sides:
    """The two sides as struct-wrapped frames, and the names used to address them."""

    src: str               # struct column of the source row (the source alias)
    tgt: str               # struct column of the target row (the target alias)
    sid: str               # source row id
    fid: str               # target file position in the plan
    rid: str               # target physical row index
    kind: str              # what a change row does (the _M_UPDATE … codes)
    src_columns: list[str]
    tgt_columns: list[str]
    unqualified_src: list[str]
    unqualified_tgt: list[str]
    src_alias: str | None = None  # the source's alias as the user gave it (messages name only that)


def _wrap_source(df: DataFrame, sides: _Sides, with_id: bool) -> DataFrame:
    cols = [F.struct(*[F.col(f"`{c}`") for c in sides.src_columns]).alias(sides.src)]
    cols += [F.col(f"`{c}`") for c in sides.unqualified_src]
    if with_id:
        cols.append(F.col(sides.sid))
    return df.select(*cols)


def _wrap_target(df: DataFrame, sides: _Sides) -> DataFrame:
    cols = [F.struct(*[F.col(f"`{c}`") for c in sides.tgt_columns]).alias(sides.tgt)]
    cols += [F.col(f"`{c}`") for c in sides.unqualified_tgt]
    return df.select(*cols, F.col(sides.fid), F.col(sides.rid))


def _matching_pairs(source: DataFrame, target: DataFrame, on: Column, sides: _Sides) -> DataFrame:
    """Every (source row, target row) pair ``on`` matches, in the wrapped shape the clauses read
    (``_wrap_source`` then ``_wrap_target`` columns).

    The join runs on the two sides' own columns under their aliases, as delta-spark resolves a MERGE condition
    (a qualified name is the qualifier's column; MergeNames has already refused what would be ambiguous), and only
    the matched rows are wrapped after it. Wrapping the target first made every target row — all of the table,
    at any match rate — build a struct of all its columns just to read the join key out of it; on the benchmark's
    16M rows that doubled the matches job. With both aliases the same name (the user's choice, or a target column
    of that name making ``t.c`` read differently) the wrapped frames are joined as before."""
    if sides.src.lower() == sides.tgt.lower():
        return _wrap_source(source, sides, with_id=True).join(_wrap_target(target, sides), on, "inner")
    joined = source.alias(sides.src).join(target.alias(sides.tgt), on, "inner")

    def side(alias: str, name: str) -> Column:
        return F.col(f"{quote_identifier(alias)}.{quote_identifier(name)}").alias(name)

    cols = [F.struct(*[side(sides.src, c) for c in sides.src_columns]).alias(sides.src)]
    cols += [side(sides.src, c) for c in [*sides.unqualified_src, sides.sid]]
    cols.append(F.struct(*[side(sides.tgt, c) for c in sides.tgt_columns]).alias(sides.tgt))
    cols += [side(sides.tgt, c) for c in [*sides.unqualified_tgt, sides.fid, sides.rid]]
    return joined.select(*cols)


def _unqualified(frame: DataFrame, names: MergeNames, scope: str) -> DataFrame:
    """``frame`` with every column of the one side a NOT MATCHED (BY SOURCE) clause sees also unqualified,
    names both sides have included: only that side is there, so they are not ambiguous."""
    src_cols, tgt_cols = names.unqualified(scope)
    struct, cols = (names.src, src_cols) if scope == SOURCE_ONLY else (names.tgt, tgt_cols)
    have = {c.lower() for c in frame.columns}
    extra = [F.col(struct).getField(c).alias(c) for c in cols if c.lower() not in have]
    return frame.select("*", *extra) if extra else frame


# --- schema evolution ----------------------------------------------------------------------------------


def evolves(spark: SparkSession, spec: MergeSpec) -> bool:
    """Schema evolution is on: asked for (``withSchemaEvolution``, ``MERGE WITH SCHEMA EVOLUTION``) or by the session
    (``spark.databricks.delta.schema.autoMerge.enabled``), as delta-spark's ``canEvolveSchema``."""
    return spec.schema_evolution or str(spark.conf.get(AUTO_MERGE_CONF, "false")).strip().lower() == "true"


def _evolved_metadata(snapshot: Snapshot, spec: MergeSpec, evolving: bool) -> Metadata | None:
    """With schema evolution: the metadata with the source's new columns and nested struct fields added (inside
    arrays and maps too), after the existing ones, as delta-spark's schema merge does; None when nothing is new.

    As in delta-spark only source fields a MATCHED UPDATE or NOT MATCHED INSERT clause assigns count: all of
    them with a ``*`` clause, otherwise those whose name path is an assigned column (``SET t.c = …`` brings
    the source's ``c``, nested fields included)."""
    if not evolving:
        return None
    clauses = [c for c in spec.clauses if c.kind in (MATCHED, NOT_MATCHED) and c.action != "delete"]
    star = any(c.assignments is None for c in clauses)
    assigned = [_target_path(k, spec.target_alias) for c in clauses for k in (c.assignments or {})]
    src_fields = _assigned_fields(json.loads(spec.source.schema.json())["fields"], assigned, star, ())
    merged = _merged_fields(snapshot.schema["fields"], src_fields, top=True)
    if merged == snapshot.schema["fields"]:
        return None
    md = snapshot.metadata
    conf = dict(md.configuration)
    schema = {**snapshot.schema, "fields": merged}
    if snapshot.column_mapping_mode != "none":  # only the new fields lack an id and a physical name
        schema, max_id = assign_column_mapping(schema, start_id=int(conf.get(MAX_COLUMN_ID_KEY, "0")))
        conf[MAX_COLUMN_ID_KEY] = str(max_id)
    from dataclasses import replace

    return replace(md, schema_string=schema_json(schema), configuration=conf)


def _target_path(key: str, alias: str | None) -> tuple[str, ...]:
    parts = split_name(key)
    if alias and len(parts) > 1 and parts[0].lower() == alias.lower():
        parts = parts[1:]
    return tuple(p.lower() for p in parts)


def _assigned_fields(fields: list[dict[str, Any]], assigned: list[tuple[str, ...]], star: bool,
                     prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    """The source fields schema evolution considers: all with ``*``, else the assigned paths (and their parents)."""
    if star:
        return fields
    out = []
    for f in fields:
        path = (*prefix, f["name"].lower())
        if path in assigned:
            out.append(f)
        elif isinstance(f["type"], dict) and f["type"].get("type") == "struct" and \
                any(a[:len(path)] == path for a in assigned):
            out.append({**f, "type": {**f["type"], "fields": _assigned_fields(f["type"]["fields"], assigned, star,
                                                                             path)}})
    return out


def _merged_fields(target: list[dict[str, Any]], source: list[dict[str, Any]], top: bool = False) -> list[dict[str, Any]]:
    """``target``'s fields, each struct merged with the source field of the same name, then the source's new ones
    (nullable: the rows already there have none)."""
    out = [dict(f) for f in target]
    where = {f["name"].lower(): i for i, f in enumerate(out)}
    for f in source:
        i = where.get(f["name"].lower())
        if i is None:
            out.append({**f, "nullable": True, "metadata": {} if top else f.get("metadata", {})})
        else:
            out[i]["type"] = _merged_type(out[i]["type"], f["type"])
    return out


def _merged_type(target: Any, source: Any) -> Any:
    """A target type with the source's new nested fields; any other difference keeps the target's type (the
    values are cast to it)."""
    if not isinstance(target, dict) or not isinstance(source, dict) or target.get("type") != source.get("type"):
        return target
    kind = target["type"]
    if kind == "struct":
        return {**target, "fields": _merged_fields(target["fields"], source["fields"])}
    if kind == "array":
        return {**target, "elementType": _merged_type(target["elementType"], source["elementType"])}
    if kind == "map":
        return {**target, "keyType": _merged_type(target["keyType"], source["keyType"]),
                "valueType": _merged_type(target["valueType"], source["valueType"])}
    return target


# --- clause evaluation ---------------------------------------------------------------------------------


def _clause_index(clauses: list[MergeClause]) -> Column:
    """The position of the first clause whose condition holds (-1: none)."""
    index: Column | None = None
    for i, c in enumerate(clauses):
        cond = as_column(c.condition) if c.condition is not None else F.lit(True)
        index = F.when(cond, F.lit(i)) if index is None else index.when(cond, F.lit(i))
    assert index is not None
    return index.otherwise(F.lit(-1))


def _kind_of(index: Column, clauses: list[MergeClause], kinds: dict[str, int]) -> Column:
    """The change kind (``_M_UPDATE`` …) of the clause at ``index``; ``_NOOP`` where none holds."""
    kind = F.lit(_NOOP)
    for i, c in enumerate(clauses):
        kind = F.when(index == i, F.lit(kinds[c.action])).otherwise(kind)
    return kind


def _clause_frame(frame: DataFrame, clauses: list[MergeClause], kinds: dict[str, int], schema: StructType,
                  sides: _Sides, current: Callable[[str], Column | None], evolving: bool, where: str,
                  rules: Casting, keep_noop: bool = False, index_col: str | None = None) -> DataFrame:
    """``frame`` → (kind, file, row, table columns): the first clause whose condition holds, applied.
    ``keep_noop``: rows no clause takes stay, as ``_NOOP`` (the multiple-match check counts them).
    ``index_col``: ``frame``'s column holding ``_clause_index`` already (evaluated once, where the marks were
    gathered: a clause condition is then never evaluated twice for a row)."""
    if index_col is not None:
        idx_name, staged = index_col, frame
    else:
        idx_name = unique_name("clause")
        staged = frame.select("*", _clause_index(clauses).alias(idx_name))
    kind = _kind_of(F.col(idx_name), clauses, kinds)
    # rows no clause writes (no-op, delete) are never written: their values only need the table's types
    values: dict[str, Column] = {f.name: F.lit(None).cast(f.dataType) for f in schema.fields}
    for i, c in enumerate(clauses):
        if c.action == "delete":
            continue
        assignments = c.assignments if c.assignments is not None else _star(c, schema, sides, evolving)
        resolved = resolve_assignments(schema, assignments, where, strip_qualifier=sides.tgt)
        nested = next((p for p in resolved if len(p) > 1), None)
        if c.action == "insert" and nested is not None:
            raise NestedFieldUpdateError(
                f"Nested field is not supported in the INSERT clause of MERGE operation (field = "
                f"{'.'.join(f'`{p}`' for p in nested)}): an inserted row has no struct to set a field of; insert the "
                "whole column (e.g. named_struct(...)).", "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION")
        base = current if c.action == "update" else _no_value
        # UPDATE SET * with schema evolution: struct fields the source lacks keep the target's values
        keep = evolving and c.action == "update" and c.assignments is None
        cols = assigned_columns(staged, schema, resolved, base, rules, keep)
        for f, col in zip(schema.fields, cols, strict=True):
            values[f.name] = F.when(F.col(idx_name) == i, col).otherwise(values[f.name])
    fid = F.col(sides.fid) if sides.fid in frame.columns else F.lit(None).cast("int")
    rid = F.col(sides.rid) if sides.rid in frame.columns else F.lit(None).cast("long")
    out = staged.select(kind.alias(sides.kind), fid.alias(sides.fid), rid.alias(sides.rid),
                        *[values[f.name].alias(f.name) for f in schema.fields])
    return out if keep_noop else out.filter(F.col(sides.kind) != _NOOP)


def _no_value(name: str) -> None:
    """An inserted row has no current value: columns it does not assign are NULL."""
    del name


def _star(clause: MergeClause, schema: StructType, sides: _Sides, evolving: bool) -> dict[str, Column]:
    """``UPDATE SET *`` / ``INSERT *``: every table column from the source column of the same name; with schema
    evolution only the source's columns (the others keep their value, or are NULL for an insert)."""
    by_lower = {c.lower(): c for c in sides.src_columns}
    out: dict[str, Column] = {}
    for f in schema.fields:
        src = by_lower.get(f.name.lower())
        if src is not None:
            out[f.name] = F.col(sides.src).getField(src)
        elif not evolving:
            label = "UPDATE" if clause.action == "update" else "INSERT"
            shown = ", ".join(f"{sides.src_alias}.{c}" if sides.src_alias else c for c in sides.src_columns)
            raise MergeUnresolvedExpressionError(
                f"Cannot resolve `{f.name}` in {label} clause given columns {shown}: {label} * takes every table "
                "column from the source column of the same name. Name the assignments explicitly, or enable schema "
                "evolution.")
    return out


# --- the command ---------------------------------------------------------------------------------------


def _gathering_marks(spark: SparkSession, joined: DataFrame, plan: ScanPlan, sides: _Sides,
                     matched: list[Any]) -> tuple[DataFrame, PairWatch, str]:
    """The matches with each one's clause index, watched so the job materializing them also gathers their marks
    (file, row, clause outcome). Only with a broadcast source: its tasks are then the target scan's, as
    ``watch_pairs`` needs; the clauses are evaluated there, once."""
    index_col = unique_name("clause")
    joined = joined.withColumn(index_col, _clause_index(matched))
    kind = _kind_of(F.col(index_col), matched, {"update": _M_UPDATE, "delete": _M_DELETE})
    joined, watch = watch_pairs(spark, joined, plan, driver_room(spark, plan), sides.fid, sides.rid, kind)
    return joined, watch, index_col


def _old_row(old_schema: StructType, schema: StructType, rules: Casting) -> list[Column]:
    """A target row's columns in the (possibly evolved) ``schema``: new columns and new struct fields NULL."""
    old_fields = {f.name.lower(): f for f in old_schema.fields}
    return [(cast_if_needed(F.col(f"`{old_fields[f.name.lower()].name}`"), old_fields[f.name.lower()].dataType,
                            f.dataType, f.name, rules) if f.name.lower() in old_fields
             else F.lit(None).cast(f.dataType)).alias(f.name) for f in schema.fields]


def _without_duplicate_matches(matches: DataFrame, sides: _Sides, exempt: bool, root: str) -> DataFrame:
    """Refuse a target row matched by two source rows (delta-spark's multiple-match error, before any write), unless
    the only clause is an unconditional delete (``exempt``): then each row is kept once."""
    dup = matches.groupBy(sides.fid, sides.rid).count().filter(F.col("count") > 1).limit(1).collect()
    if dup and not exempt:
        raise _multiple_matches(root, int(dup[0]["count"]))
    return matches.dropDuplicates([sides.fid, sides.rid]) if dup else matches


def _resolved_names(spark: SparkSession, spec: MergeSpec, plan: ScanPlan, schema: StructType) -> tuple[_Sides, MergeNames]:
    """The two sides' internal names and the user's names, with every clause's names checked before any job runs.

    A column only one side has may be named unqualified; the aliases (or generated names) qualify the rest.
    """
    old_columns = [f.name for f in plan.logical_schema.fields]
    src_columns = list(spec.source.columns)
    lower_t = {c.lower() for c in old_columns}
    lower_s = {c.lower() for c in src_columns}
    tgt_name = spec.target_alias or unique_name("target")
    src_alias = _source_alias(spec, old_columns)
    src_name = src_alias or unique_name("source")
    reserved = {tgt_name.lower(), src_name.lower()}
    sides = _Sides(src=src_name, tgt=tgt_name, sid=unique_name("source_row"), fid=unique_name("file"),
                   rid=unique_name("row"), kind=unique_name("kind"), src_columns=src_columns, tgt_columns=old_columns,
                   unqualified_src=[c for c in src_columns if c.lower() not in lower_t | reserved],
                   unqualified_tgt=[c for c in old_columns if c.lower() not in lower_s | reserved], src_alias=src_alias)
    names = MergeNames(src=src_name, tgt=tgt_name, src_alias=src_alias,
                       tgt_alias=spec.target_alias, src_schema=spec.source.schema, tgt_schema=plan.logical_schema,
                       assignable=[f.name for f in schema.fields])
    checked(spark, names, spec.condition, [(_SCOPE[c.kind], c.action, c.condition, c.assignments) for c in spec.clauses])
    return sides, names


def _prepared_source(spark: SparkSession, spec: MergeSpec, sides: _Sides) -> tuple[DataFrame, int, bool]:
    """The source with a row id, materialized unless re-reading it cannot change the answer; its row count; and
    whether it is small enough to broadcast (the target is then read once and never shuffled)."""
    source = spec.source.withColumn(sides.sid, F.monotonically_increasing_id())
    if materializes(spark, spec.source):  # ``none`` only where re-reading the source cannot change the answer
        source, num_source_rows = counted(source, "source_rows")  # counted in the job that materializes it
    else:
        num_source_rows = source.count()
    broadcast = _broadcastable(spark, source.schema, num_source_rows)
    return (F.broadcast(source) if broadcast else source), num_source_rows, broadcast


def merge_once(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec) -> Committed:
    """One attempt at ``snapshot`` (raises the concurrency exceptions instead of retrying)."""
    started = time.monotonic()
    root = snapshot.table_root
    features.check_can_write(snapshot.protocol, snapshot.metadata, root)
    check_no_reserved_columns(snapshot.metadata, root)  # before any data is read or written
    txn = OptimisticTransaction(root, snapshot)
    plan = plan_scan(spark, snapshot)
    txn.read_whole_table()

    evolving = evolves(spark, spec)
    new_md = _evolved_metadata(snapshot, spec, evolving)
    if new_md is not None:
        txn.update_metadata(new_md)
    md = new_md or snapshot.metadata
    schema = logical_struct(md.schema)
    old_columns = [f.name for f in plan.logical_schema.fields]
    lower_t = {c.lower() for c in old_columns}
    sides, names = _resolved_names(spark, spec, plan, schema)
    where = f"MERGE INTO {root}"
    on = as_column(spec.condition)
    matched = [c for c in spec.clauses if c.kind == MATCHED]
    not_matched = [c for c in spec.clauses if c.kind == NOT_MATCHED]
    by_source = [c for c in spec.clauses if c.kind == NOT_MATCHED_BY_SOURCE]
    plan = _files_to_read(spark, snapshot, plan, spec, sides, by_source)
    adds = snapshot.add_files()
    candidates = [adds[i] for i in plan.rows_indexes]
    txn.read_files(candidates)  # a file proven unable to match (or be taken by a BY SOURCE clause) was not read
    rules = casting(spark, allow_missing=evolving)
    old_row = _old_row(plan.logical_schema, schema, rules)

    def target_frame(p: Any) -> DataFrame:
        df = logical_frame(spark, snapshot, p, include_row_index=True)
        return _wrap_target(df.toDF(*old_columns, sides.fid, sides.rid), sides)

    def old_value(name: str) -> Column:
        if name.lower() in lower_t:
            return F.col(sides.tgt).getField(next(c for c in old_columns if c.lower() == name.lower()))
        return F.lit(None).cast(schema[name].dataType)

    null_value = _no_value

    insert_kinds = {"insert": _INSERT}
    fast = str(spark.conf.get(MERGE_INSERT_ONLY_FAST_PATH, "true")).lower() == "true"
    if not matched and not by_source and fast:
        return _insert_only(spark, snapshot, spec, txn, plan, sides, names, on, not_matched, schema, md, evolving,
                            where, target_frame, null_value, started, rules)

    t0 = time.monotonic()
    source, num_source_rows, broadcast = _prepared_source(spark, spec, sides)
    materialize_ms = int((time.monotonic() - t0) * 1000)
    src = _wrap_source(source, sides, with_id=True)

    t1 = time.monotonic()
    flat_target = logical_frame(spark, snapshot, plan, include_row_index=True).toDF(*old_columns, sides.fid, sides.rid)
    target = _wrap_target(flat_target, sides)
    joined = _matching_pairs(source, flat_target, on, sides)
    exempt = len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None
    with_dvs = use_dvs(spark, snapshot, MERGE_DVS_PERSISTENT)
    gather = with_dvs and bool(matched) and not by_source and not exempt and broadcast
    not_gathered: tuple[DataFrame, PairWatch, str | None] = (joined, PairWatch(None), None)
    joined, watch, index_col = _gathering_marks(spark, joined, plan, sides, matched) if gather else not_gathered
    matches, num_pairs = counted(joined, "matched_pairs")
    # every source row that matched, taken before duplicates are dropped below: a source row whose target row
    # another source row already deletes still matched, and must never reach a NOT MATCHED clause
    # (only ever the right side of a left anti join: no distinct, which would shuffle; broadcast when few)
    matched_sources = matches.select(sides.sid)
    if _broadcastable(spark, matched_sources.schema, num_pairs):
        matched_sources = F.broadcast(matched_sources)
    if with_dvs and (matched or by_source):
        if exempt:  # duplicates are harmless to a lone unconditional delete, but each row is counted (and fed) once
            matches = matches.dropDuplicates([sides.fid, sides.rid])
        return _merge_with_dvs(spark, snapshot, spec, txn, plan, candidates, sides, names, schema, md, evolving, where,
                               rules, src, target, matches, matched_sources, num_pairs, exempt, old_columns, old_row,
                               old_value, (num_source_rows, materialize_ms, t1, started), new_md is not None,
                               _Gathered(watch, index_col))
    if matched or by_source:
        matches = _without_duplicate_matches(matches, sides, exempt, root)

    parts = []
    if matched:
        parts.append(_clause_frame(matches, matched, {"update": _M_UPDATE, "delete": _M_DELETE}, schema, sides, old_value,
                                   evolving, where, rules))
    if not_matched:
        unmatched_src = _unqualified(src.join(matched_sources, sides.sid, "left_anti"), names, SOURCE_ONLY)
        parts.append(_clause_frame(unmatched_src, not_matched, insert_kinds, schema, sides, null_value, evolving, where,
                                   rules))
    if by_source:
        unmatched_tgt = _unqualified(_unmatched_target(spark, target, matches, sides, num_pairs), names, TARGET_ONLY)
        parts.append(_clause_frame(unmatched_tgt, by_source, {"update": _S_UPDATE, "delete": _S_DELETE}, schema, sides,
                                   old_value, evolving, where, rules))
    changes = functools.reduce(DataFrame.unionByName, parts)
    counts = {int(r[0]): int(r[1]) for r in changes.groupBy(sides.kind).count().collect()}
    scan_ms = int((time.monotonic() - t1) * 1000)

    t2 = time.monotonic()
    marks = changes.filter(F.col(sides.kind).isin(*_MARKED)).select(sides.fid, sides.rid)
    ids = row_tracking.ids_frame(spark, snapshot, plan)  # row tracking: updated rows keep their target row's id
    new_rows = row_tracking.with_kept_ids(changes.filter(F.col(sides.kind).isin(*_WRITTEN)), ids, sides.fid, sides.rid,
                                          [f.name for f in schema.fields], keep_commit_version=False)
    any_marked = any(counts.get(k, 0) for k in _MARKED)
    actions: list[Action] = []
    metrics: dict[str, Any] = {}
    if any_marked:
        touched_idx = sorted(int(r[0]) for r in marks.select(sides.fid).distinct().collect())
        touched_plan = sub_plan(plan, touched_idx)
        positions = F.array(*[F.lit(i) for i in touched_idx])
        kept = logical_frame(spark, snapshot, touched_plan, include_row_index=True).toDF(*old_columns, sides.fid,
                                                                                        sides.rid)
        kept = kept.withColumn(sides.fid, F.element_at(positions, F.col(sides.fid) + 1))
        kept = kept.join(marks, [sides.fid, sides.rid], "left_anti")
        copied_rows = row_tracking.with_kept_ids(kept.select(*old_row, sides.fid, sides.rid), ids, sides.fid, sides.rid,
                                                 [f.name for f in schema.fields], keep_commit_version=True)
        touched = [candidates[i] for i in touched_idx]
        ts = _now()
        actions += [a.remove(ts) for a in touched]
        metrics.update(dv_counts([(a.deletion_vector is not None, False) for a in touched], "numTarget"))
        files_removed, bytes_removed = len(touched), sum(a.size for a in touched)
        touched_positions = touched_idx
        written = new_rows.unionByName(copied_rows)
    else:
        metrics.update(dv_counts([], "numTarget"))
        files_removed = bytes_removed = 0
        touched_positions = []
        written = new_rows
    inserted = counts.get(_INSERT, 0)
    updated = counts.get(_M_UPDATE, 0) + counts.get(_S_UPDATE, 0)
    new_adds = write_rows(written, root, snapshot, md, txn.protocol) if (inserted or updated or any_marked) else []
    total_written = sum(num_records_of(a.stats) or 0 for a in new_adds)
    copied = total_written - inserted - updated if any_marked else 0
    actions += new_adds
    cdc: list[AddCDCFile] = []
    if any_marked and cdf_enabled(md):  # insert-only outcomes need none: their adds read as inserts
        cdc = _change_files(spark, snapshot, plan, changes, sides, old_columns, old_row, schema, md, touched_positions)
        actions += cdc
    rewrite_ms = int((time.monotonic() - t2) * 1000)
    metrics.update(_row_metrics(num_source_rows, counts, copied))
    metrics.update({"numTargetFilesAdded": len(new_adds), "numTargetFilesRemoved": files_removed,
                    "numTargetBytesAdded": sum(a.size for a in new_adds), "numTargetBytesRemoved": bytes_removed,
                    "numTargetChangeFilesAdded": len(cdc), "materializeSourceTimeMs": materialize_ms, "scanTimeMs": scan_ms,
                    "rewriteTimeMs": rewrite_ms})
    return _commit(spark, txn, spec, actions, metrics, started, new_md is not None)


def _merge_with_dvs(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec, txn: OptimisticTransaction,
                    plan: ScanPlan, candidates: list[Any], sides: _Sides, names: MergeNames, schema: StructType,
                    md: Metadata, evolving: bool, where: str, rules: Casting, src: DataFrame, target: DataFrame,
                    matches: DataFrame, matched_sources: DataFrame, num_pairs: int, exempt: bool,
                    old_columns: list[str], old_row: list[Column], old_value: Callable[[str], Column],
                    timing: tuple[int, int, float, float], schema_changed: bool,
                    gathered: _Gathered) -> Committed:
    """MERGE with deletion vectors, in as few passes as the semantics allow.

    The marks (file, row, clause outcome) build the DVs, count each clause outcome and find a target row matched
    twice — on the driver before anything is written when the change is small (``dv_marking``); the raise comes
    before any commit either way. An upsert with a broadcast source gathers them in the job that materialized the
    matches (``dv_pairs``); otherwise one pass over the materialized matches (plus the unmatched target rows with
    NOT MATCHED BY SOURCE clauses) reads them.
    A second pass writes the updated and inserted rows; the inserted count is what it wrote less the updated."""
    num_source_rows, materialize_ms, t1, started = timing
    root = snapshot.table_root
    matched = [c for c in spec.clauses if c.kind == MATCHED]
    not_matched = [c for c in spec.clauses if c.kind == NOT_MATCHED]
    by_source = [c for c in spec.clauses if c.kind == NOT_MATCHED_BY_SOURCE]
    if matched:  # no-op rows kept: a target row matched twice fails even where no clause takes it
        matched_frame = _clause_frame(matches, matched, {"update": _M_UPDATE, "delete": _M_DELETE}, schema, sides,
                                      old_value, evolving, where, rules, keep_noop=True, index_col=gathered.index_col)
        taken = matched_frame.filter(F.col(sides.kind) != _NOOP)
        marks = matched_frame.select(sides.fid, sides.rid, sides.kind)
    else:
        taken = None
        marks = matches.select(sides.fid, sides.rid, F.lit(_NOOP).alias(sides.kind))
    by_source_frame = None
    if by_source:
        unmatched_tgt = _unqualified(_unmatched_target(spark, target, matches, sides, num_pairs), names, TARGET_ONLY)
        by_source_frame = _clause_frame(unmatched_tgt, by_source, {"update": _S_UPDATE, "delete": _S_DELETE}, schema,
                                        sides, old_value, evolving, where, rules)
        marks = marks.unionByName(by_source_frame.select(sides.fid, sides.rid, sides.kind))
    checked_kinds: frozenset[int] = frozenset() if exempt else frozenset({_NOOP, _M_UPDATE, _M_DELETE})
    # the pairs fed: one per match, and with BY SOURCE clauses at most one per target row besides
    bound: int | None = num_pairs
    if by_source:
        bound = None if any(f.num_records is None for f in plan.files) else \
            num_pairs + sum(int(f.num_records or 0) for f in plan.files)
    outcome = mark_rows(spark, root, plan, candidates, marks, sides.fid, sides.rid, by_index=True, rows=bound,
                        exact=not by_source and not exempt, kinds=Kinds(sides.kind, frozenset(_MARKED), checked_kinds),
                        gathered=gathered.watch.pairs())
    if outcome.duplicate:
        raise _multiple_matches(root, None)
    insert_frame = None
    if not_matched:
        unmatched_src = _unqualified(src.join(matched_sources, sides.sid, "left_anti"), names, SOURCE_ONLY)
        insert_frame = _clause_frame(unmatched_src, not_matched, {"insert": _INSERT}, schema, sides, _no_value,
                                     evolving, where, rules)
    counts = outcome.kind_counts
    scan_ms = int((time.monotonic() - t1) * 1000)

    t2 = time.monotonic()
    actions: list[Action] = list(outcome.actions)
    updated = counts.get(_M_UPDATE, 0) + counts.get(_S_UPDATE, 0)
    written = [f.filter(F.col(sides.kind) == k) for f, k in ((taken, _M_UPDATE), (by_source_frame, _S_UPDATE))
               if f is not None and counts.get(k, 0)]
    if insert_frame is not None:
        written.append(insert_frame)
    new_adds: list[Any] = []
    if written:
        rows = written[0]
        for w in written[1:]:
            rows = rows.unionByName(w)
        ids = row_tracking.ids_frame(spark, snapshot, plan)  # row tracking: updated rows keep their target row's id
        rows = row_tracking.with_kept_ids(rows, ids, sides.fid, sides.rid, [f.name for f in schema.fields],
                                          keep_commit_version=False)
        new_adds = write_rows(rows, root, snapshot, md, txn.protocol, skip_empty=True)
    counts[_INSERT] = sum(num_records_of(a.stats) or 0 for a in new_adds) - updated
    actions += new_adds
    cdc: list[AddCDCFile] = []
    if outcome.touched and cdf_enabled(md):  # insert-only outcomes need none: their adds read as inserts
        changes = [f for f in (taken, by_source_frame, insert_frame) if f is not None]
        union = changes[0]
        for f in changes[1:]:
            union = union.unionByName(f)
        cdc = _change_files(spark, snapshot, plan, union, sides, old_columns, old_row, schema, md,
                            outcome.touched_positions)
        actions += cdc
    metrics: dict[str, Any] = outcome.dv_metrics("numTarget")
    metrics.update(_row_metrics(num_source_rows, counts, 0))
    metrics.update({"numTargetFilesAdded": len(new_adds), "numTargetFilesRemoved": outcome.removed_files,
                    "numTargetBytesAdded": sum(a.size for a in new_adds), "numTargetBytesRemoved": outcome.removed_bytes,
                    "numTargetChangeFilesAdded": len(cdc), "materializeSourceTimeMs": materialize_ms, "scanTimeMs": scan_ms,
                    "rewriteTimeMs": int((time.monotonic() - t2) * 1000)})
    return _commit(spark, txn, spec, actions, metrics, started, schema_changed)


def _unmatched_target(spark: SparkSession, target: DataFrame, matches: DataFrame, sides: _Sides,
                      num_pairs: int) -> DataFrame:
    """The target rows no source row matched: an anti join, which needs no distinct (it would shuffle) and takes
    the matched (file, row) pairs as a broadcast when they are few."""
    matched = matches.select(sides.fid, sides.rid)
    if _broadcastable(spark, matched.schema, num_pairs):
        matched = F.broadcast(matched)
    return target.join(matched, [sides.fid, sides.rid], "left_anti")


@dataclass(frozen=True)
class _Gathered:
    """What the matches' job gathered: their marks (``dv_pairs.py``) and the column holding each match's clause."""

    watch: PairWatch
    index_col: str | None


def _multiple_matches(root: str, count: int | None) -> MultipleSourceRowMatchingTargetRowError:
    times = f"{count} source rows" if count is not None else "more than one source row"
    return MultipleSourceRowMatchingTargetRowError(
        f"[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] MERGE INTO {root}: a target row matched "
        f"{times}, so it is ambiguous how to update or delete it. Nothing was committed. "
        "De-duplicate the source (one row per key), or make the ON condition match at most one source row per "
        "target row. See https://docs.delta.io/latest/delta-update.html#upsert-into-a-table-using-merge")


def _broadcastable(spark: SparkSession, schema: StructType, rows: int) -> bool:
    """Whether to hint a broadcast of the materialized source: few rows (``spark.dvlake.merge.broadcastSourceRows``)
    whose estimated size stays small, unless the session turned broadcasts off. Spark's own estimate of a
    checkpoint can miss (the plan it came from), and a sort-merge join would shuffle the whole target."""
    limit = int(spark.conf.get(MERGE_BROADCAST_SOURCE_ROWS, str(DEFAULT_MERGE_BROADCAST_SOURCE_ROWS)) or 0)
    threshold = str(spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10485760") or "").strip().lower()
    if limit <= 0 or rows > limit or threshold.startswith("-1"):
        return False
    return rows * (8 + _width(schema)) <= MERGE_BROADCAST_SOURCE_MAX_BYTES


def _width(dtype: Any) -> int:
    """Bytes a value of ``dtype`` takes, as Spark's planner guesses (``defaultSize``: strings 20, arrays and maps
    of 1 element): an estimate, only to keep a hinted broadcast small."""
    from pyspark.sql.types import ArrayType, MapType, StringType, StructType

    if isinstance(dtype, StructType):
        return sum(_width(f.dataType) for f in dtype.fields)
    if isinstance(dtype, ArrayType):
        return _width(dtype.elementType)
    if isinstance(dtype, MapType):
        return _width(dtype.keyType) + _width(dtype.valueType)
    if isinstance(dtype, StringType):
        return 20
    return 8 if dtype.typeName() not in ("binary", "decimal") else 16


def _files_to_read(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, spec: MergeSpec, sides: _Sides,
                   by_source: list[MergeClause]) -> ScanPlan:
    """The target files a row of which can be matched, or taken by a NOT MATCHED BY SOURCE clause
    (``merge_pruning.py``)."""
    alias = spec.target_alias
    conditions = [target_only(spec.condition, alias, sides.tgt_columns, sides.unqualified_tgt)]
    every = [c for c in sides.tgt_columns if not alias or c.lower() != alias.lower()]
    for c in by_source:
        conditions.append(target_only(c.condition, alias, sides.tgt_columns, every) if c.condition is not None else None)
    if any(c is None for c in conditions):
        return plan  # some part may hold anywhere: every file is read
    return prune_plan(spark, snapshot, plan, [c for c in conditions if c is not None])


def _change_files(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, changes: DataFrame, sides: _Sides,
                  old_columns: list[str], old_row: list[Column], schema: StructType, md: Metadata,
                  positions: list[int]) -> list[AddCDCFile]:
    """The change feed's rows of this MERGE: the old values of every updated or deleted target row
    (``update_preimage`` / ``delete``, read back from the touched files by file and row index) and the
    written rows (``update_postimage`` / ``insert``), as change data files."""
    kinds = changes.filter(F.col(sides.kind).isin(*_MARKED)).select(sides.fid, sides.rid, sides.kind)
    old = logical_frame(spark, snapshot, sub_plan(plan, positions), include_row_index=True).toDF(
        *old_columns, sides.fid, sides.rid)
    plan_positions = F.array(*[F.lit(i) for i in positions])
    old = old.withColumn(sides.fid, F.element_at(plan_positions, F.col(sides.fid) + 1))
    before = old.join(kinds, [sides.fid, sides.rid], "inner")
    pre_type = F.when(F.col(sides.kind).isin(_M_DELETE, _S_DELETE), F.lit(DELETE)).otherwise(F.lit(UPDATE_PREIMAGE))
    pre = before.select(*old_row, pre_type.alias(CHANGE_TYPE_COL))
    post_type = F.when(F.col(sides.kind) == _INSERT, F.lit(INSERT)).otherwise(F.lit(UPDATE_POSTIMAGE))
    post = changes.filter(F.col(sides.kind).isin(*_WRITTEN)).select(
        *[F.col(f"`{f.name}`") for f in schema.fields], post_type.alias(CHANGE_TYPE_COL))
    return write_change_files(pre.unionByName(post), snapshot, md)


def _now() -> int:
    from dvlake.log.actions import now_ms

    return now_ms()


def _row_metrics(num_source_rows: int, counts: dict[int, int], copied: int) -> dict[str, int]:
    m_upd, s_upd = counts.get(_M_UPDATE, 0), counts.get(_S_UPDATE, 0)
    m_del, s_del = counts.get(_M_DELETE, 0), counts.get(_S_DELETE, 0)
    inserted = counts.get(_INSERT, 0)
    return {"numSourceRows": num_source_rows, "numTargetRowsInserted": inserted, "numTargetRowsUpdated": m_upd + s_upd,
            "numTargetRowsMatchedUpdated": m_upd, "numTargetRowsNotMatchedBySourceUpdated": s_upd,
            "numTargetRowsDeleted": m_del + s_del, "numTargetRowsMatchedDeleted": m_del,
            "numTargetRowsNotMatchedBySourceDeleted": s_del, "numTargetRowsCopied": copied,
            "numOutputRows": inserted + m_upd + s_upd + copied}


def _clause_params(clauses: list[MergeClause]) -> str:
    out = []
    for c in clauses:
        entry: dict[str, str] = {}
        text = condition_text(c.condition)
        if text:
            entry["predicate"] = text
        entry["actionType"] = c.action
        out.append(entry)
    return json.dumps(out)


def _commit(spark: SparkSession, txn: OptimisticTransaction, spec: MergeSpec, actions: list[Action],
            metrics: dict[str, Any], started: float, schema_changed: bool) -> Committed:
    changed = bool(actions) or schema_changed
    metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
    if not changed and not records_empty_commits(spark.conf.get(SKIP_EMPTY_COMMITS_CONF, None)):
        return Committed(None, metrics)  # delta-spark's commitIfNeeded elides a MERGE that changed nothing
    params = {"predicate": json.dumps([condition_text(spec.condition) or ""]),
              "matchedPredicates": _clause_params([c for c in spec.clauses if c.kind == MATCHED]),
              "notMatchedPredicates": _clause_params([c for c in spec.clauses if c.kind == NOT_MATCHED]),
              "notMatchedBySourcePredicates": _clause_params([c for c in spec.clauses if c.kind == NOT_MATCHED_BY_SOURCE])}
    return Committed(txn.commit(actions, "MERGE", params, metrics), metrics)


def _insert_only(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec, txn: OptimisticTransaction, plan: Any,
                 sides: _Sides, names: MergeNames, on: Column, clauses: list[MergeClause], schema: StructType,
                 md: Metadata, evolving: bool, where: str, target_frame: Callable[[Any], DataFrame],
                 null_value: Callable[[str], Column | None], started: float, rules: Casting) -> Committed:
    """No MATCHED / NOT MATCHED BY SOURCE clause: anti join, insert, add files; the target is only read."""
    from pyspark.sql import Observation

    t0 = time.monotonic()
    observation = Observation(unique_name("source_rows"))
    source = spec.source.observe(observation, F.count(F.lit(1)).alias("n"))
    src = _wrap_source(source, sides, with_id=False)
    unmatched = _unqualified(src.join(target_frame(plan), on, "left_anti"), names, SOURCE_ONLY)
    changes = _clause_frame(unmatched, clauses, {"insert": _INSERT}, schema, sides, null_value, evolving, where, rules)
    new_rows = changes.select(*[F.col(f"`{f.name}`") for f in schema.fields])
    new_adds = write_rows(new_rows, snapshot.table_root, snapshot, md, txn.protocol)
    inserted = sum(num_records_of(a.stats) or 0 for a in new_adds)
    try:
        num_source_rows = int(observation.get.get("n", 0))
    except Exception:  # noqa: BLE001 - no action observed the source (empty plan); count it
        num_source_rows = spec.source.count()
    metrics: dict[str, Any] = dv_counts([], "numTarget")
    metrics.update(_row_metrics(num_source_rows, {_INSERT: inserted}, 0))
    metrics.update({"numTargetFilesAdded": len(new_adds), "numTargetFilesRemoved": 0,
                    "numTargetBytesAdded": sum(a.size for a in new_adds), "numTargetBytesRemoved": 0,
                    "numTargetChangeFilesAdded": 0, "materializeSourceTimeMs": 0, "scanTimeMs": 0,
                    "rewriteTimeMs": int((time.monotonic() - t0) * 1000)})
    return _commit(spark, txn, spec, list(new_adds), metrics, started, txn.new_metadata is not None)
