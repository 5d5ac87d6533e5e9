"""MERGE, one delta-spark rule per test (the docstring states it), with deletion vectors and with copy-on-write.

Name resolution, clause order and refusals of aggregates and non-deterministic conditions are in
test_merge_rules.py, struct and cast rules in test_dml_struct_rules.py, sources in test_conformance_merge_sources.py;
this file holds the rest. Rows are our own; expected rows are worked out by hand in each test.
"""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.commands.merge_source import materializes
from dvlake.config import MERGE_MATERIALIZE_SOURCE

MODES = pytest.mark.parametrize("dvs", ["true", "false"], ids=["dv", "copy_on_write"])


def _table(spark: SparkSession, tmp_path, dvs: str, rows: list[tuple[int, int]], files: int = 2) -> str:
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame(rows, "k long, v long").repartition(files), path,
                 properties={"delta.enableDeletionVectors": dvs})
    return path


def _rows(spark: SparkSession, path: str) -> list[tuple[int, ...]]:
    return sorted(tuple(r) for r in dvlake.read(spark, path).collect())


# --- the source is read as one consistent set of rows --------------------------------------------------------


@pytest.fixture
def materialize_none(spark: SparkSession):
    spark.conf.set(MERGE_MATERIALIZE_SOURCE, "none")
    yield
    spark.conf.unset(MERGE_MATERIALIZE_SOURCE)


@MODES
def test_a_source_that_changes_between_reads_never_inserts_a_matched_key(spark, tmp_path, dvs, materialize_none):
    """Rule: every source row is matched or not matched once, against one reading of the source (delta-spark
    materializes a source it cannot prove deterministic). A Python UDF that draws a new key on every call is such
    a source; with ``materializeSource=none`` dvlake still materializes it, so no key is inserted next to the
    existing row it matched."""
    import random

    path = _table(spark, tmp_path, dvs, [(i, 0) for i in range(40)])
    draw = F.udf(lambda i: i if random.random() < 0.5 else i + 1000, "long")
    source = spark.range(40).select(draw("id").alias("k"), F.lit(1).cast("long").alias("v"))
    (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.k = s.k")
     .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute())
    rows = _rows(spark, path)
    keys = [k for k, _ in rows]
    assert len(keys) == len(set(keys)), [k for k in keys if keys.count(k) > 1]
    assert {k for k in keys if k < 1000} == set(range(40))
    # each source row either updated its key or inserted key + 1000, never both: 40 decisions in all
    assert sum(1 for k, v in rows if k < 1000 and v == 1) + sum(1 for k in keys if k >= 1000) == 40


def test_none_is_honoured_only_for_sources_that_read_the_same_rows_every_time(spark, tmp_path, materialize_none):
    """Rule (dvlake's reading of delta-spark's ``merge.materializeSource``): ``none`` skips materializing only a
    deterministic plan of scans, projections and filters; anything else is materialized anyway."""
    path = _table(spark, tmp_path, "true", [(1, 1)])
    plain: list[DataFrame] = [spark.range(5), dvlake.read(spark, path).where("k > 0").select("k"),
                              spark.range(3).union(spark.range(2))]
    unsafe: list[DataFrame] = [spark.range(5).withColumn("r", F.rand()),
                               spark.range(5).withColumn("u", F.udf(lambda x: x, "long")("id")),
                               spark.range(5).groupBy((F.col("id") % 2).alias("g")).count(),
                               spark.range(5).repartition(3),
                               spark.range(5).join(spark.range(3), "id")]
    assert [materializes(spark, df) for df in plain] == [False] * len(plain)
    assert [materializes(spark, df) for df in unsafe] == [True] * len(unsafe)
    spark.conf.unset(MERGE_MATERIALIZE_SOURCE)
    assert all(materializes(spark, df) for df in plain)  # the default always materializes
