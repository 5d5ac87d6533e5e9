"""Confinement: data and DV paths of a table must resolve inside its root, and only regular files are opened.

A Delta log is data, and data can be hostile: an ``add.path`` of ``../../etc/passwd``, a ``u``
DV whose prefix carries ``../``, a ``p`` DV naming a FIFO (an ``open`` that never returns) or a
symlink that leaves the root. delta-spark resolves paths against the table root and Iceberg checks
locations against the table's; dvlake does the same here, in one place the scan, DELETE and the
DV codec call, so there is one rule to audit:

* confinement on (the default): every location is normalised (``..`` collapsed) and must lie
  under the root; a ``u`` DV prefix may not contain separators; locally, a symlink in the file or
  its folder must resolve under the root's real path. Otherwise ``PathOutsideTableRootError``.
* confinement off (shallow-clone style tables that reference other folders): outside paths are
  followed, but still only regular files are opened (``NotARegularFileError`` for FIFOs, devices,
  sockets, directories), the type being checked *before* the open and again on the open handle.

Messages name paths, never bytes read from a file.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Iterable
from urllib.parse import urlparse

from dvlake.errors import DataFileNotFoundError, DvlakeError, NotARegularFileError, PathOutsideTableRootError
from dvlake.storage.paths import absolute_file_location, has_scheme

HOW_TO_ALLOW = ("if the table really references files outside its root (a shallow clone), set the session conf "
                "spark.dvlake.confineToTableRoot=false for trusted tables only")


def normalize_location(location: str) -> str:
    """``location`` with ``.``/``..`` segments and doubled slashes collapsed (URI or plain path)."""
    if has_scheme(location):
        parsed = urlparse(location)
        path = posixpath.normpath(parsed.path) if parsed.path else "/"
        if parsed.scheme == "file":
            return path
        return f"{parsed.scheme}://{parsed.netloc}{path}"
    return posixpath.normpath(location)


def is_inside(root: str, location: str) -> bool:
    """True when the normalised ``location`` lies strictly below the normalised ``root``."""
    base = normalize_location(root).rstrip("/") + "/"
    return normalize_location(location).startswith(base)


def data_file_location(table_root: str, add_path: str, confine: bool) -> str:
    """Where the data file of ``add.path`` lives, normalised; refused outside the root when confined."""
    location = normalize_location(absolute_file_location(table_root, add_path))
    if confine and not is_inside(table_root, location):
        raise PathOutsideTableRootError(
            f"the log's data file path {add_path!r} resolves to {location}, outside "
            f"the table root {table_root}; {HOW_TO_ALLOW}")
    return location


def dv_file_location(table_root: str, storage_type: str, path_or_inline_dv: str, location: str, confine: bool) -> str:
    """The normalised location of an on-disk DV (``location`` as the descriptor resolved it); refused
    outside the root, or with a ``u`` prefix holding a separator, when confined."""
    normalized = normalize_location(location)
    if not confine:
        return normalized
    if storage_type == "u":
        prefix = path_or_inline_dv[:-20]
        if "/" in prefix or "\\" in prefix:
            raise PathOutsideTableRootError(
                f"deletion vector prefix {prefix!r} contains a path separator; Delta "
                f"writes only letters and digits there. {HOW_TO_ALLOW}")
    if not is_inside(table_root, normalized):
        raise PathOutsideTableRootError(
            f"deletion vector {storage_type!r} path resolves to {normalized}, outside "
            f"the table root {table_root}; {HOW_TO_ALLOW}")
    return normalized


def _missing_data_file(location: str) -> DvlakeError:
    return DataFileNotFoundError(
        f"data file {location} listed in the Delta log does not exist; restore it, or time travel to a version "
        "that does not reference it")


def check_local_files(table_root: str, locations: Iterable[str], confine: bool,
                      missing: Callable[[str], DvlakeError] = _missing_data_file) -> None:
    """Every local location exists and is a regular file; confined, no symlink leads out of the root.

    One ``lstat`` per file plus one ``realpath`` per folder (and per symlink): comparable to what
    Spark's own file listing costs. Locations with a scheme (object stores: no symlinks, no FIFOs)
    are skipped.
    """
    real_root = os.path.realpath(table_root) if confine and not has_scheme(table_root) else None
    checked_dirs: set[str] = set()
    for location in locations:
        if has_scheme(location):
            continue
        try:
            st = os.lstat(location)
        except (FileNotFoundError, NotADirectoryError):
            raise missing(location) from None
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(location)
            if real_root is not None and not is_inside(real_root, target):
                raise PathOutsideTableRootError(
                    f"{location} is a symlink to {target}, outside the table root "
                    f"{table_root}; {HOW_TO_ALLOW}")
            try:
                st = os.stat(location)
            except (FileNotFoundError, NotADirectoryError):
                raise missing(location) from None
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFileError(
                f"{location} is not a regular file ({file_kind(st.st_mode)}); dvlake opens only "
                "regular files (a FIFO or device could block a reader forever)")
        if real_root is not None:
            folder = os.path.dirname(location)
            if folder not in checked_dirs:
                real_folder = os.path.realpath(folder)
                if real_folder != real_root and not is_inside(real_root, real_folder):
                    raise PathOutsideTableRootError(
                        f"the folder of {location} is a symlink to {real_folder}, "
                        f"outside the table root {table_root}; {HOW_TO_ALLOW}")
                checked_dirs.add(folder)


def file_kind(mode: int) -> str:
    """What a non-regular file is, for messages (\"a FIFO\", \"a directory\", ...)."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


class RegularFile:
    """A local regular file opened for bounded positional reads (the pyarrow ``RandomAccessFile``
    subset the DV reader uses: ``size()`` and ``read_at``).

    The file type is checked with ``stat`` before the open and with ``fstat`` on the handle after
    it; the open itself is non-blocking, so even a FIFO swapped in between cannot hang the reader.
    """

    def __init__(self, path: str) -> None:
        st = os.stat(path)  # FileNotFoundError propagates: the caller types it
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFileError(
                f"{path} is not a regular file ({file_kind(st.st_mode)}); dvlake opens only "
                "regular files")
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
        self._fd = os.open(path, flags)
        st = os.fstat(self._fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(self._fd)
            raise NotARegularFileError(f"{path} is not a regular file ({file_kind(st.st_mode)})")
        self._size = st.st_size

    def size(self) -> int:
        return self._size

    def read_at(self, nbytes: int, offset: int) -> bytes:
        """At most ``nbytes`` from ``offset``, never past the size seen at open (a bounded read)."""
        nbytes = max(0, min(nbytes, self._size - offset))
        out = bytearray()
        while len(out) < nbytes:
            chunk = os.pread(self._fd, nbytes - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    def close(self) -> None:
        os.close(self._fd)

    def __enter__(self) -> RegularFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
