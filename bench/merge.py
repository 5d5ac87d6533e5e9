"""Benchmark: UPDATE and upsert-MERGE with deletion vectors vs copy-on-write (both dvlake) vs delta-rs.

A table of 16 files (``--rows-per-file`` rows x 6 columns each; the file size is printed and written
into the note). For each fraction of rows {0.01 %, 0.1 %, 1 %, 10 %}, spread over all files
(``id % N = 0``):

- UPDATE ``SET a = a + 1, s = 'updated' WHERE id % N = 0``;
- MERGE of a source holding those rows with new values plus as many new ids (an upsert:
  ``WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *``);

each as DV and as CoW (dvlake), on a fresh copy every run (hard-linked data files, copied log), median
of ``--repeat`` runs; plus delta-rs's ``update`` / ``merge`` (copy-on-write) on an identical table
without the DV feature. Prints a markdown table and, with ``--write-md``, the section in BENCHMARKS.md.

Run: ``.venv/bin/python bench/merge.py [--rows-per-file 1000000] [--repeat 3] [--write-md]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.delete import fresh_copy, listing, written  # noqa: E402

FILES = 16
FRACTIONS = [("0.01 %", 10_000), ("0.1 %", 1000), ("1 %", 100), ("10 %", 10)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows-per-file", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-md", action="store_true")
    ap.add_argument("--no-deltars", action="store_true")
    ap.add_argument("--fractions", default=",".join(label.split()[0] for label, _ in FRACTIONS),
                    help="comma-separated percentages to run (default: all of 0.01,0.1,1,10)")
    ap.add_argument("--commands", default="UPDATE,MERGE", help="comma-separated: UPDATE, MERGE or both")
    ap.add_argument("--java-options", default="",
                    help="extra JVM options of the driver (local[2]: the executors too), e.g. -XX:PerMethodTrapLimit=0")
    ap.add_argument("--fresh-plans", action="store_true",
                    help="touch rows id % N = k with k the repetition (from 1), so every run is a plan Spark has not run yet "
                         "(as a user's next command with new literals: its generated code is new to the JVM)")
    args = ap.parse_args()

    import pyarrow as pa
    from pyspark.sql import functions as F

    from dvlake import DeltaTable, write
    from dvlake.config import MERGE_DVS_PERSISTENT, UPDATE_DVS_PERSISTENT
    from dvlake.spark.session import local_session

    rows = args.rows_per_file
    total = FILES * rows
    spark = local_session("bench-merge", shuffle_partitions=8,
                          extra_conf={"spark.driver.extraJavaOptions": args.java_options} if args.java_options else None)
    tmp = tempfile.mkdtemp(prefix="dvlake-bench-merge-")
    base_dv, base_plain = os.path.join(tmp, "base-dv"), os.path.join(tmp, "base-plain")

    def columns(df):
        return (df.withColumn("a", F.col("id") * 3).withColumn("b", F.col("id") / 7.0)
                .withColumn("s", F.concat(F.lit("user-"), (F.col("id") % 9973).cast("string")))
                .withColumn("t", F.expr("uuid()")).withColumn("d", (F.col("id") % 1000).cast("int")))

    df = columns(spark.range(0, total, numPartitions=FILES))
    write(df, base_dv, properties={"delta.enableDeletionVectors": "true"})
    write(df, base_plain)
    file_mb = statistics.mean(os.path.getsize(os.path.join(base_dv, n)) for n in os.listdir(base_dv)
                              if n.endswith(".parquet")) / 2**20

    def source(step: int, k: int = 0):
        """Matched rows (id % step = k) with new values, plus as many new ids past the end."""
        n_new = max(1, total // step)
        matched = spark.range(k, total, step)
        new = spark.range(total, total + n_new)
        return columns(matched.union(new)).withColumn("s", F.lit("merged"))

    def dv_update(path: str, step: int, k: int = 0) -> None:
        DeltaTable.forPath(spark, path).update(f"id % {step} = {k}", {"a": "a + 1", "s": "'updated'"})

    def dv_merge(path: str, step: int, k: int = 0) -> None:
        (DeltaTable.forPath(spark, path).alias("t").merge(source(step, k).alias("s"), "t.id = s.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    def rs_update(path: str, step: int, k: int = 0) -> None:
        import deltalake

        deltalake.DeltaTable(path).update(updates={"a": "a + 1", "s": "'updated'"}, predicate=f"id % {step} = {k}")

    def rs_merge(path: str, step: int, src: pa.Table) -> None:
        import deltalake

        (deltalake.DeltaTable(path).merge(source=src, predicate="t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_update_all().when_not_matched_insert_all().execute())

    # Warm up the JVM and Python workers on throwaway copies: each command measured, DV three times and copy-on-write
    # once, so the JIT has compiled the Parquet reader's and writer's shared code before the first cell (one warm-up
    # run left the first cell's DV runs 15-25 % slower than the next cell's: 2.48 → 2.13 s over its five runs).
    # With --fresh-plans the warm-up's literals (k = 9997..9999 of id % 10000) are none a measured run uses.
    warm_ks = [9_997, 9_998, 9_999] if args.fresh_plans else [0, 0, 0]
    for command in args.commands.upper().split(","):
        key = UPDATE_DVS_PERSISTENT if command == "UPDATE" else MERGE_DVS_PERSISTENT
        for mode, k in [("dv", k) for k in warm_ks] + [("cow", warm_ks[-1])]:
            warm = os.path.join(tmp, "warm")
            fresh_copy(base_dv, warm)
            spark.conf.set(key, "true" if mode == "dv" else "false")
            (dv_update if command == "UPDATE" else dv_merge)(warm, 10_000, k)
            shutil.rmtree(warm)
        spark.conf.unset(key)

    results = []
    run = 0
    wanted = set(args.fractions.split(","))
    for command in args.commands.upper().split(","):
        key = UPDATE_DVS_PERSISTENT if command == "UPDATE" else MERGE_DVS_PERSISTENT
        for label, step in [(label, step) for label, step in FRACTIONS if label.split()[0] in wanted]:
            cell: dict[str, list[float]] = {"dv": [], "cow": [], "rs": []}
            sizes: dict[str, tuple[int, int]] = {}
            for rep in range(args.repeat):
                k = rep + 1 if args.fresh_plans else 0  # k = 0 is the warm-up's plan
                src_arrow = source(step, k).toArrow() if command == "MERGE" and not args.no_deltars else None
                for mode in ("dv", "cow"):
                    run += 1
                    path = os.path.join(tmp, f"run{run}")
                    fresh_copy(base_dv, path)
                    before = listing(path)
                    spark.conf.set(key, "true" if mode == "dv" else "false")
                    t0 = time.perf_counter()
                    (dv_update if command == "UPDATE" else dv_merge)(path, step, k)
                    cell[mode].append(time.perf_counter() - t0)
                    sizes[mode] = written(path, before)
                    shutil.rmtree(path)
                if not args.no_deltars:
                    run += 1
                    path = os.path.join(tmp, f"run{run}")
                    fresh_copy(base_plain, path)
                    t0 = time.perf_counter()
                    if command == "UPDATE":
                        rs_update(path, step, k)
                    else:
                        rs_merge(path, step, src_arrow)
                    cell["rs"].append(time.perf_counter() - t0)
                    shutil.rmtree(path)
            spark.conf.unset(key)
            med = {k: statistics.median(v) if v else float("nan") for k, v in cell.items()}
            results.append({"command": command, "fraction": label, **med, "dv_bytes": sizes["dv"][1],
                            "cow_bytes": sizes["cow"][1], "dv_files": sizes["dv"][0], "cow_files": sizes["cow"][0]})
            r = results[-1]
            print(f"{command} {label:>7}: DV {r['dv']:.2f}s  CoW {r['cow']:.2f}s  delta-rs {r['rs']:.2f}s  "
                  f"CoW/DV {r['cow'] / r['dv']:.1f}x  bytes {r['dv_bytes']:,} vs {r['cow_bytes']:,}", flush=True)
            print("   runs: " + "  ".join(f"{k} " + " ".join(f"{x:.2f}" for x in v) for k, v in cell.items() if v), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    table = render(results, args.repeat, rows, file_mb)
    print(table)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md("## UPDATE and MERGE: deletion vectors vs copy-on-write (bench/merge.py)", table)


def render(results: list[dict], repeat: int, rows: int, file_mb: float) -> str:
    lines = [
        f"16 files x {rows:,} rows x 7 columns ({file_mb:.1f} MB per file; the issue asks for at least 40 MB, which "
        f"the default 1,000,000 rows per file gives); rows spread over all files; median of {repeat}; "
        f"each run on a fresh copy; {time.strftime('%Y-%m-%d')}, local[2]. MERGE is an upsert: a source of the "
        "touched rows plus as many new ids.",
        "",
        "| command | rows touched | DV s | CoW s | CoW / DV time | delta-rs / DV time | DV bytes | CoW bytes | "
        "DV bytes / CoW | DV files | CoW files |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r['command']} | {r['fraction']} | {r['dv']:.1f} | {r['cow']:.1f} | {r['cow'] / r['dv']:.1f}x | "
                     f"{r['rs'] / r['dv']:.1f}x | {r['dv_bytes']:,} | {r['cow_bytes']:,} | "
                     f"{100 * r['dv_bytes'] / max(r['cow_bytes'], 1):.2f} % | {r['dv_files']} | {r['cow_files']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
