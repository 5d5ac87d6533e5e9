"""Column defaults in SQL statements: ``VALUES (…, DEFAULT)``, INSERT column lists that omit a column, and
``ALTER TABLE … ALTER COLUMN c SET DEFAULT expr | DROP DEFAULT`` (the rules are in ``dvlake.log.defaults``).

Spark resolves ``DEFAULT`` only for its own tables, so a VALUES list bound for a Delta table is rebuilt here with
each ``DEFAULT`` spelled as the column's default expression (NULL for a column without one, as Spark does), every
other value kept as the user wrote it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dvlake.sqlfront.parse import sql_error, written
from dvlake.sqlfront.refs import offset_of, reads_delta_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def table_defaults(path: str) -> dict[str, str]:
    """{column: default expression} of the Delta table at ``path`` (empty without the allowColumnDefaults feature)."""
    from dvlake.commands.writes.write import load
    from dvlake.log import defaults

    snapshot = load(path)
    return defaults.expressions(snapshot.schema) if defaults.enabled(snapshot.protocol) else {}


def is_default_keyword(node: exp.Expr) -> bool:
    """``DEFAULT`` as a value: sqlglot reads it as a Var in VALUES and as an unquoted, unqualified Column elsewhere."""
    if isinstance(node, exp.Var):
        return node.name.upper() == "DEFAULT"
    if isinstance(node, exp.Column):
        ident = node.this
        return not node.table and isinstance(ident, exp.Identifier) and not ident.quoted and ident.name.upper() == "DEFAULT"
    return False


def values_with_defaults(spark: SparkSession, source: exp.Expr, text: str, names: list[str],
                         defaults: dict[str, str]) -> DataFrame | None:
    """The rows of ``VALUES …`` with each ``DEFAULT`` replaced by the default of the column it lands in
    (``names``, in order); None when ``source`` is not a VALUES list using DEFAULT."""
    if not isinstance(source, exp.Values) or not any(is_default_keyword(v) for row in source.expressions
                                                     for v in (row.expressions if isinstance(row, exp.Tuple) else [row])):
        return None
    if reads_delta_tables(spark, source):
        raise sql_error(text, offset_of(source), "VALUES with DEFAULT cannot also read Delta tables; insert the "
                                                 "other values with INSERT … SELECT")
    by_lower = {k.lower(): v for k, v in defaults.items()}
    rows = []
    for row in source.expressions:
        values = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(values) != len(names):
            raise sql_error(text, offset_of(row), f"the table takes {len(names)} columns {names} but this row gives "
                                                  f"{len(values)}", error_class="INSERT_COLUMN_ARITY_MISMATCH")
        rows.append("(" + ", ".join(f"({by_lower.get(n.lower(), 'NULL')})" if is_default_keyword(v) else written(text, v)
                                    for n, v in zip(names, values, strict=True)) + ")")
    columns = ", ".join(f"`{n.replace('`', '``')}`" for n in names)
    return spark.sql(f"SELECT * FROM VALUES {', '.join(rows)} AS dvlake_values({columns})")


def check_default(spark: SparkSession, expression: str, data_type: str, text: str, offset: int) -> None:
    """A default must be a constant expression Spark can cast to the column's type (no column references)."""
    try:  # no FROM: a column reference cannot resolve; evaluated, so a value that does not cast fails here
        spark.sql(f"SELECT CAST(({expression}) AS {data_type}) AS v").collect()
    except Exception as exc:  # noqa: BLE001 - Spark's analysis error becomes the statement's typed error
        raise sql_error(text, offset, f"the DEFAULT {expression!r} is not a constant expression of type {data_type}: "
                                      f"{str(exc).splitlines()[0]}", error_class="INVALID_DEFAULT_VALUE") from None


def alter_default(spark: SparkSession, path: str, action: exp.Expr, text: str) -> bool:
    """``ALTER COLUMN c SET DEFAULT expr`` / ``DROP DEFAULT``; False for any other ALTER COLUMN form (or action)."""
    if not isinstance(action, exp.AlterColumn):
        return False
    others = {k for k, v in action.args.items() if v not in (None, False) and k not in ("this", "default", "drop")}
    if others or (action.args.get("default") is None and not action.args.get("drop")):
        return False
    from dvlake.commands.ddl.defaults import set_default

    default = action.args.get("default")
    if default is None:
        set_default(path, action.this.name, None)
        return True
    expression, at = written(text, default), offset_of(default)
    set_default(path, action.this.name, expression,
                check=lambda data_type: check_default(spark, expression, data_type, text, at))
    return True


def keywords_replaced(values: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """Assignment values (column → the user's text) with a bare ``DEFAULT`` spelled as that column's default, NULL
    for a column without one (Spark's rule for ``SET c = DEFAULT`` and MERGE's ``INSERT … VALUES (…, DEFAULT)``)."""
    by_lower = {k.lower(): v for k, v in defaults.items()}
    out = {}
    for column, value in values.items():
        if isinstance(value, str) and value.strip().upper() == "DEFAULT":
            leaf = column.split(".")[-1].strip("`").lower()
            value = f"({by_lower.get(leaf, 'NULL')})"
        out[column] = value
    return out


def clauses_with_defaults(clauses: list[Any], path: str) -> list[Any]:
    """MERGE clauses with ``DEFAULT`` values replaced (``keywords_replaced``), and each ``INSERT (columns) VALUES``
    given the default of every column with one that it leaves out (as Spark fills an INSERT's omitted columns);
    the same list when the table has no defaults."""
    import dataclasses

    if not any(c.assignments for c in clauses):
        return clauses
    defaults = table_defaults(path)
    if not defaults:
        return clauses
    out = []
    for c in clauses:
        if c.assignments:
            values = keywords_replaced(c.assignments, defaults)
            if c.action == "insert":
                named = {k.split(".")[-1].strip("`").lower() for k in values}
                values.update({col: f"({text})" for col, text in defaults.items() if col.lower() not in named})
            c = dataclasses.replace(c, assignments=values)
        out.append(c)
    return out
