"""What UPDATE and MERGE share beyond DV marking: the DV switch, retries,
assignments under Spark's store-assignment rules, NOT NULL enforcement and writing new rows.

Assignments are resolved against the table's logical schema: a key is a column name, or a dotted
path into nested structs (``address.city``; backquote a name containing a dot). Values are fitted
to the column's type as delta-spark does (structs by field name, Spark's store-assignment casts:
``store_assign.py``); a value that cannot be is refused before any data is read. NOT NULL columns
(nested ones too), CHECK constraints and invariants are checked on every written row; a violation fails the
write, and nothing is committed.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from dvlake.commands.data_files import write_table_files
from dvlake.commands.dml.store_assign import Casting, cast_if_needed
from dvlake.compat.pyspark_hooks import without_call_sites
from dvlake.errors import (
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    NestedFieldUpdateError,
    UnresolvedAssignmentError,
)
from dvlake.log import features
from dvlake.log.actions import AddFile, Metadata, Protocol
from dvlake.log.condition import Condition
from dvlake.log.snapshot import Snapshot
from dvlake.spark import constraints, row_tracking
from dvlake.spark.executors import executors_need_dvlake
from dvlake.spark.layout import logical_struct
from dvlake.spark.names import same_name
from dvlake.spark.scan import ScanPlan
from dvlake.spark.task_errors import translated

RETRIES_ON_CONFLICT = 3

T = TypeVar("T")


@dataclass(frozen=True)
class Committed:
    """What one attempt of a row-level command did: the version it committed (None: nothing, e.g. a DELETE that
    matched no row) and the operationMetrics it recorded."""

    version: int | None
    metrics: dict[str, Any]


def run_row_level(spark: SparkSession, root: str, command: str, attempt: Callable[[Snapshot], Committed]) -> dict[str, Any]:
    """The one shape of DELETE, UPDATE and MERGE: ``attempt`` prepares, executes and commits on the latest snapshot;
    a conflict with a concurrent command re-runs it on the new one. Post-commit work, auto-compaction last (off
    unless ``delta.autoOptimize.autoCompact``; it never fails the command), runs inside the commit as the
    transaction's hooks (``txn/hooks.py``). Returns the operationMetrics."""
    return retry_on_conflict(lambda: attempt(Snapshot.load(root)), command).metrics


def retry_on_conflict(run_once: Callable[[], T], command: str) -> T:
    """Run a DML command; when a concurrent DML removed or re-marked files it read, re-run it on the new snapshot.

    Errors from its Spark jobs reach the caller typed (a dvlake error raised in a task, a value Spark cannot cast,
    a Python worker without dvlake: how to ship it). Its Columns are built without PySpark's call-site capture.
    """
    for attempt in range(RETRIES_ON_CONFLICT + 1):
        try:
            with translated(), executors_need_dvlake(command), without_call_sites():
                return run_once()
        except (ConcurrentDeleteDeleteException, ConcurrentDeleteReadException):
            if attempt == RETRIES_ON_CONFLICT:
                raise
    raise AssertionError("unreachable")


def use_dvs(spark: SparkSession, snapshot: Snapshot, session_key: str) -> bool:
    """delta-spark's switch: the command's ``…deletionVectors.persistent`` flag and DVs writable on the table."""
    persistent = str(spark.conf.get(session_key, "true")).lower() == "true"
    return persistent and features.dvs_enabled(snapshot.protocol, snapshot.metadata)


def predicate_param(condition: Condition | None) -> str:
    """``operationParameters.predicate``: a JSON list with the condition's text, ``[]`` without one."""
    return condition.predicate_param() if condition is not None else "[]"


def as_column(value: Any) -> Column:
    """A SQL string parsed as an expression; a Column as is; any other Python value as a literal."""
    if isinstance(value, str):
        return F.expr(value)
    return value if isinstance(value, Column) else F.lit(value)


def sub_plan(plan: ScanPlan, positions: list[int]) -> ScanPlan:
    """The plan restricted to some of its files (positions in ``plan.files``), its ``confine`` kept."""
    return plan.restricted(positions)


# --- assignments ------------------------------------------------------------------------------


def split_name(name: str) -> list[str]:
    """``a.b`` → [a, b]; ```x.y`.z`` → [x.y, z]."""
    parts = re.findall(r"`((?:[^`]|``)+)`|([^.`]+)", name.strip())
    return [(q.replace("``", "`") if q else p.strip()) for q, p in parts]


def _field(struct: StructType, name: str, where: str, parent: list[str], sensitive: bool) -> StructField:
    for f in struct.fields:
        if same_name(f.name, name, sensitive):
            return f
    names = [f.name for f in struct.fields]
    if parent:  # Spark's classes, as delta-spark reports them
        raise UnresolvedAssignmentError(
            f"No such struct field `{name}` in {', '.join(f'`{n}`' for n in names)} "
            f"(the SET column {'.'.join([*parent, name])!r} of {where}).", error_class="FIELD_NOT_FOUND")
    raise UnresolvedAssignmentError(
        f"A column, variable, or function parameter with name `{name}` cannot be "
        f"resolved: {where} has no such column. Did you mean one of the following? "
        f"[{', '.join(f'`{n}`' for n in names)}].")


def resolve_assignments(schema: StructType, assignments: dict[str, Any], where: str,
                        strip_qualifier: str | None = None, case_sensitive: bool = False) -> dict[tuple[str, ...], Column]:
    """Assignment keys → (canonical field path, value Column); unknown or duplicate columns are errors.

    Names match the table's under ``case_sensitive`` (the session's ``spark.sql.caseSensitive``), as Spark's
    analyzer resolves them; a key may be qualified by ``strip_qualifier`` (the alias)."""
    out: dict[tuple[str, ...], Column] = {}
    prefixes = [(strip_qualifier,)] if strip_qualifier else []
    for key, value in assignments.items():
        parts = unqualified(split_name(key), prefixes, case_sensitive)
        struct: DataType = schema
        canonical: list[str] = []
        for i, p in enumerate(parts):
            if not isinstance(struct, StructType):
                raise NestedFieldUpdateError(
                    f"Updating nested fields is only supported for StructType, but you are trying to update a field "
                    f"of `{'.'.join(canonical)}`, which is of type: {struct.simpleString()} ({where}, {key!r}).")
            f = _field(struct, p, where, canonical, case_sensitive)
            canonical.append(f.name)
            struct = f.dataType
            del i
        path = tuple(canonical)
        clash = [k for k in out if k[:len(path)] == path or path[:len(k)] == k]
        if clash:
            raise UnresolvedAssignmentError(
                f"{where}: there is a conflict from these SET columns: "
                f"{', '.join(repr('.'.join(k)) for k in [*clash, path])}; assign each column (or nested field) once",
                error_class="DELTA_CONFLICT_SET_COLUMN")
        out[path] = as_column(value)
    return out


def unqualified(parts: list[str], prefixes: Sequence[tuple[str, ...]], sensitive: bool) -> list[str]:
    """``parts`` without the qualifier (alias or table name) it starts with, the longest first, so that
    ``db.tab.col`` loses ``db.tab``; at least one part always stays. A qualifier wins over a struct column of the
    same name, as Spark's analyzer tries the relation's qualifier before nested fields."""
    for prefix in sorted(prefixes, key=len, reverse=True):
        n = len(prefix)
        if len(parts) > n and all(same_name(a, b, sensitive) for a, b in zip(parts[:n], prefix, strict=True)):
            return parts[n:]
    return parts


def assigned_columns(frame: DataFrame, schema: StructType, resolved: dict[tuple[str, ...], Column],
                     current: Callable[[str], Column | None], rules: Casting,
                     keep_target_fields: bool = False) -> list[Column]:
    """One Column per table column, in ``schema``'s order: delta-spark's ``generateUpdateExpressions``.

    A column assigned whole gets its value fitted to its type (``store_assign.cast_if_needed``); a column with
    assigned nested fields is rebuilt as a struct of its fields, the assigned ones replaced (a NULL struct
    becomes a struct then, as in delta-spark); any other column keeps ``current(name)`` (None: NULL), fitted
    to its type too (with schema evolution the table's type may have gained fields). ``keep_target_fields``:
    struct fields a whole-column value lacks keep ``current``'s (``UPDATE SET *`` with schema evolution)."""
    values = list(resolved.items())
    currents = {f.name: current(f.name) for f in schema.fields}
    present = [(n, c) for n, c in currents.items() if c is not None]
    probe = frame.select(*[v.alias(f"v{i}") for i, (_, v) in enumerate(values)],
                         *[c.alias(f"c{i}") for i, (_, c) in enumerate(present)]).schema.fields
    typed = [(path, v, t.dataType) for (path, v), t in zip(values, probe[:len(values)], strict=True)]
    current_types = {n: t.dataType for (n, _), t in zip(present, probe[len(values):], strict=True)}
    out = []
    for f in schema.fields:
        ops = [(path[1:], v, t) for path, v, t in typed if path[0] == f.name]
        col = _assigned(f, ops, currents[f.name], current_types.get(f.name), rules, keep_target_fields)
        out.append(col.alias(f.name))
    return out


_Op = tuple[tuple[str, ...], Column, DataType]


def _assigned(field: StructField, ops: list[_Op], default: Column | None, default_type: DataType | None,
              rules: Casting, keep: bool) -> Column:
    if not ops:
        if default is None or default_type is None:
            return F.lit(None).cast(field.dataType)
        return cast_if_needed(default, default_type, field.dataType, field.name, rules)
    whole = [op for op in ops if not op[0]]
    if whole:  # resolve_assignments refused a column assigned both whole and by field
        _, value, value_type = whole[0]
        original = default if keep else None
        return cast_if_needed(value, value_type, field.dataType, field.name, rules, original,
                              default_type if keep else None)
    struct = field.dataType
    assert isinstance(struct, StructType)  # resolve_assignments refused a nested path through anything else
    old = {f.name: f for f in default_type.fields} if isinstance(default_type, StructType) else {}
    parts = []
    for child in struct.fields:
        mine = [(p[1:], v, t) for p, v, t in ops if p[0] == child.name]
        was = old.get(child.name)
        child_default = default.getField(child.name) if default is not None and was is not None else None
        parts.append(_assigned(child, mine, child_default, was.dataType if was else None, rules, keep)
                     .alias(child.name))
    return F.struct(*parts)


# --- writing new rows -------------------------------------------------------------------------


def write_rows(df: DataFrame, table_root: str, snapshot: Snapshot, metadata: Metadata | None = None,
               protocol: Protocol | None = None, *, skip_empty: bool = False) -> list[AddFile]:
    """Write ``df`` (logical columns of the table, in any order) as new data files; NOT NULL columns, CHECK
    constraints and invariants enforced (``spark.constraints``).

    ``skip_empty``: no file is added for a frame that turns out empty (the caller did not count it first)."""
    md = metadata or snapshot.metadata
    proto = protocol or snapshot.protocol
    schema_json = md.schema
    logical = logical_struct(schema_json)
    kept_ids, kept_names = row_tracking.materialized_out(df, md, proto)  # row tracking: ids the rows keep
    ordered = df.select(*[F.col(f"`{f.name}`") for f in logical.fields], *kept_ids)
    checked = constraints.enforce(ordered, logical, md, proto)  # generated columns are checked too
    try:
        return write_table_files(checked, table_root, snapshot.storage, md, proto, extra=kept_names, skip_empty=skip_empty)
    except Exception as exc:  # noqa: BLE001 - Spark wraps the raise_error; re-raise it typed
        constraints.raise_typed(exc, table_root)
        raise


def unique_name(stem: str) -> str:
    """An internal column name no user column can have (a fresh random suffix per command)."""
    return f"__dvlake_{stem}_{uuid.uuid4().hex[:12]}"
