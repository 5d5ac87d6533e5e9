"""The storage seam: every implementation behaves alike, and the commit primitive is honoured or refused."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pyarrow.fs as pafs
import pytest
from obstore.store import MemoryStore

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import DeletionVectorWriter, load_bitmap
from dvlake.errors import CommitPrimitiveUnavailableError, DeletionVectorNotFoundError
from dvlake.storage import Storage, register_storage, storage_for
from dvlake.storage.arrowfs import SINGLE_WRITER_ENV, ArrowFileSystemStorage
from dvlake.storage.local import LocalStorage
from dvlake.storage.memory import MemoryStorage
from dvlake.storage.objectstore import Location, ObjectStoreStorage


@pytest.fixture(params=["local", "memory", "arrow"])
def root_and_storage(request: pytest.FixtureRequest, tmp_path) -> Iterator[tuple[str, Storage]]:
    if request.param == "local":
        root = str(tmp_path)
        yield root, storage_for(root)
    elif request.param == "memory":
        root = f"memory://{uuid.uuid4().hex}"
        yield root, storage_for(root)
        MemoryStorage.forget(root)
    else:  # pyarrow's local filesystem behind the generic implementation
        yield str(tmp_path), ArrowFileSystemStorage(pafs.LocalFileSystem(), "file")


def test_storage_for_picks_by_scheme(tmp_path) -> None:
    assert isinstance(storage_for(str(tmp_path)), LocalStorage)
    assert isinstance(storage_for("memory://a/t"), MemoryStorage)
    assert storage_for("memory://a/t") is storage_for("memory://a/other")  # one store per name
    assert isinstance(storage_for("mock:///t"), ArrowFileSystemStorage)


def test_same_behaviour_everywhere(root_and_storage: tuple[str, Storage]) -> None:
    root, s = root_and_storage
    s.write(f"{root}/d/a.bin", b"0123456789")
    s.write(f"{root}/d/sub/b.bin", b"xy")
    assert s.read_bytes(f"{root}/d/a.bin") == b"0123456789"
    assert s.read_range(f"{root}/d/a.bin", 3, 4) == b"3456"
    assert s.read_range(f"{root}/d/a.bin", 8, 10) == b"89"  # short read at the end
    info = s.stat(f"{root}/d/a.bin")
    assert info is not None and info.size == 10
    assert s.stat(f"{root}/d/missing") is None
    assert [i is None for i in s.stat_many([f"{root}/d/a.bin", f"{root}/nope"])] == [False, True]
    assert sorted(i.path.rsplit("/", 1)[1] for i in s.list_dir(f"{root}/d")) == ["a.bin"]
    assert sorted(i.path.rsplit("/", 1)[1] for i in s.walk(f"{root}/d")) == ["a.bin", "b.bin"]
    assert s.list_dir(f"{root}/absent") == []
    s.move(f"{root}/d/a.bin", f"{root}/e/a.bin")
    assert not s.exists(f"{root}/d/a.bin") and s.exists(f"{root}/e/a.bin")
    with s.open_output(f"{root}/f/c.bin") as out:
        out.write(b"abc")
    assert s.read_bytes(f"{root}/f/c.bin") == b"abc"
    s.delete(f"{root}/f/c.bin")
    s.delete(f"{root}/f/c.bin")  # missing is fine
    assert not s.exists(f"{root}/f/c.bin")
    s.delete_dir(f"{root}/d")
    assert s.stat(f"{root}/d/sub/b.bin") is None
    with pytest.raises(FileNotFoundError):
        s.read_bytes(f"{root}/d/sub/b.bin")


@pytest.mark.parametrize("kind", ["local", "memory", "obstore"])
def test_put_if_absent_has_exactly_one_winner(kind: str, tmp_path) -> None:
    """16 threads race to create one commit file: exactly one wins, the file holds the winner's bytes.

    ``obstore``: the object-store storage's create-only PUT, on obstore's in-memory store (the GCS store's only
    race test: no installable GCS emulator takes obstore's PUT)."""
    if kind == "obstore":
        root = "gs://bucket/t"
        s: Storage = ObjectStoreStorage(Location("gs", "gcs", "gs://bucket", "bucket"), MemoryStore())
    else:
        root = str(tmp_path) if kind == "local" else f"memory://{uuid.uuid4().hex}"
        s = storage_for(root)
    path = f"{root}/_delta_log/00000000000000000007.json"
    wins: list[int] = []
    losses: list[int] = []
    barrier = threading.Barrier(16)

    def racer(i: int) -> None:
        barrier.wait()
        try:
            s.write_if_absent(path, f"writer {i}".encode())
            wins.append(i)
        except FileExistsError:
            losses.append(i)

    threads = [threading.Thread(target=racer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 15
    assert s.read_bytes(path) == f"writer {wins[0]}".encode()
    with pytest.raises(FileExistsError):
        s.write_if_absent(path, b"late")


def test_object_store_refuses_commits_without_conditional_put(monkeypatch: pytest.MonkeyPatch) -> None:
    s = storage_for("mock:///t")
    monkeypatch.delenv(SINGLE_WRITER_ENV, raising=False)
    assert not s.log_store.is_safe_for_concurrent_writers
    with pytest.raises(CommitPrimitiveUnavailableError, match="put-if-absent") as err:
        s.write_if_absent("mock:///t/_delta_log/00000000000000000000.json", b"{}")
    assert SINGLE_WRITER_ENV in str(err.value)
    monkeypatch.setenv(SINGLE_WRITER_ENV, "1")  # the caller declares a single writer
    s.write_if_absent("mock:///t/_delta_log/00000000000000000000.json", b"{}")
    with pytest.raises(FileExistsError):
        s.write_if_absent("mock:///t/_delta_log/00000000000000000000.json", b"{}")


def test_registered_storage_wins_for_its_scheme() -> None:
    fake = MemoryStorage()
    register_storage("dvlaketest", lambda root: fake)
    assert storage_for("dvlaketest://bucket/t") is fake


def test_dvs_round_trip_through_memory_storage() -> None:
    """The DV codec reads and writes only through the seam: no disk is touched."""
    import pyroaring

    root = f"memory://{uuid.uuid4().hex}/t"
    with DeletionVectorWriter(root, random_prefix_length=2) as w:
        d = w.add(pyroaring.BitMap64([1, 5, 1 << 40]))
    assert sorted(load_bitmap(d, root)) == [1, 5, 1 << 40]
    missing = DeletionVectorDescriptor.on_disk(uuid.uuid4(), 1, d.size_in_bytes, 3, "")
    with pytest.raises(DeletionVectorNotFoundError):
        load_bitmap(missing, root)
    MemoryStorage.forget(root)
