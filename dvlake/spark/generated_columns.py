"""The checks a new table's generated columns pass before it is created, shared by CREATE TABLE and the builder.

delta-spark validates generation expressions when the table is defined (``validateGeneratedColumns``), not when
rows arrive: a bad expression must never reach the log, where every later write would trip over it. SQL and
``DeltaTableBuilder.addColumn(..., generatedAlwaysAs=...)`` define the same thing, so both go through
:func:`check_generation_expressions`; each face only decides how a refusal is worded (the SQL front end names the
statement and the column's position, the builder names the column).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.log import constraints

#: ``refuse(column, problem, error_class)`` → the exception the caller's face raises for a refused expression.
Refusal = Callable[[str, str, str], Exception]


def check_generation_expressions(spark: SparkSession, schema: StructType, expressions: dict[str, str],
                                 refuse: Refusal) -> None:
    """delta-spark's ``validateGeneratedColumns``, the parts dvlake checks: an expression reads only other, not
    generated, columns of the table, is deterministic, and its value has the column's type.

    Args:
        spark: the session whose analyzer types the expressions (over an empty frame: no job runs).
        schema: the new table's columns, generated ones included.
        expressions: generated column name → its expression text.
        refuse: builds the exception to raise for a column, a message and delta-spark's error class.
    """
    names = {f.name.lower() for f in schema.fields}
    generated = {c.lower() for c in expressions}
    for column, expression in expressions.items():
        for ref in constraints.referenced_columns(expression):
            base = ref.split(".")[0].strip("`").lower()
            if base not in names or base in generated:
                raise refuse(column, f"the generation expression of {column!r} ({expression}) reads {ref!r}, which is "
                             f"{'not a column of the table' if base not in names else 'a generated column'}; a generated "
                             "column may read only the table's other, not generated, columns",
                             "DELTA_INVALID_GENERATED_COLUMN_REFERENCES")
        if constraints.non_deterministic_call(expression) is not None:
            raise refuse(column, f"the generation expression of {column!r} ({expression}) is not deterministic; a "
                         "generated column needs a deterministic expression",
                         "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN")
    probe = spark.createDataFrame([], StructType([f for f in schema.fields if f.name not in expressions]))
    types = {f.name: f.dataType for f in schema.fields}
    for column, expression in expressions.items():
        got = probe.select(F.expr(expression).alias("v")).schema.fields[0].dataType
        if got != types[column]:
            raise refuse(column, f"the generation expression of {column!r} ({expression}) has type "
                         f"{got.simpleString()}, but the column is {types[column].simpleString()}; cast the expression "
                         "to the column's type", "DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH")
