"""Commits on S3 (moto) and Azure Blob / ADLS (Azurite) through dvlake's own transaction: concurrent writers in
separate processes, writers killed around the conditional write, and DV commits (DELETE / UPDATE / MERGE shapes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyroaring
import pytest

from dvlake.commands.writes.write import create_table
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import DeletionVectorWriter, load_bitmap
from dvlake.log.actions import AddFile
from dvlake.log.snapshot import Snapshot
from dvlake.storage import storage_for
from dvlake.storage.objectstore import ObjectStoreStorage
from dvlake.txn.transaction import OptimisticTransaction
from tests.objectstore.conftest import Store, child_env
from tests.objectstore.writer import data_file

pytestmark = pytest.mark.objectstore

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
#: Four writer processes race for every version (60 in all: six checkpoints, the losers rebasing over the winners);
#: more commits per writer make the same race longer, not different.
WRITERS, COMMITS = 4, 15
RUN_TIMEOUT_S = float(os.environ.get("DVLAKE_OBJECTSTORE_RUN_TIMEOUT", "600"))


def writer_cmd(root: str, name: str, commits: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "tests.objectstore.writer", root, name, str(commits), *extra]


def log_names(root: str) -> list[str]:
    return sorted(f.path.rsplit("/", 1)[1] for f in storage_for(root).list_dir(f"{root}/_delta_log"))


def test_storage_is_the_object_store_one(store: Store) -> None:
    s = storage_for(store.root())
    assert isinstance(s, ObjectStoreStorage) and s.log_store.is_safe_for_concurrent_writers


def test_four_processes_commit_at_once_and_none_is_lost(store: Store) -> None:
    root = store.root()
    assert create_table(root, SCHEMA, [], {"delta.enableDeletionVectors": "true"}) == 0
    start_at = f"{time.time() + 3:.3f}"  # after every child has imported dvlake
    procs = [subprocess.Popen(writer_cmd(root, f"w{n}", COMMITS, "--start-at", start_at), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=child_env(store), cwd=Path(__file__).resolve().parents[2])
             for n in range(WRITERS)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=RUN_TIMEOUT_S)
        assert p.returncode == 0, err.decode()[-3000:]
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    won = sorted(v for r in results for v in r["versions"])
    assert won == list(range(1, WRITERS * COMMITS + 1))  # contiguous, each version won exactly once
    assert sum(r["rebased_over"] for r in results) > 0  # writers did race: losers rebased and retried
    snap = Snapshot.load(root)
    assert snap.version == WRITERS * COMMITS
    expected = {data_file(f"w{n}", i).path for n in range(WRITERS) for i in range(COMMITS)}
    assert {r["path"] for r in snap.files.to_pylist()} == expected  # 0 lost commits
    assert {k: t.version for k, t in snap.txns.items()} == {f"w{n}": COMMITS - 1 for n in range(WRITERS)}
    names = log_names(root)
    assert [n for n in names if n.endswith(".json")] == [f"{v:020d}.json" for v in range(WRITERS * COMMITS + 1)]
    assert [n for n in names if n.endswith(".checkpoint.parquet")] == [
        f"{v:020d}.checkpoint.parquet" for v in range(10, WRITERS * COMMITS + 1, 10)]
    assert not [n for n in names if "probe" in n or n.endswith(".tmp")]
    hint = json.loads(storage_for(root).read_bytes(f"{root}/_delta_log/_last_checkpoint"))
    assert hint["version"] == WRITERS * COMMITS and hint["numOfAddFiles"] == WRITERS * COMMITS


@pytest.mark.parametrize("when", ["before", "after"])
def test_writer_killed_around_the_conditional_write(store: Store, when: str, tmp_path: Path) -> None:
    root = store.root()
    create_table(root, SCHEMA, [], {"delta.enableDeletionVectors": "true"})
    for i in range(3):
        OptimisticTransaction(root, Snapshot.load(root)).commit([data_file("setup", i)], "WRITE")
    marker = tmp_path / "paused"
    proc = subprocess.Popen(writer_cmd(root, "victim", 1, "--pause-at", "4", "--pause-when", when, "--marker",
                                       str(marker)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(store), cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.kill()  # SIGKILL by our own child's pid: no cleanup runs in it
        proc.communicate(timeout=60)
    snap = Snapshot.load(root)
    setup = {data_file("setup", i).path for i in range(3)}
    if when == "before":  # killed before its PUT: the table stays at its last version, untouched
        assert snap.version == 3 and {r["path"] for r in snap.files.to_pylist()} == setup
    else:  # killed after its PUT returned: the commit is whole, post-commit work did not run and is not needed
        assert snap.version == 4
        assert {r["path"] for r in snap.files.to_pylist()} == setup | {data_file("victim", 0).path}
    next_version = OptimisticTransaction(root, snap).commit([data_file("after", 0)], "WRITE")
    assert next_version == snap.version + 1 and Snapshot.load(root).num_files == len(setup) + (when == "after") + 1


def _dv_of(snap: Snapshot, path: str) -> DeletionVectorDescriptor | None:
    row = next(r for r in snap.files.to_pylist() if r["path"] == path)
    return DeletionVectorDescriptor.from_json(row["deletionVector"]) if row["deletionVector"] else None


def test_dv_delete_update_merge_metadata_round_trips(store_root: tuple[Store, str]) -> None:
    """The log and DV files of DELETE, UPDATE and MERGE in DV mode, written and read back through the store."""
    _, root = store_root
    create_table(root, SCHEMA, [], {"delta.enableDeletionVectors": "true"})
    a, b = data_file("base", 0), data_file("base", 1)
    OptimisticTransaction(root, Snapshot.load(root)).commit([a, b], "WRITE")

    def mark(snap: Snapshot, path: str, rows: list[int], operation: str, extra: list[AddFile] | None = None) -> int:
        """One DV commit as the row-level commands shape it: the file removed, re-added with its new DV."""
        old = _dv_of(snap, path)
        bitmap = pyroaring.BitMap64(rows) | (load_bitmap(old, root) if old else pyroaring.BitMap64())
        with DeletionVectorWriter(root, random_prefix_length=2) as w:
            dv = w.add(bitmap)
        add = next(x for x in (a, b) if x.path == path)
        stats = json.loads(add.stats or "{}")
        re_added = AddFile(path=path, partition_values={}, size=add.size, modification_time=add.modification_time,
                           stats=json.dumps({**stats, "tightBounds": False}), deletion_vector=dv, data_change=True)
        removed = AddFile(path=path, partition_values={}, size=add.size, modification_time=add.modification_time,
                          stats=add.stats, deletion_vector=old).remove()
        txn = OptimisticTransaction(root, snap)
        txn.read_files([add])
        return txn.commit([removed, re_added, *(extra or [])], operation)

    assert mark(Snapshot.load(root), a.path, [1, 3], "DELETE") == 2
    updated = data_file("updated", 0)
    assert mark(Snapshot.load(root), b.path, [0, 9], "UPDATE", [updated]) == 3
    merged = data_file("merged", 0)
    assert mark(Snapshot.load(root), a.path, [5], "MERGE", [merged]) == 4

    snap = Snapshot.load(root)
    assert snap.version == 4
    assert sorted(r["path"] for r in snap.files.to_pylist()) == sorted([a.path, b.path, updated.path, merged.path])
    dv_a, dv_b = _dv_of(snap, a.path), _dv_of(snap, b.path)
    assert dv_a is not None and dv_b is not None
    assert sorted(load_bitmap(dv_a, root)) == [1, 3, 5] and dv_a.cardinality == 3
    assert sorted(load_bitmap(dv_b, root)) == [0, 9] and dv_b.cardinality == 2
    assert _dv_of(snap, updated.path) is None and _dv_of(snap, merged.path) is None
    dv_files = [f.path for f in storage_for(root).walk(root) if f.path.endswith(".bin")]
    assert len(dv_files) == 3  # one DV file per command, each under a two-letter random prefix
    assert all(f[len(root) + 1:].count("/") == 1 for f in dv_files)
    ops = [json.loads(line)["commitInfo"]["operation"] for v in range(2, 5)
           for line in storage_for(root).read_bytes(f"{root}/_delta_log/{v:020d}.json").splitlines()
           if b"commitInfo" in line]
    assert ops == ["DELETE", "UPDATE", "MERGE"]
