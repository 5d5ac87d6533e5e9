"""Benchmark: loading the snapshot of a 100k-file table, dvlake vs delta-rs, side by side.

The table is log-only (no data files are needed to replay a log): commits 0..79 add 1,250
files each, a checkpoint at 79, then 20 JSON commits that each give 1,000 files a new DV
(remove + add), so 20 % of the files carry DVs. Run: ``.venv/bin/python bench/log_replay.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import median_time  # noqa: E402
from dvlake.log.snapshot import Snapshot  # noqa: E402
from dvlake.txn.transaction import checkpoint  # noqa: E402

SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "part", "type": "integer", "nullable": True, "metadata": {}}]})


def _add(i: int, dv: dict | None = None) -> dict:
    stats = {"numRecords": 1000, "minValues": {"id": i * 1000}, "maxValues": {"id": i * 1000 + 999},
             "nullCount": {"id": 0}, "tightBounds": dv is None}
    add = {"path": f"part={i % 100}/part-{i:06d}-{uuid.UUID(int=i)}.c000.snappy.parquet",
           "partitionValues": {"part": str(i % 100)}, "size": 123456, "modificationTime": 1700000000000,
           "dataChange": True, "stats": json.dumps(stats)}
    if dv:
        add["deletionVector"] = dv
    return add


def build(root: str, files: int, commits_before: int, dv_commits: int, dv_per_commit: int) -> None:
    log = os.path.join(root, "_delta_log")
    os.makedirs(log)
    per = files // commits_before
    for v in range(commits_before):
        lines = [{"commitInfo": {"timestamp": 1700000000000 + v, "operation": "WRITE"}}]
        if v == 0:
            lines.append({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                                       "writerFeatures": ["deletionVectors"]}})
            lines.append({"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                                       "schemaString": SCHEMA, "partitionColumns": ["part"],
                                       "configuration": {"delta.enableDeletionVectors": "true"},
                                       "createdTime": 1700000000000}})
        lines += [{"add": _add(i)} for i in range(v * per, (v + 1) * per)]
        with open(os.path.join(log, f"{v:020d}.json"), "w") as f:
            f.write("\n".join(json.dumps(x) for x in lines) + "\n")
    checkpoint(root, commits_before - 1)
    for k in range(dv_commits):
        v = commits_before + k
        lines = [{"commitInfo": {"timestamp": 1700000100000 + v, "operation": "DELETE"}}]
        for j in range(dv_per_commit):
            i = k * dv_per_commit + j
            dv = {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": 1 + 45 * j,
                  "sizeInBytes": 36, "cardinality": 2}
            old = _add(i)
            rm = {k2: old[k2] for k2 in ("path", "partitionValues", "size")}
            rm.update({"deletionTimestamp": 1700000100000, "dataChange": True, "extendedFileMetadata": True})
            lines += [{"remove": rm}, {"add": _add(i, dv)}]
        with open(os.path.join(log, f"{v:020d}.json"), "w") as f:
            f.write("\n".join(json.dumps(x) for x in lines) + "\n")




def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    import deltalake

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "t")
        t0 = time.perf_counter()
        build(root, args.files, 80, 20, args.files // 100)
        print(f"built {args.files:,}-file table in {time.perf_counter() - t0:.1f}s")
        snap = Snapshot.load(root)
        dt = deltalake.DeltaTable(root)
        assert snap.num_files == args.files == len(dt.file_uris()), (snap.num_files, len(dt.file_uris()))
        assert snap.dv_count() == args.files // 5
        ours = median_time(lambda: Snapshot.load(root), args.repeat)
        theirs = median_time(lambda: deltalake.DeltaTable(root), args.repeat)
        theirs_files = median_time(lambda: deltalake.DeltaTable(root).file_uris(), args.repeat)
        table = "\n".join([
            f"{args.files:,} files (checkpoint + 20 JSON commits, 20 % with DVs); median of {args.repeat}; "
            f"{time.strftime('%Y-%m-%d')}, target <= 2x delta-rs.", "",
            "| snapshot load | median s | dvlake / this |", "|---|---:|---:|",
            f"| dvlake `Snapshot.load` | {ours:.3f} | |",
            f"| delta-rs `DeltaTable(path)` | {theirs:.3f} | {ours / theirs:.2f}x |",
            f"| delta-rs `DeltaTable(path).file_uris()` | {theirs_files:.3f} | {ours / theirs_files:.2f}x |"])
        print(table)
        if args.write_md:
            from bench.common import update_benchmarks_md

            update_benchmarks_md(f"## Snapshot load, {args.files:,} files (bench/log_replay.py)", table)


if __name__ == "__main__":
    main()
