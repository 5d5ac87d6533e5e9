"""Structured Streaming on Delta tables with deletion vectors: the sink (exactly once) and the source.

Every query runs with ``availableNow`` (or ``once``) on tiny tables; a query restarted from its
checkpoint continues where it stopped. Micro-batches are observed with ``foreachBatch`` collecting
into a list (classic sessions run it in this process).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.errors import (
    DeltaOptionError,
    DeltaSourceIgnoreChangesError,
    DeltaSourceIgnoreDeleteError,
    UnsupportedOutputModeError,
)
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS


def _ids(df: DataFrame) -> list[int]:
    return sorted(r[0] for r in df.collect())


def _append_parquet(spark: SparkSession, folder: Path, start: int, end: int) -> None:
    """One more Parquet file in a folder read by Spark's file stream source."""
    spark.range(start, end).coalesce(1).write.mode("append").parquet(str(folder))


def _sink(spark: SparkSession, folder: Path, out: str, checkpoint: Path, **options: Any) -> None:
    """Stream the Parquet folder (one file per micro-batch) into the Delta table at ``out``; wait until done."""
    q = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).parquet(str(folder))
         .writeStream.format("delta").option("checkpointLocation", str(checkpoint)).options(**options)
         .trigger(availableNow=True).start(out))
    q.awaitTermination()


def _collect(stream: DataFrame, checkpoint: Path, columns: list[str] | None = None, **trigger: Any) -> list[tuple[int, list]]:
    """Run ``stream`` to the end of the available data: (batch id, sorted first column, or sorted tuples of
    ``columns``) of each non-empty batch."""
    got: list[tuple[int, list]] = []

    def keep(df: DataFrame, batch_id: int) -> None:
        rows = sorted(tuple(r) for r in df.select(*columns).collect()) if columns else _ids(df)
        if rows:
            got.append((batch_id, rows))

    q = (stream.writeStream.foreachBatch(keep).option("checkpointLocation", str(checkpoint))
         .trigger(**(trigger or {"availableNow": True})).start())
    try:
        if "processingTime" in trigger:
            q.processAllAvailable()
        else:
            q.awaitTermination()
    finally:
        q.stop()
    return got


@pytest.fixture(params=["jvm", "python"])
def engine(request: pytest.FixtureRequest, dspark: SparkSession) -> Any:
    """The source's two engines: the JVM source (native DV scan; the default on classic sessions with the jar) and
    the Python data source (Spark Connect's, and the fallback), chosen by ``spark.dvlake.stream.engine``."""
    from dvlake.spark.stream_jvm import ENGINE_SETTING

    dspark.conf.set(ENGINE_SETTING, "auto" if request.param == "jvm" else "python")
    yield request.param
    dspark.conf.unset(ENGINE_SETTING)


def _engine_of(stream: DataFrame) -> str:
    """Which source a streaming DataFrame reads from, seen in its plan."""
    plan = stream._jdf.queryExecution().logical().toString()
    if "io.dvlake.spark.DeltaStreamProvider" in plan:
        return "jvm"
    assert "dvlake_delta_stream" in plan, plan
    return "python"


# -- sink ------------------------------------------------------------------------------------------------
def test_sink_appends_each_batch_once_and_skips_a_replayed_batch(dspark: SparkSession, tmp_path: Path) -> None:
    src, out, chk = tmp_path / "in", str(tmp_path / "out"), tmp_path / "chk"
    _append_parquet(dspark, src, 0, 5)
    _append_parquet(dspark, src, 5, 10)
    _sink(dspark, src, out, chk)
    assert _ids(dvlake.read(dspark, out)) == list(range(10))
    snap = Snapshot.load(out)
    history = snap.history()
    assert [h["operation"] for h in history] == ["STREAMING UPDATE", "STREAMING UPDATE"]
    query_id = history[0]["operationParameters"]["queryId"]
    assert snap.txns[query_id].version == 1 and history[0]["operationParameters"]["epochId"] == "1"
    # a crash after the table commit of batch 1 but before Spark recorded it: Spark runs batch 1 again
    for name in ("1", ".1.crc"):
        (chk / "commits" / name).unlink(missing_ok=True)
    _sink(dspark, src, out, chk)
    assert Snapshot.load(out).version == snap.version, "the replayed batch must not commit"
    assert _ids(dvlake.read(dspark, out)) == list(range(10))
    # the restarted query keeps its id and goes on with new data, exactly once
    _append_parquet(dspark, src, 10, 12)
    _sink(dspark, src, out, chk)
    after = Snapshot.load(out)
    assert after.version == snap.version + 1 and after.txns[query_id].version == 2
    assert _ids(dvlake.read(dspark, out)) == list(range(12))


def test_sink_complete_mode_replaces_the_rows(dspark: SparkSession, tmp_path: Path) -> None:
    src, out = tmp_path / "in", str(tmp_path / "out")
    _append_parquet(dspark, src, 0, 6)
    _append_parquet(dspark, src, 6, 9)
    counts = (dspark.readStream.schema("id long").option("maxFilesPerTrigger", 1).parquet(str(src))
              .selectExpr("id % 3 AS k").groupBy("k").count())
    q = (counts.writeStream.format("delta").outputMode("complete").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start(out))
    q.awaitTermination()
    got = sorted((r.k, r["count"]) for r in dvlake.read(dspark, out).collect())
    assert got == [(0, 3), (1, 3), (2, 3)]
    assert [h["operationParameters"]["outputMode"] for h in Snapshot.load(out).history()] == ["Complete", "Complete"]


@pytest.mark.parametrize("shape", ["complete-aggregation", "append-dropDuplicates"])
def test_stateful_sink_restarts_once_after_a_crash_between_the_table_and_the_commit_log(
        dspark: SparkSession, tmp_path: Path, shape: str) -> None:
    """Issue 39: the replay of a batch the table already committed must still run its plan, or Spark 4 refuses the
    batch ("Not all StateStores committed") and a scheduler that restarts once gives up. One restart must do: the
    replay commits nothing, and the state it leaves gives exact rows for the batches after it."""
    from collections import Counter

    src, out, chk = tmp_path / "in", str(tmp_path / "out"), tmp_path / "chk"
    _append_parquet(dspark, src, 0, 6)
    _append_parquet(dspark, src, 3, 9)  # overlaps the first file: dropDuplicates must drop 3..5
    stream = dspark.readStream.schema("id long").option("maxFilesPerTrigger", 1).parquet(str(src))
    if shape == "complete-aggregation":
        query, mode = stream.selectExpr("id % 3 AS k").groupBy("k").count(), "complete"
    else:
        query, mode = stream.dropDuplicates(["id"]), "append"

    def run() -> None:
        q = (query.writeStream.format("delta").outputMode(mode).option("checkpointLocation", str(chk))
             .trigger(availableNow=True).start(out))
        q.awaitTermination()

    def expected(*ranges: range) -> list[Any]:
        ids = [i for r in ranges for i in r]
        if shape == "complete-aggregation":
            return sorted(Counter(i % 3 for i in ids).items())
        return sorted(set(ids))

    def table() -> list[Any]:
        got = dvlake.read(dspark, out).collect()
        return sorted((r.k, r["count"]) for r in got) if shape == "complete-aggregation" else sorted(r.id for r in got)

    run()
    version = Snapshot.load(out).version
    assert version == 1 and table() == expected(range(6), range(3, 9))
    for name in ("1", ".1.crc"):  # the crash: batch 1 committed to the table, not to Spark's commit log
        (chk / "commits" / name).unlink(missing_ok=True)
    run()  # the one restart: batch 1 is replayed (its plan run, nothing committed)
    assert Snapshot.load(out).version == version, "the replayed batch must not commit"
    assert (chk / "commits" / "1").exists()
    assert table() == expected(range(6), range(3, 9))
    _append_parquet(dspark, src, 6, 12)
    run()
    assert Snapshot.load(out).version == version + 1
    assert table() == expected(range(6), range(3, 9), range(6, 12))


def test_a_check_constraint_violated_by_a_batch_stops_the_query_with_the_typed_error(dspark: SparkSession,
                                                                                   tmp_path: Path) -> None:
    """Issue 39: Spark wraps the error of the sink's batch into an untyped StreamingQueryException; the query's
    awaitTermination() raises dvlake's CheckConstraintViolationError with its Delta error class, and nothing of the
    violating batch is committed."""
    from dvlake.errors import CheckConstraintViolationError

    src, out, chk = tmp_path / "in", str(tmp_path / "out"), tmp_path / "chk"
    dvlake.write(dspark.range(0, 2), out)
    dvlake.sql(dspark, f"ALTER TABLE delta.`{out}` ADD CONSTRAINT small CHECK (id < 5)")
    _append_parquet(dspark, src, 2, 4)
    _append_parquet(dspark, src, 4, 8)  # 5, 6 and 7 violate the constraint
    with pytest.raises(CheckConstraintViolationError) as info:
        _sink(dspark, src, out, chk)
    assert info.value.getCondition() == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert _ids(dvlake.read(dspark, out)) == [0, 1, 2, 3]


def test_sink_refuses_update_mode(dspark: SparkSession, tmp_path: Path) -> None:
    _append_parquet(dspark, tmp_path / "in", 0, 2)
    stream = dspark.readStream.schema("id long").parquet(str(tmp_path / "in"))
    with pytest.raises(UnsupportedOutputModeError):
        stream.writeStream.format("delta").outputMode("update").option("checkpointLocation", str(tmp_path / "c")) \
            .start(str(tmp_path / "out"))


# -- source ----------------------------------------------------------------------------------------------
def _table(spark: SparkSession, path: str, *ranges: tuple[int, int]) -> None:
    """A DV-enabled table with one file per range (one commit each)."""
    for i, (start, end) in enumerate(ranges):
        dvlake.write(spark.range(start, end).coalesce(1), path, "append", properties=DV_PROPS if i == 0 else None)


def test_source_reads_the_snapshot_with_dvs_applied_then_new_commits(dspark: SparkSession, tmp_path: Path, engine: str) -> None:
    path, chk = str(tmp_path / "t"), tmp_path / "chk"
    _table(dspark, path, (0, 10))
    DeltaTable.forPath(dspark, path).delete("id % 3 = 0")
    assert Snapshot.load(path).dv_count() == 1
    stream = dspark.readStream.format("delta").load(path)
    assert _engine_of(stream) == engine
    assert [b for _, b in _collect(stream, chk)] == [[1, 2, 4, 5, 7, 8]]
    dvlake.write(dspark.range(10, 13).coalesce(1), path, "append")
    assert [b for _, b in _collect(dvlake.read_stream(dspark, path), chk)] == [[10, 11, 12]]


def test_restart_before_the_first_commit_replays_the_same_snapshot(dspark: SparkSession, tmp_path: Path,
                                                                   engine: str) -> None:
    """A query that stopped after logging its first batch's offsets but before Spark's commit log recorded it runs
    that batch again on restart: the snapshot of the version the logged offset names (not the newer snapshot of the
    restart, which would make the replayed batch empty and lose its rows), then the commits after it."""
    path, chk = str(tmp_path / "t"), tmp_path / "chk"
    _table(dspark, path, (0, 4))
    DeltaTable.forPath(dspark, path).delete("id = 1")
    assert _collect(dvlake.read_stream(dspark, path), chk) == [(0, [0, 2, 3])]
    for name in ("0", ".0.crc"):  # the crash: batch 0 planned and logged, never committed
        (chk / "commits" / name).unlink(missing_ok=True)
    dvlake.write(dspark.range(4, 6).coalesce(1), path, "append")  # lands before the restart
    assert _collect(dvlake.read_stream(dspark, path), chk) == [(0, [0, 2, 3]), (1, [4, 5])]


def test_jvm_source_batches_run_the_batch_reads_columnar_scan(dspark: SparkSession, tmp_path: Path) -> None:
    """A plain micro-batch is the batch read's own plan with its file relations streaming (Spark's file scan with the
    DV filter, as a batch read runs it), not a scan of rows copied out of another plan."""
    path = str(tmp_path / "t")
    _table(dspark, path, (0, 6), (6, 9))
    DeltaTable.forPath(dspark, path).delete("id % 4 = 0")
    stream = dvlake.read_stream(dspark, path)
    assert _engine_of(stream) == "jvm"
    q = (stream.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    plan = q._jsq.explainInternal(False)
    assert "DvlakeParquet" in plan and "ExistingRDD" not in plan, plan
    assert sum(int(p["numInputRows"]) for p in q.recentProgress) == 6


def test_many_streams_leave_one_planner_factory_and_a_derived_frame_outlives_its_parent(dspark: SparkSession,
                                                                                        tmp_path: Path) -> None:
    """The JVM source's registry holds one planner factory per session, however many streams are opened, started and
    stopped; a frame derived from a stream still starts (and restarts) after the stream it came from is collected."""
    import gc

    from dvlake.spark.stream_jvm import registered_factories

    path = str(tmp_path / "t")
    _table(dspark, path, (0, 5))
    DeltaTable.forPath(dspark, path).delete("id = 2")
    derived = dvlake.read_stream(dspark, path).selectExpr("id * 10 AS id")
    gc.collect()  # the parent frame is gone; only the derived one holds the plan
    before = registered_factories(dspark)
    for i in range(12):
        stream = dvlake.read_stream(dspark, path)
        assert _engine_of(stream) == "jvm"
        if i % 4 == 0:
            assert [b for _, b in _collect(stream, tmp_path / f"c{i}")] == [[0, 1, 3, 4]]
    assert registered_factories(dspark) == before
    assert [b for _, b in _collect(derived, tmp_path / "d")] == [[0, 10, 30, 40]]
    dvlake.write(dspark.range(5, 7).coalesce(1), path, "append")
    assert [b for _, b in _collect(derived, tmp_path / "d")] == [[50, 60]]


@pytest.mark.parametrize("engine", ["python"], indirect=True)
def test_source_reads_a_large_file_in_row_group_slices_with_its_dv(dspark: SparkSession, tmp_path: Path,
                                                                   engine: str) -> None:
    """A file larger than a task's share is read by several tasks, each its own row groups; the DV's row indexes
    must stay the file's (a slice that counted rows from its own first row group would drop the wrong rows)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from dvlake.spark.stream_source import parallelism
    from dvlake.spark.stream_tasks import split_bytes

    folder, chk = tmp_path / "t", tmp_path / "chk"
    folder.mkdir()
    rows = 600_000
    rng = np.random.default_rng(3)
    pq.write_table(pa.table({"id": np.arange(rows), "r": rng.integers(0, 1 << 62, rows)}), folder / "big.parquet",
                   row_group_size=50_000)
    path = str(folder)
    DeltaTable.convertToDelta(dspark, f"parquet.`{path}`")
    dspark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    DeltaTable.forPath(dspark, path).delete("id % 7 = 3 OR id BETWEEN 49990 AND 100010")
    snap = Snapshot.load(path)
    assert snap.dv_count() == 1
    size = int(snap.files.to_pylist()[0]["size"])
    assert size > split_bytes([size], parallelism(dspark)), "the file must be large enough to be sliced"

    def summary(df: DataFrame) -> tuple:
        return tuple(df.agg(F.count("*"), F.sum("id"), F.sum(F.col("r") % 1000003), F.max("id")).first())

    got: list[tuple] = []
    q = (dvlake.read_stream(dspark, path).writeStream.foreachBatch(lambda df, _: got.append(summary(df)))
         .option("checkpointLocation", str(chk)).trigger(availableNow=True).start())
    q.awaitTermination()
    assert got == [summary(dvlake.read(dspark, path))]
    assert got[0][0] == rows - len([i for i in range(rows) if i % 7 == 3 or 49990 <= i <= 100010])


def test_rate_limits_and_triggers(dspark: SparkSession, tmp_path: Path, engine: str) -> None:
    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2), (2, 4), (4, 6))
    by_files = _collect(dvlake.read_stream(dspark, path, maxFilesPerTrigger=1), tmp_path / "c1")
    assert [b for _, b in by_files] == [[0, 1], [2, 3], [4, 5]]
    by_bytes = _collect(dvlake.read_stream(dspark, path, maxBytesPerTrigger=1), tmp_path / "c2")
    assert len(by_bytes) == 3
    once = _collect(dvlake.read_stream(dspark, path, maxFilesPerTrigger=1), tmp_path / "c3", None, once=True)
    assert [b for _, b in once] == [[0, 1, 2, 3, 4, 5]]  # Trigger.Once reads everything in one batch
    timed = _collect(dvlake.read_stream(dspark, path, maxFilesPerTrigger=2), tmp_path / "c4", None,
                     processingTime="1 second")
    assert [b for _, b in timed] == [[0, 1, 2, 3], [4, 5]]


def test_dv_delete_fails_the_stream_unless_skipped(dspark: SparkSession, tmp_path: Path, engine: str) -> None:
    """Which commits are skipped is the planning both engines share (``log/stream_plan.py``): the Python engine (each
    query start costs a Python worker) runs the failing stream only, to prove the typed error reaches its query."""
    path = str(tmp_path / "t")
    skip = engine == "jvm"
    _table(dspark, path, (0, 4))
    _collect(dvlake.read_stream(dspark, path), tmp_path / "strict")
    if skip:
        _collect(dvlake.read_stream(dspark, path, skipChangeCommits="true"), tmp_path / "skip")
    DeltaTable.forPath(dspark, path).delete("id = 1")  # a DV: remove + add of the same file
    dvlake.write(dspark.range(4, 6).coalesce(1), path, "append")
    with pytest.raises(DeltaSourceIgnoreChangesError) as info:
        _collect(dvlake.read_stream(dspark, path), tmp_path / "strict")
    assert info.value.error_class == "DELTA_SOURCE_TABLE_IGNORE_CHANGES"
    if skip:
        assert [b for _, b in _collect(dvlake.read_stream(dspark, path, skipChangeCommits="true"),
                                       tmp_path / "skip")] == [[4, 5]]


def test_whole_file_delete_and_optimize(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2), (2, 4))
    _collect(dvlake.read_stream(dspark, path), tmp_path / "c")
    DeltaTable.forPath(dspark, path).optimize().executeCompaction()  # dataChange=false: nothing to emit
    assert Snapshot.load(path).history(1)[0]["operation"] == "OPTIMIZE"
    dvlake.write(dspark.range(4, 5).coalesce(1), path, "append")
    assert [b for _, b in _collect(dvlake.read_stream(dspark, path), tmp_path / "c")] == [[4]]
    DeltaTable.forPath(dspark, path).delete()  # every file removed, nothing added
    with pytest.raises(DeltaSourceIgnoreDeleteError):
        _collect(dvlake.read_stream(dspark, path), tmp_path / "c")
    assert _collect(dvlake.read_stream(dspark, path, ignoreDeletes="true"), tmp_path / "c") == []


def test_starting_version(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2), (2, 4), (4, 6))
    assert [b for _, b in _collect(dvlake.read_stream(dspark, path, startingVersion=1), tmp_path / "a")] == [[2, 3, 4, 5]]
    assert _collect(dvlake.read_stream(dspark, path, startingVersion="latest"), tmp_path / "b") == []
    with pytest.raises(DeltaOptionError):
        dvlake.read_stream(dspark, path, startingVersion="soon")
    with pytest.raises(DeltaOptionError):
        dspark.readStream.format("delta").schema("id long").load(path)


def test_bronze_to_silver_equals_the_batch_result(dspark: SparkSession, tmp_path: Path) -> None:
    src, bronze, silver = tmp_path / "in", str(tmp_path / "bronze"), str(tmp_path / "silver")
    for start in (0, 7, 13):
        _append_parquet(dspark, src, start, start + 6)
        _sink(dspark, src, bronze, tmp_path / "c_bronze")
        (dspark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(bronze)
         .where("id % 2 = 0").selectExpr("id", "id * 10 AS v")
         .writeStream.format("delta").option("checkpointLocation", str(tmp_path / "c_silver"))
         .trigger(availableNow=True).start(silver).awaitTermination())
    expected = sorted(tuple(r) for r in dvlake.read(dspark, bronze).where("id % 2 = 0").selectExpr("id", "id * 10").collect())
    assert sorted(tuple(r) for r in dvlake.read(dspark, silver).collect()) == expected
    assert len(expected) == 9


def test_checkpoint_of_another_table_is_refused(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2))
    _collect(dvlake.read_stream(dspark, path), tmp_path / "c")
    shutil.rmtree(path)
    _table(dspark, path, (5, 7))  # re-created: another table id
    from dvlake.errors import DifferentTableReadByStreamError

    with pytest.raises(DifferentTableReadByStreamError):
        _collect(dvlake.read_stream(dspark, path), tmp_path / "c")


def test_change_feed_stream_emits_exactly_the_changed_rows(dspark: SparkSession, tmp_path: Path, engine: str) -> None:
    path, chk = str(tmp_path / "t"), tmp_path / "chk"
    cols = ["id", "_change_type", "_commit_version"]
    dvlake.write(dspark.range(0, 6).coalesce(1), path, "append",
                 properties={**DV_PROPS, "delta.enableChangeDataFeed": "true"})
    first = _collect(dvlake.read_stream(dspark, path, readChangeFeed="true"), chk, cols)
    assert [b for _, b in first] == [[(i, "insert", 0) for i in range(6)]]  # the snapshot, as inserts
    table = DeltaTable.forPath(dspark, path)
    table.delete("id = 1")  # a DV delete: only row 1 is a change
    table.update("id = 2", {"id": "20"})
    dvlake.write(dspark.range(6, 7), path, "append")
    got = [r for _, b in _collect(dspark.readStream.format("delta").option("readChangeFeed", "true").load(path), chk,
                                  cols) for r in b]
    expected = sorted(tuple(r) for r in dvlake.read_changes(dspark, path, startingVersion=1).select(*cols).collect())
    assert sorted(got) == expected
    assert {(1, "delete"), (2, "update_preimage"), (20, "update_postimage"), (6, "insert")} == {r[:2] for r in got}


def test_sink_to_table_with_partitions(dspark: SparkSession, tmp_path: Path) -> None:
    src, location, name = tmp_path / "in", str(tmp_path / "tbl"), "dvlake_stream_sink_t"
    _append_parquet(dspark, src, 0, 4)
    q = (dspark.readStream.schema("id long").parquet(str(src)).selectExpr("id", "id % 2 AS p")
         .writeStream.format("delta").partitionBy("p").option("checkpointLocation", str(tmp_path / "c"))
         .option("path", location).trigger(availableNow=True).toTable(name))
    q.awaitTermination()
    try:
        assert _ids(dspark.table(name)) == [0, 1, 2, 3]
        assert Snapshot.load(location).partition_columns == ["p"]
    finally:
        dspark.sql(f"DROP TABLE IF EXISTS {name}")


_KILLED_CHILD = """
import sys, time
import dvlake
from dvlake.commands.writes import write as write_cmd
from dvlake.spark.session import local_session

src, out, chk = sys.argv[1:4]
commit = write_cmd.write

def stalled_after_batch_1(*args, **kwargs):
    version = commit(*args, **kwargs)
    if kwargs["options"].txn_version == 1:
        time.sleep(600)  # SIGKILLed here: batch 1 is in the table, not yet in Spark's commit log
    return version

write_cmd.write = stalled_after_batch_1
spark = dvlake.configure_spark(local_session("killed-sink", cores=1, shuffle_partitions=1, driver_memory="1g"))
(spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).parquet(src)
 .writeStream.format("delta").option("checkpointLocation", chk).start(out).awaitTermination())
"""


@pytest.mark.slow
def test_sink_sigkilled_mid_batch_then_restarted_keeps_every_row_once(dspark: SparkSession, tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    src, out, chk = tmp_path / "in", str(tmp_path / "out"), tmp_path / "chk"
    for start in (0, 3, 6, 9):
        _append_parquet(dspark, src, start, start + 3)
    script = tmp_path / "child.py"
    script.write_text(_KILLED_CHILD)
    child = subprocess.Popen([sys.executable, str(script), str(src), out, str(chk)], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and child.poll() is None:
            if (Path(out) / "_delta_log").exists() and any(t.version == 1 for t in Snapshot.load(out).txns.values()):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the child query never committed batch 1 (exit code {child.poll()})")
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert not (chk / "commits" / "1").exists(), "the kill must land between the table commit and Spark's"
    _sink(dspark, src, out, chk)  # restart from the checkpoint: batch 1 is replayed (and skipped), then the rest
    assert _ids(dvlake.read(dspark, out)) == list(range(12))
    assert Snapshot.load(out).version == 3  # one commit per batch 0..3, none for the replay


def test_read_stream_of_a_table_name(dspark: SparkSession, tmp_path: Path) -> None:
    name = "dvlake_stream_source_t"
    dspark.range(0, 3).write.format("delta").option("path", str(tmp_path / "t")).saveAsTable(name)
    try:
        assert [b for _, b in _collect(dspark.readStream.table(name), tmp_path / "c")] == [[0, 1, 2]]
    finally:
        dspark.sql(f"DROP TABLE IF EXISTS {name}")


def test_source_with_column_mapping_partitions_and_nested_columns(dspark: SparkSession, tmp_path: Path, engine: str) -> None:
    path = str(tmp_path / "t")
    cols = ["id", "s", "p", "d", "ts"]
    df = dspark.range(0, 6).selectExpr(
        "id", "named_struct('a', id, 'b', array(cast(id AS string))) AS s", "cast(id % 2 AS string) AS p",
        "date_add(date'2024-01-01', cast(id % 2 AS int)) AS d",
        "timestamp'2024-01-01 10:00:00' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts")
    dvlake.write(df, path, "append", partitionBy=["p", "d"],
                 properties={**DV_PROPS, "delta.columnMapping.mode": "name"})
    DeltaTable.forPath(dspark, path).delete("id = 3")
    got = [r for _, b in _collect(dvlake.read_stream(dspark, path), tmp_path / "c", cols) for r in b]
    expected = sorted(tuple(r) for r in dvlake.read(dspark, path).select(*cols).collect())
    assert sorted(got) == expected and len(expected) == 5


# -- the sink over Spark Connect: its foreachBatch function must survive cloudpickle ---------------------------
def test_sink_batch_function_is_picklable_and_learns_the_id_from_the_checkpoint(dspark: SparkSession, tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark Connect pickles the foreachBatch function and runs it on the server: the function start() hands over must
    pickle (no lock inside), and once unpickled elsewhere it reads the query id from the checkpoint's metadata."""
    from pyspark import cloudpickle
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    handed: list[Any] = []
    original = DataStreamWriter.foreachBatch

    def keep(self: Any, func: Any) -> Any:
        handed.append(func)
        return original(self, func)

    monkeypatch.setattr(DataStreamWriter, "foreachBatch", keep)
    src, out, chk = tmp_path / "in", str(tmp_path / "out"), tmp_path / "chk"
    _append_parquet(dspark, src, 0, 3)
    _sink(dspark, src, out, chk)
    assert len(handed) == 1
    clone = cloudpickle.loads(cloudpickle.dumps(handed[0]))  # what a Connect server's Python worker gets
    query_id = Snapshot.load(out).history()[0]["operationParameters"]["queryId"]
    cell = next(c.cell_contents for c in clone.__closure__ if type(c.cell_contents).__name__ == "QueryId")
    # as on a Connect server: nothing learnt in this process, no start() to wait for; only the checkpoint can answer
    cell._value, cell.token, cell.remote = None, "never-started", True
    assert cell.get() == query_id


def test_sink_query_id_over_connect_needs_a_readable_checkpoint(tmp_path: Path) -> None:
    from dvlake.commands.writes.stream_sink import QueryId, checkpoint_location
    from dvlake.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="checkpointLocation"):
        QueryId(str(tmp_path / "never-written"), remote=True).get()  # fails at once, no 300 s wait
    (tmp_path / "chk").mkdir()
    (tmp_path / "chk" / "metadata").write_text('{"id":"1234-abcd"}\n')
    assert QueryId(str(tmp_path / "chk"), remote=True).get() == "1234-abcd"
    conf = {"spark.sql.streaming.checkpointLocation": "/chk/root"}.get
    assert checkpoint_location({"checkpointLocation": "/a"}, conf, None) == "/a"
    assert checkpoint_location({}, conf, "q1") == "/chk/root/q1"  # Spark's own rule for a named query
    assert checkpoint_location({}, conf, None) is None  # Spark names the folder with a random UUID


# -- schema changes -----------------------------------------------------------------------------------------
def test_stream_from_an_older_version_reads_across_an_added_column(dspark: SparkSession, tmp_path: Path, engine: str) -> None:
    """Starting before ADD COLUMNS: old files read with the latest schema (the new column null), not a stream that
    fails at the schema change on every restart."""
    path = str(tmp_path / "t")
    _table(dspark, path, (0, 3))
    dspark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (x STRING)")  # v1
    dvlake.write(dspark.range(3, 5).selectExpr("id", "'n' AS x"), path, "append")  # v2
    got = _collect(dvlake.read_stream(dspark, path, startingVersion=0), tmp_path / "c", ["id", "x"])
    assert [r for _, b in got for r in b] == [(0, None), (1, None), (2, None), (3, "n"), (4, "n")]


def test_restarted_stream_behind_a_rename_fails_instead_of_reading_old_files_renamed(dspark: SparkSession,
                                                                                     tmp_path: Path) -> None:
    from dvlake.errors import StreamingIncompatibleSchemaChangeError

    path, chk = str(tmp_path / "t"), tmp_path / "c"
    props = {**DV_PROPS, "delta.columnMapping.mode": "name"}
    dvlake.write(dspark.range(0, 2).selectExpr("id", "cast(id AS string) AS a"), path, "append", properties=props)
    assert [b for _, b in _collect(dvlake.read_stream(dspark, path), chk)] == [[0, 1]]
    dvlake.write(dspark.range(2, 4).selectExpr("id", "cast(id AS string) AS a"), path, "append")  # v1: not read yet
    dspark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN a TO b")  # v2: metadata only, the physical name stays
    dvlake.write(dspark.range(4, 5).selectExpr("id", "cast(id AS string) AS b"), path, "append")  # v3
    with pytest.raises(StreamingIncompatibleSchemaChangeError) as info:
        _collect(dvlake.read_stream(dspark, path), chk, ["id", "b"])
    assert info.value.error_class == "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG"
    # the way out the error names: a new query from the version of the change
    got = _collect(dvlake.read_stream(dspark, path, startingVersion=2), tmp_path / "c2", ["id", "b"])
    assert [r for _, b in got for r in b] == [(4, "4")]


# -- options unit-tested in test_stream_plan.py, end to end ----------------------------------------------------
def test_read_change_data_streams_the_change_feed(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dvlake.write(dspark.range(0, 3).coalesce(1), path, "append", properties={**DV_PROPS, "delta.enableChangeDataFeed": "true"})
    DeltaTable.forPath(dspark, path).delete("id = 1")
    stream = dspark.readStream.format("delta").option("readChangeData", "true").option("startingVersion", 1).load(path)
    got = _collect(stream, tmp_path / "c", ["id", "_change_type", "_commit_version"])
    assert [r for _, b in got for r in b] == [(1, "delete", 1)]


def test_pyspark_without_admission_control_gets_a_clear_error(dspark: SparkSession, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from dvlake.config import STREAM_ENGINE
    from dvlake.errors import UnsupportedFeatureError
    from dvlake.spark import stream_jvm

    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2))
    import dvlake.spark.stream_source  # noqa: F401 - imported as on 4.0/4.1 (its fallback), before the API goes
    monkeypatch.setitem(sys.modules, "pyspark.sql.streaming.datasource", None)  # PySpark 4.0/4.1: no such module
    if stream_jvm.usable(dspark):  # the JVM engine needs none of that API: PySpark 4.0/4.1 stream through it
        assert dspark.readStream.format("delta").load(path).isStreaming
    dspark.conf.set(STREAM_ENGINE, "python")  # the Python engine (as over Spark Connect) does need it
    try:
        with pytest.raises(UnsupportedFeatureError, match=r"PySpark 4\.2 or newer"):
            dspark.readStream.format("delta").load(path)
        monkeypatch.undo()
        from pyspark.sql import datasource

        monkeypatch.delattr(datasource.DataSourceStreamReader, "getDefaultReadLimit")  # the module there, the API not
        with pytest.raises(UnsupportedFeatureError, match="latestOffset"):
            dvlake.read_stream(dspark, path)
    finally:
        dspark.conf.unset(STREAM_ENGINE)


def test_ignore_changes_re_emits_the_rewritten_files_live_rows(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _table(dspark, path, (0, 4))
    _collect(dvlake.read_stream(dspark, path, ignoreChanges="true"), tmp_path / "c")
    DeltaTable.forPath(dspark, path).delete("id = 1")  # the file comes back with a DV: its live rows again
    dvlake.write(dspark.range(4, 6).coalesce(1), path, "append")
    got = _collect(dvlake.read_stream(dspark, path, ignoreChanges="true"), tmp_path / "c")
    assert [b for _, b in got] == [[0, 2, 3, 4, 5]]


def test_exclude_regex_skips_matching_files(dspark: SparkSession, tmp_path: Path) -> None:
    import re

    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2), (2, 4))
    second = next(a.path for a in Snapshot.load(path).add_files() if a.path not in
                  {x.path for x in Snapshot.load(path, version=0).add_files()})
    got = _collect(dvlake.read_stream(dspark, path, excludeRegex=re.escape(second)), tmp_path / "c")
    assert [b for _, b in got] == [[0, 1]]


def test_starting_timestamp_reads_from_the_first_commit_at_or_after_it(dspark: SparkSession, tmp_path: Path) -> None:
    import datetime as dt

    path = str(tmp_path / "t")
    _table(dspark, path, (0, 2), (2, 4), (4, 6))
    ms = Snapshot.load(path).commit_timestamp(1)
    stamp = dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    stream = dspark.readStream.format("delta").option("startingTimestamp", stamp).load(path)
    assert [b for _, b in _collect(stream, tmp_path / "c")] == [[2, 3, 4, 5]]


def test_sink_merge_schema_user_metadata_and_table_properties(dspark: SparkSession, tmp_path: Path) -> None:
    src, out = tmp_path / "in", str(tmp_path / "out")
    _append_parquet(dspark, src, 0, 2)
    _sink(dspark, src, out, tmp_path / "c1", **{"delta.appendOnly": "true", "userMetadata": "first"})
    snap = Snapshot.load(out)
    assert snap.configuration.get("delta.appendOnly") == "true"  # a delta.* option: a property of the new table
    assert snap.history()[0].get("userMetadata") == "first"
    wider = dspark.readStream.schema("id long").parquet(str(src)).selectExpr("id + 10 AS id", "id AS extra")

    def run(**options: Any) -> None:
        (wider.writeStream.format("delta").option("checkpointLocation", str(tmp_path / "c2")).options(**options)
         .trigger(availableNow=True).start(out).awaitTermination())

    with pytest.raises(Exception, match="(?i)schema"):
        run()  # a new column without mergeSchema: the batch fails, nothing is committed
    assert [f["name"] for f in Snapshot.load(out).schema["fields"]] == ["id"]
    run(mergeSchema="true")
    after = Snapshot.load(out)
    assert [f["name"] for f in after.schema["fields"]] == ["id", "extra"]
    assert sorted(tuple(r) for r in dvlake.read(dspark, out).collect()) == [(0, None), (1, None), (10, 0), (11, 1)]


def test_sink_to_table_creates_a_managed_table(dspark: SparkSession, tmp_path: Path) -> None:
    from dvlake.spark.catalog import registered_location

    src = tmp_path / "in"
    _append_parquet(dspark, src, 0, 3)
    dspark.sql(f"CREATE DATABASE IF NOT EXISTS stream_db LOCATION '{tmp_path / 'stream_db'}'")
    try:
        q = (dspark.readStream.schema("id long").parquet(str(src)).writeStream.format("delta")
             .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).toTable("stream_db.events"))
        q.awaitTermination()
        location = registered_location(dspark, "stream_db.events")
        assert location is not None and Path(location.removeprefix("file:")) == tmp_path / "stream_db" / "events"
        assert _ids(dspark.table("stream_db.events")) == [0, 1, 2]
        _append_parquet(dspark, src, 3, 5)  # the second run appends to the table the first one created
        (dspark.readStream.schema("id long").parquet(str(src)).writeStream.format("delta")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).toTable("stream_db.events")
         .awaitTermination())
        assert _ids(dspark.table("stream_db.events")) == [0, 1, 2, 3, 4]
    finally:
        dspark.sql("DROP DATABASE IF EXISTS stream_db CASCADE")
