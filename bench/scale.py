"""Benchmark: the read benchmark's table and a DELETE on it, local[2] vs a two-worker standalone cluster.

The same machine, the same 2 cores: the ratios show what separate executors cost (task launch
over RPC, executor JVMs and Python workers of their own, dvlake shipped as a zip and imported per
Python worker, broadcasts and shuffles over the network stack) rather than any speed-up.

The table: ``bench/read_overhead.py``'s frame (6 columns) written by dvlake as a DV-enabled Delta
table of 8 files. Per mode, in one subprocess each (a classic session on a cluster cannot share a
process with a local one), median of ``--repeat`` runs:

- plain Spark Parquet scan of the table's files, explicit schema (noop write, 2-column sum): the baseline;
- ``dvlake.read`` without DVs (noop, sum);
- DELETE ``id % 100 = 7`` (1 % of the rows, DVs on all 8 files), on a fresh copy of the table each run;
- ``dvlake.read`` with those DVs (noop, sum).

Run: ``.venv/bin/python bench/scale.py [--rows 4000000] [--repeat 3] [--write-md]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

HEADING = "## Local vs a standalone cluster (bench/scale.py)"
DELETE_CONDITION = "id % 100 = 7"
OPERATIONS = ["plain Parquet scan, noop", "plain Parquet scan, sum", "dvlake read (no DVs), noop",
              "dvlake read (no DVs), sum", "DELETE (1 % of rows, DVs on 8/8 files)",
              "dvlake read (DVs), noop", "dvlake read (DVs), sum"]


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(spark, table: str, work: Path, repeat: int) -> dict[str, float]:
    """Median seconds of every operation in ``OPERATIONS`` in this session."""
    import statistics

    from pyspark.sql import functions as F

    import dvlake
    from dvlake.log.snapshot import Snapshot

    files = [os.path.join(table, a.path) for a in Snapshot.load(table).add_files()]
    schema = dvlake.read(spark, table).schema  # the plain scan gets it too: no footer-reading schema inference
    agg = [F.sum("a"), F.sum("b")]

    def noop(df) -> None:
        df.write.format("noop").mode("overwrite").save()

    def plain():
        return spark.read.schema(schema).parquet(*files)

    times: dict[str, list[float]] = {op: [] for op in OPERATIONS}
    noop(dvlake.read(spark, table))  # warm-up: executors, Python workers, the zip import
    for i in range(repeat):
        times[OPERATIONS[0]].append(_timed(lambda: noop(plain())))
        times[OPERATIONS[1]].append(_timed(lambda: plain().agg(*agg).collect()))
        times[OPERATIONS[2]].append(_timed(lambda: noop(dvlake.read(spark, table))))
        times[OPERATIONS[3]].append(_timed(lambda: dvlake.read(spark, table).agg(*agg).collect()))
        copy = str(work / f"copy-{i}")
        shutil.copytree(table, copy)
        times[OPERATIONS[4]].append(_timed(lambda c=copy: dvlake.DeltaTable.forPath(spark, c).delete(DELETE_CONDITION)))
        times[OPERATIONS[5]].append(_timed(lambda c=copy: noop(dvlake.read(spark, c))))
        times[OPERATIONS[6]].append(_timed(lambda c=copy: dvlake.read(spark, c).agg(*agg).collect()))
        expected = plain().filter(f"NOT ({DELETE_CONDITION})").count()
        assert dvlake.read(spark, copy).count() == expected, "DELETE result differs from plain Spark"
        shutil.rmtree(copy)
    return {op: statistics.median(ts) for op, ts in times.items()}


def child(args: argparse.Namespace) -> None:
    """One mode's measurements in this process; JSON to ``args.out``."""
    work = Path(args.work)
    if args.master:
        from tests.cluster.scenarios import cluster_session

        spark = cluster_session(args.master, args.py_files, "768m", app_name="dvlake-bench-scale")
    else:
        from dvlake.spark.session import local_session

        spark = local_session("dvlake-bench-scale", shuffle_partitions=4)
    if args.build:
        import dvlake
        from bench.read_overhead import bench_frame

        dvlake.write(bench_frame(spark, args.rows), args.table, properties={"delta.enableDeletionVectors": "true"})
    result = measure(spark, args.table, work, args.repeat)
    spark.stop()
    Path(args.out).write_text(json.dumps(result))


def run_mode(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    subprocess.run([sys.executable, "-m", "bench.scale", "--child", "--out", out, *argv], check=True, cwd=ROOT, env=env)
    return json.loads(Path(out).read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-md", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--master", help=argparse.SUPPRESS)
    ap.add_argument("--py-files", help=argparse.SUPPRESS)
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--table", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return

    from tests.cluster import daemons

    work = Path(tempfile.mkdtemp(prefix="dvlake-bench-scale-"))
    table = str(work / "table")
    common = ["--rows", str(args.rows), "--repeat", str(args.repeat), "--table", table, "--work", str(work)]
    try:
        env = daemons.daemon_env()
        local = run_mode(common + ["--build"], env)
        zip_path, python = daemons.pack_dvlake(work), daemons.executor_python(work)
        cluster = daemons.start_standalone(work / "standalone", workers=2, worker_memory="1g")
        try:
            remote = run_mode(common + ["--master", cluster.master_url, "--py-files", str(zip_path)],
                              daemons.daemon_env({"PYSPARK_PYTHON": str(python)}))
        finally:
            cluster.stop()
        # local again after the cluster (local, cluster, local): the load of a shared machine drifts, and the
        # ratio is taken against the mean of the two local runs
        again = run_mode(common, env)
        local = {op: (local[op] + again[op]) / 2 for op in OPERATIONS}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    intro = (f"{args.rows:,} rows x 6 columns (bench/read_overhead.py's frame) as a DV-enabled Delta table of 8 files; "
             f"DELETE `{DELETE_CONDITION}` on a fresh copy each run. local[2] vs a standalone master + 2 workers "
             "(1 core, 1 GB each; executors on the same 2-core machine, dvlake shipped as a zip in "
             f"`spark.submit.pyFiles`); median of {args.repeat}, run local, cluster, local (local = mean of the two); "
             f"{time.strftime('%Y-%m-%d')}, machine shared with "
             "other work. The cluster has no more cores than local[2]: the ratio is the cost of separate executors.")
    lines = [intro, "", "| operation | cluster / local | local: x plain scan | cluster: x plain scan |",
             "|---|---:|---:|---:|"]
    for op, base in zip(OPERATIONS, [OPERATIONS[0], OPERATIONS[1]] * 2 + [None] + [OPERATIONS[0], OPERATIONS[1]],
                        strict=True):
        rel_l = f"{local[op] / local[base]:.2f}x" if base else ""
        rel_c = f"{remote[op] / remote[base]:.2f}x" if base else ""
        lines.append(f"| {op} | {remote[op] / local[op]:.2f}x | {rel_l} | {rel_c} |")
    table_md = "\n".join(lines)
    print(table_md)
    print(json.dumps({"local_s": local, "cluster_s": remote}, indent=1))
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md(HEADING, table_md)


if __name__ == "__main__":
    main()
