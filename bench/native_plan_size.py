"""Benchmark: what the native scan's file listing costs in the plan and in each task, at 100,000 files with DVs.

The native scan (dvlake/jvm/) takes each planned file's DV descriptor from the ``dvlake.scan.files`` read option: one
line per file. That option is part of the logical plan (over Spark Connect it travels in the plan the client
sends), is broadcast once to the executors, and must not be in the serialized scan every task deserializes
(Spark copies read options into the Hadoop conf the reader functions keep; the format strips it there).

A small real DV table is read with its own listing plus ``--files`` made-up lines shaped like real ones (a data
file and a DV file under a warehouse path), so the numbers are those of a table with that many files with DVs
without writing them. Measured: the listing's bytes, the scan's RDD as Spark's closure serializer writes it
(what each task deserializes), and the wall time of planning and reading (rows checked).

Run alone: ``.venv/bin/python bench/native_plan_size.py [--files 100000] [--write-md]``
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from typing import Any
from urllib.parse import quote

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HEADING = "## Native scan: the DV listing in the plan and in each task (bench/native_plan_size.py)"


def _fake_lines(n: int) -> str:
    """``n`` listing lines as long as a real table's (see dvlake/spark/native.py: listing)."""
    root = "/data/warehouse/sales/events"
    return "\n".join(
        f"{quote(f'{root}/part-{i % 1000:05d}-{uuid.UUID(int=i)}-c000.snappy.parquet', safe='')}\tf\t"
        f"{quote(f'{root}/deletion_vector_{uuid.UUID(int=i // 100)}.bin', safe='')}\t{1 + (i % 100) * 48}\t40\t3\t"
        for i in range(n))  # the last field: the file's partition values, none here


def _scan(plan: Any) -> Any:
    nodes = [plan]
    while nodes:
        node = nodes.pop()
        name = node.getClass().getName()
        if name.endswith("FileSourceScanExec"):
            return node
        if name.endswith("AdaptiveSparkPlanExec"):
            nodes.append(node.executedPlan())
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    raise RuntimeError("no file scan in the plan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--write-md", action="store_true")
    args = parser.parse_args()

    import dvlake
    from dvlake.spark import native
    from dvlake.spark.session import local_session

    spark = local_session("bench-native-plan-size", shuffle_partitions=2)
    work = tempfile.mkdtemp(prefix="dvlake-plan-size-")
    try:
        path = os.path.join(work, "t")
        dvlake.write(spark.range(10_000).coalesce(2), path, properties={"delta.enableDeletionVectors": "true"})
        dvlake.DeltaTable.forPath(spark, path).delete("id % 10 = 0")
        spark.conf.set(native.SETTING, "true")
        df = dvlake.read(spark, path)
        scan = _scan(df._jdf.queryExecution().executedPlan())
        own = str(scan.relation().options().get(native.FILES_OPTION).get())
        paths = [str(p) for p in scan.relation().location().inputFiles()]
        listing = own + "\n" + _fake_lines(args.files)
        t0 = time.perf_counter()
        big = native.reader(spark, df.schema, listing).load(paths)
        big_scan = _scan(big._jdf.queryExecution().executedPlan())
        plan_s = time.perf_counter() - t0
        jvm = spark._jvm
        assert jvm is not None
        task_bytes = len(jvm.org.apache.commons.lang3.SerializationUtils.serialize(big_scan.inputRDD()))
        t0 = time.perf_counter()
        rows = big.count()
        read_s = time.perf_counter() - t0
        assert rows == 9_000, rows
        t0 = time.perf_counter()
        assert df.count() == 9_000
        small_read_s = time.perf_counter() - t0
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)

    body = (
        f"A 2-file DV table read through the native scan with its own listing plus {args.files:,} made-up lines shaped "
        "like a real table's (data file and DV file under a warehouse path); local[2], 2 cores shared with other "
        f"work, {time.strftime('%Y-%m-%d')}.\n\n"
        "| measure | value |\n|---|---:|\n"
        f"| `dvlake.scan.files` listing (in the logical plan; over Connect, in the plan the client sends) | "
        f"{len(listing) / 1e6:.1f} MB |\n"
        f"| serialized scan RDD (what each task deserializes; the listing is broadcast once instead) | "
        f"{task_bytes / 1e3:.1f} KB |\n"
        f"| planning the read (driver parses the listing, broadcasts it) | {plan_s:.2f} s |\n"
        f"| reading it (count) / the same table with its own 2-line listing | {read_s:.2f} s / {small_read_s:.2f} s |\n")
    print(body)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md(HEADING, body)


if __name__ == "__main__":
    main()
