"""All I/O: the ``Storage`` seam, its implementations, the commit primitive and path helpers."""

from dvlake.storage.arrowfs import ArrowFileSystemStorage
from dvlake.storage.base import FileInfo, LogStore, Storage, register_built_in, register_storage, storage_for
from dvlake.storage.local import LocalStorage
from dvlake.storage.memory import MemoryStorage
from dvlake.storage.paths import OBJECT_STORE_SCHEMES, join, normalize_table_root, relativize

__all__ = ["FileInfo", "LogStore", "Storage", "join", "normalize_table_root", "register_storage", "relativize", "storage_for"]

# the built-in backends, registered here so that ``base`` (which they import) never imports them back
register_built_in("", lambda root: LocalStorage())
register_built_in("memory", MemoryStorage.named)
register_built_in("*", ArrowFileSystemStorage.from_uri)


def _object_store(root: str) -> Storage:
    """S3, GCS and Azure roots: obstore is imported when the first such root is opened, not with dvlake."""
    from dvlake.storage.objectstore import ObjectStoreStorage

    return ObjectStoreStorage.from_uri(root)


for _scheme in OBJECT_STORE_SCHEMES:
    register_built_in(_scheme, _object_store)
