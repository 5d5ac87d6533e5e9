"""The storage seam: listing, reading and the atomic put-if-absent a Delta commit needs.

Local tables use the OS directly (``os.link`` of a fully written temp file gives an atomic,
never-overwriting create). Other schemes go through ``pyarrow.fs``; most object stores cannot
create-if-absent, so commits there are only safe with a single writer — we say so rather than
pretend.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Iterator

import pyarrow.fs as pafs

from dvlake.storage.paths import has_scheme


@dataclass(frozen=True)
class FileInfo:
    """One listed file."""

    path: str
    size: int
    mtime_ms: int


class Storage:
    """Filesystem operations dvlake needs, over one pyarrow filesystem."""

    def __init__(self, fs: pafs.FileSystem, is_local: bool) -> None:
        self.fs = fs
        self.is_local = is_local

    @staticmethod
    def _p(location: str) -> str:
        """pyarrow filesystems take paths without the scheme."""
        return location.split("://", 1)[1] if "://" in location else location

    # -- reading -------------------------------------------------------------------------------
    def read_bytes(self, path: str) -> bytes:
        """The whole content of ``path`` (FileNotFoundError when absent)."""
        if self.is_local:
            with open(path, "rb") as f:
                return f.read()
        with self.fs.open_input_file(self._p(path)) as f:
            return f.read()

    def exists(self, path: str) -> bool:
        """True if a file or directory exists at ``path``."""
        if self.is_local:
            return os.path.exists(path)
        return self.fs.get_file_info(self._p(path)).type != pafs.FileType.NotFound

    def list_dir(self, path: str) -> list[FileInfo]:
        """Files directly inside ``path`` (not recursive); empty when the folder is absent."""
        if self.is_local:
            try:
                entries = list(os.scandir(path))
            except FileNotFoundError:
                return []
            out = []
            for e in entries:
                try:
                    if e.is_file():
                        st = e.stat()
                        out.append(FileInfo(e.path, st.st_size, int(st.st_mtime * 1000)))
                except FileNotFoundError:
                    continue  # a concurrent writer's temp file vanished between listing and stat
            return out
        infos = self.fs.get_file_info(pafs.FileSelector(self._p(path), allow_not_found=True))
        return [FileInfo(i.path, i.size, int(i.mtime.timestamp() * 1000) if i.mtime else 0)
                for i in infos if i.type == pafs.FileType.File]

    def walk(self, path: str) -> Iterator[FileInfo]:
        """Every file below ``path``, recursively."""
        if self.is_local:
            for dirpath, _dirs, files in os.walk(path):
                for name in files:
                    full = os.path.join(dirpath, name)
                    try:
                        st = os.stat(full)
                    except FileNotFoundError:
                        continue
                    yield FileInfo(full, st.st_size, int(st.st_mtime * 1000))
            return
        infos = self.fs.get_file_info(pafs.FileSelector(self._p(path), recursive=True, allow_not_found=True))
        for i in infos:
            if i.type == pafs.FileType.File:
                yield FileInfo(i.path, i.size, int(i.mtime.timestamp() * 1000) if i.mtime else 0)

    # -- writing -------------------------------------------------------------------------------
    def write_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically; FileExistsError if it already exists.

        Locally the bytes go to a temp file that is hard-linked into place: the link either
        creates the complete file or fails, so readers never see a partial commit and a
        concurrent writer can never overwrite one.
        """
        if self.is_local:
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
            return
        if self.exists(path):
            raise FileExistsError(path)
        with self.fs.open_output_stream(self._p(path)) as f:
            f.write(data)

    def write(self, path: str, data: bytes) -> None:
        """Create or replace ``path`` (for files that may be rewritten, like _last_checkpoint)."""
        if self.is_local:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            return
        with self.fs.open_output_stream(self._p(path)) as f:
            f.write(data)

    def makedirs(self, path: str) -> None:
        """Create a directory and its parents."""
        if self.is_local:
            os.makedirs(path, exist_ok=True)
        else:
            self.fs.create_dir(self._p(path), recursive=True)

    def move(self, src: str, dst: str) -> None:
        """Move a file (a rename locally; a copy and delete on most object stores)."""
        if self.is_local:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.rename(src, dst)
        else:
            self.fs.move(self._p(src), self._p(dst))

    def delete(self, path: str) -> None:
        """Delete a file; a missing file is not an error."""
        try:
            if self.is_local:
                os.unlink(path)
            else:
                self.fs.delete_file(self._p(path))
        except FileNotFoundError:
            pass

    def delete_dir(self, path: str) -> None:
        """Delete a directory tree; a missing one is not an error."""
        if self.is_local:
            import shutil

            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                self.fs.delete_dir(self._p(path))
            except FileNotFoundError:
                pass


def storage_for(table_root: str) -> Storage:
    """The storage for a normalized table root (see ``paths.normalize_table_root``)."""
    if not has_scheme(table_root):
        return Storage(pafs.LocalFileSystem(), is_local=True)
    fs, _ = pafs.FileSystem.from_uri(table_root)
    return Storage(fs, is_local=False)
