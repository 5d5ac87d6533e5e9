"""The snapshot cache never answers an old or foreign state (issue 44 item 2, the cache on by default).

Each case is one way a cached state could go stale: another writer (another storage object, another process),
a table deleted and recreated at the same path with as many versions, an equally long last commit and the same
modification time, a checkpoint written at the cached version, log cleanup, two stores answering one URI, threads
loading while another commits, a caller mutating what it was handed, and the memory bound. Every check compares
against a load with the cache off. No Spark."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import obstore
import pytest
from obstore.store import MemoryStore

from dvlake.errors import CorruptLogError, InvalidArgumentError
from dvlake.log import snapshot_cache
from dvlake.log.replay import replay
from dvlake.log.segment import list_log
from dvlake.log.snapshot import Snapshot
from dvlake.log.snapshot_cache import SnapshotCache
from dvlake.storage.base import storage_for
from dvlake.storage.local import LocalStorage
from dvlake.storage.memory import MemoryStorage
from dvlake.storage.objectstore import Location, ObjectStoreStorage
from dvlake.txn.hooks import checkpoint
from tests.unit.test_snapshot_cache import CountingStorage, _add, _commit, _meta, _remove, _same, _table


def _cached(cache: SnapshotCache, root: str, storage: Any = None) -> Snapshot:
    storage = storage or storage_for(root)
    return Snapshot.checked(root, storage, *cache.latest(root, storage))


def _fresh(root: str, storage: Any = None) -> Snapshot:
    """A load with the cache off: what every cached answer must equal."""
    storage = storage or storage_for(root)
    listing = list_log(storage, root)
    return Snapshot.checked(root, storage, listing, replay(storage, root, listing, None))


def _paths(snapshot: Snapshot) -> list[str]:
    return sorted(snapshot.files.column("path").to_pylist())


def _stamp(root: str, version: int, seconds: int) -> None:
    os.utime(Path(root) / "_delta_log" / f"{version:020d}.json", (seconds, seconds))


# -- other writers -----------------------------------------------------------------------------------------------
def test_a_commit_through_another_storage_object_is_seen(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    assert _paths(_cached(cache, root, LocalStorage())) == ["a.parquet", "b.parquet", "c.parquet"]
    other = LocalStorage()
    other.write_if_absent(f"{root}/_delta_log/{1:020d}.json",
                          b'{"commitInfo":{}}\n' + json.dumps(_remove("a.parquet")).encode() + b"\n")
    snapshot = _cached(cache, root, LocalStorage())
    assert _paths(snapshot) == ["b.parquet", "c.parquet"] and snapshot.version == 1
    _same(snapshot, _fresh(root))


def test_a_commit_by_another_process_is_seen(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    assert _cached(cache, root).num_files == 3
    line = json.dumps(_add("z.parquet"))
    code = (f"from dvlake.storage.base import storage_for\n"
            f"storage_for({root!r}).write_if_absent({root!r} + '/_delta_log/{1:020d}.json', "
            f"b'{{\"commitInfo\": {{}}}}\\n' + {line!r}.encode() + b'\\n')\n")
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    snapshot = _cached(cache, root)
    assert _paths(snapshot) == ["a.parquet", "b.parquet", "c.parquet", "z.parquet"] and snapshot.version == 1


# -- a table deleted and recreated at the same path --------------------------------------------------------------
def test_recreated_with_as_many_versions_same_size_and_same_mtime_is_not_a_hit(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    _commit(Path(root), 1, [_add("d.parquet")])
    _stamp(root, 0, 1_000)
    _stamp(root, 1, 2_000)
    assert _paths(_cached(cache, root)) == ["a.parquet", "b.parquet", "c.parquet", "d.parquet"]
    shutil.rmtree(root)
    _table(Path(root))
    _commit(Path(root), 1, [_add("e.parquet")])  # as long as the first table's commit 1
    _stamp(root, 0, 1_000)
    _stamp(root, 1, 2_000)  # the same second, as a store listing times to the second would show
    listing = list_log(storage_for(root), root)
    assert listing.commits[1][1] == 2_000_000 and listing.commit_files[1][0] == len(
        (Path(root) / "_delta_log" / f"{1:020d}.json").read_bytes())
    snapshot = _cached(cache, root)
    assert _paths(snapshot) == ["a.parquet", "b.parquet", "c.parquet", "e.parquet"]
    assert (cache.stats.hits, cache.stats.full_replays) == (0, 2)
    _same(snapshot, _fresh(root))


def test_recreated_memory_store_of_the_same_name_is_another_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = SnapshotCache()
    root = "memory://recreated/t"
    monkeypatch.setattr("dvlake.storage.memory.time.time", lambda: 1_700_000_000.0)  # every write the same ms

    def make(path: str) -> None:
        store = storage_for(root)
        lines = [{"commitInfo": {}}, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _meta({}), _add(path)]
        store.write_if_absent(f"{root}/_delta_log/{0:020d}.json", "\n".join(json.dumps(a) for a in lines).encode())

    try:
        make("a.parquet")
        assert _paths(_cached(cache, root)) == ["a.parquet"]
        MemoryStorage.forget(root)
        make("b.parquet")
        assert _paths(_cached(cache, root)) == ["b.parquet"]
        assert cache.stats.hits == 0
    finally:
        MemoryStorage.forget(root)


def _object_store_table(client: Any, first_file: str) -> ObjectStoreStorage:
    storage = ObjectStoreStorage(Location("s3", "s3", "s3://bucket", "bucket"), client)
    lines = [{"commitInfo": {}}, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _meta({}),
             _add(first_file)]
    obstore.put(client, f"t/_delta_log/{0:020d}.json", "\n".join(json.dumps(a) for a in lines).encode())
    return storage


def test_an_object_store_commit_rewritten_in_place_shows_another_etag_without_a_read() -> None:
    cache = SnapshotCache()
    client = MemoryStore()
    storage = CountingStorage.__new__(CountingStorage)
    storage.inner, storage.reads = _object_store_table(client, "a.parquet"), []
    assert _paths(_cached(cache, "s3://bucket/t", storage)) == ["a.parquet"]
    storage.reads.clear()
    assert _paths(_cached(cache, "s3://bucket/t", storage)) == ["a.parquet"]
    assert storage.reads == [] and cache.stats.hits == 1  # the listing's ETag identifies the commit: no GET
    _object_store_table(client, "b.parquet")  # the same key and length, new bytes: another ETag in the listing
    assert _paths(_cached(cache, "s3://bucket/t", storage)) == ["b.parquet"]
    assert cache.stats.hits == 1


def test_two_stores_answering_one_uri_do_not_share_an_entry() -> None:
    cache = SnapshotCache()
    first = _object_store_table(MemoryStore(), "a.parquet")
    second = _object_store_table(MemoryStore(), "b.parquet")  # another endpoint or credentials, say
    assert _paths(_cached(cache, "s3://bucket/t", first)) == ["a.parquet"]
    assert _paths(_cached(cache, "s3://bucket/t", second)) == ["b.parquet"]
    assert _paths(_cached(cache, "s3://bucket/t", ObjectStoreStorage(first.location, first.client))) == ["a.parquet"]
    assert cache.stats.hits == 1


def test_a_storage_without_an_identity_is_never_cached(tmp_path: Path) -> None:
    class Anonymous(LocalStorage):
        def cache_identity(self) -> object | None:
            return None

    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    for _ in range(2):
        assert _cached(cache, root, Anonymous()).num_files == 3
    assert (cache.stats.hits, cache.stats.full_replays, cache.cached_files()) == (0, 0, 0)


# -- checkpoints, log cleanup, RESTORE-like rewinds ----------------------------------------------------------------
def test_a_checkpoint_written_at_the_cached_version_is_read_as_a_fresh_load_reads_it(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    _commit(Path(root), 1, [_meta({"delta.deletedFileRetentionDuration": "interval 0 seconds"})])
    _commit(Path(root), 2, [_remove("a.parquet")])
    assert _cached(cache, root).tombstones.num_rows == 1
    checkpoint(root, 2)  # drops the expired tombstone: a fresh load has none now
    snapshot = _cached(cache, root)
    assert snapshot.tombstones.num_rows == 0 and cache.stats.hits == 0
    _same(snapshot, _fresh(root))


def test_log_cleanup_below_a_checkpoint_keeps_the_answer(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    for v in range(1, 4):
        _commit(Path(root), v, [_add(f"n{v}.parquet")])
    checkpoint(root, 3)
    _cached(cache, root)
    _commit(Path(root), 4, [_remove("n1.parquet")])
    for v in range(3):
        (Path(root) / "_delta_log" / f"{v:020d}.json").unlink()
    snapshot = _cached(cache, root)
    assert snapshot.version == 4 and cache.stats.forwards == 1
    _same(snapshot, _fresh(root))


def test_a_restore_commit_moves_the_state_forward_to_the_old_files(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    _commit(Path(root), 1, [_remove("a.parquet"), _add("x.parquet")])
    assert _paths(_cached(cache, root)) == ["b.parquet", "c.parquet", "x.parquet"]
    _commit(Path(root), 2, [_remove("x.parquet"), _add("a.parquet")])  # RESTORE TO VERSION 0's actions
    snapshot = _cached(cache, root)
    assert _paths(snapshot) == ["a.parquet", "b.parquet", "c.parquet"] and cache.stats.forwards == 1
    _same(snapshot, _fresh(root))


def test_protocol_and_metadata_changes_are_seen(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    _cached(cache, root)
    _commit(Path(root), 1, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}},
                            _meta({"delta.appendOnly": "true"})])
    snapshot = _cached(cache, root)
    assert snapshot.protocol.min_writer_version == 4 and snapshot.configuration == {"delta.appendOnly": "true"}


# -- threads -------------------------------------------------------------------------------------------------------
def test_threads_loading_while_another_commits_each_see_a_whole_version(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    seen: list[tuple[int, list[str]]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                s = _cached(cache, root)
                seen.append((s.version, _paths(s)))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread's assert
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    writer = LocalStorage()
    for v in range(1, 21):  # commits land whole, as a committer's put-if-absent makes them
        writer.write_if_absent(f"{root}/_delta_log/{v:020d}.json",
                               b'{"commitInfo":{}}\n' + json.dumps(_add(f"n{v:02d}.parquet")).encode() + b"\n")
    stop.set()
    for t in threads:
        t.join()
    assert errors == []
    base = ["a.parquet", "b.parquet", "c.parquet"]
    for version, paths in seen:  # version v holds exactly the files of commits 0..v
        assert paths == sorted(base + [f"n{v:02d}.parquet" for v in range(1, version + 1)])
    assert _cached(cache, root).version == 20


def test_threads_loading_one_table_at_once_replay_it_once(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    barrier = threading.Barrier(6)
    out: list[int] = []

    def load() -> None:
        barrier.wait()
        out.append(_cached(cache, root).num_files)

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [3] * 6 and (cache.stats.full_replays, cache.stats.hits) == (1, 5)


# -- what a caller holds ---------------------------------------------------------------------------------------------
def test_a_caller_mutating_its_snapshot_does_not_change_the_next_one(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    _commit(Path(root), 1, [_meta({"k": "v"}), {"txn": {"appId": "app", "version": 1}},
                            {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}}])
    first = _cached(cache, root)
    first.metadata.configuration["k"] = "changed"
    first.metadata.format_options["x"] = "y"
    first.metadata.extra["injected"] = True
    first.txns.clear()
    first.domains.clear()
    assert first.state.commit_info is not None
    first.state.commit_info.values["operation"] = "CHANGED"
    first.state.files = first.state.files.slice(0, 0)
    second = _cached(cache, root)
    assert cache.stats.hits == 1
    assert second.configuration == {"k": "v"} and second.metadata.format_options == {}
    assert "injected" not in second.metadata.extra
    assert list(second.txns) == ["app"] and list(second.domains) == ["d"]
    assert second.state.commit_info is not None and second.state.commit_info.values["operation"] == "WRITE"
    assert second.num_files == 3
    _same(second, _fresh(root))


# -- memory -------------------------------------------------------------------------------------------------------
def test_the_bound_counts_file_rows_over_all_tables(tmp_path: Path) -> None:
    cache = SnapshotCache(max_files=7)
    roots = [_table(tmp_path / f"t{i}") for i in range(3)]  # 3 files each
    for root in roots:
        _cached(cache, root)
    assert cache.cached_files() == 6 and cache.stats.evictions == 1  # the oldest went when the third came
    _cached(cache, roots[1])
    _cached(cache, roots[2])
    assert cache.stats.hits == 2
    _cached(cache, roots[0])
    assert cache.stats.full_replays == 4


def test_a_state_larger_than_the_bound_is_not_kept(tmp_path: Path) -> None:
    cache = SnapshotCache(max_files=2)
    root = _table(tmp_path / "t")
    for _ in range(2):
        assert _cached(cache, root).num_files == 3
    assert (cache.stats.hits, cache.stats.full_replays, cache.cached_files()) == (0, 2, 0)


def test_the_bound_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVLAKE_SNAPSHOT_CACHE_MAX_FILES", "12")
    assert snapshot_cache.max_files_from_env() == 12
    monkeypatch.setenv("DVLAKE_SNAPSHOT_CACHE_MAX_FILES", "lots")
    with pytest.raises(InvalidArgumentError, match="DVLAKE_SNAPSHOT_CACHE_MAX_FILES"):
        snapshot_cache.max_files_from_env()


# -- the switches --------------------------------------------------------------------------------------------------
def test_on_by_default_and_each_off_switch_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DVLAKE_SNAPSHOT_CACHE", raising=False)
    try:
        snapshot_cache.enable(None)
        snapshot_cache.set_session_choice(None)
        assert snapshot_cache.enabled() is True
        snapshot_cache.set_session_choice("false")
        assert snapshot_cache.enabled() is False
        snapshot_cache.set_session_choice("true")
        assert snapshot_cache.enabled() is True
        monkeypatch.setenv("DVLAKE_SNAPSHOT_CACHE", "0")
        assert snapshot_cache.enabled() is False
        snapshot_cache.enable(True)  # the process's explicit call wins over both
        assert snapshot_cache.enabled() is True
        with pytest.raises(InvalidArgumentError, match="true or false"):
            snapshot_cache.set_session_choice("maybe")
    finally:
        snapshot_cache.enable(None)
        snapshot_cache.set_session_choice(None)


def test_turning_it_off_empties_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DVLAKE_SNAPSHOT_CACHE", raising=False)
    root = _table(tmp_path / "t")
    try:
        snapshot_cache.enable(None)
        Snapshot.load(root)
        assert snapshot_cache.SHARED.cached_files() >= 3
        snapshot_cache.set_session_choice("false")
        assert snapshot_cache.SHARED.cached_files() == 0
        Snapshot.load(root)
        assert snapshot_cache.SHARED.cached_files() == 0
    finally:
        snapshot_cache.set_session_choice(None)



def test_a_commit_removed_from_the_middle_is_the_fresh_loads_error_not_a_hit(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    _commit(Path(root), 1, [_add("d.parquet")])
    _commit(Path(root), 2, [_add("e.parquet")])
    assert _cached(cache, root).num_files == 5
    (Path(root) / "_delta_log" / f"{1:020d}.json").unlink()
    with pytest.raises(CorruptLogError, match=f"{1:020d}.json"):
        _cached(cache, root)


def test_an_older_commit_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    cache = SnapshotCache()
    root = _table(tmp_path / "t")
    _commit(Path(root), 1, [_add("d.parquet")])
    _commit(Path(root), 2, [_add("e.parquet")])
    assert _cached(cache, root).num_files == 5
    _commit(Path(root), 1, [_add("longer-name.parquet")])  # another length (and time) than the file read
    snapshot = _cached(cache, root)
    assert _paths(snapshot) == ["a.parquet", "b.parquet", "c.parquet", "e.parquet", "longer-name.parquet"]
    assert cache.stats.hits == 0
