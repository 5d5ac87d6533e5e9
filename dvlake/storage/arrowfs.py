"""Storage over any ``pyarrow.fs`` filesystem (S3, GCS, ABFS, HDFS, …), chosen by URI scheme.

pyarrow offers no conditional PUT, so this storage cannot create a commit file only-if-absent
atomically. Rather than risk a lost commit under concurrent writers, commits are refused unless
the caller declares a single writer (``DVLAKE_SINGLE_WRITER=1`` in the environment), or
registers a storage for the scheme whose ``LogStore`` uses the store's conditional PUT
(``register_storage``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import IO, cast

import pyarrow.fs as pafs

from dvlake.errors import CommitPrimitiveUnavailableError, NotARegularFileError
from dvlake.storage.base import FileInfo, LogStore, RandomAccessFile, Storage

SINGLE_WRITER_ENV = "DVLAKE_SINGLE_WRITER"


def _info(i: pafs.FileInfo, path: str) -> FileInfo:
    return FileInfo(path, int(i.size or 0), int(i.mtime.timestamp() * 1000) if i.mtime else 0)


class SingleWriterLogStore(LogStore):
    """Exists-then-write: correct only while one process writes the table, so it must be opted into."""

    def __init__(self, storage: ArrowFileSystemStorage) -> None:
        self._storage = storage

    @property
    def is_safe_for_concurrent_writers(self) -> bool:
        return False

    def put_if_absent(self, path: str, data: bytes) -> None:
        if os.environ.get(SINGLE_WRITER_ENV, "").lower() not in ("1", "true", "yes"):
            raise CommitPrimitiveUnavailableError(
                f"cannot commit {path}: this store ({self._storage.scheme}://) offers no atomic put-if-absent through "
                "pyarrow, so two concurrent writers could both win one version and one commit would be lost. "
                f"If only one process ever writes this table, set {SINGLE_WRITER_ENV}=1; otherwise register a storage "
                "whose LogStore uses the store's conditional PUT (dvlake.storage.register_storage).")
        if self._storage.exists(path):
            raise FileExistsError(path)
        with self._storage.open_output(path) as f:
            f.write(data)


class ArrowFileSystemStorage(Storage):
    """A ``pyarrow.fs.FileSystem``; locations keep their ``scheme://`` prefix outside this class."""

    def __init__(self, fs: pafs.FileSystem, scheme: str) -> None:
        self.fs = fs
        self.scheme = scheme
        self.log_store = SingleWriterLogStore(self)

    @classmethod
    def from_uri(cls, uri: str) -> ArrowFileSystemStorage:
        fs, _ = pafs.FileSystem.from_uri(uri)
        return cls(fs, uri.split(":", 1)[0])

    def _p(self, location: str) -> str:
        """pyarrow filesystems take paths without the scheme."""
        return location.split("://", 1)[1] if "://" in location else location

    def _uri(self, fs_path: str) -> str:
        return f"{self.scheme}://{fs_path}"

    def open_input(self, path: str) -> RandomAccessFile:
        info = self.fs.get_file_info(self._p(path))
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(path)
        if info.type != pafs.FileType.File:
            raise NotARegularFileError(f"{path} is not a regular file; dvlake opens only regular files")
        return cast(RandomAccessFile, self.fs.open_input_file(self._p(path)))

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with self.fs.open_input_file(self._p(path)) as f:
            return cast(bytes, f.read_at(length, offset))

    def stat(self, path: str) -> FileInfo | None:
        return self.stat_many([path])[0]

    def stat_many(self, paths: Sequence[str]) -> list[FileInfo | None]:
        infos = self.fs.get_file_info([self._p(p) for p in paths])
        return [_info(i, p) if i.type == pafs.FileType.File else None for i, p in zip(infos, paths, strict=True)]

    def exists(self, path: str) -> bool:
        return cast(bool, self.fs.get_file_info(self._p(path)).type != pafs.FileType.NotFound)

    def list_dir(self, path: str) -> list[FileInfo]:
        infos = self.fs.get_file_info(pafs.FileSelector(self._p(path), allow_not_found=True))
        return [_info(i, self._uri(i.path)) for i in infos if i.type == pafs.FileType.File]

    def walk(self, path: str) -> Iterator[FileInfo]:
        infos = self.fs.get_file_info(pafs.FileSelector(self._p(path), recursive=True, allow_not_found=True))
        for i in infos:
            if i.type == pafs.FileType.File:
                yield _info(i, self._uri(i.path))

    def _parent(self, path: str) -> None:
        """Filesystems with real directories need the parent; on object stores this is cheap."""
        parent = self._p(path).rsplit("/", 1)[0]
        if parent:
            self.fs.create_dir(parent, recursive=True)

    def write(self, path: str, data: bytes) -> None:
        self._parent(path)
        with self.fs.open_output_stream(self._p(path)) as f:
            f.write(data)

    def open_output(self, path: str) -> IO[bytes]:
        self._parent(path)
        return cast(IO[bytes], self.fs.open_output_stream(self._p(path)))

    def makedirs(self, path: str) -> None:
        self.fs.create_dir(self._p(path), recursive=True)

    def move(self, src: str, dst: str) -> None:
        self._parent(dst)
        self.fs.move(self._p(src), self._p(dst))

    def delete(self, path: str) -> None:
        try:
            self.fs.delete_file(self._p(path))
        except FileNotFoundError:
            pass

    def delete_dir(self, path: str) -> None:
        try:
            self.fs.delete_dir(self._p(path))
        except FileNotFoundError:
            pass
