"""Benchmark: the DV scan (``dvlake.spark.dv_scan.scan_files``) vs Spark's plain Parquet scan of the same files.

20M rows x 6 columns (ints, doubles, a string) in 8 Parquet files written by Spark. DVs written with
the codec's ``DeletionVectorWriter`` (random rows): none; every file at 0.1 %, 1 %, 10 %; 1 of 8
files at 1 %. For each: full materialization (``write.format("noop")``) and a 2-column sum, through
``scan_files`` vs ``spark.read.parquet`` of the same files. The two run alternately and each pair
gives a ratio (the machine is shared and its load drifts); the table shows the median ratio. Each
DataFrame is built inside the timed call (planning counts). Every scan_files result's row count is
checked against the DVs' cardinalities.

``--alternatives`` also times approaches that were measured and rejected (same harness, same files).

Run: ``.venv/bin/python bench/read_overhead.py [--rows N] [--repeat 3] [--alternatives] [--write-md]``
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np
import pyarrow as pa
import pyroaring

HEADING = "## Read overhead (bench/read_overhead.py)"
VARIANTS = [("no DV", 0.0, 0), ("0.1 % on 8/8 files", 0.001, 8), ("1 % on 8/8 files", 0.01, 8),
            ("10 % on 8/8 files", 0.10, 8), ("1 % on 1/8 files", 0.01, 1)]


def write_dvs(dv_root: str, data_files: list[tuple[str, int, int]], fraction: float, files_with_dv: int,
              seed: int = 7) -> dict[str, object]:
    """Random DVs on the first ``files_with_dv`` files, written by the codec's writer under ``dv_root``."""
    from dvlake.dv.store import DeletionVectorWriter

    rng = np.random.default_rng(seed)
    out = {}
    os.makedirs(dv_root, exist_ok=True)
    with DeletionVectorWriter(dv_root) as writer:
        for path, _, n in data_files[:files_with_dv]:
            rows = rng.choice(n, size=max(1, int(n * fraction)), replace=False).astype(np.uint64)
            out[path] = writer.add(pyroaring.BitMap64(np.sort(rows)))
    return out


def bench_frame(spark, rows: int):
    """The benchmark's rows: id and 5 columns (ints, doubles, a string) in 8 partitions (8 files when written)."""
    from pyspark.sql import functions as F

    return (spark.range(0, rows, numPartitions=8)
            .withColumn("a", (F.col("id") * 7 % 1000).cast("int")).withColumn("b", F.col("id") / 3.0)
            .withColumn("c", (F.col("id") % 97).cast("long")).withColumn("d", F.sqrt(F.col("id").cast("double")))
            .withColumn("s", F.concat(F.lit("v"), (F.col("id") % 10007).cast("string"))))


# --- rejected alternatives, kept runnable for the record (see BENCHMARKS.md) -------------------------

def _words64(table_root: str):
    """mapInArrow: (size, dv json) → one row per 64-row word with a deletion (key size << 26 | row >> 6)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dvlake.dv.descriptor import DeletionVectorDescriptor
        from dvlake.dv.roaring import to_numpy
        from dvlake.dv.store import load_bitmap

        for b in batches:
            for key, dv in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True):
                rows = to_numpy(load_bitmap(DeletionVectorDescriptor.from_json(json.loads(dv)), table_root))
                word = rows >> np.uint64(6)
                starts = np.concatenate(([0], np.flatnonzero(word[1:] != word[:-1]) + 1))
                bits = np.bitwise_or.reduceat(np.left_shift(np.uint64(1), rows & np.uint64(63)), starts)
                keys = (np.uint64(key) << np.uint64(26)) | word[starts]
                yield pa.RecordBatch.from_arrays([pa.array(keys.view(np.int64)), pa.array(bits.view(np.int64))],
                                                 names=["__bk", "__bw"])
    return run


def _chunks(table_root: str):
    """mapInArrow: (size, dv json) → (size, row >> 16, 1,024 words) per 65,536-row chunk with a deletion."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dvlake.dv.descriptor import DeletionVectorDescriptor
        from dvlake.dv.roaring import to_numpy
        from dvlake.dv.store import load_bitmap

        for b in batches:
            for key, dv in zip(b.column(0).to_pylist(), b.column(1).to_pylist(), strict=True):
                rows = to_numpy(load_bitmap(DeletionVectorDescriptor.from_json(json.loads(dv)), table_root))
                chunk = (rows >> np.uint64(16)).astype(np.int64)
                uniq, inv = np.unique(chunk, return_inverse=True)
                m = np.zeros((len(uniq), 1024), np.uint64)
                np.bitwise_or.at(m, (inv, ((rows >> np.uint64(6)) & np.uint64(1023)).astype(np.int64)),
                                 np.left_shift(np.uint64(1), rows & np.uint64(63)))
                words = pa.ListArray.from_arrays(pa.array(np.arange(0, len(uniq) * 1024 + 1, 1024, dtype=np.int32)),
                                                 pa.array(m.reshape(-1).view(np.int64)))
                yield pa.RecordBatch.from_arrays([pa.array(np.full(len(uniq), key, np.int64)), pa.array(uniq), words],
                                                 names=["__bk", "__bc", "__bw"])
    return run


def _alternative(kind: str):
    """scan_files-like callables for the rejected approaches (DV files only; DV-free files read plain)."""
    def scan(spark, files, data_schema, table_root):
        import pandas as pd
        from pyspark.sql import functions as F

        plain = [f.path for f in files if f.dv is None]
        dv = [f for f in files if f.dv is not None]
        parts = [spark.read.schema(data_schema).parquet(*plain)] if plain else []
        if dv:
            desc = spark.createDataFrame(pd.DataFrame({"k": [f.size for f in dv],
                                                       "dv": [json.dumps(f.dv.to_json()) for f in dv]}),
                                         "k long, dv string")
            df = spark.read.schema(data_schema).parquet(*[f.path for f in dv]).select(
                "*", F.col("_metadata.file_size").alias("__k"), F.col("_metadata.row_index").alias("__r"))
            r = F.col("__r")
            if kind == "outer join + filter, 64-row words":
                words = F.broadcast(desc.mapInArrow(_words64(table_root), "__bk long, __bw long"))
                df = df.join(words, F.shiftleft("__k", 26).bitwiseOR(F.shiftright(r, 6)) == words["__bk"], "left")
                df = df.filter(words["__bw"].isNull() | (F.getbit(words["__bw"], r.bitwiseAND(63).cast("int")) == 0))
            else:  # "outer join + filter, (size, 65,536-row chunk) key"
                chunks = F.broadcast(desc.mapInArrow(_chunks(table_root), "__bk long, __bc long, __bw array<long>"))
                df = df.join(chunks, (F.col("__k") == chunks["__bk"]) & (F.shiftright(r, 16) == chunks["__bc"]), "left")
                word = F.get(chunks["__bw"], F.shiftright(r, 6).bitwiseAND(1023).cast("int"))
                df = df.filter(chunks["__bw"].isNull() | (F.getbit(word, r.bitwiseAND(63).cast("int")) == 0))
            parts.append(df.select(*data_schema.names))
        out = parts[0]
        for p in parts[1:]:
            out = out.union(p)
        return out
    return scan


#: Measured while choosing (5M rows, 1 % on 8/8 files, executor CPU from the Spark REST API where noted);
#: kept with the table so a re-run does not lose them.
NOTES = """Also measured while choosing (5M rows, 1 % deleted on 8/8 files; wall ratios to the same plain scan):

- Floor: selecting `_metadata.row_index` + `_metadata.file_size` and filtering on them, no DV at all, costs 1.1-1.35x
  on noop and 1.3-1.7x on the sum (executor CPU +17 % / +60-90 %): Spark builds the `_metadata` struct per row. Reading
  the internal `_tmp_metadata_row_index` column instead saves ~5 % CPU but is an unsupported Spark internal (its
  semantics are a TODO in Spark, SPARK-40059, and it cannot be mixed with `_metadata.row_index`): rejected.
- Per-row DV test on top of that floor (executor CPU, noop / sum): anti join 64-word blocks on one long key +0.17 s /
  +0.16 s per 5M rows; 64-row words (long value, no array) and dense keys (file base from a CASE on the size +
  block, so Spark's dense long map) within noise of it; two-column key (size, 65,536-row chunk) ~10 % more.
  Cross join with a one-row broadcast of all bit words + CASE for the file base: ~15 % more CPU.
- Fixed cost per query (driver, measured from job timelines): building the frame 70-100 ms (plain 20-30 ms), the
  executor job decoding DVs (Python) ~100 ms, AQE re-planning after the broadcast ~80 ms. The descriptor frame from
  a Python list (`createDataFrame(list)`, an RDD) cost ~200 ms more than from pandas/Arrow (a local relation).
- Constant-folded literal bitsets (compact words collected from executors, a `split(...)::array<bigint>` literal,
  CASE on the file size): no broadcast stage, but the eager job plus planning a multi-MB literal cost more than
  they saved (1.5-2.1x noop at 5M), and Spark prints array literals in full in every plan: rejected.
- Row-level Python (Arrow UDF, mapInArrow over rows) and per-row `_metadata.file_path` keys: see the
  team's read-path probe notes (4-10x noop); not re-measured."""

ALTERNATIVES = ["outer join + filter, 64-row words", "outer join + filter, (size, 65,536-row chunk) key"]


def paired_ratios(plain: Callable[[], object], ours: Callable[[], object], repeat: int) -> tuple[float, float, float]:
    """Alternate plain/ours ``repeat`` times; (median ratio, median plain s, median ours s)."""
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2M rows, 3 repeats (a smoke run)")
    ap.add_argument("--alternatives", action="store_true", help="also time the rejected approaches")
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.rows = min(args.rows, 2_000_000)
    args.repeat = max(args.repeat, 3)

    import pyarrow.parquet as pq
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from dvlake.spark.dv_scan import ScanFile, scan_files
    from dvlake.spark.session import local_session

    spark = local_session("bench-read", shuffle_partitions=8, driver_memory="8g")
    tmp = tempfile.mkdtemp(prefix="dvlake-bench-read-")
    data_dir = os.path.join(tmp, "data")
    bench_frame(spark, args.rows).write.parquet(data_dir)
    data_files = [(p, os.path.getsize(p), pq.ParquetFile(p).metadata.num_rows)
                  for p in sorted(glob.glob(os.path.join(data_dir, "*.parquet")))]
    paths = [p for p, _, _ in data_files]
    schema = spark.read.parquet(paths[0]).schema
    no_partitions = StructType([])
    agg = [F.sum("a"), F.sum("b")]
    def alternative(kind: str) -> Callable:
        fn = _alternative(kind)
        return lambda files, root: fn(spark, files, schema, root)

    approaches = [("dvlake", lambda files, root: scan_files(spark, files, schema, no_partitions, root))]
    if args.alternatives:
        approaches += [(k, alternative(k)) for k in ALTERNATIVES]

    results = []  # (variant, approach, noop ratio, sum ratio, plain noop s, plain sum s)
    for label, fraction, nfiles in VARIANTS:
        dv_root = os.path.join(tmp, "dvs-" + label.replace(" ", "_").replace("%", "pct").replace("/", "of"))
        dvs = write_dvs(dv_root, data_files, fraction, nfiles) if nfiles else {}
        files = [ScanFile(p, size, n, dvs.get(p), ()) for p, size, n in data_files]
        expected = args.rows - sum(d.cardinality for d in dvs.values())
        for name, build in approaches:
            if name != "dvlake" and not dvs:
                continue
            got = build(files, dv_root).count()
            assert got == expected, (label, name, got, expected)
            build(files, dv_root).write.format("noop").mode("overwrite").save()  # warm-up
            spark.read.schema(schema).parquet(*paths).write.format("noop").mode("overwrite").save()
            def ours(build=build, files=files, dv_root=dv_root):
                return build(files, dv_root)

            def plain():
                return spark.read.schema(schema).parquet(*paths)

            noop = paired_ratios(lambda: plain().write.format("noop").mode("overwrite").save(),
                                 lambda: ours().write.format("noop").mode("overwrite").save(), args.repeat)
            total = paired_ratios(lambda: plain().agg(*agg).collect(), lambda: ours().agg(*agg).collect(), args.repeat)
            results.append((label, name, noop[0], total[0], noop[1], total[1]))
            print(f"{label:>20} | {name:<52}: noop {noop[0]:.2f}x  sum {total[0]:.2f}x "
                  f"(plain noop {noop[1]:.2f}s, plain sum {total[1]:.2f}s; ours {noop[2]:.2f}s / {total[2]:.2f}s)",
                  flush=True)
        shutil.rmtree(dv_root, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)

    intro = (f"{args.rows:,} rows x 6 columns in 8 Parquet files written by Spark; DVs of random rows written by "
             "the codec's writer. Ratio `scan_files` / `spark.read.schema(s).parquet(files)` (both with the explicit "
             "schema), each DataFrame built inside the timed call; median of "
             f"{args.repeat} ratios of alternating runs; {time.strftime('%Y-%m-%d')}, 2 cores shared with other work, "
             "local[2]. Every result's row count was checked. Targets: <= 1.25x noop at 1 %, <= 2x on the sum, "
             "<= 1.05x with no DVs.")
    chosen = ("**Chosen** (`dvlake`): DV-free files by a plain Parquet scan (unioned, no extra column); files with "
              "a DV keyed by `_metadata.file_size`, rows dropped by one broadcast left anti join on "
              "`file_size << 20 | _metadata.row_index >> 12` against the DVs' 4,096-row blocks (64 bit words "
              "each, built on executors by `mapInArrow` from the descriptors), the bit tested with `get` + `getbit`.")
    lines = [intro, "", chosen, "", "| DVs | approach | full materialization (noop) | 2-column sum |",
             "|---|---|---:|---:|"]
    lines += [f"| {label} | {name} | {n:.2f}x | {s:.2f}x |" for label, name, n, s, _, _ in results]
    table = "\n".join(lines + ["", NOTES])
    print(table)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md(HEADING, table)


if __name__ == "__main__":
    main()
