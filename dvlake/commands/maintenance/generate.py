"""GENERATE symlink_format_manifest FOR TABLE: the manifests of ``log/symlink_manifest.py``, on request."""

from __future__ import annotations

from dvlake.errors import UnsupportedModeError
from dvlake.log.snapshot import Snapshot
from dvlake.log.symlink_manifest import write_manifests
from dvlake.storage.paths import normalize_table_root

MODES = ("symlink_format_manifest",)


def generate(path: str, mode: str) -> list[str]:
    """Write the manifests of the latest version; returns the manifest files written."""
    if mode.lower() not in MODES:
        raise UnsupportedModeError(
            f"Specified mode '{mode}' is not supported. Supported modes are: {', '.join(MODES)}.")
    return write_manifests(Snapshot.load(normalize_table_root(path)))
