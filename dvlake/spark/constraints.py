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
from dvlake.log.sql_dialect import backquoted
from dvlake.spark.task_errors import framed

NOT_NULL_MARKER = "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"


def _text(value: str) -> str:
    """``value`` as a SQL string expression that no quoting or escape setting can change: UTF-8 bytes in hex."""
    return f"CAST(X'{value.encode('utf-8').hex()}' AS STRING)"


def not_null_violations(schema: StructType) -> list[tuple[str, str]]:
    """(column path, SQL text true when the row breaks it) for every NOT NULL field reachable through structs: a
    nested field only counts where its parents are present."""
    out: list[tuple[str, str]] = []

    def visit(struct: StructType, parent: str | None, prefix: str, parent_present: str | None) -> None:
        for f in struct.fields:
            col = backquoted(f.name) if parent is None else f"{parent}.{backquoted(f.name)}"
            name = prefix + f.name
            if not f.nullable:
                out.append((name, f"{col} IS NULL" if parent_present is None else f"({parent_present} AND {col} IS NULL)"))
            if isinstance(f.dataType, StructType):
                present = f"{col} IS NOT NULL" if parent_present is None else f"{parent_present} AND {col} IS NOT NULL"
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
    nulls = not_null_violations(schema)
    if not (rules or nulls) or not schema.fields:
        return df
    first = schema.fields[0]
    # The NOT NULL arms as one SQL text (every table has some; a chain of Column calls is a round trip to the JVM
    # per call, on every write). CHECK rules, whose text is the table's, each stay an expression of their own,
    # tried first.
    message = f"[{NOT_NULL_MARKER}] NULL value appeared in non-nullable field "
    # the name ends at a closing marker: column names may hold spaces, dots and quotes (raise_typed reads it back)
    arms = "".join(f"WHEN {bad} THEN raise_error({_text(f'{message}{name}[/{NOT_NULL_MARKER}]')})\n"
                   for name, bad in nulls)
    guard = F.expr(f"CASE\n{arms}ELSE {backquoted(first.name)} END") if nulls else F.col(backquoted(first.name))
    if rules:
        checks = [_check_violation(c) for c in rules]
        chain = F.when(checks[0][0], F.raise_error(checks[0][1]))
        for bad, text in checks[1:]:
            chain = chain.when(bad, F.raise_error(text))
        guard = chain.otherwise(guard)
    names = set(schema.fieldNames())
    return df.select(guard.cast(first.dataType).alias(first.name), *[backquoted(f.name) for f in schema.fields[1:]],
                     *[backquoted(c) for c in df.columns if c not in names])  # hidden columns pass through


def raise_typed(exc: BaseException, table_root: str) -> None:
    """Re-raise a NOT NULL failure of ``enforce`` as DeltaInvariantViolationException (CHECK failures are
    typed by ``task_errors.translated``); return for any other error."""
    text = str(exc)
    if NOT_NULL_MARKER in text and "non-nullable field" in text:
        m = re.search(rf"non-nullable field (.*?)\[/{NOT_NULL_MARKER}\]", text, re.DOTALL)
        column = m.group(1) if m else "?"
        raise DeltaInvariantViolationException(
            f"NULL value appeared in non-nullable field {column!r} of {table_root}: the command "
            "would write a NULL into a NOT NULL column. Nothing was committed; fix the written values (e.g. "
            "COALESCE) or relax the column.") from None
