"""delta-spark's DataFrameWriter options through ``df.write.format("delta")`` (configure_spark's hooks)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvlake import DeltaTable
from dvlake.commands.writes import options as write_options
from dvlake.errors import DeltaOptionError, ReplaceWhereMismatchError, SchemaMismatchError
from dvlake.log.snapshot import Snapshot


def _rows(spark: SparkSession, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _last_commit(path: str) -> dict:
    info = Snapshot.load(path).state.commit_info
    return info.values if info is not None else {}


def _history(spark: SparkSession, path: str):
    return DeltaTable.forPath(spark, path).history(1).collect()[0]


@pytest.fixture
def by_day(dspark: SparkSession, tmp_path: Path) -> str:
    """A table partitioned by day, DVs on: (1,a) (2,a) (3,b) (4,c)."""
    path = str(tmp_path / "by_day")
    (dspark.createDataFrame([(1, "a"), (2, "a"), (3, "b"), (4, "c")], "id long, day string")
        .write.format("delta").partitionBy("day").option("delta.enableDeletionVectors", "true").save(path))
    return path


def test_merge_schema_option_and_session_setting(dspark: SparkSession, by_day: str) -> None:
    wider = dspark.createDataFrame([(5, "d", "x")], "id long, day string, note string")
    with pytest.raises(SchemaMismatchError, match="note"):
        wider.write.format("delta").mode("append").save(by_day)
    wider.write.format("delta").mode("append").option("mergeSchema", "true").save(by_day)
    assert _rows(dspark, by_day)[-1] == (5, "d", "x")
    assert (1, "a", None) in _rows(dspark, by_day)
    # the session setting does the same; the data may also lack a (nullable) data column, never a partition column
    dspark.conf.set(write_options.AUTO_MERGE_CONF, "true")
    try:
        dspark.createDataFrame([(6, "e", 1.5)], "id long, day string, score double").write.format("delta") \
            .mode("append").save(by_day)
    finally:
        dspark.conf.unset(write_options.AUTO_MERGE_CONF)
    assert [f.name for f in dspark.read.format("delta").load(by_day).schema] == ["id", "day", "note", "score"]
    assert (6, "e", None, 1.5) in _rows(dspark, by_day)


def test_overwrite_schema(dspark: SparkSession, by_day: str) -> None:
    other = dspark.createDataFrame([("z", 1.0)], "name string, value double")
    with pytest.raises(SchemaMismatchError):
        other.write.format("delta").mode("overwrite").save(by_day)
    other.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(by_day)
    assert _rows(dspark, by_day) == [("z", 1.0)]
    assert list(Snapshot.load(by_day).partition_columns) == []


def test_replace_where_partition_and_data_predicates(dspark: SparkSession, by_day: str) -> None:
    (dspark.createDataFrame([(30, "b"), (31, "b")], "id long, day string")
        .write.format("delta").mode("overwrite").option("replaceWhere", "day = 'b'").save(by_day))
    assert _rows(dspark, by_day) == [(1, "a"), (2, "a"), (4, "c"), (30, "b"), (31, "b")]
    assert _last_commit(by_day)["operationParameters"]["predicate"] == '["day = \'b\'"]'
    # a data-column condition: matching rows are deleted (with DVs here) and the new rows added, in one commit
    before = Snapshot.load(by_day).version
    (dspark.createDataFrame([(1, "z")], "id long, day string")
        .write.format("delta").mode("overwrite").option("replaceWhere", "id = 1").save(by_day))
    assert Snapshot.load(by_day).version == before + 1
    assert _rows(dspark, by_day) == [(1, "z"), (2, "a"), (4, "c"), (30, "b"), (31, "b")]
    assert any(f.get("deletionVector") for f in Snapshot.load(by_day).files.to_pylist())
    with pytest.raises(ReplaceWhereMismatchError, match="DELTA_REPLACE_WHERE_MISMATCH"):
        (dspark.createDataFrame([(9, "c")], "id long, day string")
            .write.format("delta").mode("overwrite").option("replaceWhere", "day = 'b'").save(by_day))
    assert Snapshot.load(by_day).version == before + 1


def test_dynamic_partition_overwrite(dspark: SparkSession, by_day: str) -> None:
    new = dspark.createDataFrame([(10, "a"), (11, "d")], "id long, day string")
    new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(by_day)
    assert _rows(dspark, by_day) == [(3, "b"), (4, "c"), (10, "a"), (11, "d")]
    assert _last_commit(by_day)["operationParameters"]["isDynamicPartitionOverwrite"] == "true"
    dspark.conf.set(write_options.PARTITION_OVERWRITE_CONF, "dynamic")
    try:
        dspark.createDataFrame([(12, "b")], "id long, day string").write.format("delta").mode("overwrite").save(by_day)
    finally:
        dspark.conf.unset(write_options.PARTITION_OVERWRITE_CONF)
    assert _rows(dspark, by_day) == [(4, "c"), (10, "a"), (11, "d"), (12, "b")]
    with pytest.raises(DeltaOptionError, match="DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE"):
        (new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic")
            .option("replaceWhere", "day = 'a'").save(by_day))
    with pytest.raises(DeltaOptionError, match="DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE"):
        (new.write.format("delta").mode("overwrite").option("partitionOverwriteMode", "dynamic")
            .option("overwriteSchema", "true").save(by_day))


def test_user_metadata_option_and_session_setting(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dspark.range(2).write.format("delta").option("userMetadata", "first load").save(path)
    assert _history(dspark, path).userMetadata == "first load"
    dspark.conf.set(write_options.USER_METADATA_CONF, "nightly")
    try:
        dspark.range(2).write.format("delta").mode("append").save(path)
        assert _history(dspark, path).userMetadata == "nightly"
        dspark.range(2).write.format("delta").mode("append").option("userMetadata", "wins").save(path)
        assert _history(dspark, path).userMetadata == "wins"
    finally:
        dspark.conf.unset(write_options.USER_METADATA_CONF)


def test_idempotent_writes_skip_committed_versions(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = dspark.range(3)
    writer = lambda v: df.write.format("delta").mode("append").option("txnAppId", "job-7").option("txnVersion", v)  # noqa: E731
    writer(1).save(path)
    writer(1).save(path)  # already committed: skipped
    writer(0).save(path)  # older: skipped
    assert Snapshot.load(path).version == 0
    assert Snapshot.load(path).txns["job-7"].version == 1
    writer(2).save(path)
    assert Snapshot.load(path).version == 1 and Snapshot.load(path).txns["job-7"].version == 2
    assert len(_rows(dspark, path)) == 6
    with pytest.raises(DeltaOptionError, match="DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS"):
        df.write.format("delta").mode("append").option("txnAppId", "job-7").save(path)


def test_delta_properties_at_creation(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    (dspark.range(5).write.format("delta").option("delta.enableDeletionVectors", "true")
        .option("delta.appendOnly", "false").save(path))
    snap = Snapshot.load(path)
    assert snap.configuration["delta.enableDeletionVectors"] == "true"
    assert snap.configuration["delta.appendOnly"] == "false"
    assert "deletionVectors" in (snap.protocol.reader_features or [])


def test_data_change_false_rearranges_only(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(DeltaOptionError, match="DELTA_DATA_CHANGE_FALSE"):
        dspark.range(4).write.format("delta").option("dataChange", "false").save(path)
    dspark.range(4).repartition(4).write.format("delta").save(path)
    (dspark.read.format("delta").load(path).coalesce(1).write.format("delta").mode("overwrite")
        .option("dataChange", "false").save(path))
    assert _rows(dspark, path) == [(0,), (1,), (2,), (3,)]
    import json

    log = Path(path) / "_delta_log" / "00000000000000000001.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [k for a in actions for k in ("add", "remove") if k in a]
    flags = [a[k]["dataChange"] for a in actions for k in ("add", "remove") if k in a]
    assert "add" in kinds and "remove" in kinds and not any(flags)


def test_option_parsing_refuses_bad_values() -> None:
    with pytest.raises(DeltaOptionError, match="mergeSchema"):
        write_options.parse({"mergeSchema": "yes"})
    with pytest.raises(DeltaOptionError, match="DELTA_ILLEGAL_OPTION"):
        write_options.parse({"partitionOverwriteMode": "sometimes"})
    parsed = write_options.parse({"MERGESCHEMA": "True", "delta.appendOnly": "true"},
                                 {write_options.PARTITION_OVERWRITE_CONF: "DYNAMIC"}.get)
    assert parsed.merge_schema and parsed.dynamic_partition_overwrite
    assert parsed.table_properties == {"delta.appendOnly": "true"}
    # the session's DYNAMIC yields to an explicit replaceWhere, as in delta-spark
    assert not write_options.parse({"replaceWhere": "x = 1"}, {write_options.PARTITION_OVERWRITE_CONF: "dynamic"}.get
                                   ).dynamic_partition_overwrite
