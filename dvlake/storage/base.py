"""The storage seam: every byte dvlake reads or writes goes through a ``Storage``.

``Storage`` is the small interface the log, the transaction, the DV codec and the driver side
of the Spark layer need (read whole/range, stat, list, write, move, delete), modelled on
pyiceberg's ``FileIO`` and delta-kernel-rs' ``StorageHandler``. The commit primitive is a seam
of its own (``LogStore``, as in delta-rs): whether a commit file can be created atomically and
only if absent decides whether concurrent writers are safe, and it differs per store.

Implementations: ``LocalStorage`` (the OS), ``ArrowFileSystemStorage`` (any ``pyarrow.fs``
filesystem, chosen by URI scheme) and ``MemoryStorage`` (a process-local fake for unit tests).
``storage_for`` picks one by the table root's scheme; ``register_storage`` plugs in another.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Protocol

from dvlake.storage.paths import has_scheme


@dataclass(frozen=True)
class FileInfo:
    """One listed or stat-ed file."""

    path: str
    size: int
    mtime_ms: int
    #: the store's entity tag where its listing gives one (object stores): it changes whenever the object is written
    #: anew, which a modification time of one-second granularity does not show (``log.snapshot_cache``)
    etag: str | None = None


@dataclass(frozen=True)
class OddEntry:
    """A listed entry that is not a plain regular file inside the root (see ``Storage.list_dir_strict``)."""

    path: str
    reason: str
    outside_root: bool


class RandomAccessFile(Protocol):
    """What ``Storage.open_input`` returns: a seekable binary reader (Parquet footers need one)."""

    def read(self, n: int = -1, /) -> bytes: ...
    def seek(self, offset: int, whence: int = 0, /) -> int: ...
    def tell(self) -> int: ...
    def close(self) -> None: ...


class LogStore(abc.ABC):
    """The commit primitive: create a file with given bytes only if no file exists at that path.

    Delta's optimistic concurrency rests on it: two writers racing for version N must not both
    succeed. An implementation that cannot guarantee it must refuse (see ``SingleWriterLogStore``).
    """

    @abc.abstractmethod
    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically; raise FileExistsError if it already exists."""

    @property
    def is_safe_for_concurrent_writers(self) -> bool:
        """Whether two processes committing at once can never both win the same version."""
        return True


class Storage(abc.ABC):
    """Filesystem operations dvlake needs, for one kind of store.

    Paths are the locations dvlake builds with ``storage.paths`` (plain absolute local paths or
    URIs with a scheme); an implementation maps them to its own addressing.
    """

    log_store: LogStore
    #: True for the OS filesystem, where paths can be resolved (symlinks, realpath) before deleting.
    is_local: bool = False

    def cache_identity(self) -> object | None:
        """What, besides a path, decides the bytes this storage reads there (hashable, compared by ``==``); None:
        loads through it are not cached.

        The process's snapshot cache (``log.snapshot_cache``) keys each table on (root, this): two storages that
        answer the same path from different stores (another endpoint or credentials, a forgotten in-memory store)
        must not share an entry. The default, None, keeps a storage the cache knows nothing about (a registered
        scheme, a ``pyarrow.fs`` filesystem built per call) out of it: such loads replay the log as before.
        """
        return None

    # -- reading ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def open_input(self, path: str) -> RandomAccessFile:
        """A seekable reader over ``path`` (FileNotFoundError when absent). Close it after use."""

    def read_bytes(self, path: str) -> bytes:
        """The whole content of ``path`` (FileNotFoundError when absent)."""
        f = self.open_input(path)
        try:
            return f.read()
        finally:
            f.close()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``path`` from ``offset`` (fewer when the file ends first)."""
        f = self.open_input(path)
        try:
            f.seek(offset)
            return f.read(length)
        finally:
            f.close()

    @abc.abstractmethod
    def stat(self, path: str) -> FileInfo | None:
        """Size and modification time of the file at ``path``; None when there is no file."""

    def stat_many(self, paths: Sequence[str]) -> list[FileInfo | None]:
        """``stat`` of many paths; stores with a batched call override it."""
        return [self.stat(p) for p in paths]

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """True if a file or directory exists at ``path``."""

    @abc.abstractmethod
    def list_dir(self, path: str) -> list[FileInfo]:
        """Files directly inside ``path`` (not recursive); empty when the folder is absent."""

    def list_dir_strict(self, path: str, root: str) -> tuple[list[FileInfo], list[OddEntry]]:
        """``list_dir`` plus the entries a reader must neither skip silently nor follow: anything that is
        not a regular file, and symlinks resolving outside ``root``. Listed files include no odd entry.

        The Delta log is listed this way, so a commit replaced by a FIFO or a symlink to another table's
        commit is an error naming the file rather than a skipped or foreign version. Object stores have
        neither symlinks nor special files: the default reports none.
        """
        return self.list_dir(path), []

    @abc.abstractmethod
    def walk(self, path: str) -> Iterator[FileInfo]:
        """Every file below ``path``, recursively, streamed (a table may hold millions)."""

    # -- writing ---------------------------------------------------------------------------------
    def write_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` only if absent (the commit primitive; see ``LogStore``)."""
        self.log_store.put_if_absent(path, data)

    @abc.abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Create or replace ``path`` (for files that may be rewritten, like ``_last_checkpoint``)."""

    @abc.abstractmethod
    def open_output(self, path: str) -> IO[bytes]:
        """A writer that creates ``path`` (parents too); the file is complete once it is closed."""

    @abc.abstractmethod
    def makedirs(self, path: str) -> None:
        """Create a directory and its parents (a no-op on stores without directories)."""

    @abc.abstractmethod
    def move(self, src: str, dst: str) -> None:
        """Move a file (a rename locally; a copy and delete on most object stores)."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Delete a file; a missing file is not an error."""

    def delete_many(self, paths: Sequence[str]) -> None:
        """Delete files (missing ones are not an error); stores with a batch call (S3 ``DeleteObjects``) override it."""
        for p in paths:
            self.delete(p)

    @abc.abstractmethod
    def delete_dir(self, path: str) -> None:
        """Delete a directory tree; a missing one is not an error."""


StorageFactory = Callable[[str], Storage]
#: Stores registered by users (``register_storage``): they take precedence over the built-in ones.
_FACTORIES: dict[str, StorageFactory] = {}
#: The package's own backends, by scheme: ``""`` for plain paths, ``memory``, and ``*`` for any other scheme.
#: ``dvlake/storage/__init__.py`` fills it (it runs before any module of the package is imported), so this module
#: never imports its own implementations, which import it.
_BUILT_IN: dict[str, StorageFactory] = {}


def register_storage(scheme: str, factory: StorageFactory) -> None:
    """Use ``factory(table_root)`` for table roots with URI scheme ``scheme`` (e.g. ``"s3"``).

    This is how a store with a real conditional PUT gets a safe ``LogStore``; it takes
    precedence over the built-in choice for that scheme.
    """
    _FACTORIES[scheme.lower()] = factory


def register_built_in(scheme: str, factory: StorageFactory) -> None:
    """One of the package's own backends (``""``: plain paths, ``*``: any scheme without another)."""
    _BUILT_IN[scheme] = factory


def storage_for(table_root: str) -> Storage:
    """The storage for a normalized table root (see ``paths.normalize_table_root``).

    Plain paths are local; ``memory://`` is the in-process fake; a registered scheme uses its
    factory; ``s3``, ``s3a``, ``gs``, ``abfs``, ``abfss`` and ``az`` use obstore and commit with the store's
    create-only write (``storage.objectstore``); any other scheme goes through ``pyarrow.fs``. Executors
    call this too, with the same root, so they reach the same store the driver planned against.
    """
    if not has_scheme(table_root):
        return _BUILT_IN[""](table_root)
    scheme = table_root.split(":", 1)[0].lower()
    if scheme in _FACTORIES:
        return _FACTORIES[scheme](table_root)
    return _BUILT_IN[scheme if scheme in _BUILT_IN else "*"](table_root)
