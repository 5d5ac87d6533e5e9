"""MERGE's output repartitioned by the table's partition columns before it is written, as delta-spark's
``writeFiles`` does when ``spark.databricks.delta.merge.repartitionBeforeWrite.enabled`` is on (its default).

Without it every write task holds rows of many partitions and writes a file into each: a MERGE touching P
partitions over T tasks writes up to P x T small files; after the shuffle each partition's rows are in one task,
so about one file per partition.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dvlake.config import MERGE_REPARTITION_BEFORE_WRITE
from dvlake.log.actions import Metadata


def repartition_before_write(spark: SparkSession, rows: DataFrame, metadata: Metadata) -> DataFrame:
    """``rows`` repartitioned by ``metadata``'s partition columns when the table has some and the flag is on."""
    parts = list(metadata.partition_columns)
    on = str(spark.conf.get(MERGE_REPARTITION_BEFORE_WRITE, "true") or "true").strip().lower() == "true"
    if not parts or not on:
        return rows
    return rows.repartition(*[F.col(f"`{p}`") for p in parts])
