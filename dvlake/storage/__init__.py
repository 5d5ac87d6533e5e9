"""Filesystem access: the one place that knows how to list, read and atomically create files."""

from dvlake.storage.base import Storage, FileInfo, storage_for
from dvlake.storage.paths import normalize_table_root, join, relativize

__all__ = ["Storage", "FileInfo", "storage_for", "normalize_table_root", "join", "relativize"]
