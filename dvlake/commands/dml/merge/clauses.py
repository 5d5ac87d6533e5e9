"""Clause evaluation: the first clause whose condition holds decides a row's outcome and its new values."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.commands.dml.merge.frames import Sides
from dvlake.commands.dml.merge.identity import insert_values as identity_insert_values
from dvlake.commands.dml.merge.spec import NOOP, MergeClause
from dvlake.commands.dml.shared import (
    assigned_columns,
    resolve_assignments,
    unique_name,
)
from dvlake.commands.dml.store_assign import Casting
from dvlake.errors import (
    MergeUnresolvedExpressionError,
    NestedFieldUpdateError,
)
from dvlake.log.identity import Identity
from dvlake.spark import constraints
from dvlake.spark.names import case_sensitive
from dvlake.spark.pruning import column_of


def clause_index(clauses: list[MergeClause]) -> Column:
    """The position of the first clause whose condition holds (-1: none)."""
    index: Column | None = None
    for i, c in enumerate(clauses):
        cond = column_of(c.condition) if c.condition is not None else F.lit(True)
        index = F.when(cond, F.lit(i)) if index is None else index.when(cond, F.lit(i))
    assert index is not None
    return index.otherwise(F.lit(-1))


def kind_of(index: Column, clauses: list[MergeClause], kinds: dict[str, int]) -> Column:
    """The change kind (``M_UPDATE`` …) of the clause at ``index``; ``NOOP`` where none holds."""
    kind = F.lit(NOOP)
    for i, c in enumerate(clauses):
        kind = F.when(index == i, F.lit(kinds[c.action])).otherwise(kind)
    return kind


def clause_frame(frame: DataFrame, clauses: list[MergeClause], kinds: dict[str, int], schema: StructType,
                  sides: Sides, current: Callable[[str], Column | None], evolving: bool, where: str,
                  rules: Casting, keep_noop: bool = False, index_col: str | None = None,
                  generated: dict[str, str] | None = None, identities: list[Identity] | None = None) -> DataFrame:
    """``frame`` → (kind, file, row, table columns): the first clause whose condition holds, applied.
    ``keep_noop``: rows no clause takes stay, as ``NOOP`` (the multiple-match check counts them).
    ``generated``: the table's generated columns (name → expression); a clause that does not assign one gives it
    its expression over the clause's new values (delta-spark's ``generateUpdateExprsForGeneratedColumns`` for
    UPDATE, ``resolveImplicitColumns`` for INSERT); an assigned one is checked when written.
    ``identities``: the table's binding identity columns; an INSERT clause that leaves one out generates its
    values (``merge.identity.insert_values``), before generated columns, which may read them.
    ``index_col``: ``frame``'s column holding ``clause_index`` already (evaluated once, where the marks were
    gathered: a clause condition is then never evaluated twice for a row)."""
    if index_col is not None:
        idx_name, staged = index_col, frame
    else:
        idx_name = unique_name("clause")
        staged = frame.select("*", clause_index(clauses).alias(idx_name))
    kind = kind_of(F.col(idx_name), clauses, kinds)
    # rows no clause writes (no-op, delete) are never written: their values only need the table's types
    values: dict[str, Column] = {f.name: F.lit(None).cast(f.dataType) for f in schema.fields}
    computes: dict[str, list[int]] = {}  # generated column → the clauses that compute it
    sensitive = case_sensitive(frame.sparkSession)
    for i, c in enumerate(clauses):
        if c.action == "delete":
            continue
        generates = {i.name for i in identities or []} if c.action == "insert" else set()
        assignments = c.assignments if c.assignments is not None else _star(c, schema, sides, evolving, generates)
        resolved = resolve_assignments(schema, assignments, where, strip_qualifier=sides.tgt, case_sensitive=sensitive)
        nested = next((p for p in resolved if len(p) > 1), None)
        if c.action == "insert" and nested is not None:
            raise NestedFieldUpdateError(
                f"Nested field is not supported in the INSERT clause of MERGE operation (field = "
                f"{'.'.join(f'`{p}`' for p in nested)}): an inserted row has no struct to set a field of; insert the "
                "whole column (e.g. named_struct(...)).", "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION")
        base = current if c.action == "update" else no_value
        # UPDATE SET * with schema evolution: struct fields the source lacks keep the target's values
        keep = evolving and c.action == "update" and c.assignments is None
        cols = assigned_columns(staged, schema, resolved, base, rules, keep)
        if generates:
            fresh = identity_insert_values(identities or [], {p[0] for p in resolved})
            cols = [fresh.get(f.name, col) for f, col in zip(schema.fields, cols, strict=True)]
        for name in generated or {}:
            if name not in {p[0] for p in resolved}:
                computes.setdefault(name, []).append(i)
        for f, col in zip(schema.fields, cols, strict=True):
            values[f.name] = F.when(F.col(idx_name) == i, col).otherwise(values[f.name])
    fid = F.col(sides.fid) if sides.fid in frame.columns else F.lit(None).cast("int")
    rid = F.col(sides.rid) if sides.rid in frame.columns else F.lit(None).cast("long")
    out = staged.select(kind.alias(sides.kind), fid.alias(sides.fid), rid.alias(sides.rid),
                        *[values[f.name].alias(f.name) for f in schema.fields], *([F.col(idx_name)] if computes else []))
    for name, taken_by in computes.items():
        assert generated is not None
        out = constraints.computed(out, schema, {name: generated[name]}, F.col(idx_name).isin(*taken_by))
    if computes:
        out = out.drop(idx_name)
    return out if keep_noop else out.filter(F.col(sides.kind) != NOOP)


def no_value(name: str) -> None:
    """An inserted row has no current value: columns it does not assign are NULL."""
    del name


def _star(clause: MergeClause, schema: StructType, sides: Sides, evolving: bool,
          generates: set[str] | frozenset[str] = frozenset()) -> dict[str, Column]:
    """``UPDATE SET *`` / ``INSERT *``: every table column from the source column of the same name; with schema
    evolution only the source's columns (the others keep their value, or are NULL for an insert). A column in
    ``generates`` (an identity column of an INSERT) the source lacks is left to be generated."""
    by_lower = {c.lower(): c for c in sides.src_columns}
    out: dict[str, Column] = {}
    for f in schema.fields:
        src = by_lower.get(f.name.lower())
        if src is not None:
            out[f.name] = F.col(sides.src).getField(src)
        elif not evolving and f.name not in generates:
            label = "UPDATE" if clause.action == "update" else "INSERT"
            shown = ", ".join(f"{sides.src_alias}.{c}" if sides.src_alias else c for c in sides.src_columns)
            raise MergeUnresolvedExpressionError(
                f"Cannot resolve `{f.name}` in {label} clause given columns {shown}: {label} * takes every table "
                "column from the source column of the same name. Name the assignments explicitly, or enable schema "
                "evolution.")
    return out
