"""All I/O: the ``Storage`` seam, its implementations, the commit primitive and path helpers."""

from dvlake.storage.base import FileInfo, LogStore, Storage, register_storage, storage_for
from dvlake.storage.paths import join, normalize_table_root, relativize

__all__ = ["FileInfo", "LogStore", "Storage", "join", "normalize_table_root", "register_storage", "relativize", "storage_for"]
