"""Benchmark: reading the change feed of a DV DELETE — only what changed vs a full scan of the touched files.

A table of FILES files (one Spark task each, ``--rows-per-file`` rows of 6 columns, Parquet row
groups of ``--row-group-mb``), ``delta.enableChangeDataFeed`` and DVs on. One DELETE of 10 rows spread
across the files (one row in each of 10 files, at scattered positions: 10 DV changes). Reading that
version's changes, median of ``--repeat`` runs:

- **dvlake** ``read_changes(v, v)``: the DV diff of each file computed on executors, the rows read by
  row index, decoding only the row groups that hold them;
- **full scan of the touched files** the way peers (delta-rs, kernel) do it: every touched file read
  whole, rows kept by their row index (Spark's Parquet reader with a ``_metadata.row_index`` filter,
  which is also the alternative dvlake's reader was chosen over);
- **delta-rs** ``DeltaTable.load_cdf(v, v)``.

Run: ``.venv/bin/python bench/cdf.py [--rows-per-file 1500000] [--row-group-mb 8] [--repeat 3] [--write-md]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import median_time, update_benchmarks_md  # noqa: E402

FILES = 16
ROWS_DELETED = 10


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows-per-file", type=int, default=1_500_000)
    ap.add_argument("--row-group-mb", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    rows = args.rows_per_file

    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    import dvlake
    from dvlake import DeltaTable
    from dvlake.log.snapshot import Snapshot
    from dvlake.spark.session import local_session

    block = str(args.row_group_mb * 1024 * 1024)
    spark = local_session("bench-cdf", shuffle_partitions=8,
                          extra_conf={"spark.hadoop.parquet.block.size": block})
    tmp = tempfile.mkdtemp(prefix="dvlake-bench-cdf-")
    path = os.path.join(tmp, "t")
    try:
        df = (spark.range(0, FILES * rows, numPartitions=FILES)
              .withColumn("r", (F.col("id") % rows).cast("int"))
              .withColumn("a", F.xxhash64("id"))
              .withColumn("b", F.rand(7))
              .withColumn("s", F.sha2(F.col("id").cast("string"), 256))
              .withColumn("t", F.concat(F.lit("event-"), (F.col("id") % 9973).cast("string"))))
        dvlake.write(df, path, properties={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"})
        # file k's row at a scattered position; Spark's range gives file k the ids k*rows .. (k+1)*rows-1
        ids = [k * rows + (k * 7919 * 37 + 11) % rows for k in range(ROWS_DELETED)]
        DeltaTable.forPath(spark, path).delete(f"id in ({', '.join(map(str, ids))})")
        snap = Snapshot.load(path)
        version = snap.version
        adds = [json.loads(ln)["add"] for ln in open(os.path.join(path, "_delta_log", f"{version:020d}.json"))
                if '"add"' in ln]
        touched = [os.path.join(path, a["path"]) for a in adds]
        positions = sorted({i % rows for i in ids})
        sizes = [os.path.getsize(p) for p in touched]
        groups = pq.ParquetFile(touched[0]).metadata.num_row_groups
        expected = ROWS_DELETED

        def dvlake_changes() -> None:
            n = len(dvlake.read_changes(spark, path, version, version).collect())
            assert n == expected, n

        def full_scan() -> None:
            scan = spark.read.parquet(*touched).select("*", F.col("_metadata.row_index").alias("__row"))
            # every touched file decoded whole; the positions of the other touched files match a few rows too
            n = len(scan.filter(F.col("__row").isin(positions)).collect())
            assert n >= expected, n

        for fn in (dvlake_changes, full_scan):  # warm-up: JVM, Python workers, page cache
            fn()
        t_dv = median_time(dvlake_changes, args.repeat)
        t_full = median_time(full_scan, args.repeat)
        t_rs, rs_note = delta_rs_seconds(path, version, expected, args.repeat)
        mb = sum(sizes) / FILES / 1e6
        body = "\n".join([
            f"{FILES} files x {rows:,} rows x 7 columns ({mb:.0f} MB per file, {groups} row groups of "
            f"~{args.row_group_mb} MB each), DVs and the change feed on; one DELETE of {ROWS_DELETED} rows, one in each "
            f"of {len(touched)} files at scattered positions; reading that version's {expected} change rows. local[2] "
            f"on the shared 2-core machine, median of {args.repeat}.",
            "",
            "| reader | seconds | vs full scan of the touched files |",
            "|---|---:|---:|",
            f"| dvlake `read_changes` (DV diff on executors, rows by index, only their row groups) | {t_dv:.2f} | "
            f"{t_dv / t_full:.2f}x |",
            f"| full scan of the touched files (Spark Parquet reader + `_metadata.row_index` filter) | {t_full:.2f} | 1.00x |",
            f"| delta-rs `load_cdf` | {rs_note or f'{t_rs:.2f}'} | {'-' if rs_note else f'{t_rs / t_full:.2f}x'} |",
            "",
            "dvlake decodes, per touched file, only the row group holding the changed row, and in it only the",
            "batches up to that row; the full scan decodes every row group of every touched file.",
        ])
        print(body)
        if args.write_md:
            update_benchmarks_md("## Change Data Feed of a DV DELETE (bench/cdf.py)", body)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_DELTA_RS = """
import json, statistics, sys, time
import pyarrow as pa
from deltalake import DeltaTable
path, version, expected, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def run():
    reader = DeltaTable(path).load_cdf(starting_version=version, ending_version=version)
    n = pa.RecordBatchReader.from_stream(reader).read_all().num_rows
    assert n == expected, n
run()
times = []
for _ in range(repeat):
    t0 = time.perf_counter(); run(); times.append(time.perf_counter() - t0)
print(json.dumps(statistics.median(times)))
"""


def delta_rs_seconds(path: str, version: int, expected: int, repeat: int) -> tuple[float, str | None]:
    """delta-rs's load_cdf in a child process: on files with several row groups it can abort the process
    (a Rust panic in its Parquet row selection), which must not take the benchmark down."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _DELTA_RS, path, str(version), str(expected), str(repeat)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines() or ["?"]
        panic = next((ln for ln in lines if "panicked" in ln), None)
        print(f"delta-rs failed: {panic or lines[-1]}", file=sys.stderr)
        if panic:
            return float("nan"), "failed: Rust panic in its Parquet row selection (process aborted)"
        return float("nan"), "failed: " + lines[-1].split("Parquet error: ")[-1][:90].replace("|", "/")
    return float(json.loads(proc.stdout.strip().splitlines()[-1])), None


if __name__ == "__main__":
    main()
