"""Partition pruning with Spark for the conjuncts the pure evaluator cannot decide.

The predicate logic itself (splitting, parsing, stats skipping, simple partition conjuncts) is
Spark-free in ``dvlake.log.predicates``; this module only adds Spark's evaluation of the partition
conjuncts that use SQL beyond simple comparisons (functions, casts, expressions).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import Column, SparkSession
from pyspark.sql.types import IntegerType, StructField, StructType

from dvlake.log.predicates import (  # noqa: F401 - re-exported for callers of the old module
    Conjunct,
    condition_text,
    mentions_only,
    parse_conjunct,
    partition_values_mask,
    references_only,
    skipping_mask,
    split_conjuncts,
)


def partition_mask(spark: SparkSession, condition: str | Column | None, partition_schema: StructType,
                   partition_rows: list[tuple[Any, ...]], all_columns: set[str]) -> np.ndarray:
    """True for files whose partition values may satisfy the condition's partition-only conjuncts.

    Spark itself evaluates those conjuncts (so every SQL function works) on one row per distinct
    partition tuple. A conjunct that mentions any data column is left to the scan.
    """
    n = len(partition_rows)
    keep = np.ones(n, dtype=bool)
    text = condition_text(condition)
    if text is None or not partition_schema.fields or n == 0:
        return keep
    allowed = {f.name.lower() for f in partition_schema.fields}
    conjuncts = [c for c in split_conjuncts(text) if mentions_only(c, allowed, all_columns)]
    if not conjuncts:
        return keep
    # simple comparisons are decided in Python (no Spark job); only the rest goes to Spark
    keep, conjuncts = partition_values_mask(conjuncts, [f.name for f in partition_schema.fields], partition_rows)
    if not conjuncts:
        return keep
    distinct = list(dict.fromkeys(partition_rows))
    # values come back from Spark in other Python forms (naive local datetimes...): match by position
    schema = StructType([StructField("__dvlake_idx", IntegerType(), False), *partition_schema.fields])
    df = spark.createDataFrame([(i, *vals) for i, vals in enumerate(distinct)], schema)
    kept = {r[0] for r in df.filter(" AND ".join(f"({c})" for c in conjuncts)).select("__dvlake_idx").collect()}
    surviving = {distinct[i] for i in kept}
    return keep & np.array([r in surviving for r in partition_rows], dtype=bool)


