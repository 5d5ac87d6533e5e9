"""Benchmark: compaction (OPTIMIZE, REORG … APPLY (PURGE)) against the physical limit, and what PURGE buys readers.

1. Read overhead before and after PURGE, on the read benchmark's table shape (``bench/read_overhead.py``:
   ints, doubles, a string; 8 files) as a Delta table with ~1 % of the rows of every file deleted: dvlake's
   read vs ``spark.read.parquet`` of the same data files (full materialization and a 2-column sum; median of
   alternating pairs). Target: after PURGE <= 1.05x.
2. OPTIMIZE of 1,000 small files, and of 16 files with 5 % deleted rows, vs the physical limit measured in the
   same run - Spark reading those Parquet files and writing them back with no Delta work
   (``spark.read.parquet(files).write.parquet(out)``) - and delta-rs' ``optimize.compact()`` on an identical
   table. Each run works on a fresh copy of the table. Target: <= 1.3x the physical limit.

Run: ``.venv/bin/python bench/optimize.py [--rows N] [--repeat 3] [--write-md]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HEADING = "## Compaction: OPTIMIZE and REORG PURGE (bench/optimize.py)"
DV_PROPS = {"delta.enableDeletionVectors": "true"}


NOTES = """Reading the numbers:

- After PURGE the table is a single file (the default `optimize.maxFileSize` is 1 GiB), which both readers read
  with the same tasks; what remains of the ratio for `dvlake.read(path)` is its fixed cost (log replay and
  planning) over a scan of about a second. The planned-files row separates that fixed cost from the per-row cost.
- The physical limit packs the small files into ~30 read tasks (128 MB splits, 4 MB open cost per file) and writes
  one output file per task; OPTIMIZE writes one file per bin (as delta-spark: `coalesce(1)`), one task and one
  file, which here was cheaper than the limit's ~30. `optimize.repartition.enabled` (parallel read, shuffle to
  one writer) did not pay in either case.
- delta-rs compacts in-process in Rust with no job scheduling; at these sizes dvlake's time is mostly Spark's
  per-job cost (larger tables were not measured)."""


def _frame(spark, rows: int, parts: int):
    from pyspark.sql import functions as F

    return (spark.range(0, rows, numPartitions=parts)
            .withColumn("a", (F.col("id") * 7 % 1000).cast("int")).withColumn("b", F.col("id") / 3.0)
            .withColumn("c", (F.col("id") % 97).cast("long")).withColumn("d", F.sqrt(F.col("id").cast("double")))
            .withColumn("s", F.concat(F.lit("v"), (F.col("id") % 10007).cast("string"))))


def _data_paths(path: str) -> list[str]:
    from dvlake.log.snapshot import Snapshot
    from dvlake.storage.paths import absolute_file_location

    snap = Snapshot.load(path)
    return [absolute_file_location(snap.table_root, a.path) for a in snap.add_files()]


def _paired(plain: Callable[[], object], ours: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    ratios, tp, to = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        plain()
        t1 = time.perf_counter()
        ours()
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
        tp.append(t1 - t0)
        to.append(t2 - t1)
    return statistics.median(ratios), statistics.median(tp), statistics.median(to)


def read_overhead(spark, tmp: str, rows: int, repeat: int) -> list[tuple[str, str, float, float]]:
    """(state, reader, noop ratio, sum ratio) before and after REORG PURGE.

    Two readers against the same plain scan: ``dvlake.read(path)`` end to end (log replay and planning
    included, as a user calls it), and the scan of the already planned files (``logical_frame``, the
    read benchmark's method), which isolates what DVs cost per row.
    """
    from pyspark.sql import functions as F

    import dvlake
    from dvlake.commands.maintenance.reorg import purge
    from dvlake.log.snapshot import Snapshot
    from dvlake.spark.scan import logical_frame, plan_scan

    path = os.path.join(tmp, "read")
    dvlake.write(_frame(spark, rows, 8), path, properties=DV_PROPS)
    dvlake.DeltaTable.forPath(spark, path).delete("pmod(hash(id), 100) = 0")  # ~1 % of every file
    out = []
    agg = [F.sum("a"), F.sum("b")]
    for state in ("1 % deleted in 8/8 files (DVs)", "after REORG … APPLY (PURGE)"):
        if state.startswith("after"):
            purge(spark, path)
        paths = _data_paths(path)
        schema = spark.read.parquet(paths[0]).schema
        snap = Snapshot.load(path)
        plan = plan_scan(spark, snap, None)

        def plain(paths=paths, schema=schema):
            return spark.read.schema(schema).parquet(*paths)

        readers = [("`dvlake.read(path)`", lambda: dvlake.read(spark, path)),
                   ("scan of the planned files", lambda snap=snap, plan=plan: logical_frame(spark, snap, plan))]
        for reader, ours in readers:
            ours().write.format("noop").mode("overwrite").save()  # warm-up
            plain().write.format("noop").mode("overwrite").save()
            noop = _paired(lambda: plain().write.format("noop").mode("overwrite").save(),
                           lambda ours=ours: ours().write.format("noop").mode("overwrite").save(), repeat)
            total = _paired(lambda: plain().agg(*agg).collect(), lambda ours=ours: ours().agg(*agg).collect(), repeat)
            print(f"read {state} / {reader}: noop {noop[0]:.2f}x sum {total[0]:.2f}x ({len(paths)} files; plain "
                  f"{noop[1]:.2f}s / {total[1]:.2f}s)", flush=True)
            out.append((state, reader, noop[0], total[0]))
    return out


def compaction(spark, tmp: str, label: str, rows: int, files: int, delete: str | None,
               repeat: int) -> tuple[str, float, float, float, float | None, str]:
    """(label, dvlake OPTIMIZE s, same with optimize.repartition.enabled, physical limit s, delta-rs s or None, note)."""
    import dvlake
    from dvlake import DeltaTable
    from dvlake.config import OPTIMIZE_REPARTITION

    base = os.path.join(tmp, f"base-{files}")
    rs_base = os.path.join(tmp, f"rs-base-{files}")
    df = _frame(spark, rows, files)
    dvlake.write(df, base, properties=DV_PROPS if delete else None)
    if delete:
        DeltaTable.forPath(spark, base).delete(delete)
    shutil.copytree(base, rs_base)
    ours, ours_rep, limit, rs = [], [], [], []
    note = ""
    for i in range(repeat):
        work = os.path.join(tmp, f"work-{files}-{i}")
        shutil.copytree(base, work)
        paths = _data_paths(work)
        out = os.path.join(tmp, f"limit-{files}-{i}")
        t0 = time.perf_counter()
        spark.read.parquet(*paths).write.parquet(out)
        t1 = time.perf_counter()
        m = DeltaTable.forPath(spark, work).optimize().executeCompaction().collect()[0].metrics
        t2 = time.perf_counter()
        assert m.numFilesRemoved == files, m
        limit.append(t1 - t0)
        ours.append(t2 - t1)
        work_rep = os.path.join(tmp, f"work-rep-{files}-{i}")
        shutil.copytree(base, work_rep)
        spark.conf.set(OPTIMIZE_REPARTITION, "true")
        try:
            t0 = time.perf_counter()
            DeltaTable.forPath(spark, work_rep).optimize().executeCompaction().collect()
            ours_rep.append(time.perf_counter() - t0)
        finally:
            spark.conf.unset(OPTIMIZE_REPARTITION)
        rs_work = os.path.join(tmp, f"rs-work-{files}-{i}")
        shutil.copytree(rs_base, rs_work)
        try:
            from deltalake import DeltaTable as RsTable

            t3 = time.perf_counter()
            RsTable(rs_work).optimize.compact()
            rs.append(time.perf_counter() - t3)
        except Exception as exc:  # noqa: BLE001 - reported in the table, e.g. a writer feature delta-rs lacks
            note = f"delta-rs: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
        for p in (work, work_rep, out, rs_work):
            shutil.rmtree(p, ignore_errors=True)
    rs_s = statistics.median(rs) if rs else None
    result = (label, statistics.median(ours), statistics.median(ours_rep), statistics.median(limit), rs_s, note)
    print(f"{label}: dvlake {result[1]:.2f}s (repartition {result[2]:.2f}s), physical limit {result[3]:.2f}s "
          f"({result[1] / result[3]:.2f}x), "
          f"delta-rs {rs_s if rs_s is None else round(rs_s, 2)} {note}", flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4_000_000, help="rows of the read table and of each compaction table")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-md", action="store_true")
    ap.add_argument("--only", choices=["read", "compact"], help="run one half (the other half's section is not written)")
    args = ap.parse_args()

    from dvlake.spark.session import local_session

    spark = local_session("bench-optimize", shuffle_partitions=8, driver_memory="6g")
    tmp = tempfile.mkdtemp(prefix="dvlake-bench-optimize-")
    try:
        reads = read_overhead(spark, tmp, args.rows, args.repeat) if args.only != "compact" else []
        if args.only == "read":
            print(reads)
            return
        small = compaction(spark, tmp, "1,000 small files", args.rows // 4, 1000, None, args.repeat)
        dv16 = compaction(spark, tmp, "16 files, 5 % rows deleted (DVs)", args.rows, 16, "pmod(hash(id), 20) = 0",
                          args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    lines = [
        f"{time.strftime('%Y-%m-%d')}, 2 cores shared with other work, local[2]; table shape of bench/read_overhead.py "
        f"(6 columns). Read: {args.rows:,} rows in 8 files, ~1 % of every file deleted, dvlake's read vs "
        f"`spark.read.parquet` of the same data files, median of {args.repeat} alternating pairs.",
        "", "| table state | reader | full materialization (noop) | 2-column sum |", "|---|---|---:|---:|",
        *[f"| {s} | {r} | {n:.2f}x | {t:.2f}x |" for s, r, n, t in reads],
        "", f"OPTIMIZE (`executeCompaction`, default sizes: every file is small, one bin, one output file) vs the "
        f"physical limit `spark.read.parquet(files).write.parquet(out)` in the same run, and delta-rs "
        f"`optimize.compact()` on a copy of the same table; median of {args.repeat}, fresh copy each run.",
        "", "| input | dvlake OPTIMIZE s | dvlake / limit | with `optimize.repartition.enabled` | physical limit s "
        "| delta-rs compact s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for label, ours, rep, limit, rs, note in (small, dv16):
        lines.append(f"| {label} | {ours:.2f} | {ours / limit:.2f}x | {rep:.2f} s ({rep / limit:.2f}x) | {limit:.2f} | "
                     f"{'n/a' if rs is None else f'{rs:.2f}'} |")
        if note:
            notes.append(f"- {label}: {note}")
    body = "\n".join(lines + ([""] + notes if notes else []) + ["", NOTES])
    print(body)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md(HEADING, body)


if __name__ == "__main__":
    main()
