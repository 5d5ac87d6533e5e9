"""Benchmark: reading a table with deletion vectors vs Spark's plain Parquet scan of the same files.

20M rows x 6 columns (ints, doubles, a string) in 8 Parquet files. Variants: no DV; DVs on every
file at 0.1 %, 1 %, 10 % of rows (random); a DV on 1 of 8 files (1 %). For each: full
materialization (``write.format("noop")``) and a 2-column aggregate, through ``dvlake.read`` vs
``spark.read.parquet`` of the same files, side by side, median of --repeat. Each dvlake result's
row count is checked. Run: ``.venv/bin/python bench/read_overhead.py [--rows N] [--repeat 3] [--write-md]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import statistics
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import median_time  # noqa: E402

import numpy as np  # noqa: E402
import pyroaring  # noqa: E402


def add_dvs(path: str, fraction: float, files_with_dv: int, seed: int = 7) -> int:
    """Commit random DVs on the first ``files_with_dv`` files; returns the rows deleted."""
    from dataclasses import replace

    from dvlake.dv.store import DeletionVectorWriter
    from dvlake.log.snapshot import Snapshot
    from dvlake.log.stats import num_records_of, with_loose_bounds
    from dvlake.txn.transaction import OptimisticTransaction

    snap = Snapshot.load(path)
    rng = np.random.default_rng(seed)
    actions, deleted = [], 0
    with DeletionVectorWriter(path) as writer:
        for add in sorted(snap.add_files(), key=lambda a: a.path)[:files_with_dv]:
            n = num_records_of(add.stats)
            rows = rng.choice(n, size=max(1, int(n * fraction)), replace=False).astype(np.uint64)
            desc = writer.add(pyroaring.BitMap64(np.sort(rows)))
            deleted += desc.cardinality
            actions += [add.remove(), replace(add, deletion_vector=desc, stats=with_loose_bounds(add.stats))]
    OptimisticTransaction(path, snap).commit(actions, "DELETE", {"predicate": "[]"})
    return deleted




def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()

    from pyspark.sql import functions as F

    import dvlake
    from dvlake.log.snapshot import Snapshot
    from dvlake.spark.session import local_session
    from dvlake.storage.paths import absolute_file_location

    spark = local_session("bench-read", shuffle_partitions=8, driver_memory="8g")
    tmp = tempfile.mkdtemp(prefix="dvlake-bench-read-")
    base = os.path.join(tmp, "base")
    df = (spark.range(0, args.rows, numPartitions=8)
          .withColumn("a", (F.col("id") * 7 % 1000).cast("int")).withColumn("b", F.col("id") / 3.0)
          .withColumn("c", (F.col("id") % 97).cast("long")).withColumn("d", F.sqrt(F.col("id").cast("double")))
          .withColumn("s", F.concat(F.lit("v"), (F.col("id") % 10007).cast("string"))))
    dvlake.write(df, base, properties={"delta.enableDeletionVectors": "true"})
    variants = [("no DV", 0.0, 0), ("0.1 % on 8/8 files", 0.001, 8), ("1 % on 8/8 files", 0.01, 8),
                ("10 % on 8/8 files", 0.10, 8), ("1 % on 1/8 files", 0.01, 1)]
    rows_out = []
    for label, fraction, nfiles in variants:
        path = os.path.join(tmp, label.replace(" ", "_").replace("%", "pct").replace("/", "of"))
        shutil.copytree(base, path, copy_function=os.link, ignore=shutil.ignore_patterns("_delta_log"))
        shutil.copytree(os.path.join(base, "_delta_log"), os.path.join(path, "_delta_log"))
        deleted = add_dvs(path, fraction, nfiles) if nfiles else 0
        snap = Snapshot.load(path)
        files = [absolute_file_location(path, a.path) for a in snap.add_files()]
        expected = args.rows - deleted
        ours = dvlake.read(spark, path)
        plain = spark.read.parquet(*files)
        assert ours.count() == expected, (label, ours.count(), expected)
        # warm both once
        ours.write.format("noop").mode("overwrite").save()
        plain.write.format("noop").mode("overwrite").save()
        agg = [F.sum("a"), F.sum("b")]
        # plain and dvlake run alternately and each pair gives a ratio: drift in machine load hits both sides
        noop_pairs, agg_pairs = [], []
        for _ in range(args.repeat):
            plain_t = median_time(lambda: spark.read.parquet(*files).write.format("noop").mode("overwrite").save(), 1)
            ours_t = median_time(lambda: dvlake.read(spark, path).write.format("noop").mode("overwrite").save(), 1)
            noop_pairs.append((ours_t / plain_t, plain_t))
            plain_t = median_time(lambda: spark.read.parquet(*files).agg(*agg).collect(), 1)
            ours_t = median_time(lambda: dvlake.read(spark, path).agg(*agg).collect(), 1)
            agg_pairs.append((ours_t / plain_t, plain_t))
        rows_out.append((label, statistics.median(r for r, _ in noop_pairs), statistics.median(r for r, _ in agg_pairs),
                         statistics.median(t for _, t in noop_pairs), statistics.median(t for _, t in agg_pairs)))
        print(f"{label:>20}: noop {rows_out[-1][1]:.2f}x  sum {rows_out[-1][2]:.2f}x "
              f"(plain noop {rows_out[-1][3]:.2f}s, plain sum {rows_out[-1][4]:.2f}s)", flush=True)
        shutil.rmtree(path)
    shutil.rmtree(tmp, ignore_errors=True)
    lines = [f"{args.rows:,} rows x 6 columns in 8 files; ratio dvlake.read / spark.read.parquet of the same files, "
             f"median of {args.repeat} ratios of alternating runs; {time.strftime('%Y-%m-%d')}, 2 cores, local[2].", "",
             "| DVs | full materialization (noop) | 2-column sum |", "|---|---:|---:|"]
    lines += [f"| {label} | {n:.2f}x | {s:.2f}x |" for label, n, s, _, _ in rows_out]
    table = "\n".join(lines)
    print(table)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md("## Read overhead (bench/read_overhead.py)", table)


if __name__ == "__main__":
    main()
