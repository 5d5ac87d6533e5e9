"""Benchmark: Structured Streaming with ``format("delta")`` against the batch paths, and exactly once under SIGKILL.

Three measurements, side by side in one run (local[2]):

- **source**: a DV table of ``--files`` files x ``--rows-per-file`` rows (a DV DELETE of 1 row in 10 on every
  file) read as a stream from its initial snapshot (``readStream.format("delta")``, ``availableNow``, one
  micro-batch, into Spark's ``noop`` sink) vs a batch ``dvlake.read`` of the same table into ``noop``. Both
  return the same live rows; the ratio is batch seconds / stream seconds (the stream's rows/s as a fraction of
  the batch read's; target >= 0.8x). Both engines of the source run, alternating with the batch read: the JVM
  source (classic sessions with the jar: the native scan) and the Python data source (Spark Connect's engine,
  ``spark.dvlake.stream.engine=python``). Median of ``--repeat``, each stream run on a new checkpoint. Each
  stream's micro-batch alone (Spark's ``triggerExecution``) is reported too: the rest is the query's start and
  stop (for the Python engine, Spark launches a fresh Python process for the source's offsets per query).
- **sink**: ``--batches`` Parquet files of ``--rows-per-batch`` rows streamed into a Delta table one file per
  micro-batch (``maxFilesPerTrigger=1``), vs one batch ``dvlake.write(..., "append")`` per file into another
  table. Per micro-batch: the sink's own time (Spark's ``addBatch`` duration, what ``foreachBatch`` takes) and
  the query's whole trigger (``triggerExecution``: plus Spark's offset and commit logs), against the median
  batch append (target: sink <= 1.3x).
- **kill/restart** (``--kill-cycles``, default 10): a sink query in a child process, SIGKILLed (its whole process
  group) at a random moment while it commits micro-batches, then restarted from its checkpoint; after the last
  cycle a final ``availableNow`` run drains the rest. The table must hold every source row exactly once; the
  result counts the cycles, the kills that landed between a table commit and Spark's commit log (the replayed
  batch must be skipped), lost and duplicated rows.

Run: ``.venv/bin/python bench/streaming.py [--files 16] [--rows-per-file 500000] [--batches 10]
[--rows-per-batch 200000] [--kill-cycles 10] [--repeat 3] [--write-md]``
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import median_time, update_benchmarks_md  # noqa: E402

ENGINE_SETTING = "spark.dvlake.stream.engine"

DV = {"delta.enableDeletionVectors": "true"}


def _rows(spark: Any, start: int, end: int, parts: int) -> Any:
    from pyspark.sql import functions as F

    return (spark.range(start, end, numPartitions=parts)
            .withColumn("a", F.xxhash64("id")).withColumn("b", F.rand(7))
            .withColumn("s", F.concat(F.lit("event-"), (F.col("id") % 9973).cast("string"))))


def source_ratio(spark: Any, work: Path, files: int, rows_per_file: int, repeat: int) -> dict[str, Any]:
    """Initial snapshot as a stream vs the same table read in batch, both into ``noop``."""
    import dvlake
    from dvlake import DeltaTable

    path = str(work / "source")
    dvlake.write(_rows(spark, 0, files * rows_per_file, files), path, properties=DV)
    DeltaTable.forPath(spark, path).delete("id % 10 = 3")
    live = dvlake.read(spark, path).count()
    runs = [0]

    def batch() -> None:
        dvlake.read(spark, path).write.format("noop").mode("overwrite").save()

    def stream_with(engine: str, triggers: list[float]) -> None:
        runs[0] += 1
        spark.conf.set(ENGINE_SETTING, engine)
        try:
            q = (dvlake.read_stream(spark, path, maxFilesPerTrigger=files + 1).writeStream.format("noop")
                 .option("checkpointLocation", str(work / f"chk-source-{runs[0]}")).trigger(availableNow=True).start())
            q.awaitTermination()
        finally:
            spark.conf.unset(ENGINE_SETTING)
        read = sum(int(p["numInputRows"]) for p in q.recentProgress)
        assert read == live, (read, live)
        triggers.append(sum(p["durationMs"]["triggerExecution"] for p in q.recentProgress
                            if int(p["numInputRows"])) / 1000)

    out: dict[str, Any] = {"live": live}
    batch()  # warm-up: JVM, page cache
    for engine in ("auto", "python"):
        triggers: list[float] = []
        stream_with(engine, triggers)  # warm-up: Python workers, the callback server
    # the engines and the batch read alternate, so a machine slowing down in the run weighs on each alike
    times: dict[str, list[float]] = {"batch": [], "auto": [], "python": []}
    trig: dict[str, list[float]] = {"auto": [], "python": []}
    for _ in range(repeat):
        times["batch"].append(median_time(batch, 1))
        for engine in ("auto", "python"):
            times[engine].append(median_time(lambda e=engine: stream_with(e, trig[e]), 1))
    out["batch"] = statistics.median(times["batch"])
    for engine, key in (("auto", "jvm"), ("python", "python")):
        t = statistics.median(times[engine])
        # the query's micro-batch alone, without its start and stop (for the Python engine Spark starts a new
        # Python process per query for the source's offsets): what the stream costs per batch once it runs
        t_trigger = statistics.median(trig[engine])
        out[key] = {"stream": t, "ratio": out["batch"] / t, "trigger": t_trigger, "trigger_ratio": out["batch"] / t_trigger}
    return out


def sink_ratio(spark: Any, work: Path, batches: int, rows_per_batch: int) -> dict[str, Any]:
    """Per micro-batch cost of the Delta sink vs a batch append of the same rows."""
    import dvlake

    folder = work / "sink-in"
    for i in range(batches):
        _rows(spark, i * rows_per_batch, (i + 1) * rows_per_batch, 1).write.mode("append").parquet(str(folder))
    parts = sorted(str(p) for p in folder.glob("*.parquet"))
    assert len(parts) == batches, parts
    schema = spark.read.parquet(parts[0]).schema
    appended = str(work / "appended")
    dvlake.write(spark.read.parquet(parts[0]).limit(0), appended, properties=DV)
    append_times = []
    for p in parts:
        t0 = time.perf_counter()
        dvlake.write(spark.read.parquet(p), appended, "append")
        append_times.append(time.perf_counter() - t0)
    streamed = str(work / "streamed")
    dvlake.write(spark.read.parquet(parts[0]).limit(0), streamed, properties=DV)
    q = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))
         .writeStream.format("delta").option("checkpointLocation", str(work / "chk-sink"))
         .trigger(availableNow=True).start(streamed))
    q.awaitTermination()
    progress = [p for p in q.recentProgress if int(p["numInputRows"]) > 0]
    assert len(progress) == batches, len(progress)
    assert dvlake.read(spark, streamed).count() == batches * rows_per_batch
    add_batch = [p["durationMs"]["addBatch"] / 1000 for p in progress]
    trigger = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    # the first of each is the warm-up (Python worker start, first plan of the table): medians over the rest
    append = statistics.median(append_times[1:] or append_times)
    sink = statistics.median(add_batch[1:] or add_batch)
    whole = statistics.median(trigger[1:] or trigger)
    return {"append": append, "sink": sink, "trigger": whole, "ratio": sink / append, "trigger_ratio": whole / append}


_CHILD = """
import sys
import dvlake
from dvlake.spark.session import local_session

src, out, chk = sys.argv[1:4]
spark = dvlake.configure_spark(local_session("bench-streaming-killed", cores=1, shuffle_partitions=1, driver_memory="1g"))
schema = spark.read.parquet(src).schema
(spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(src)
 .writeStream.format("delta").option("checkpointLocation", chk).start(out).awaitTermination())
"""


def _committed_version(out: str) -> int:
    from dvlake.log.segment import list_log
    from dvlake.storage.base import storage_for

    if not os.path.isdir(os.path.join(out, "_delta_log")):
        return -1
    return int(list_log(storage_for(out), out).latest_version)


def kill_restart(spark: Any, work: Path, cycles: int, files: int, rows_per_file: int, seed: int) -> dict[str, Any]:
    """SIGKILL a sink query at random moments, restart it from its checkpoint; every row exactly once at the end."""
    import dvlake
    from dvlake.log.snapshot import Snapshot

    rng = random.Random(seed)
    src, out, chk = work / "kill-in", str(work / "kill-out"), work / "chk-kill"
    for i in range(files):
        _rows(spark, i * rows_per_file, (i + 1) * rows_per_file, 1).write.mode("append").parquet(str(src))
    script = work / "child.py"
    script.write_text(_CHILD)
    mid_batch = 0
    killed = 0
    total = files
    for _ in range(cycles):
        # data keeps arriving: each cycle has at least one new micro-batch to be killed in
        _rows(spark, total * rows_per_file, (total + 1) * rows_per_file, 1).write.mode("append").parquet(str(src))
        total += 1
        before = _committed_version(out)
        child = subprocess.Popen([sys.executable, str(script), str(src), out, str(chk)], start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 600
            while child.poll() is None and time.monotonic() < deadline and _committed_version(out) <= before:
                time.sleep(0.05)  # the query is up and committing micro-batches
            time.sleep(rng.uniform(0.0, 1.5))  # then a random point: inside a batch, between the two commits, ...
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                killed += 1
            child.wait()
        # a kill between the table commit and Spark's commit log: the table has a batch Spark did not record
        done = {int(p.name) for p in (chk / "commits").glob("[0-9]*")} if (chk / "commits").exists() else set()
        txns = Snapshot.load(out).txns if _committed_version(out) >= 0 else {}
        last = max((int(t.version) for t in txns.values()), default=-1)
        if last >= 0 and last not in done:
            mid_batch += 1
    schema = spark.read.parquet(str(src)).schema
    (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(src))
     .writeStream.format("delta").option("checkpointLocation", str(chk)).trigger(availableNow=True).start(out)
     .awaitTermination())
    from pyspark.sql import functions as F

    got = dvlake.read(spark, out).groupBy("id").count()
    expected = total * rows_per_file
    present = got.count()
    duplicated = got.where(F.col("count") > 1).count()
    return {"cycles": cycles, "killed": killed, "between_commits": mid_batch, "expected": expected,
            "lost": expected - present, "duplicated": duplicated, "commits": Snapshot.load(out).version + 1}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--rows-per-file", type=int, default=500_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--rows-per-batch", type=int, default=200_000)
    ap.add_argument("--kill-cycles", type=int, default=10)
    ap.add_argument("--kill-files", type=int, default=40, help="source files of the kill/restart query (one per batch)")
    ap.add_argument("--kill-rows-per-file", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--parts", default="source,sink,kill", help="which measurements to run (comma-separated)")
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    parts = {p.strip() for p in args.parts.split(",")}

    import dvlake
    from dvlake.spark.session import local_session

    spark = dvlake.configure_spark(local_session("bench-streaming", shuffle_partitions=4))
    work = Path(tempfile.mkdtemp(prefix="dvlake-bench-streaming-"))
    try:
        src = source_ratio(spark, work, args.files, args.rows_per_file, args.repeat) if "source" in parts else None
        sink = sink_ratio(spark, work, args.batches, args.rows_per_batch) if "sink" in parts else None
        kill = kill_restart(spark, work, args.kill_cycles, args.kill_files, args.kill_rows_per_file, args.seed) \
            if args.kill_cycles > 0 and "kill" in parts else None
        lines = [f"local[2] on the shared 2-core machine, median of {args.repeat} runs (source) and of the micro-batches "
                 "after the first (sink)."]
        if src is not None:
            lines += [
                "",
                f"**Source, initial snapshot**: {args.files} files x {args.rows_per_file:,} rows x 4 columns, DVs on "
                f"every file (1 row in 10 deleted), {src['live']:,} live rows, read whole into Spark's `noop` sink.",
                "",
                "| read | seconds | rows/s vs batch |",
                "|---|---:|---:|",
                f"| batch `dvlake.read` (native Parquet scan, DVs applied in the JVM) | {src['batch']:.2f} | 1.00x |",
                f"| `readStream.format(\"delta\")`, `availableNow`, JVM source (native scan; classic default) | "
                f"{src['jvm']['stream']:.2f} | {src['jvm']['ratio']:.2f}x (target >= 0.8x) |",
                f"| its micro-batch alone (`triggerExecution`: without the query's start and stop) | "
                f"{src['jvm']['trigger']:.2f} | {src['jvm']['trigger_ratio']:.2f}x |",
                f"| the same, Python source (pyarrow in Python workers; Spark Connect's engine) | "
                f"{src['python']['stream']:.2f} | {src['python']['ratio']:.2f}x |",
                f"| its micro-batch alone | {src['python']['trigger']:.2f} | {src['python']['trigger_ratio']:.2f}x |",
            ]
        if sink is not None:
            lines += [
                "",
                f"**Sink, per micro-batch**: {args.batches} micro-batches of {args.rows_per_batch:,} rows (one Parquet "
                "file each) into a Delta table vs one batch append per file.",
                "",
                "| write | seconds per batch | vs batch append |",
                "|---|---:|---:|",
                f"| batch `dvlake.write(..., \"append\")` | {sink['append']:.2f} | 1.00x |",
                f"| Delta sink, Spark's `addBatch` (the foreachBatch commit) | {sink['sink']:.2f} | {sink['ratio']:.2f}x "
                "(target <= 1.3x) |",
                f"| whole trigger (plus Spark's offset and commit logs, source listing) | {sink['trigger']:.2f} | "
                f"{sink['trigger_ratio']:.2f}x |",
            ]
        if kill is not None:
            lines += [
                "",
                f"**Kill/restart**: a sink query (one {args.kill_rows_per_file:,}-row file per micro-batch, "
                f"{args.kill_files} files, one more arriving per cycle) SIGKILLed at a random moment {kill['cycles']} "
                f"times and restarted from its checkpoint, then drained: {kill['killed']} kills, "
                f"{kill['between_commits']} of them between the table commit and Spark's commit log (the replayed batch "
                f"skipped by its txn id); {kill['expected']:,} rows expected, **{kill['lost']} lost, "
                f"{kill['duplicated']} duplicated**, {kill['commits']} table commits.",
            ]
        body = "\n".join(lines)
        print(body)
        if args.write_md:
            update_benchmarks_md("## Structured Streaming (bench/streaming.py)", body)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
