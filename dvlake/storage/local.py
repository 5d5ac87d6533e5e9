"""Local filesystem storage, straight on the OS (no pyarrow layer in the way of every stat)."""

from __future__ import annotations

import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from typing import IO

from dvlake.errors import NotARegularFileError, TableRootNotADirectoryError
from dvlake.storage.base import FileInfo, LogStore, OddEntry, RandomAccessFile, Storage
from dvlake.storage.confine import file_kind, is_inside


def _info(path: str, st: os.stat_result) -> FileInfo:
    return FileInfo(path, st.st_size, int(st.st_mtime * 1000))


class HardLinkLogStore(LogStore):
    """Commits by hard-linking a fully written, fsynced temp file into place.

    ``link`` either creates the complete file or fails when the name exists, so readers never see
    a partial commit and a concurrent writer can never overwrite one.
    """

    def put_if_absent(self, path: str, data: bytes) -> None:
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        finally:
            os.unlink(tmp)


class LocalStorage(Storage):
    """Plain absolute local paths."""

    is_local = True

    def __init__(self) -> None:
        self.log_store = HardLinkLogStore()

    def cache_identity(self) -> object | None:
        """Every ``LocalStorage`` reads the one filesystem of this process."""
        return "local"

    def open_input(self, path: str) -> RandomAccessFile:
        """Only regular files are opened, without blocking: a FIFO or device named by a hostile log
        would otherwise hang the reader (checked before the open and again on the handle)."""
        st = os.stat(path)  # FileNotFoundError / NotADirectoryError propagate for the caller to type
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFileError(f"{path} is not a regular file; dvlake opens only regular files")
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
        fd = os.open(path, flags)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotARegularFileError(f"{path} is not a regular file; dvlake opens only regular files")
        return os.fdopen(fd, "rb")

    def stat(self, path: str) -> FileInfo | None:
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        return _info(path, st) if not os.path.isdir(path) else None

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def list_dir(self, path: str) -> list[FileInfo]:
        try:
            entries = list(os.scandir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for e in entries:
            try:
                if e.is_file():
                    out.append(_info(e.path, e.stat()))
            except FileNotFoundError:
                continue  # a concurrent writer's temp file vanished between listing and stat
        return out

    def list_dir_strict(self, path: str, root: str) -> tuple[list[FileInfo], list[OddEntry]]:
        """One ``scandir``: regular files (symlinks only when they resolve to a regular file under ``root``),
        and every other entry as an ``OddEntry`` (FIFOs, devices, sockets, folders, dangling or outside links)."""
        try:
            entries = list(os.scandir(path))
        except (FileNotFoundError, NotADirectoryError):
            return [], []
        real_root: str | None = None
        files: list[FileInfo] = []
        odd: list[OddEntry] = []
        for e in entries:
            try:
                if e.is_symlink():
                    real_root = real_root or os.path.realpath(root)
                    target = os.path.realpath(e.path)
                    if not is_inside(real_root, target):
                        odd.append(OddEntry(e.path, f"a symlink to {target}, outside the table root {root}", True))
                        continue
                st = e.stat()
            except FileNotFoundError:
                if e.is_symlink():
                    odd.append(OddEntry(e.path, "a symlink to a file that does not exist", False))
                continue  # a concurrent writer's temp file vanished between listing and stat
            if stat.S_ISREG(st.st_mode):
                files.append(_info(e.path, st))
            else:
                odd.append(OddEntry(e.path, file_kind(st.st_mode), False))
        return files, odd

    def walk(self, path: str) -> Iterator[FileInfo]:
        for dirpath, _dirs, files in os.walk(path):
            for name in files:
                full = os.path.join(dirpath, name)
                try:
                    yield _info(full, os.stat(full))
                except FileNotFoundError:
                    continue

    def write(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)

    def open_output(self, path: str) -> IO[bytes]:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return open(path, "wb")  # noqa: SIM115 - the caller closes it

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def move(self, src: str, dst: str) -> None:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        os.rename(src, dst)

    def delete(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def delete_dir(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)


def check_creatable_root(root: str) -> None:
    """A table can be created at ``root``: its nearest existing ancestor (or itself) is a folder.

    Otherwise Spark's writers fail deep in Hadoop ("Not a directory", ParentNotDirectoryException)
    with no word of which path is in the way; this names it before any file is written.
    """
    current = os.path.abspath(root)
    while True:
        try:
            st = os.stat(current)
        except FileNotFoundError:
            parent = os.path.dirname(current)
            if parent == current:
                return
            current = parent
            continue
        except NotADirectoryError:  # a component above ``current`` is a file: keep climbing to name it
            current = os.path.dirname(current)
            continue
        if stat.S_ISDIR(st.st_mode):
            return
        raise TableRootNotADirectoryError(
            f"cannot create a Delta table at {root}: {current} is "
            f"{file_kind(st.st_mode) if not stat.S_ISREG(st.st_mode) else 'a regular file'}, not a folder. "
            "Choose a path whose parent folders are folders.")
