"""Benchmark: DELETE with deletion vectors vs copy-on-write (both dvlake) vs delta-rs, the blog's heatmap.

A table of 64 files x 100k rows x 6 columns. For each cell of the grid files touched
{1, 4, 16, 64} x rows deleted per touched file {1 row, 0.1 %, 1 %, 10 %}, the same DELETE runs
as DV DELETE and as CoW DELETE (dvlake), each on a fresh copy (hard-linked data files, copied
log), median of --repeat runs; plus delta-rs's ``DeltaTable.delete`` (copy-on-write) on an
identical table without the DV feature. Prints a markdown table, writes docs/delete_heatmap.png
and, with --write-md, the section in BENCHMARKS.md.

``--realistic`` uses files of the size real tables hold: 16 files of ~64 MB (1 GB), touching 1, 4 or
16 files and deleting 1 row, 0.01 %, 0.1 % or 1 % of each touched file (no heatmap).

Run: ``.venv/bin/python bench/delete.py [--repeat 3] [--realistic [--rows-per-file N]] [--write-md]``
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

FILES, ROWS = 64, 100_000
TOUCHED = [1, 4, 16, 64]
DENSITY = [("1 row", None), ("0.1 %", 1000), ("1 %", 100), ("10 %", 10)]
#: ``--realistic``: files of the size real Delta tables hold (>= 64 MB each; --rows-per-file sets it).
REALISTIC_FILES, REALISTIC_ROWS = 16, 2_400_000
REALISTIC_TOUCHED = [1, 4, 16]
REALISTIC_DENSITY = [("1 row", None), ("0.01 %", 10_000), ("0.1 %", 1000), ("1 %", 100)]


def condition(files: int, step: int | None) -> str:
    rows = "r = 0" if step is None else f"r % {step} = 0"
    return f"f < {files} AND {rows}"


def fresh_copy(src: str, dst: str) -> None:
    """Data files hard-linked (neither DELETE mode modifies them), the log copied."""
    shutil.copytree(src, dst, copy_function=os.link, ignore=shutil.ignore_patterns("_delta_log"))
    shutil.copytree(os.path.join(src, "_delta_log"), os.path.join(dst, "_delta_log"))


def written(root: str, before: set[str]) -> tuple[int, int]:
    files, total = 0, 0
    for d, _, names in os.walk(root):
        if "_delta_log" in d:
            continue
        for n in names:
            p = os.path.join(d, n)
            if p not in before and not n.startswith((".", "_")):
                files += 1
                total += os.path.getsize(p)
    return files, total


def listing(root: str) -> set[str]:
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-md", action="store_true")
    ap.add_argument("--no-deltars", action="store_true")
    ap.add_argument("--realistic", action="store_true",
                    help="16 files of ~64 MB (1 GB); 1, 4, 16 files x 1 row, 0.01, 0.1, 1 %% per file")
    ap.add_argument("--rows-per-file", type=int, default=None)
    ap.add_argument("--touched", default=None, help="comma-separated numbers of files touched to run (default: all)")
    ap.add_argument("--densities", default=None, help="comma-separated densities to run, as labelled (e.g. '1 row,0.01 %%')")
    args = ap.parse_args()
    global FILES, ROWS, TOUCHED, DENSITY
    if args.realistic:
        FILES, ROWS, TOUCHED, DENSITY = REALISTIC_FILES, REALISTIC_ROWS, REALISTIC_TOUCHED, REALISTIC_DENSITY
    if args.rows_per_file:
        ROWS = args.rows_per_file
    if args.touched:
        TOUCHED = [n for n in TOUCHED if str(n) in args.touched.split(",")]
    if args.densities:
        DENSITY = [d for d in DENSITY if d[0] in args.densities.split(",")]

    from pyspark.sql import functions as F

    from dvlake import DeltaTable, write
    from dvlake.config import DELETE_DVS_PERSISTENT
    from dvlake.spark.session import local_session

    spark = local_session("bench-delete", shuffle_partitions=8)
    tmp = tempfile.mkdtemp(prefix="dvlake-bench-delete-")
    base_dv, base_plain = os.path.join(tmp, "base-dv"), os.path.join(tmp, "base-plain")
    df = (spark.range(0, FILES * ROWS, numPartitions=FILES)
          .withColumn("f", (F.col("id") / ROWS).cast("int")).withColumn("r", (F.col("id") % ROWS).cast("int"))
          .withColumn("a", F.col("id") * 3).withColumn("b", F.col("id") / 7.0)
          .withColumn("s", F.concat(F.lit("user-"), (F.col("id") % 9973).cast("string"))))
    write(df, base_dv, properties={"delta.enableDeletionVectors": "true"})
    write(df, base_plain)
    data_sizes = [os.path.getsize(os.path.join(base_dv, n)) for n in os.listdir(base_dv) if n.endswith(".parquet")]
    print(f"{len(data_sizes)} data files, {statistics.median(data_sizes) / 2**20:.1f} MB median", flush=True)
    # warm up the JVM and Python workers on a throwaway copy
    warm = os.path.join(tmp, "warm")
    fresh_copy(base_dv, warm)
    DeltaTable.forPath(spark, warm).delete(condition(1, None))
    shutil.rmtree(warm)

    results = []
    run = 0
    for files in TOUCHED:
        for label, step in DENSITY:
            cond = condition(files, step)
            cell: dict[str, list] = {"dv": [], "cow": [], "rs": []}
            sizes: dict[str, tuple[int, int]] = {}
            for _ in range(args.repeat):
                for mode in ("dv", "cow"):
                    run += 1
                    path = os.path.join(tmp, f"run{run}")
                    fresh_copy(base_dv, path)
                    before = listing(path)
                    spark.conf.set(DELETE_DVS_PERSISTENT, "true" if mode == "dv" else "false")
                    t0 = time.perf_counter()
                    DeltaTable.forPath(spark, path).delete(cond)
                    cell[mode].append(time.perf_counter() - t0)
                    sizes[mode] = written(path, before)
                    shutil.rmtree(path)
                if not args.no_deltars:
                    import deltalake

                    run += 1
                    path = os.path.join(tmp, f"run{run}")
                    fresh_copy(base_plain, path)
                    t0 = time.perf_counter()
                    deltalake.DeltaTable(path).delete(cond)
                    cell["rs"].append(time.perf_counter() - t0)
                    shutil.rmtree(path)
            spark.conf.unset(DELETE_DVS_PERSISTENT)
            med = {k: statistics.median(v) if v else float("nan") for k, v in cell.items()}
            results.append({"files": files, "density": label, **med, "dv_files": sizes["dv"][0], "dv_bytes": sizes["dv"][1],
                            "cow_files": sizes["cow"][0], "cow_bytes": sizes["cow"][1]})
            r = results[-1]
            print(f"{files:>3} files, {label:>6}: DV {r['dv']:.2f}s  CoW {r['cow']:.2f}s  delta-rs {r['rs']:.2f}s  "
                  f"CoW/DV {r['cow'] / r['dv']:.1f}x  bytes {r['dv_bytes']:,} vs {r['cow_bytes']:,}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    table = render(results, args.repeat, statistics.median(data_sizes))
    print(table)
    if not args.realistic:
        heatmap(results)
    if args.write_md:
        from bench.common import update_benchmarks_md

        heading = "## DELETE: deletion vectors vs copy-on-write (bench/delete.py)"
        if args.realistic:
            heading = "## DELETE at realistic file sizes (bench/delete.py --realistic)"
        update_benchmarks_md(heading, table)


def render(results: list[dict], repeat: int, file_bytes: float) -> str:
    lines = [
        f"{FILES} files x {ROWS:,} rows x 6 columns ({file_bytes / 2**20:.0f} MB per file); median of {repeat}; "
        f"each run on a fresh copy; {time.strftime('%Y-%m-%d')}, 2 cores shared with other work, local[2].",
        "",
        "| files touched | rows deleted per file | CoW / DV time | delta-rs / DV time | DV bytes | CoW bytes | DV bytes / CoW | DV files | CoW files |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(f"| {r['files']} | {r['density']} | {r['cow'] / r['dv']:.1f}x | {r['rs'] / r['dv']:.1f}x | "
                     f"{r['dv_bytes']:,} | {r['cow_bytes']:,} | {100 * r['dv_bytes'] / max(r['cow_bytes'], 1):.3f} % | "
                     f"{r['dv_files']} | {r['cow_files']} |")
    return "\n".join(lines)


def heatmap(results: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    grid = np.array([[next(r["cow"] / r["dv"] for r in results if r["files"] == f and r["density"] == d)
                      for d, _ in DENSITY] for f in TOUCHED])
    fig, ax = plt.subplots(figsize=(6, 4.5))
    im = ax.imshow(grid, cmap="Greens", origin="lower")
    ax.set_xticks(range(len(DENSITY)), [d for d, _ in DENSITY])
    ax.set_yticks(range(len(TOUCHED)), [str(f) for f in TOUCHED])
    ax.set_xlabel("rows deleted per touched file")
    ax.set_ylabel("files touched (of 64)")
    ax.set_title("DELETE speed-up: copy-on-write time / DV time")
    for i in range(len(TOUCHED)):
        for j in range(len(DENSITY)):
            ax.text(j, i, f"{grid[i, j]:.1f}x", ha="center", va="center")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "delete_heatmap.png")
    fig.savefig(out, dpi=110)
    print(f"heatmap: {out}")


if __name__ == "__main__":
    main()
