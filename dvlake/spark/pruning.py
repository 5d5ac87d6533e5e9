"""File pruning with Spark's help: a partition-only condition the log visitor cannot decide exactly is
evaluated by Spark itself (so every SQL function works) on one row per distinct partition tuple, with
the user's own text.

The visitor over stats and partition values is Spark-free (``dvlake.log.predicates``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, StructField, StructType

from dvlake.log.condition import Condition

_POSITION = "__dvlake_partition_tuple"


def session_time_zone(spark: SparkSession) -> str:
    """The zone Spark reads TIMESTAMP literals in (``spark.sql.session.timeZone``)."""
    return str(spark.conf.get("spark.sql.session.timeZone", "UTC") or "UTC")


def partition_only_mask(spark: SparkSession, condition: Condition, partition_schema: StructType,
                        partition_rows: list[tuple[Any, ...]]) -> np.ndarray:
    """Exactly the files whose partition tuple satisfies a partition-only ``condition``, by Spark."""
    distinct = list(dict.fromkeys(partition_rows))
    # values come back from Spark in other Python forms (naive local datetimes...): match by position
    schema = StructType([*partition_schema.fields, StructField(_POSITION, IntegerType(), False)])
    df = spark.createDataFrame([(*vals, i) for i, vals in enumerate(distinct)], schema)
    if condition.alias:
        df = df.alias(condition.alias)
    kept = {r[0] for r in df.filter(condition_column(condition, [f.name for f in partition_schema.fields]))
            .select(_POSITION).collect()}
    surviving = {distinct[i] for i in kept}
    return np.array([r in surviving for r in partition_rows], dtype=bool)


def column_of(condition: Condition) -> Column:
    """The Column Spark evaluates for a condition over frames that hold nothing but the user's names (MERGE's joined
    sides): the text as written, or the user's Column."""
    return F.expr(condition.text) if condition.text is not None else condition.column


def condition_column(condition: Condition, table_columns: list[str]) -> Column:
    """The Column Spark evaluates: the user's text (``*`` spelled as the table's columns) or their Column."""
    if condition.text is None:
        return condition.column
    return F.expr(condition.spark_text(table_columns))
