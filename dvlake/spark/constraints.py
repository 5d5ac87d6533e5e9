"""Enforcing a table's write-time rules on every row a command adds: NOT NULL columns, CHECK constraints,
column invariants and generated columns (delta-spark's ``DeltaInvariantCheckerExec``).

The check is a Spark expression wrapped around the first column of the frame being written: a CASE
whose branches call ``raise_error`` when a rule fails. It runs on the executors inside the write job
itself (no extra pass over the data, nothing collected to the driver, cluster and Connect alike), so a
violation fails the job before any file reaches the log and nothing is committed. A CHECK violation's
message is framed as a dvlake task error (``task_errors``), so ``translated()`` raises it on the driver
as ``CheckConstraintViolationError`` with delta-spark's text: the constraint's name, its expression as
Spark prints it and the row's values of the columns it reads.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.errors import CheckConstraintViolationError, DeltaInvariantViolationException
from dvlake.log import constraints, generated
from dvlake.log.actions import Metadata, Protocol
from dvlake.spark.task_errors import framed

NOT_NULL_MARKER = "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"


def not_null_violations(schema: StructType) -> list[tuple[str, Column]]:
    """(column path, violation Column) for every NOT NULL field reachable through nullable-or-not structs."""
    out: list[tuple[str, Column]] = []

    def visit(struct: StructType, parent: Column | None, prefix: str, parent_present: Column | None) -> None:
        for f in struct.fields:
            col = F.col(f"`{f.name}`") if parent is None else parent.getField(f.name)
            name = prefix + f.name
            if not f.nullable:
                bad = col.isNull() if parent_present is None else (parent_present & col.isNull())
                out.append((name, bad))
            if isinstance(f.dataType, StructType):
                present = col.isNotNull() if parent_present is None else (parent_present & col.isNotNull())
                visit(f.dataType, col, name + ".", present)

    visit(schema, None, "", None)
    return out


def _check_violation(check: constraints.Check) -> tuple[Column, Column]:
    """(the row fails the check, the error message naming the check and the row's values) for one CHECK rule.

    A NULL result is a failure, as in delta-spark."""
    bad = ~F.coalesce(F.expr(check.text).cast("boolean"), F.lit(False))
    opening, closing = framed(CheckConstraintViolationError.__name__)
    # the driver rebuilds it as CheckConstraintViolationError, whose type shows its class in front
    parts: list[Column] = [F.lit(f"{opening}CHECK constraint {check.name} "
                                 f"{constraints.spark_sql(check.text)} violated by row with values:")]
    for name in constraints.referenced_columns(check.text):
        parts += [F.lit(f"\n - {name} : "), F.coalesce(F.expr(name).cast("string"), F.lit("null"))]
    parts.append(F.lit(closing))
    return bad, F.concat(*parts)


def fill_generated(df: DataFrame, schema: StructType, protocol: Protocol, metadata: Metadata,
                   columns: set[str]) -> DataFrame:
    """``df`` (the table's logical columns) with the generated ``columns`` computed from their expressions over
    the row's other values, cast to the column's type, as delta-spark computes a generated column the written
    data lacks. Other columns, and generated columns not named, keep their values (``enforce`` checks them)."""
    wanted = {c.lower() for c in columns}
    exprs = {n: t for n, t in generated.expressions(protocol, metadata).items() if n.lower() in wanted}
    return computed(df, schema, exprs)


def computed(df: DataFrame, schema: StructType, exprs: dict[str, str], where: Column | None = None) -> DataFrame:
    """``df`` with each column of ``exprs`` (name → generation expression) set to its expression over the row's
    values, cast to the column's type; with ``where``, only on the rows it holds for. Columns keep their order."""
    if not exprs:
        return df
    types = {f.name: f.dataType for f in schema.fields}

    def value(c: str) -> Column:
        new = F.expr(exprs[c]).cast(types[c])
        return (new if where is None else F.when(where, new).otherwise(F.col(f"`{c}`"))).alias(c)

    return df.select(*[value(c) if c in exprs else F.col(f"`{c}`") for c in df.columns])


def enforce(df: DataFrame, schema: StructType, metadata: Metadata, protocol: Protocol | None = None) -> DataFrame:
    """``df`` (the table's logical columns first, hidden columns after) failing at run time on the first row
    that breaks a rule of the table: a CHECK constraint or invariant (checked first, as delta-spark orders
    them), a generated column whose value differs from its expression (with ``protocol``: the expressions bind
    only under the ``generatedColumns`` feature) or a NULL in a NOT NULL column. The columns and their order
    are unchanged."""
    rules = constraints.all_checks(metadata) + (generated.checks(protocol, metadata) if protocol is not None else [])
    branches: list[tuple[Column, Column]] = [_check_violation(c) for c in rules]
    for name, bad in not_null_violations(schema):
        branches.append((bad, F.lit(f"[{NOT_NULL_MARKER}] NULL value appeared in non-nullable field {name}")))
    if not branches or not schema.fields:
        return df
    guard = F.when(branches[0][0], F.raise_error(branches[0][1]))
    for bad, message in branches[1:]:
        guard = guard.when(bad, F.raise_error(message))
    first = schema.fields[0]
    names = set(schema.fieldNames())
    cols = [guard.otherwise(F.col(f"`{first.name}`")).cast(first.dataType).alias(first.name)]
    cols += [F.col(f"`{f.name}`") for f in schema.fields[1:]]
    return df.select(*cols, *[F.col(f"`{c}`") for c in df.columns if c not in names])  # hidden columns pass through


def raise_typed(exc: BaseException, table_root: str) -> None:
    """Re-raise a NOT NULL failure of ``enforce`` as DeltaInvariantViolationException (CHECK failures are
    typed by ``task_errors.translated``); return for any other error."""
    text = str(exc)
    if NOT_NULL_MARKER in text and "non-nullable field" in text:
        m = re.search(r"non-nullable field ([^\s'\"\]]+)", text)
        column = m.group(1) if m else "?"
        raise DeltaInvariantViolationException(
            f"NULL value appeared in non-nullable field {column!r} of {table_root}: the command "
            "would write a NULL into a NOT NULL column. Nothing was committed; fix the written values (e.g. "
            "COALESCE) or relax the column.") from None
