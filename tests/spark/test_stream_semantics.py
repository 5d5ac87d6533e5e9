"""delta-spark's streaming cases that dvlake once got wrong (issue 40), shaped as delta-spark's suites shape them:
``availableNow`` runs on one checkpoint, restarts, rate limits; exact rows on both engines of the source."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

import dvlake
from dvlake import DeltaTable
from tests.helpers import DV_PROPS
from tests.spark import test_streaming as base

_collect = base._collect
engine = base.engine  # the two engines' fixture, used by name


def _values_table(spark: SparkSession, path: str, files: list[list[int]], properties: dict[str, str] | None = None) -> None:
    """One commit per list, each one file of those ``value`` rows; deletion vectors on."""
    for i, values in enumerate(files):
        frame = spark.createDataFrame([(v,) for v in values], "value INT").coalesce(1)
        dvlake.write(frame, path, "append", properties={**DV_PROPS, **(properties or {})} if i == 0 else None)


def test_two_dv_deletes_of_one_file_in_one_batch_read_each_commits_own_dv(dspark: SparkSession, tmp_path: Path,
                                                                            engine: str) -> None:
    """DeltaSourceDeletionVectorsSuite's shape: the file comes back twice in one batch, once per DELETE; the first
    re-add still has 4 (only 3 deleted), the second has only 5. Reading both with the latest DV would lose the 4.
    ``skipChangeCommits=false`` beside ``ignoreChanges`` changes nothing: the options are the planning both engines
    share (``log/stream_plan.py``), so that second query runs on the JVM engine only (each query start of the Python
    engine costs a Python worker)."""
    path = str(tmp_path / "t")
    _values_table(dspark, path, [[3, 4, 5], [10, 11, 12], [20, 21, 22], [30, 31, 32], [40, 41, 42]])
    cases = [({"ignoreChanges": "true"}, "a")]
    if engine == "jvm":
        cases.append(({"ignoreChanges": "true", "skipChangeCommits": "false"}, "b"))
    for options, chk in cases:
        first = _collect(dvlake.read_stream(dspark, path, **options), tmp_path / chk)
        assert [b for _, b in first] == [[3, 4, 5, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42]]
    table = DeltaTable.forPath(dspark, path)
    table.delete("value = 3")
    table.delete("value = 4")
    for options, chk in cases:
        got = _collect(dspark.readStream.format("delta").options(**options).load(path), tmp_path / chk)
        assert [b for _, b in got] == [[4, 5, 5]]


def _commit(path: str, version: int) -> list[dict]:
    """The parsed lines of one commit file."""
    from dvlake.log.replay import read_commit
    from dvlake.log.segment import list_log
    from dvlake.storage.base import storage_for

    storage = storage_for(path)
    return read_commit(storage, list_log(storage, path).commits[version][0])


CDF_COLS = ["id", "part", "_change_type", "_commit_version"]


def _cdf_table(spark: SparkSession, path: str, dvs: bool = False) -> None:
    """delta-spark's rate-limit shape: ids 0..3 in two partitions (``part`` = id % 2), change data feed on."""
    props = {"delta.enableChangeDataFeed": "true", **(DV_PROPS if dvs else {})}
    dvlake.write(spark.range(0, 4).selectExpr("id", "id % 2 AS part").coalesce(1), path, "append", partitionBy="part",
                 properties=props)


def test_change_feed_stream_honours_exclude_regex(dspark: SparkSession, tmp_path: Path, engine: str) -> None:
    """``excludeRegex = part=0`` drops the ``part=0`` files from the change feed: the snapshot's inserts, later
    inserts and deletes alike (DeltaCDCStreamSuite's excludeRegex case)."""
    path, chk = str(tmp_path / "t"), tmp_path / "chk"
    _cdf_table(dspark, path, dvs=True)
    first = _collect(dvlake.read_stream(dspark, path, readChangeFeed="true", excludeRegex="part=0"), chk, CDF_COLS)
    assert [b for _, b in first] == [[(1, 1, "insert", 0), (3, 1, "insert", 0)]]
    dvlake.write(dspark.range(4, 6).selectExpr("id", "id % 2 AS part").coalesce(1), path, "append")
    table = DeltaTable.forPath(dspark, path)
    table.delete("id = 2")  # part=0: excluded
    table.delete("id = 3")  # part=1, a DV: the delete is emitted
    got = _collect(dvlake.read_stream(dspark, path, readChangeFeed="true", excludeRegex="part=0"), chk, CDF_COLS)
    assert sorted(r for _, b in got for r in b) == [(3, 1, "delete", 3), (5, 1, "insert", 1)]


def test_change_feed_rate_limit_admits_whole_commits_only_when_they_fit(dspark: SparkSession, tmp_path: Path) -> None:
    """DeltaCDCStreamSuite's "maxFilesPerTrigger - 2 successive AddCDCFile commits": with 3 files per batch, version
    0's two adds fill a batch that the next UPDATE's two change data files would overshoot, so it waits: [2, 4, 4]
    rows, never [6, 4]; and "rate limiting overall": one file per batch splits a plain commit, not a change-data one."""
    path = str(tmp_path / "t")
    dvlake.write(dspark.range(0, 2).selectExpr("id", "id % 2 AS part", "0 AS col3").coalesce(1), path, "append",
                 partitionBy="part", properties={"delta.enableChangeDataFeed": "true"})
    table = DeltaTable.forPath(dspark, path)
    table.update("col3 < 2", {"col3": "0"})
    table.update("col3 < 2", {"col3": "1"})
    cdc_files = [sum(1 for ln in _commit(path, v) if "cdc" in ln) for v in (1, 2)]
    assert min(cdc_files) >= 2, cdc_files  # more than the batch has room for after version 0's two files
    cols = ["id", "col3", "_change_type", "_commit_version"]
    got = _collect(dvlake.read_stream(dspark, path, readChangeFeed="true", startingVersion=0, maxFilesPerTrigger=3),
                   tmp_path / "c", cols)
    assert [b for _, b in got] == [
        [(0, 0, "insert", 0), (1, 0, "insert", 0)],
        [(0, 0, "update_postimage", 1), (0, 0, "update_preimage", 1), (1, 0, "update_postimage", 1),
         (1, 0, "update_preimage", 1)],
        [(0, 0, "update_preimage", 2), (0, 1, "update_postimage", 2), (1, 0, "update_preimage", 2),
         (1, 1, "update_postimage", 2)]]
    one = _collect(dvlake.read_stream(dspark, path, readChangeFeed="true", startingVersion=0, maxFilesPerTrigger=1),
                   tmp_path / "c1", cols)
    assert [len(b) for _, b in one] == [1, 1, 4, 4]


def _table(spark: SparkSession, path: str, *ranges: tuple[int, int]) -> None:
    """A DV-enabled table with one file per range (one commit each)."""
    for i, (start, end) in enumerate(ranges):
        dvlake.write(spark.range(start, end).coalesce(1), path, "append", properties=DV_PROPS if i == 0 else None)


def test_starting_timestamp_is_read_in_the_session_time_zone(dspark: SparkSession, tmp_path: Path) -> None:
    """DeltaSourceSuite's "startingTimestamp" in a Los Angeles session: a timestamp without an offset is wall-clock time
    there (read as UTC it would be hours later, after every commit); one after the last commit fails the query with
    DELTA_TIMESTAMP_GREATER_THAN_COMMIT unless changeDataFeed.timestampOutOfRange.enabled, which starts the stream at
    the next commit."""
    import datetime as dt
    import zoneinfo

    import pytest

    from dvlake.config import TIMESTAMP_OUT_OF_RANGE
    from dvlake.errors import TimestampGreaterThanCommitError
    from dvlake.log.snapshot import Snapshot

    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2), (2, 4), (4, 6))
    snap = Snapshot.load(path)
    zone = zoneinfo.ZoneInfo("America/Los_Angeles")

    def wall(ms: int) -> str:
        return dt.datetime.fromtimestamp(ms / 1000, zone).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    dspark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        stream = dspark.readStream.format("delta").option("startingTimestamp", wall(snap.commit_timestamp(1))).load(path)
        assert [b for _, b in _collect(stream, tmp_path / "c")] == [[2, 3, 4, 5]]
        late = wall(snap.commit_timestamp(2) + 1)  # after the last commit, before the next one
        with pytest.raises(TimestampGreaterThanCommitError) as info:
            _collect(dvlake.read_stream(dspark, path, startingTimestamp=late), tmp_path / "late")
        assert info.value.error_class == "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"
        dspark.conf.set(TIMESTAMP_OUT_OF_RANGE, "true")
        assert _collect(dvlake.read_stream(dspark, path, startingTimestamp=late), tmp_path / "ok") == []
        dvlake.write(dspark.range(6, 8).coalesce(1), path, "append")
        assert [b for _, b in _collect(dvlake.read_stream(dspark, path, startingTimestamp=late), tmp_path / "ok")] \
            == [[6, 7]]
    finally:
        dspark.conf.set("spark.sql.session.timeZone", "UTC")
        dspark.conf.unset(TIMESTAMP_OUT_OF_RANGE)


def _commit_protocol(path: str, version: int, protocol: dict) -> None:
    """Commit ``version`` by hand: only a protocol action (what an upgrade by a newer client looks like)."""
    import json

    log = Path(path) / "_delta_log"
    lines = [{"commitInfo": {"timestamp": 0, "operation": "UPGRADE PROTOCOL"}}, {"protocol": protocol}]
    (log / f"{version:020d}.json").write_text("".join(json.dumps(ln) + "\n" for ln in lines))


def _run(stream: DataFrame, checkpoint: Path, got: list[list[int]]) -> None:
    """An ``availableNow`` run that keeps each non-empty batch's sorted ids in ``got`` (kept when the query fails)."""

    def keep(df: DataFrame, _: int) -> None:
        rows = sorted(r[0] for r in df.collect())
        if rows:
            got.append(rows)

    q = stream.writeStream.foreachBatch(keep).option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    try:
        q.awaitTermination()
    finally:
        q.stop()


def test_a_protocol_the_stream_cannot_read_fails_the_query_where_it_lands(dspark: SparkSession, tmp_path: Path,
                                                                          engine: str) -> None:
    """DeltaSourceSuite's protocol checks: a commit raising minReaderVersion, or adding a reader feature dvlake does not
    implement, fails the running stream; the rows committed before it are delivered first. Which protocols are
    refused is the planning both engines share (``log/stream_plan.py``): the Python engine (each query start costs a
    Python worker) runs the reader-version case only, to prove the error reaches its query too."""
    import pytest

    from dvlake.errors import UnsupportedFeatureError
    from dvlake.log.snapshot import Snapshot

    protocols = [("version", {"minReaderVersion": 4, "minWriterVersion": 7}),
                 ("feature", {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["fooBar"],
                              "writerFeatures": ["fooBar"]})]
    for name, protocol in protocols if engine == "jvm" else protocols[:1]:
        path, chk = str(tmp_path / name), tmp_path / f"c_{name}"
        _table(dspark, path, (0, 2))
        stream = dvlake.read_stream(dspark, path)  # made before the upgrade, restarted after it
        got: list[list[int]] = []
        _run(stream, chk, got)
        dvlake.write(dspark.range(2, 4).coalesce(1), path, "append")
        _commit_protocol(path, Snapshot.load(path).version + 1, protocol)
        with pytest.raises(UnsupportedFeatureError) as info:
            _run(stream, chk, got)
        assert info.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_READ"
        assert got == [[0, 1], [2, 3]]


def test_a_table_re_created_at_the_path_is_detected_on_restart_of_the_same_stream(dspark: SparkSession,
                                                                                  tmp_path: Path, engine: str) -> None:
    """DeltaSourceSuite's "restarting a query should pick up latest table schema and recover": the same streaming
    DataFrame restarted after the table was deleted and re-created fails with
    DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE, as a freshly loaded one does (the check of the checkpoint's
    table id is the planning both engines share: the freshly loaded DataFrame runs on the JVM engine only, each query
    start of the Python engine costing a Python worker)."""
    import shutil

    import pytest

    from dvlake.errors import DifferentTableReadByStreamError

    path, chk = str(tmp_path / "t"), tmp_path / "c"
    _table(dspark, path, (0, 2))
    stream = dvlake.read_stream(dspark, path)
    got: list[list[int]] = []
    _run(stream, chk, got)
    assert got == [[0, 1]]
    shutil.rmtree(path)
    _table(dspark, path, (5, 7))
    for again in (stream, dvlake.read_stream(dspark, path)) if engine == "jvm" else (stream,):
        with pytest.raises(DifferentTableReadByStreamError) as info:
            _run(again, chk, got)
        assert info.value.error_class == "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"
    assert got == [[0, 1]]


def _batches(stream: DataFrame, checkpoint: Path) -> list[list[int]]:
    """An ``availableNow`` run: every batch Spark ran, empty ones included, as sorted ids."""
    got: list[list[int]] = []
    _run_all(stream, checkpoint, got)
    return got


def _run_all(stream: DataFrame, checkpoint: Path, got: list[list[int]]) -> None:
    q = (stream.writeStream.foreachBatch(lambda df, _: got.append(sorted(r[0] for r in df.collect())))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        q.awaitTermination()
    finally:
        q.stop()


def test_max_files_per_trigger_on_the_snapshot_and_after_a_restart_with_a_new_limit(dspark: SparkSession,
                                                                                    tmp_path: Path, engine: str) -> None:
    """DeltaSourceSuite's "maxFilesPerTrigger" and "maxFilesPerTrigger: change and restart": one file per batch over
    a five-file snapshot is five batches, none empty; restarted with two files per batch, the new limit holds."""
    path, chk = str(tmp_path / "t"), tmp_path / "c"
    _table(dspark, path, *[(i, i + 1) for i in range(5)])
    assert _batches(dvlake.read_stream(dspark, path, maxFilesPerTrigger=1), chk) == [[0], [1], [2], [3], [4]]
    for i in range(5, 10):
        dvlake.write(dspark.range(i, i + 1).coalesce(1), path, "append")
    assert _batches(dvlake.read_stream(dspark, path, maxFilesPerTrigger=2), chk) == [[5, 6], [7, 8], [9]]
    # the default trigger (delta-spark's processAllAvailable shape): no empty batch between the files either
    got: list[list[int]] = []
    q = (dvlake.read_stream(dspark, path, maxFilesPerTrigger=3).writeStream
         .foreachBatch(lambda df, _: got.append(sorted(r[0] for r in df.collect())))
         .option("checkpointLocation", str(tmp_path / "c2")).start())
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert got == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


def test_starting_version_after_log_cleanup_streams_the_commits_left(dspark: SparkSession, tmp_path: Path,
                                                                      engine: str) -> None:
    """DeltaSourceSuite's "startingTimestamp" end: with a checkpoint at version 2 and 0.json deleted, a stream from
    version 1 (or from a timestamp before every commit: the earliest commit left) reads versions 1 and 2 without
    rebuilding version 1's snapshot. Where a start version or timestamp lands is the planning both engines share
    (``log/stream_plan.py``): the Python engine (each query start costs a Python worker) reads from the version."""
    from dvlake.txn.transaction import checkpoint

    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2), (2, 4), (4, 6))
    checkpoint(path, 2)
    (Path(path) / "_delta_log" / f"{0:020d}.json").unlink()
    got = _collect(dvlake.read_stream(dspark, path, startingVersion=1), tmp_path / "a")
    assert [b for _, b in got] == [[2, 3, 4, 5]]
    if engine == "jvm":
        got = _collect(dvlake.read_stream(dspark, path, startingTimestamp="2000-01-01"), tmp_path / "b")
        assert [b for _, b in got] == [[2, 3, 4, 5]]


# -- sink ------------------------------------------------------------------------------------------------
def _parquet_source(spark: SparkSession, folder: Path, *ranges: tuple[int, int]) -> DataFrame:
    """A Parquet folder (one file per range) read by Spark's file stream source, one file per micro-batch."""
    for start, end in ranges:
        spark.range(start, end).coalesce(1).write.mode("append").parquet(str(folder))
    return spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).parquet(str(folder))


def test_sink_foreach_batch_after_format_delta_runs_the_function(dspark: SparkSession, tmp_path: Path) -> None:
    """DeltaSinkSuite's foreachBatch shape: ``format("delta").foreachBatch(fn)`` is a foreachBatch query (Spark keeps
    the last of format/foreachBatch); nothing is written as a Delta table."""
    stream = _parquet_source(dspark, tmp_path / "in", (0, 3), (3, 5))
    got: list[list[int]] = []
    q = (stream.writeStream.format("delta").foreachBatch(lambda df, _: got.append(sorted(r[0] for r in df.collect())))
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start())
    q.awaitTermination()
    assert got == [[0, 1, 2], [3, 4]]
    assert not (tmp_path / "out").exists()


def test_sink_streaming_appends_are_blind_appends(dspark: SparkSession, tmp_path: Path) -> None:
    """Each micro-batch of an append-mode Delta sink commits only adds (and its txn): isBlindAppend=true, as
    delta-spark's sink writes it, the table-creating first batch included."""
    from dvlake.log.snapshot import Snapshot

    out = str(tmp_path / "out")
    stream = _parquet_source(dspark, tmp_path / "in", (0, 3), (3, 5))
    (stream.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True)
     .start(out).awaitTermination())
    history = Snapshot.load(out).history()
    assert [(h["operation"], h["isBlindAppend"]) for h in history] == [("STREAMING UPDATE", True)] * 2
    assert sorted(r[0] for r in dvlake.read(dspark, out).collect()) == [0, 1, 2, 3, 4]


def test_sink_errors_carry_their_delta_error_class(dspark: SparkSession, tmp_path: Path) -> None:
    """A batch the sink refuses (a new column without mergeSchema) fails the query with the dvlake class and its Delta
    error class, not a Python traceback under STREAM_FAILED."""
    import pytest

    from dvlake.errors import DvlakeError

    out = str(tmp_path / "out")
    dvlake.write(dspark.range(0, 1), out, "append")
    wider = _parquet_source(dspark, tmp_path / "in", (5, 7)).selectExpr("id", "id AS extra")
    with pytest.raises(DvlakeError) as info:
        (wider.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start(out).awaitTermination())
    assert info.value.error_class == "DELTA_METADATA_MISMATCH"


def test_change_feed_batch_read_timestamps_in_the_session_time_zone(dspark: SparkSession, tmp_path: Path) -> None:
    """The batch change feed reads startingTimestamp as the stream does (delta-spark's CDCReader and source share
    the rule): wall-clock time in the session zone; after the last commit an error, or no rows with
    changeDataFeed.timestampOutOfRange.enabled."""
    import datetime as dt
    import zoneinfo

    import pytest

    from dvlake.config import TIMESTAMP_OUT_OF_RANGE
    from dvlake.errors import DvlakeError
    from dvlake.log.snapshot import Snapshot

    path = str(tmp_path / "t")
    _cdf_table(dspark, path)
    dvlake.write(dspark.range(4, 6).selectExpr("id", "id % 2 AS part").coalesce(1), path, "append")
    snap = Snapshot.load(path)
    zone = zoneinfo.ZoneInfo("America/Los_Angeles")
    wall = dt.datetime.fromtimestamp(snap.commit_timestamp(1) / 1000, zone).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    late = dt.datetime.fromtimestamp(snap.commit_timestamp(1) / 1000 + 60, zone).strftime("%Y-%m-%d %H:%M:%S")
    dspark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        got = dvlake.read_changes(dspark, path, startingTimestamp=wall).select("id", "_commit_version").collect()
        assert sorted(tuple(r) for r in got) == [(4, 1), (5, 1)]
        with pytest.raises(DvlakeError) as info:
            dvlake.read_changes(dspark, path, startingTimestamp=late)
        assert info.value.error_class == "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"
        dspark.conf.set(TIMESTAMP_OUT_OF_RANGE, "true")
        assert dvlake.read_changes(dspark, path, startingTimestamp=late).count() == 0
    finally:
        dspark.conf.set("spark.sql.session.timeZone", "UTC")
        dspark.conf.unset(TIMESTAMP_OUT_OF_RANGE)


def test_sink_creates_every_column_nullable(dspark: SparkSession, tmp_path: Path) -> None:
    """DeltaSinkSuite's nullability case: a NOT NULL column of the streaming DataFrame is nullable in the table the
    sink creates (delta-spark writes the data's schema as nullable)."""
    from dvlake.log.snapshot import Snapshot

    out = str(tmp_path / "out")
    stream = _parquet_source(dspark, tmp_path / "in", (0, 2)).selectExpr("coalesce(id, 0) AS id")
    assert stream.schema["id"].nullable is False
    (stream.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True)
     .start(out).awaitTermination())
    assert [(f["name"], f["nullable"]) for f in Snapshot.load(out).schema["fields"]] == [("id", True)]
    assert sorted(r[0] for r in dvlake.read(dspark, out).collect()) == [0, 1]
