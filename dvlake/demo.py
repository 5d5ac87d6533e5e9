"""The main job: the Delta blog's DELETE on ``daily_user_actions``, with and without deletion vectors.

Run with ``make demo`` (or ``python -m dvlake.demo --output demo-output``). It builds a table of
10 ``day`` partitions, enables deletion vectors, deletes one user's rows, shows that the commit
wrote one small DV file and no Parquet, reads the table back, prints the history, then runs the
same DELETE as copy-on-write on a copy and compares time, bytes and files written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pyspark.sql import SparkSession

from dvlake import DeltaTable, read, sql, write
from dvlake.config import DELETE_DVS_PERSISTENT
from dvlake.log.snapshot import Snapshot

T = TypeVar("T")


def _with_progress(description: str, step: Callable[[], T]) -> T:
    """Run a long step with a spinner and the elapsed time on a terminal; print how long it took."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    t0 = time.perf_counter()
    sys.stdout.flush()
    # its own copy of the terminal: starting Spark points fds 1 and 2 at Spark's log file for a moment
    with os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1) as terminal, \
            Progress(SpinnerColumn(), TextColumn("   {task.description}"), TimeElapsedColumn(), transient=True,
                     console=Console(file=terminal)) as bar:
        bar.add_task(description, total=None)
        result = step()
    print(f"   done in {time.perf_counter() - t0:.0f} s")
    return result


def _shown(path: Path) -> str:
    """A path as the user would type it from the current folder."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def _files(root: Path) -> dict[str, int]:
    """Every file below the table (but the log), with its size."""
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        if "_delta_log" in dirpath:
            continue
        for n in names:
            if not n.startswith((".", "_")):
                p = os.path.join(dirpath, n)
                out[os.path.relpath(p, root)] = os.path.getsize(p)
    return out


def _timed_delete(spark: SparkSession, path: Path, condition: str) -> tuple[float, dict[str, int]]:
    before = _files(path)
    t0 = time.perf_counter()
    DeltaTable.forPath(spark, str(path)).delete(condition)
    elapsed = time.perf_counter() - t0
    after = _files(path)
    return elapsed, {k: v for k, v in after.items() if k not in before}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="demo-output", help="folder for the demo tables (recreated)")
    parser.add_argument("--rows", type=int, default=3_000_000, help="rows in daily_user_actions")
    args = parser.parse_args(argv)

    from dvlake.terminal.spark_start import discard, new_log_file, start

    out = Path(args.output).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    log = new_log_file()
    try:
        spark = _with_progress("starting Spark (its own output goes to a log file)",
                               lambda: start("dvlake-demo", {"spark.sql.shuffle.partitions": "8"}, log_path=log))
        _run(spark, out, args.rows)
    except BaseException:
        print(f"\nThe demo failed; Spark's own log: {log}", file=sys.stderr)
        raise
    discard(log)


def _run(spark: SparkSession, out: Path, rows: int) -> None:
    from pyspark.sql import functions as F

    table = out / "daily_user_actions"
    print(f"1. Building {_shown(table)} with {rows:,} rows in 10 day partitions")
    actions = (spark.range(rows)
               .withColumn("day", F.date_add(F.lit("2024-06-01").cast("date"), (F.col("id") % 10).cast("int")))
               # 100,000 users, each on every day (10 consecutive ids share one), user 3 at any --rows from 40
               .withColumn("user_id", (F.col("id") / 10).cast("long") % 100_000)
               .withColumn("action", F.element_at(F.array(*[F.lit(a) for a in ("view", "click", "buy", "share")]),
                                                  (F.col("id") % 4 + 1).cast("int")))
               .withColumn("amount", (F.col("id") % 1000) / 10.0))
    _with_progress(f"writing {rows:,} rows", lambda: write(actions.repartition(20, "day"), str(table), partitionBy=["day"]))
    sql(spark, f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    cow_table = out / "daily_user_actions_cow"
    shutil.copytree(table, cow_table)
    snap = Snapshot.load(str(table))
    print(f"   {snap.num_files} Parquet files, protocol reader {snap.protocol.min_reader_version} / writer "
          f"{snap.protocol.min_writer_version}, features {sorted(snap.protocol.writer_features or [])}")

    # The first Spark job that runs Python on executors starts the Python workers; do that on a
    # throwaway table so that neither timed DELETE below pays for it.
    warm = out / "warm-up"
    write(spark.range(100).withColumn("p", F.col("id") % 2), str(warm), properties={"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(spark, str(warm)).delete("id = 1")
    shutil.rmtree(warm)

    condition = "user_id = 3"
    print(f"\n2. DELETE FROM daily_user_actions WHERE {condition}  (deletion vectors)")
    dv_time, dv_new = _with_progress("deleting", lambda: _timed_delete(spark, table, condition))
    dv_files = {k: v for k, v in dv_new.items() if k.endswith(".bin")}
    pq_files = {k: v for k, v in dv_new.items() if k.endswith(".parquet")}
    print(f"   new DV files: {len(dv_files)} ({sum(dv_files.values()):,} bytes); new Parquet files: {len(pq_files)}")
    last = DeltaTable.forPath(spark, str(table)).history(1).collect()[0]
    m = last.operationMetrics
    print(f"   commit {last.version}: numDeletedRows={m['numDeletedRows']} numDeletionVectorsAdded="
          f"{m['numDeletionVectorsAdded']} numRemovedFiles={m['numRemovedFiles']} numAddedFiles={m['numAddedFiles']}")

    print("\n3. Reading the table back")
    df = read(spark, str(table))
    remaining = df.filter(F.col("user_id") == 3).count()
    print(f"   rows: {df.count():,} (rows of user 3 left: {remaining})")
    df.groupBy("day").count().orderBy("day").show(10)

    print("4. History")
    DeltaTable.forPath(spark, str(table)).history().select(
        "version", "operation", F.col("operationMetrics")["numDeletedRows"].alias("deletedRows"),
        F.col("operationMetrics")["numDeletionVectorsAdded"].alias("dvsAdded"),
        F.col("operationMetrics")["numAddedFiles"].alias("addedFiles")).show(truncate=False)

    print(f"5. The same DELETE as copy-on-write ({DELETE_DVS_PERSISTENT}=false) on a copy")
    spark.conf.set(DELETE_DVS_PERSISTENT, "false")
    try:
        cow_time, cow_new = _with_progress("deleting (rewrites every file with a deleted row)",
                                           lambda: _timed_delete(spark, cow_table, condition))
    finally:
        spark.conf.set(DELETE_DVS_PERSISTENT, "true")
    assert read(spark, str(cow_table)).count() == df.count(), "DV and CoW results differ"

    print("\n| DELETE mode | time (s) | bytes written | files written |")
    print("|---|---:|---:|---:|")
    print(f"| deletion vectors | {dv_time:.2f} | {sum(dv_new.values()):,} | {len(dv_new)} |")
    print(f"| copy-on-write | {cow_time:.2f} | {sum(cow_new.values()):,} | {len(cow_new)} |")
    ratio = cow_time / dv_time if dv_time else float("inf")
    print(f"\nDV DELETE was {ratio:.1f}x faster and wrote "
          f"{100 * sum(dv_new.values()) / max(sum(cow_new.values()), 1):.3f} % of copy-on-write's bytes. "
          f"Tables are in {_shown(out)}.")
    spark.stop()
    dvlake_cli = Path(sys.executable).parent / "dvlake"
    command = _shown(dvlake_cli) if dvlake_cli.exists() else "dvlake"
    print("\nLook at the table without Spark (each answers in seconds):")
    print(f"  {command} files {_shown(table)} --with-dvs     # the files with a DV: deleted rows, DV file, offset")
    print(f"  {command} health {_shown(table)}               # deleted rows per partition, read cost, what to run")
    print(f"  {command} history {_shown(table)} --limit 3    # the commits, with their DV metrics")


if __name__ == "__main__":
    main()
