"""The process's snapshot cache (``log/snapshot_cache.py``): the same state as a fresh load after appends, DV
replacements, removes, metadata changes and checkpoints; an unchanged table is answered without a replay; a new
commit is read alone; a recreated table or a gap is replayed in full. No Spark (staleness: test_snapshot_cache_staleness.py)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dvlake.log import snapshot_cache
from dvlake.log.actions import now_ms
from dvlake.log.snapshot import Snapshot
from dvlake.log.snapshot_cache import SnapshotCache
from dvlake.storage.base import RandomAccessFile, storage_for
from dvlake.txn import hooks
from dvlake.txn.transaction import checkpoint

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})


def _dv(n: int) -> dict[str, Any]:
    return {"storageType": "u", "pathOrInlineDv": f"ab^-aqEH.-t@S}}K{{vb[{n:02d}", "offset": 1 + 40 * n,
            "sizeInBytes": 36, "cardinality": n + 1}


def _add(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    add: dict[str, Any] = {"path": path, "partitionValues": {}, "size": 10, "modificationTime": 0, "dataChange": True}
    if dv:
        add["deletionVector"] = dv
    return {"add": add}


def _remove(path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    rm: dict[str, Any] = {"path": path, "deletionTimestamp": 1, "dataChange": True}
    if dv:
        rm["deletionVector"] = dv
    return {"remove": rm}


def _commit(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    lines = [{"commitInfo": {"operation": "WRITE"}}, *actions]
    (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")


def _meta(conf: dict[str, str]) -> dict[str, Any]:
    return {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                         "partitionColumns": [], "configuration": conf}}


def _table(root: Path) -> str:
    (root / "_delta_log").mkdir(parents=True)
    _commit(root, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _meta({}),
                      _add("a.parquet"), _add("b.parquet"), _add("c.parquet")])
    return str(root)


class CountingStorage:
    """The table's storage, counting the files opened for reading (listing the log is not a read)."""

    def __init__(self, root: str) -> None:
        self.inner = storage_for(root)
        self.reads: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def open_input(self, path: str) -> RandomAccessFile:
        self.reads.append(path)
        return self.inner.open_input(path)

    def read_bytes(self, path: str) -> bytes:
        self.reads.append(path)
        return self.inner.read_bytes(path)


def _same(cached: Snapshot, fresh: Snapshot) -> None:
    """Same version, protocol, metadata, txns, domains, and the same files and tombstones (row order aside)."""
    assert cached.version == fresh.version
    assert cached.protocol == fresh.protocol and cached.metadata == fresh.metadata
    assert cached.txns == fresh.txns and cached.domains == fresh.domains

    def rows(table: Any) -> list[str]:
        return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())

    assert rows(cached.files) == rows(fresh.files)
    assert rows(cached.tombstones) == rows(fresh.tombstones)


@pytest.fixture()
def cache() -> Iterator[SnapshotCache]:
    yield SnapshotCache()


def _cached(cache: SnapshotCache, root: str, storage: Any = None) -> Snapshot:
    return Snapshot.checked(root, storage or storage_for(root), *cache.latest(root, storage or storage_for(root)))


def test_the_cache_follows_appends_dv_replacements_metadata_and_checkpoints(tmp_path: Path,
                                                                            cache: SnapshotCache) -> None:
    root = _table(tmp_path / "t")
    _same(_cached(cache, root), Snapshot.load(root))
    steps: list[list[dict[str, Any]]] = [
        [_add("d.parquet")],                                                       # append
        [_remove("a.parquet"), _add("a.parquet", _dv(1))],                         # a DV on a
        [_remove("a.parquet", _dv(1)), _add("a.parquet", _dv(2)), _remove("b.parquet")],  # DV replaced, b gone
        [_meta({"delta.appendOnly": "false"}), {"txn": {"appId": "app", "version": 3}}],
        [_add("b.parquet")],                                                       # b back (its tombstone goes)
    ]
    for version, actions in enumerate(steps, start=1):
        _commit(Path(root), version, actions)
        if version == 3:
            checkpoint(root, 3)
        _same(_cached(cache, root), Snapshot.load(root))
    # replayed in full at first and once at the checkpoint (its writer dropped expired tombstones); forward else
    assert (cache.stats.full_replays, cache.stats.forwards, cache.stats.commits_read) == (2, 4, 4)
    files = {r["path"]: r["deletionVector"] for r in _cached(cache, root).files.to_pylist()}
    assert sorted(files) == ["a.parquet", "b.parquet", "c.parquet", "d.parquet"]
    assert files["a.parquet"]["cardinality"] == 3


def test_a_hit_reads_no_log_file_and_a_new_commit_is_read_alone(tmp_path: Path, cache: SnapshotCache) -> None:
    root = _table(tmp_path / "t")
    for v in range(1, 4):
        _commit(Path(root), v, [_add(f"n{v}.parquet")])
    checkpoint(root, 3)
    _commit(Path(root), 4, [_add("n4.parquet")])
    storage = CountingStorage(root)
    _cached(cache, root, storage)
    assert storage.reads  # the first load replays: the checkpoint and commit 4
    storage.reads.clear()
    assert _cached(cache, root, storage).num_files == 7
    # a hit reads only the cached version's commit file (its digest: local mtimes are too coarse to trust alone)
    assert [os.path.basename(p) for p in storage.reads] == [f"{4:020d}.json"] and cache.stats.hits == 1
    storage.reads.clear()
    _commit(Path(root), 5, [_remove("n1.parquet")])
    assert _cached(cache, root, storage).num_files == 6
    # forward: the cached commit checked, the new one digested, then read and applied
    assert [os.path.basename(p) for p in storage.reads] == [f"{4:020d}.json"] + [f"{5:020d}.json"] * 2


def test_a_recreated_table_is_replayed_in_full(tmp_path: Path, cache: SnapshotCache) -> None:
    root = _table(tmp_path / "t")
    _commit(Path(root), 1, [_add("d.parquet")])
    assert _cached(cache, root).num_files == 4
    shutil.rmtree(root)
    _table(Path(root))
    os.utime(Path(root) / "_delta_log" / f"{0:020d}.json", (1_000, 1_000))  # another file time for version 0
    _commit(Path(root), 1, [_remove("c.parquet")])
    os.utime(Path(root) / "_delta_log" / f"{1:020d}.json", (2_000, 2_000))
    snapshot = _cached(cache, root)
    _same(snapshot, Snapshot.load(root))
    assert snapshot.num_files == 2 and cache.stats.full_replays == 2


def test_snapshot_load_uses_the_shared_cache_only_when_on(tmp_path: Path) -> None:
    root = _table(tmp_path / "t")
    snapshot_cache.enable(True)
    try:
        before = snapshot_cache.SHARED.stats.hits
        Snapshot.load(root)
        assert Snapshot.load(root).num_files == 3
        assert snapshot_cache.SHARED.stats.hits == before + 1
        assert Snapshot.load(root, version=0).num_files == 3  # time travel replays, as always
        assert snapshot_cache.SHARED.stats.hits == before + 1
    finally:
        snapshot_cache.enable(None)


def test_a_checkpoint_this_process_wrote_is_adopted_not_read_back(tmp_path: Path) -> None:
    """The post-commit checkpoint written from the cached state leaves the entry standing as read from it: the
    next load moves forward by the new commit alone (no million-file read back), and gives what a fresh load from
    the checkpoint gives: the expired tombstones gone, the recent one kept, DVs, txns, domains as before."""
    root = _table(tmp_path / "t")
    recent = {"remove": {"path": "c.parquet", "deletionTimestamp": now_ms(), "dataChange": True}}
    _commit(Path(root), 1, [_remove("a.parquet"), _add("a.parquet", _dv(1)), recent,
                            {"txn": {"appId": "app", "version": 1}},
                            {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}}])
    _commit(Path(root), 2, [_remove("b.parquet")])  # deletionTimestamp 1: expired at the checkpoint
    snapshot_cache.enable(True)
    try:
        stats = snapshot_cache.SHARED.stats
        assert Snapshot.load(root).version == 2
        adopted, replays = stats.adopted_checkpoints, stats.full_replays
        hooks.checkpoint(root, 2)
        assert stats.adopted_checkpoints == adopted + 1
        at_checkpoint = Snapshot.load(root)
        assert at_checkpoint.state.checkpoint_version == 2
        assert at_checkpoint.tombstones.column("path").to_pylist() == ["c.parquet"]  # a and b: expired
        _commit(Path(root), 3, [_add("d.parquet")])
        moved = Snapshot.load(root)
        assert stats.full_replays == replays  # moved forward from the adopted entry
        snapshot_cache.enable(False)
        for cached, fresh in ((at_checkpoint, Snapshot.load(root, version=2)), (moved, Snapshot.load(root))):
            _same(cached, fresh)
    finally:
        snapshot_cache.enable(None)
