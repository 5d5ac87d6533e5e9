"""How MERGE writes its output (issue 40), with deletion vectors and with copy-on-write. Rows are our own.

- ``spark.databricks.delta.merge.repartitionBeforeWrite.enabled`` (delta-spark's default: on) repartitions the
  output by the table's partition columns before the write: one file per partition written, where the source's
  tasks would each write into every partition.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.config import MERGE_REPARTITION_BEFORE_WRITE
from tests.helpers import table_rows


# The flag decides the output's layout the same way in both modes: each setting runs once, one per mode.
@pytest.mark.parametrize(("enabled", "dvs"), [("true", "true"), ("false", "false")],
                         ids=["true-dv", "false-copy_on_write"])
def test_repartition_before_write_writes_one_file_per_partition(spark: SparkSession, tmp_path, dvs, enabled) -> None:
    """Rule: with the flag on, a MERGE that updates and inserts rows of two partitions from a four-task source adds
    one file per partition; off, the source's tasks each write their own files (more than two)."""
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame([(i, i % 2, 0) for i in range(4)], "key int, part int, v int"), path,
                 partitionBy=["part"], properties={"delta.enableDeletionVectors": dvs})
    source = spark.createDataFrame([(i, i % 2, 1) for i in range(2, 10)], "key int, part int, v int").repartition(4)
    spark.conf.set(MERGE_REPARTITION_BEFORE_WRITE, enabled)
    try:
        DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key") \
            .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute()
    finally:
        spark.conf.unset(MERGE_REPARTITION_BEFORE_WRITE)
    assert table_rows(spark, path) == [(0, 0, 0), (1, 1, 0), *[(i, i % 2, 1) for i in range(2, 10)]]
    added = int(DeltaTable.forPath(spark, path).history(1).collect()[0].operationMetrics["numTargetFilesAdded"])
    assert added == 2 if enabled == "true" else added > 2
