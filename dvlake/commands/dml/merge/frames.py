"""The two sides as the clauses see them: aliases, the matched pairs (joined on the sides' own columns, wrapped after),
the names each side answers to.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.commands.dml.merge.names import SOURCE_ONLY, MergeNames, checked
from dvlake.commands.dml.merge.spec import SCOPE, MergeSpec
from dvlake.commands.dml.shared import (
    unique_name,
)
from dvlake.commands.dml.store_assign import Casting, cast_if_needed
from dvlake.log.condition import value_qualifiers
from dvlake.log.snapshot import Snapshot
from dvlake.log.sql_dialect import quote_identifier
from dvlake.spark.scan import ScanPlan, logical_frame


def _qualifiers(spec: MergeSpec) -> list[str]:
    """Every qualifier the MERGE's expressions use (``s`` of ``s.id``), in order: read from the parsed conditions'
    trees, and from the assignment values (parsed for this only; string literals are never taken for names)."""
    seen: list[str] = []
    trees = [spec.condition, *[c.condition for c in spec.clauses if c.condition is not None]]
    found = [q for cond in trees for q in cond.qualifiers()]
    found += [q for c in spec.clauses for v in (c.assignments or {}).values() for q in value_qualifiers(v)]
    for q in found:
        if q not in seen:
            seen.append(q)
    return seen


def _source_alias(spec: MergeSpec, target_columns: list[str]) -> str | None:
    """The alias the source was given (``source.alias("s")``): the qualifier the expressions use that the
    source DataFrame answers to. PySpark does not expose a DataFrame's alias, so it is probed."""
    if spec.source_alias:
        return spec.source_alias
    taken = {spec.target_alias.lower()} if spec.target_alias else set()
    expected = list(spec.source.columns)
    for q in _qualifiers(spec):
        if q.lower() in taken:
            continue
        try:
            if spec.source.select(F.col(f"`{q}`.*")).columns == expected:  # a struct column's fields would differ
                return q
        except Exception:  # noqa: BLE001 - not an alias of the source
            continue
    return None


@dataclass
class Sides:
    """The two sides as struct-wrapped frames, and the names used to address them."""

    src: str               # struct column of the source row (the source alias)
    tgt: str               # struct column of the target row (the target alias)
    sid: str               # source row id
    fid: str               # target file position in the plan
    rid: str               # target physical row index
    kind: str              # what a change row does (the M_UPDATE … codes)
    src_columns: list[str]
    tgt_columns: list[str]
    unqualified_src: list[str]
    unqualified_tgt: list[str]
    src_alias: str | None = None  # the source's alias as the user gave it (messages name only that)


def wrap_source(df: DataFrame, sides: Sides, with_id: bool) -> DataFrame:
    cols = [F.struct(*[F.col(f"`{c}`") for c in sides.src_columns]).alias(sides.src)]
    cols += [F.col(f"`{c}`") for c in sides.unqualified_src]
    if with_id:
        cols.append(F.col(sides.sid))
    return df.select(*cols)


def flat_target(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, sides: Sides) -> DataFrame:
    """The target's live rows in ``plan`` with their file position and row index, columns under their own names."""
    return logical_frame(spark, snapshot, plan, include_row_index=True).toDF(*sides.tgt_columns, sides.fid, sides.rid)


def wrap_target(df: DataFrame, sides: Sides) -> DataFrame:
    cols = [F.struct(*[F.col(f"`{c}`") for c in sides.tgt_columns]).alias(sides.tgt)]
    cols += [F.col(f"`{c}`") for c in sides.unqualified_tgt]
    return df.select(*cols, F.col(sides.fid), F.col(sides.rid))


def matching_pairs(source: DataFrame, target: DataFrame, on: Column, sides: Sides) -> DataFrame:
    """Every (source row, target row) pair ``on`` matches, in the wrapped shape the clauses read
    (``wrap_source`` then ``wrap_target`` columns).

    The join runs on the two sides' own columns under their aliases, as delta-spark resolves a MERGE condition
    (a qualified name is the qualifier's column; MergeNames has already refused what would be ambiguous), and only
    the matched rows are wrapped after it. Wrapping the target first made every target row — all of the table,
    at any match rate — build a struct of all its columns just to read the join key out of it; on the benchmark's
    16M rows that doubled the matches job. With both aliases the same name (the user's choice, or a target column
    of that name making ``t.c`` read differently) the wrapped frames are joined as before."""
    if sides.src.lower() == sides.tgt.lower():
        return wrap_source(source, sides, with_id=True).join(wrap_target(target, sides), on, "inner")
    joined = source.alias(sides.src).join(target.alias(sides.tgt), on, "inner")

    def side(alias: str, name: str) -> Column:
        return F.col(f"{quote_identifier(alias)}.{quote_identifier(name)}").alias(name)

    cols = [F.struct(*[side(sides.src, c) for c in sides.src_columns]).alias(sides.src)]
    cols += [side(sides.src, c) for c in [*sides.unqualified_src, sides.sid]]
    cols.append(F.struct(*[side(sides.tgt, c) for c in sides.tgt_columns]).alias(sides.tgt))
    cols += [side(sides.tgt, c) for c in [*sides.unqualified_tgt, sides.fid, sides.rid]]
    return joined.select(*cols)


def with_unqualified(frame: DataFrame, names: MergeNames, scope: str) -> DataFrame:
    """``frame`` with every column of the one side a NOT MATCHED (BY SOURCE) clause sees also unqualified,
    names both sides have included: only that side is there, so they are not ambiguous."""
    src_cols, tgt_cols = names.unqualified(scope)
    struct, cols = (names.src, src_cols) if scope == SOURCE_ONLY else (names.tgt, tgt_cols)
    have = {c.lower() for c in frame.columns}
    extra = [F.col(struct).getField(c).alias(c) for c in cols if c.lower() not in have]
    return frame.select("*", *extra) if extra else frame


def old_row_columns(old_schema: StructType, schema: StructType, rules: Casting) -> list[Column]:
    """A target row's columns in the (possibly evolved) ``schema``: new columns and new struct fields NULL."""
    old_fields = {f.name.lower(): f for f in old_schema.fields}
    return [(cast_if_needed(F.col(f"`{old_fields[f.name.lower()].name}`"), old_fields[f.name.lower()].dataType,
                            f.dataType, f.name, rules) if f.name.lower() in old_fields
             else F.lit(None).cast(f.dataType)).alias(f.name) for f in schema.fields]


def resolved_names(spark: SparkSession, spec: MergeSpec, plan: ScanPlan, schema: StructType) -> tuple[Sides, MergeNames]:
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
    sides = Sides(src=src_name, tgt=tgt_name, sid=unique_name("source_row"), fid=unique_name("file"),
                   rid=unique_name("row"), kind=unique_name("kind"), src_columns=src_columns, tgt_columns=old_columns,
                   unqualified_src=[c for c in src_columns if c.lower() not in lower_t | reserved],
                   unqualified_tgt=[c for c in old_columns if c.lower() not in lower_s | reserved], src_alias=src_alias)
    names = MergeNames(src=src_name, tgt=tgt_name, src_alias=src_alias,
                       tgt_alias=spec.target_alias, src_schema=spec.source.schema, tgt_schema=plan.logical_schema,
                       assignable=[f.name for f in schema.fields])
    checked(spark, names, spec.condition, [(SCOPE[c.kind], c.action, c.condition, c.assignments) for c in spec.clauses])
    return sides, names
