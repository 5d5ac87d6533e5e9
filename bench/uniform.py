"""Benchmark: UniForm conversion time per commit relative to the commit itself, at 100 and 10,000 files.

The table: N small Parquet files (1,000 rows each, written with pyarrow under column mapping, field
ids in the files) committed by dvlake's log-level writer with ``numRecords``/min/max stats and a
checkpoint, deletion vectors enabled; ``dvlake uniform sync`` publishes its first Iceberg snapshot.
Then, ``--repeat`` times: a real DV DELETE through Spark touching 3 files (stats prune the rest),
timed, followed by the conversion of that one commit, timed separately:

- *hook*: what the commit hook runs (``sync`` with the transaction's metadata): the commit's own
  actions against the state the previous conversion left in this process;
- *hook, cold*: the same after dropping that state (as in a new process: the manifest list and each manifest's
  key sidecar are read, and only the manifests the commit rewrites);
- *sync, cold*: what ``dvlake uniform sync PATH`` runs, state dropped (it loads the Delta snapshot as well).

Overhead = conversion / DELETE wall time (median of the repeats; the cold rows time one commit each).
Run: ``.venv/bin/python bench/uniform.py [--files 100 10000] [--repeat 5] [--write-md]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROWS = 1000
TOUCHED = 3
HEADING = "## UniForm conversion per commit (bench/uniform.py)"


def build(root: str, files: int) -> None:
    """A column-mapped DV table of ``files`` files, ids ``[i*ROWS, (i+1)*ROWS)`` in file i, checkpointed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dvlake.commands.writes.write import create_table
    from dvlake.log.actions import AddFile
    from dvlake.log.schema import physical_name
    from dvlake.log.snapshot import Snapshot
    from dvlake.txn.transaction import OptimisticTransaction, checkpoint

    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "v", "type": "integer", "nullable": True, "metadata": {}}]}
    create_table(root, schema, (), {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"})
    snap = Snapshot.load(root)
    cols = [(physical_name(f, "name"), f["metadata"]["delta.columnMapping.id"]) for f in snap.schema["fields"]]
    arrow_schema = pa.schema([pa.field(cols[0][0], pa.int64(), metadata={b"PARQUET:field_id": str(cols[0][1])}),
                              pa.field(cols[1][0], pa.int32(), metadata={b"PARQUET:field_id": str(cols[1][1])})])
    adds = []
    for i in range(files):
        name = f"part-{i:05d}.parquet"
        ids = pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())
        pq.write_table(pa.Table.from_arrays([ids, pa.array([j % 7 for j in range(ROWS)], pa.int32())],
                                            schema=arrow_schema), os.path.join(root, name))
        stats = {"numRecords": ROWS, "minValues": {cols[0][0]: i * ROWS, cols[1][0]: 0},
                 "maxValues": {cols[0][0]: (i + 1) * ROWS - 1, cols[1][0]: 6},
                 "nullCount": {cols[0][0]: 0, cols[1][0]: 0}, "tightBounds": True}
        adds.append(AddFile(path=name, partition_values={}, size=os.path.getsize(os.path.join(root, name)),
                            modification_time=int(time.time() * 1000), stats=json.dumps(stats)))
    version = OptimisticTransaction(root, snap).commit(adds, "WRITE")
    checkpoint(root, version)


def run(spark, tmp: str, files: int, repeat: int) -> dict[str, float]:
    from dvlake import DeltaTable
    from dvlake.log.snapshot import Snapshot
    from dvlake.storage.base import storage_for
    from dvlake.uniform import state
    from dvlake.uniform.convert import metadata_location, sync

    root = os.path.join(tmp, f"t{files}")
    t0 = time.perf_counter()
    build(root, files)
    print(f"{files} files built in {time.perf_counter() - t0:.1f}s", flush=True)
    storage = storage_for(root)
    t0 = time.perf_counter()
    sync(root)
    first = time.perf_counter() - t0
    step = max(1, files // (TOUCHED * (repeat + 3)))
    nxt = iter(range(0, files, step))

    def delete() -> tuple[float, int]:
        picked = [next(nxt) for _ in range(TOUCHED)]
        cond = " OR ".join(f"id = {i * ROWS + 7}" for i in picked)
        t = time.perf_counter()
        DeltaTable.forPath(spark, root).delete(cond)
        return time.perf_counter() - t, Snapshot.load(root).version

    def convert(version: int, cold: bool, hook: bool) -> float:
        metadata = Snapshot.load(root, version=version).metadata  # the committing transaction holds it
        if cold:
            state.forget(root)
        t = time.perf_counter()
        if hook:
            sync(root, storage, version=version, metadata=metadata)
        else:
            sync(root)
        elapsed = time.perf_counter() - t
        assert storage.exists(metadata_location(root, version)), f"version {version} was not converted"
        return elapsed

    commit, hook = [], []
    for _ in range(repeat):
        c, v = delete()
        commit.append(c)
        hook.append(convert(v, cold=False, hook=True))
    c, v = delete()
    hook_cold = convert(v, cold=True, hook=True)
    commit.append(c)
    c, v = delete()
    sync_cold = convert(v, cold=True, hook=False)
    commit.append(c)
    shutil.rmtree(root, ignore_errors=True)
    return {"files": files, "first": first, "commit": statistics.median(commit), "hook": statistics.median(hook),
            "hook_cold": hook_cold, "sync_cold": sync_cold}


def render(results: list[dict[str, float]], repeat: int) -> str:
    lines = [f"A DV DELETE touching {TOUCHED} files of a column-mapped table with files of {ROWS:,} rows (local[2]), "
             f"then the conversion of that one commit to an Iceberg snapshot; median of {repeat} commits (cold rows: "
             "one commit each). Overhead = conversion / DELETE wall time.", "",
             "| files | first sync (whole table) | DELETE | hook (warm) | overhead | hook, cold | overhead | "
             "`uniform sync`, cold | overhead |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        c = r["commit"]
        lines.append(f"| {int(r['files']):,} | {r['first']:.2f} s | {c:.2f} s | {r['hook'] * 1000:.0f} ms | "
                     f"{r['hook'] / c:.0%} | {r['hook_cold'] * 1000:.0f} ms | {r['hook_cold'] / c:.0%} | "
                     f"{r['sync_cold'] * 1000:.0f} ms | {r['sync_cold'] / c:.0%} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, nargs="+", default=[100, 10_000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()

    from dvlake import DeltaTable
    from dvlake.spark.session import local_session

    spark = local_session("bench-uniform", shuffle_partitions=8)
    tmp = tempfile.mkdtemp(prefix="dvlake-bench-uniform-")
    warm = os.path.join(tmp, "warm")  # JVM and Python workers warmed up on a throwaway table
    build(warm, 4)
    DeltaTable.forPath(spark, warm).delete("id = 1")
    shutil.rmtree(warm)
    results = [run(spark, tmp, n, args.repeat) for n in args.files]
    shutil.rmtree(tmp, ignore_errors=True)
    table = render(results, args.repeat)
    print(table)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md(HEADING, table)


if __name__ == "__main__":
    main()
