"""An in-process storage for unit tests: the log and transactions run without touching disk.

Files live in a dict guarded by a lock, so ``put_if_absent`` is truly atomic across threads —
a test proves the fake honours the commit primitive as strictly as the real stores. Tables are
addressed as ``memory://<name>/…``; every ``storage_for`` of the same name shares one store
within a process (executors in other processes cannot see it: it is a driver-side test fake).
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Iterator
from typing import IO, ClassVar

from dvlake.storage.base import FileInfo, LogStore, RandomAccessFile, Storage


class _MemoryLogStore(LogStore):
    def __init__(self, storage: MemoryStorage) -> None:
        self._storage = storage

    def put_if_absent(self, path: str, data: bytes) -> None:
        with self._storage._lock:
            if path in self._storage._files:
                raise FileExistsError(path)
            self._storage._put(path, data)


class _Output(io.BytesIO):
    """A write buffer that lands in the store only when closed (like an object-store upload)."""

    def __init__(self, storage: MemoryStorage, path: str) -> None:
        super().__init__()
        self._storage, self._path = storage, path

    def close(self) -> None:
        if not self.closed:
            with self._storage._lock:
                self._storage._put(self._path, self.getvalue())
        super().close()


class MemoryStorage(Storage):
    """A dict of path → (bytes, mtime ms)."""

    _named: ClassVar[dict[str, MemoryStorage]] = {}
    _named_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self) -> None:
        self._files: dict[str, tuple[bytes, int]] = {}
        self._lock = threading.RLock()
        self.log_store = _MemoryLogStore(self)

    @classmethod
    def named(cls, table_root: str) -> MemoryStorage:
        """The shared store for ``memory://<name>/…`` (created on first use)."""
        name = table_root.split("://", 1)[1].split("/", 1)[0] if "://" in table_root else table_root
        with cls._named_lock:
            if name not in cls._named:
                cls._named[name] = cls()
            return cls._named[name]

    @classmethod
    def forget(cls, table_root: str) -> None:
        """Drop a named store (tests call it to start clean)."""
        name = table_root.split("://", 1)[1].split("/", 1)[0] if "://" in table_root else table_root
        with cls._named_lock:
            cls._named.pop(name, None)

    def cache_identity(self) -> object | None:
        """This store itself: after ``forget`` the same name is a new, empty store."""
        return self

    def _put(self, path: str, data: bytes) -> None:
        self._files[path] = (bytes(data), int(time.time() * 1000))

    @staticmethod
    def _dir(path: str) -> str:
        return path.rstrip("/") + "/"

    def open_input(self, path: str) -> RandomAccessFile:
        with self._lock:
            if path not in self._files:
                raise FileNotFoundError(path)
            return io.BytesIO(self._files[path][0])

    def stat(self, path: str) -> FileInfo | None:
        with self._lock:
            entry = self._files.get(path)
        return FileInfo(path, len(entry[0]), entry[1]) if entry else None

    def exists(self, path: str) -> bool:
        prefix = self._dir(path)
        with self._lock:
            return path in self._files or any(p.startswith(prefix) for p in self._files)

    def list_dir(self, path: str) -> list[FileInfo]:
        prefix = self._dir(path)
        with self._lock:
            items = list(self._files.items())
        return [FileInfo(p, len(d), m) for p, (d, m) in items if p.startswith(prefix) and "/" not in p[len(prefix):]]

    def walk(self, path: str) -> Iterator[FileInfo]:
        prefix = self._dir(path)
        with self._lock:
            items = list(self._files.items())
        for p, (d, m) in items:
            if p.startswith(prefix):
                yield FileInfo(p, len(d), m)

    def write(self, path: str, data: bytes) -> None:
        with self._lock:
            self._put(path, data)

    def open_output(self, path: str) -> IO[bytes]:
        return _Output(self, path)

    def makedirs(self, path: str) -> None:
        return None  # no directories: a prefix exists once a file below it does

    def move(self, src: str, dst: str) -> None:
        with self._lock:
            if src not in self._files:
                raise FileNotFoundError(src)
            self._files[dst] = self._files.pop(src)

    def delete(self, path: str) -> None:
        with self._lock:
            self._files.pop(path, None)

    def delete_dir(self, path: str) -> None:
        prefix = self._dir(path)
        with self._lock:
            for p in [p for p in self._files if p.startswith(prefix)]:
                del self._files[p]
