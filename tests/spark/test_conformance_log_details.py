"""What the log records, by delta-spark's rules (``DeltaOperations``, ``OptimisticTransaction.commitIfNeeded``,
``DeletionVectorsSuite``).

Rules checked:

- A write by path that creates the table (``df.write.format("delta").save``, ``dvlake.write``) is recorded as
  ``WRITE`` with its save mode and partition columns; a table created by name from a query (``saveAsTable``, SQL
  ``CREATE TABLE … AS SELECT``) is ``CREATE TABLE AS SELECT``.
- One DELETE that marks rows in many files writes all their deletion vectors into one DV file (the tasks follow the
  marked rows, and a small DELETE is one task).
- A MERGE that changes nothing commits no version, unless the session turns delta-spark's
  ``spark.databricks.delta.skipRecordingEmptyCommits`` off; then it commits an empty MERGE version with its metrics.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS


def _history(spark: SparkSession, path: str) -> list[tuple[str, dict[str, str]]]:
    rows = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    return [(r.operation, dict(r.operationParameters)) for r in rows]


def test_a_path_write_that_creates_the_table_is_write(dspark: SparkSession, tmp_path) -> None:
    df = dspark.createDataFrame([(1, "a")], "id long, day string")
    dvlake.write(df, str(tmp_path / "api"), partitionBy="day")
    df.write.format("delta").save(str(tmp_path / "faces"))
    for name in ("api", "faces"):
        (operation, params), = _history(dspark, str(tmp_path / name))
        assert operation == "WRITE", name
        assert params["mode"] == "ErrorIfExists"
    assert _history(dspark, str(tmp_path / "api"))[0][1]["partitionBy"] == '["day"]'


def test_a_table_created_by_name_from_a_query_is_ctas(dspark: SparkSession, tmp_path) -> None:
    df = dspark.createDataFrame([(1, "a")], "id long, day string")
    location = str(tmp_path / "named")
    try:
        df.write.format("delta").option("path", location).saveAsTable("log_details_named")
        assert [op for op, _ in _history(dspark, location)] == ["CREATE TABLE AS SELECT"]
    finally:
        dspark.sql("DROP TABLE IF EXISTS log_details_named")
    sql_path = str(tmp_path / "sql")
    dvlake.sql(dspark, f"CREATE TABLE delta.`{sql_path}` USING delta AS SELECT 1 AS id")
    assert [op for op, _ in _history(dspark, sql_path)] == ["CREATE TABLE AS SELECT"]


def test_one_delete_over_many_files_writes_one_dv_file(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "many")
    dvlake.write(spark.range(0, 400, 1, numPartitions=200), path, properties=DV_PROPS)  # 200 files of 2 rows
    DeltaTable.forPath(spark, path).delete("id % 2 = 0 AND id < 200")
    snap = Snapshot.load(path)
    dvs = [a.deletion_vector for a in snap.add_files() if a.deletion_vector is not None]
    assert len(dvs) == 100 and sum(d.cardinality for d in dvs) == 100
    assert len({d.absolute_path(snap.table_root) for d in dvs}) == 1
    assert sorted(r.id for r in dvlake.read(spark, path).filter("id < 10").collect()) == [1, 3, 5, 7, 9]


@pytest.mark.parametrize("skip", [None, "false"])
def test_a_merge_that_changes_nothing(spark: SparkSession, tmp_path, skip: str | None) -> None:
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame([(1, 10), (2, 20)], "id long, v long"), path)
    source = spark.createDataFrame([(9, 90)], "id long, v long")
    key = "spark.databricks.delta.skipRecordingEmptyCommits"
    if skip is not None:
        spark.conf.set(key, skip)
    try:
        out = (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
               .whenMatchedUpdateAll().whenNotMatchedInsertAll("s.v < 0").execute().collect())
    finally:
        spark.conf.unset(key)
    assert tuple(out[0]) == (0, 0, 0, 0)
    history = DeltaTable.forPath(spark, path).history().orderBy("version").collect()
    if skip is None:
        assert len(history) == 1
    else:
        assert [r.operation for r in history] == ["WRITE", "MERGE"]
        assert history[1].operationMetrics["numTargetRowsInserted"] == "0"
        assert history[1].operationMetrics["numSourceRows"] == "1"
    assert sorted(tuple(r) for r in dvlake.read(spark, path).collect()) == [(1, 10), (2, 20)]
