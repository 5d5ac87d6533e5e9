"""Benchmark: cost that grows with the work, not the table (issue 44): large logs, small work.

Per scale (``--files``, default 100,000 and 1,000,000 files, 20 % with DVs) two tables are built fast: a real
partition ``part = 'hot'`` of 10 Parquet files written by dvlake (``--rows`` rows), then the rest of the log written
directly as JSON commits plus a checkpoint (``bench/log_replay.py``'s shape: the data files of the other partitions
do not exist and are never read; only planning sees them). The ``dv`` table has DVs on the hot files (a DELETE) and
on 20 % of the others; the ``plain`` one has none. A third table holds the hot partition alone (10 files).

Cells, each the median of ``--repeat`` (the two sides of a ratio run alternately, ``paired_median_times``):

- snapshot load of the ``dv`` table: dvlake (log replay, cache off) beside delta-rs ``DeltaTable(path)``, and a load
  answered by the snapshot cache (``log/snapshot_cache.py``);
- a one-partition read (``condition="part = 'hot'"``, noop write) on the ``dv`` table over the same read on the
  ``plain`` one (target <= 1.2x);
- a DELETE touching the 10 hot files on the large ``dv`` table over the same DELETE on the 10-file table (target
  <= 2x; snapshot cache on, as a session running commands would have it);
- the read's analysed plan size (characters) at each scale: the proxy for what a Spark Connect client sends (target:
  flat in the number of DV files).

Run alone on a quiet machine: ``.venv/bin/python bench/table_scale.py [--files 100000,1000000] [--write-md]``.
``--small`` proves it works in a minute (2,000 files, one repeat; never written to BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import median_time, paired_median_times  # noqa: E402

HEADING = "## Cost at scale: large logs, small work (bench/table_scale.py)"
HOT_FILES = 10
PER_COMMIT = 10_000


def _phantom_add(i: int, dv: bool) -> dict[str, Any]:
    """A log-only add (its file never read) in one of 100 partitions; a DV on it when ``dv``."""
    add: dict[str, Any] = {"path": f"part=p{i % 100}/part-{i:07d}-{uuid.UUID(int=i)}.c000.snappy.parquet",
                           "partitionValues": {"part": f"p{i % 100}"}, "size": 123456, "modificationTime": 1700000000000,
                           "dataChange": True,
                           "stats": json.dumps({"numRecords": 1000, "minValues": {"id": i * 1000},
                                                "maxValues": {"id": i * 1000 + 999}, "nullCount": {"id": 0},
                                                "tightBounds": not dv})}
    if dv:
        add["deletionVector"] = {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": 1 + 45 * (i % 100),
                                 "sizeInBytes": 36, "cardinality": 2}
    return add


def _append_log(root: str, files: int, dvs: bool) -> None:
    """``files`` log-only adds after the table's last commit, in commits of ``PER_COMMIT``, a checkpoint, then five
    more commits (a checkpoint plus JSON commits, as a live table's log is)."""
    from dvlake.log.snapshot import Snapshot
    from dvlake.txn.transaction import checkpoint

    log = os.path.join(root, "_delta_log")
    version = Snapshot.load(root).version
    tail = min(5_000, files // 10)
    chunks = [(start, min(start + PER_COMMIT, files - tail)) for start in range(0, files - tail, PER_COMMIT)]
    chunks += [(files - tail + k * (tail // 5), files - tail + (k + 1) * (tail // 5)) for k in range(5)]
    for n, (start, end) in enumerate(chunks):
        version += 1
        lines = [{"commitInfo": {"timestamp": 1700000000000 + version, "operation": "WRITE"}}]
        lines += [{"add": _phantom_add(i, dvs and i % 5 == 0)} for i in range(start, end)]
        with open(os.path.join(log, f"{version:020d}.json"), "w") as f:
            f.write("\n".join(json.dumps(x) for x in lines) + "\n")
        if n == len(chunks) - 6:
            checkpoint(root, version)


def _hot(spark: Any, root: str, rows: int, dvs: bool) -> None:
    import dvlake

    df = spark.range(rows).selectExpr("id", "'hot' AS part").repartition(HOT_FILES)
    dvlake.write(df, root, partitionBy=["part"], properties={"delta.enableDeletionVectors": "true"})
    if dvs:
        dvlake.DeltaTable.forPath(spark, root).delete("part = 'hot' AND id % 10 = 0")


def connect_chars(df: Any) -> int:
    """What a Spark Connect client sends for ``df``'s file relations (their read options and root paths), in
    characters: the proxy for plan bytes over Connect (tests/spark/test_scan_listing.py asserts with it too)."""
    total = 0
    nodes = [df._jdf.queryExecution().analyzed()]
    while nodes:
        node = nodes.pop()
        if node.getClass().getName().endswith("LogicalRelation"):
            relation = node.relation()
            total += len(relation.options().values().mkString("\n"))
            total += len(relation.location().rootPaths().mkString("\n"))
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    return total


def _scale(spark: Any, work: str, files: int, rows: int, repeat: int) -> dict[str, float]:
    import dvlake
    from dvlake.log import snapshot_cache
    from dvlake.log.snapshot import Snapshot

    big, plain = os.path.join(work, f"dv{files}"), os.path.join(work, f"plain{files}")
    t0 = time.perf_counter()
    for root, dvs in ((big, True), (plain, False)):
        _hot(spark, root, rows, dvs)
        _append_log(root, files, dvs)
    print(f"built two {files:,}-file logs in {time.perf_counter() - t0:.1f} s", flush=True)
    out: dict[str, float] = {}
    snapshot_cache.enable(False)
    out["load"] = median_time(lambda: Snapshot.load(big), repeat)
    try:
        import deltalake

        out["load_rs"] = median_time(lambda: deltalake.DeltaTable(big), repeat)
    except ImportError:
        out["load_rs"] = float("nan")
    snapshot_cache.enable(True)
    Snapshot.load(big)
    out["load_cached"] = median_time(lambda: Snapshot.load(big), repeat)

    def hot_read(root: str) -> Any:
        return dvlake.read(spark, root, condition="part = 'hot'")

    expected = rows - (rows + 9) // 10
    assert hot_read(big).count() == expected and hot_read(plain).count() == rows
    out["read_dv"], out["read_plain"] = paired_median_times(
        lambda: hot_read(big).write.format("noop").mode("overwrite").save(),
        lambda: hot_read(plain).write.format("noop").mode("overwrite").save(), repeat)
    out["plan_chars"] = connect_chars(hot_read(big))
    out["plan_chars_plain"] = connect_chars(hot_read(plain))

    small = os.path.join(work, f"small{files}")
    _hot(spark, small, rows, True)
    counter = iter(range(1, 10_000))

    def delete(root: str) -> None:
        k = next(counter)  # other rows every run: each DELETE touches the 10 hot files and commits
        dvlake.DeltaTable.forPath(spark, root).delete(f"part = 'hot' AND id % 1000 = {k}")

    out["delete_big"], out["delete_small"] = paired_median_times(lambda: delete(big), lambda: delete(small), repeat)
    snapshot_cache.enable(None)
    for root in (big, plain, small):
        shutil.rmtree(root, ignore_errors=True)
    return out


def _markdown(results: dict[int, dict[str, float]], repeat: int, rows: int) -> str:
    lines = [f"Per scale: a real partition of {HOT_FILES} files ({rows:,} rows) plus a log-only rest, 20 % of all files "
             f"with DVs (the `plain` twin has none); median of {repeat}, the two sides of each ratio run alternately "
             f"(seconds in brackets); {time.strftime('%Y-%m-%d')}, local[2].", "",
             "| files | snapshot load / delta-rs (target <= 1.0x) | cached load s | one-partition read, DVs / none "
             "(target <= 1.2x) | 10-file DELETE, large / 10-file table (target <= 2x) | read plan chars, DVs / none |",
             "|---:|---:|---:|---:|---:|---:|"]
    for files, r in sorted(results.items()):
        lines.append(f"| {files:,} | {r['load'] / r['load_rs']:.2f}x ({r['load']:.2f} s) | {r['load_cached']:.3f} | "
                     f"{r['read_dv'] / r['read_plain']:.2f}x ({r['read_dv']:.2f} / {r['read_plain']:.2f}) | "
                     f"{r['delete_big'] / r['delete_small']:.2f}x ({r['delete_big']:.2f} / {r['delete_small']:.2f}) | "
                     f"{int(r['plan_chars']):,} / {int(r['plan_chars_plain']):,} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="100000,1000000", help="comma-separated scales (files in the log)")
    parser.add_argument("--rows", type=int, default=200_000, help="rows of the real hot partition")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="2,000 files, 20,000 rows, one repeat: a smoke run")
    parser.add_argument("--write-md", action="store_true")
    args = parser.parse_args()
    if args.small:
        args.files, args.rows, args.repeat, args.write_md = "2000", 20_000, 1, False

    from dvlake.spark.session import local_session

    spark = local_session("bench-table-scale", shuffle_partitions=2)
    work = tempfile.mkdtemp(prefix="dvlake-table-scale-")
    results: dict[int, dict[str, float]] = {}
    try:
        for files in (int(f) for f in args.files.split(",")):
            results[files] = _scale(spark, work, files, args.rows, args.repeat)
            print(json.dumps({files: results[files]}), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    body = _markdown(results, args.repeat, args.rows)
    print(body)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md(HEADING, body)


if __name__ == "__main__":
    main()
