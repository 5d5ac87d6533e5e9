"""Benchmark: VACUUM of a 100,000-file table with deletion vectors, dvlake vs delta-rs, on identical copies.

The table is built cheaply (tiny stand-in files, actions written directly; VACUUM never reads data):
commit 0 adds N files in 10 partitions, commit 1 removes half of them, commit 2 gives a tenth of
the files DVs packed 100 per DV file (set A), commit 3 replaces those DVs (set B), so set A is
stale and set B is live; a checkpoint at 3. Every file, commit and tombstone is 30 days old, so
both tools' default 7-day retention applies. Expected deletions: the N/2 removed data files and
the set-A DV files. The run also reports whether delta-rs deleted any *live* DV file (a table it
would leave unreadable). Run: ``.venv/bin/python bench/vacuum.py [--files N] [--write-md]``.
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import update_benchmarks_md  # noqa: E402
from dvlake.commands.maintenance.vacuum import vacuum  # noqa: E402
from dvlake.dv import z85  # noqa: E402
from dvlake.txn.transaction import checkpoint  # noqa: E402

DAY = 86_400
OLD = time.time() - 30 * DAY
OLD_MS = int(OLD * 1000)
DVS_PER_FILE = 100
SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True, "metadata": {}},
    {"name": "part", "type": "integer", "nullable": True, "metadata": {}}]})


def _path(i: int) -> str:
    return f"part={i % 10}/part-{i:06d}-{uuid.UUID(int=i)}.c000.snappy.parquet"


def _add(i: int, dv: dict | None = None) -> dict:
    add = {"path": _path(i), "partitionValues": {"part": str(i % 10)}, "size": 8, "modificationTime": OLD_MS,
           "dataChange": True, "stats": json.dumps({"numRecords": 1000, "tightBounds": dv is None})}
    if dv:
        add["deletionVector"] = dv
    return add


def _remove(add: dict) -> dict:
    rm = {"path": add["path"], "deletionTimestamp": OLD_MS, "dataChange": True, "size": add["size"],
          "partitionValues": add["partitionValues"]}
    if "deletionVector" in add:
        rm["deletionVector"] = add["deletionVector"]
    return rm


def _dv_set(root: str, count: int) -> tuple[list[dict], list[str]]:
    """``count`` DV descriptors packed DVS_PER_FILE per DV file, and the DV files' relative paths."""
    descs, files = [], []
    for k in range(0, count, DVS_PER_FILE):
        u = uuid.uuid4()
        rel = f"deletion_vector_{u}.bin"
        files.append(rel)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(b"\x01" + b"\x00" * (DVS_PER_FILE * 20))
        for j in range(min(DVS_PER_FILE, count - k)):
            descs.append({"storageType": "u", "pathOrInlineDv": z85.encode_uuid(u), "offset": 1 + j * 20,
                          "sizeInBytes": 12, "cardinality": 1})
    return descs, files


def _write_commit(log: str, version: int, actions: list[dict]) -> None:
    p = os.path.join(log, f"{version:020d}.json")
    lines = [{"commitInfo": {"timestamp": OLD_MS + version, "operation": "WRITE"}}, *actions]
    with open(p, "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")


def build(root: str, n: int) -> tuple[list[str], list[str]]:
    """The table; returns (stale DV files, live DV files)."""
    log = os.path.join(root, "_delta_log")
    os.makedirs(log)
    for p in range(10):
        os.makedirs(os.path.join(root, f"part={p}"))
    for i in range(n):
        with open(os.path.join(root, _path(i)), "wb") as f:
            f.write(b"PAR1PAR1")
    adds = [_add(i) for i in range(n)]
    _write_commit(log, 0, [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                      "partitionColumns": ["part"], "configuration": {"delta.enableDeletionVectors": "true"},
                      "createdTime": OLD_MS}},
        *({"add": a} for a in adds)])
    _write_commit(log, 1, [{"remove": _remove(adds[i])} for i in range(n // 2, n)])
    with_dvs = list(range(n // 10))  # a tenth of all files, all among the live half
    set_a, stale_files = _dv_set(root, len(with_dvs))
    adds_a = [_add(i, set_a[k]) for k, i in enumerate(with_dvs)]
    _write_commit(log, 2, [*({"remove": _remove(adds[i])} for i in with_dvs), *({"add": a} for a in adds_a)])
    set_b, live_files = _dv_set(root, len(with_dvs))
    adds_b = [_add(i, set_b[k]) for k, i in enumerate(with_dvs)]
    _write_commit(log, 3, [*({"remove": _remove(a)} for a in adds_a), *({"add": a} for a in adds_b)])
    checkpoint(root, 3)
    for d, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(d, name), (OLD, OLD))
        os.utime(d, (OLD, OLD))
    return stale_files, live_files


def _count_files(root: str) -> int:
    return sum(len([n for n in names if not n.startswith(".")]) for d, _, names in os.walk(root) if "_delta_log" not in d)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    import deltalake

    with tempfile.TemporaryDirectory(prefix="dvlake-bench-vacuum-") as tmp:
        ours, full_rs, lite_rs = (os.path.join(tmp, n) for n in ("ours", "rs-full", "rs-default"))
        t0 = time.perf_counter()
        stale_dvs, live_dvs = build(ours, args.files)
        shutil.copytree(ours, full_rs)  # copy2 keeps the mtimes
        shutil.copytree(ours, lite_rs)
        print(f"built 3 x {_count_files(ours)} files in {time.perf_counter() - t0:.1f}s", flush=True)

        t0 = time.perf_counter()
        result = vacuum(None, ours)
        ours_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        deleted_full = deltalake.DeltaTable(full_rs).vacuum(dry_run=False, enforce_retention_duration=False, full=True)
        full_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        deleted_lite = deltalake.DeltaTable(lite_rs).vacuum(dry_run=False, enforce_retention_duration=False)
        lite_s = time.perf_counter() - t0

        def dv_damage(root: str) -> tuple[int, int]:
            return (sum(not os.path.exists(os.path.join(root, f)) for f in live_dvs),
                    sum(os.path.exists(os.path.join(root, f)) for f in stale_dvs))

        ours_dmg, full_dmg, lite_dmg = dv_damage(ours), dv_damage(full_rs), dv_damage(lite_rs)
        assert ours_dmg == (0, 0), "dvlake's VACUUM got the DV files wrong"
        expected = args.files // 2 + len(stale_dvs)
        rs = f"delta-rs {deltalake.__version__} `vacuum(dry_run=False, enforce_retention_duration=False"
        lines = [
            f"Table: {args.files:,} data files in 10 partitions, half removed 30 days ago; a tenth of the files "
            f"have DVs, {DVS_PER_FILE} per DV file: {len(live_dvs)} live DV files, {len(stale_dvs)} stale ones; "
            f"a checkpoint at the last version. Both tools use the default 7-day retention (everything is 30 days "
            f"old). Expected deletions: {expected:,}.",
            "",
            "| tool | time | files deleted | live DV files deleted | stale DV files left |",
            "|---|---|---|---|---|",
            f"| dvlake `vacuum()` (FULL, 16 threads) | {ours_s:.2f} s | {result.num_deleted:,} | {ours_dmg[0]} | "
            f"{ours_dmg[1]} |",
            f"| {rs}, full=True)` | {full_s:.2f} s | {len(deleted_full):,} | {full_dmg[0]} | {full_dmg[1]} |",
            f"| {rs})` (its default, lite) | {lite_s:.2f} s | {len(deleted_lite):,} | {lite_dmg[0]} | {lite_dmg[1]} |",
            "",
            f"Ratio dvlake / delta-rs full: **{ours_s / full_s:.2f}x** (one run each, side by side, 2 shared cores; "
            "all times include loading the snapshot).",
            "",
            ("delta-rs (full) deleted live DV files: the table it leaves cannot be read (every file with a DV in such "
             "a file fails)." if full_dmg[0] else "delta-rs (full) deleted no live DV file.")
            + (f" It left {full_dmg[1]} stale DV files behind." if full_dmg[1] else " It removed the stale DV files too.")
            + f" Its default (lite) mode deleted {len(deleted_lite):,} files: it only considers tombstones still in "
            "the snapshot, and the checkpoint dropped the expired ones (as delta-spark's checkpoints do).",
        ]
        body = "\n".join(lines)
        print(body)
        if args.write_md:
            update_benchmarks_md("VACUUM, 100,000 files with DVs (bench/vacuum.py)", body)


if __name__ == "__main__":
    main()
