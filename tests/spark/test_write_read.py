"""Writing tables with dvlake and reading them back: modes, partitions, time travel, history, detail, SQL."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.errors import SchemaMismatchError, TableAlreadyExistsError, TableNotFoundError, VersionNotFoundError
from dvlake.log.snapshot import Snapshot


def _df(spark, start, n):
    return spark.createDataFrame([(i, f"v{i}", i % 3) for i in range(start, start + n)], "id long, s string, p int")


def _ids(df):
    return sorted(r[0] for r in df.select("id").collect())


def test_write_modes_and_time_travel(spark, tmp_path):
    path = str(tmp_path / "t")
    assert dvlake.write(_df(spark, 0, 10), path) == 0
    with pytest.raises(TableAlreadyExistsError):
        dvlake.write(_df(spark, 0, 10), path)
    assert dvlake.write(_df(spark, 10, 5), path, mode="append") == 1
    assert dvlake.write(_df(spark, 100, 3), path, mode="overwrite") == 2
    assert dvlake.write(_df(spark, 0, 1), path, mode="ignore") is None
    assert _ids(dvlake.read(spark, path)) == [100, 101, 102]
    assert _ids(dvlake.read(spark, path, version=1)) == list(range(15))
    assert _ids(dvlake.read(spark, path, version=0)) == list(range(10))
    with pytest.raises(VersionNotFoundError):
        dvlake.read(spark, path, version=7)


def test_time_travel_by_timestamp(spark, tmp_path):
    path = str(tmp_path / "ts")
    dvlake.write(_df(spark, 0, 3), path)
    log = os.path.join(path, "_delta_log")
    os.utime(os.path.join(log, f"{0:020d}.json"), (1_700_000_000, 1_700_000_000))
    dvlake.write(_df(spark, 3, 3), path, mode="append")
    os.utime(os.path.join(log, f"{1:020d}.json"), (1_700_000_100, 1_700_000_100))
    at = dt.datetime.fromtimestamp(1_700_000_050, dt.UTC)
    assert _ids(dvlake.read(spark, path, timestamp=at)) == [0, 1, 2]
    assert _ids(dvlake.read(spark, path, timestamp="2023-11-14T22:15:00Z")) == list(range(6))
    with pytest.raises(VersionNotFoundError):
        dvlake.read(spark, path, timestamp="2020-01-01")
    with pytest.raises(VersionNotFoundError, match="after the latest"):  # after the last commit: refused, as delta-spark
        dvlake.read(spark, path, timestamp="2023-11-14T22:16:00Z")


def test_schema_mismatch_is_refused(spark, tmp_path):
    path = str(tmp_path / "sm")
    dvlake.write(_df(spark, 0, 3), path)
    with pytest.raises(SchemaMismatchError, match="extra columns"):
        dvlake.write(_df(spark, 0, 3).withColumnRenamed("s", "t"), path, mode="append")
    reordered = _df(spark, 3, 2).select("p", "s", "id")
    dvlake.write(reordered, path, mode="append")
    dvlake.write(_df(spark, 5, 1).withColumn("id", F.col("id").cast("int")), path, mode="append")  # int widens to long
    assert _ids(dvlake.read(spark, path)) == list(range(6))
    with pytest.raises(SchemaMismatchError, match="'s'"):
        dvlake.write(_df(spark, 0, 1).withColumn("s", F.lit(1)), path, mode="append")


def test_partitioned_write_and_pruning(spark, tmp_path):
    path = str(tmp_path / "p")
    dvlake.write(_df(spark, 0, 30), path, partitionBy=["p"])
    snap = Snapshot.load(path)
    assert snap.partition_columns == ["p"]
    assert {dict(r["partitionValues"])["p"] for r in snap.files.to_pylist()} == {"0", "1", "2"}
    assert _ids(dvlake.read(spark, path, condition="p = 1")) == [i for i in range(30) if i % 3 == 1]
    from dvlake.spark.scan import plan_scan

    plan = plan_scan(spark, snap, "p = 1")
    assert {f.partition_values for f in plan.files} == {(1,)}
    plan = plan_scan(spark, snap, "id >= 25 AND p = 2")
    assert all(f.partition_values == (2,) for f in plan.files)


def test_data_skipping_uses_stats(spark, tmp_path):
    path = str(tmp_path / "skip")
    dvlake.write(_df(spark, 0, 100).repartitionByRange(4, "id"), path)
    snap = Snapshot.load(path)
    from dvlake.spark.scan import plan_scan

    assert len(plan_scan(spark, snap).files) == 4
    assert len(plan_scan(spark, snap, "id = 3").files) == 1
    assert len(plan_scan(spark, snap, "id > 1000").files) == 0
    assert len(plan_scan(spark, snap, "id IN (1, 99)").files) == 2
    assert len(plan_scan(spark, snap, "s IS NULL").files) == 0
    assert _ids(dvlake.read(spark, path, condition="id = 3 OR id = 50")) == [3, 50]


def test_stats_from_footers(spark, tmp_path):
    path = str(tmp_path / "stats")
    df = spark.createDataFrame([(1, "a", None), (5, "zz", 2.5)], "id int, s string, d double")
    dvlake.write(df.coalesce(1), path)
    [add] = Snapshot.load(path).add_files()
    stats = json.loads(add.stats)
    assert stats["numRecords"] == 2
    assert stats["minValues"] == {"id": 1, "s": "a", "d": 2.5}
    assert stats["maxValues"] == {"id": 5, "s": "zz", "d": 2.5}
    assert stats["nullCount"] == {"id": 0, "s": 0, "d": 1}


def test_history_detail_and_sql(spark, tmp_path):
    path = str(tmp_path / "h")
    dvlake.write(_df(spark, 0, 5), path)
    dvlake.write(_df(spark, 5, 5), path, mode="append")
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    snap = Snapshot.load(path)
    assert snap.configuration["delta.enableDeletionVectors"] == "true"
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (3, 7)
    assert set(snap.protocol.reader_features) == {"deletionVectors"}
    assert set(snap.protocol.writer_features) == {"appendOnly", "invariants", "deletionVectors"}
    hist = dvlake.sql(spark, f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert [r.version for r in hist] == [2, 1, 0]
    assert [r.operation for r in hist] == ["SET TBLPROPERTIES", "WRITE", "WRITE"]  # a path write creates with WRITE
    assert hist[1].operationMetrics["numOutputRows"] == "5"
    assert hist[1].readVersion == 0 and hist[1].isBlindAppend is True
    assert DeltaTable.forPath(spark, path).history(1).count() == 1
    detail = dvlake.sql(spark, f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert detail.format == "delta" and detail.numFiles == len(snap.add_files())
    assert detail.minReaderVersion == 3 and "deletionVectors" in detail.tableFeatures
    assert detail.statistics == {"numDeletionVectors": 0, "numRowsDeletedByDeletionVectors": 0}
    assert dvlake.sql(spark, "SELECT 1 AS x").collect()[0].x == 1


def test_builder_and_for_path(spark, tmp_path):
    path = str(tmp_path / "b")
    assert not DeltaTable.isDeltaTable(spark, path)
    with pytest.raises(TableNotFoundError):
        DeltaTable.forPath(spark, path)
    DeltaTable.create(spark).location(path).addColumn("id", "long").addColumn("p", "string") \
        .partitionedBy("p").property("delta.enableDeletionVectors", "true").execute()
    assert DeltaTable.isDeltaTable(spark, path)
    dt_ = DeltaTable.forPath(spark, path)
    assert dt_.toDF().count() == 0
    assert dt_.detail().collect()[0].partitionColumns == ["p"]
    DeltaTable.createIfNotExists(spark).location(path).addColumn("id", "long").execute()
    assert Snapshot.load(path).version == 0


def test_appending_without_a_partition_column_is_refused(spark, tmp_path):
    """delta-spark refuses it; filling the column with NULL would put every row in a NULL partition."""
    from dvlake.errors import SchemaMismatchError

    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame([(1, "2024-01-01")], "id long, day string"), path, partitionBy="day")
    with pytest.raises(SchemaMismatchError) as info:
        dvlake.write(spark.createDataFrame([(2,)], "id long"), path, mode="append")
    assert info.value.error_class == "DELTA_PARTITION_COLUMN_NOT_FOUND" and "day" in str(info.value)
    assert [tuple(r) for r in dvlake.read(spark, path).collect()] == [(1, "2024-01-01")]
