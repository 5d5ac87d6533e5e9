"""Expiring Iceberg snapshots with Delta's retention, so ``metadata/`` stays bounded.

An Iceberg snapshot published for Delta version V names V's data files and DV files. Delta keeps
them readable until VACUUM deletes the files removed more than the retention ago, which first
breaks V when the commit after V (the one that removed some of V's files) falls out of the
window. So a snapshot is kept while it is the current one or its successor is newer than the
cutoff — exactly the versions Delta time travel still guarantees (the version current at any
instant inside the window is kept).

Two halves, as delta-spark splits Iceberg expiry from its log cleanup:
* a conversion drops expired snapshots (and their snapshot-log and metadata-log entries) from the
  metadata it publishes, with ``delta.deletedFileRetentionDuration`` as the window;
* VACUUM deletes files under ``metadata/`` that no kept snapshot of the current metadata uses (a manifest's
  key sidecar counts as used with its manifest),
  with VACUUM's own cutoff and only files older than it, so a conversion writing right now never
  loses a file it has not published yet.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dvlake.storage.base import Storage
from dvlake.storage.paths import join
from dvlake.uniform import avro
from dvlake.uniform.keys import sidecar_path
from dvlake.uniform.state import DELTA_VERSION, METADATA_DIR, metadata_location, read_hint, storage_path

_METADATA_FILE = re.compile(r"^v(\d+)\.metadata\.json$")
#: the files conversions write (anything else under metadata/ is left alone)
_OURS = re.compile(r"^(v\d+\.metadata\.json|snap-.*\.avro|\d+-[0-9a-f]+-m\d+\.(avro|puffin|keys))$")


def kept_snapshots(snapshots: list[dict[str, Any]], current_id: int | None, cutoff_ms: int) -> list[dict[str, Any]]:
    """The snapshots still inside the window: the current one, and each one whose successor is at or after ``cutoff_ms``.

    ``snapshots`` are in commit order (each one's successor is the next in the list).
    """
    kept = []
    for i, s in enumerate(snapshots):
        successor = snapshots[i + 1] if i + 1 < len(snapshots) else None
        if s["snapshot-id"] == current_id or successor is None or int(successor["timestamp-ms"]) >= cutoff_ms:
            kept.append(s)
    return kept


def expire_in_metadata(meta: dict[str, Any], cutoff_ms: int) -> None:
    """Drop expired snapshots from a metadata JSON about to be published, with their log entries."""
    kept = kept_snapshots(meta["snapshots"], meta.get("current-snapshot-id"), cutoff_ms)
    if len(kept) == len(meta["snapshots"]):
        return
    ids = {s["snapshot-id"] for s in kept}
    versions = {_delta_version(s) for s in kept}
    meta["snapshots"] = kept
    meta["snapshot-log"] = [e for e in meta.get("snapshot-log", []) if e["snapshot-id"] in ids]
    meta["metadata-log"] = [e for e in meta.get("metadata-log", []) if _file_version(e["metadata-file"]) in versions]


def _delta_version(snapshot: dict[str, Any]) -> int | None:
    value = snapshot.get("summary", {}).get(DELTA_VERSION)
    return int(value) if value is not None else None


def _file_version(location: str) -> int | None:
    m = _METADATA_FILE.match(location.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None


def expired_files(storage: Storage, table_root: str, cutoff_ms: int) -> list[str]:
    """Files under ``metadata/`` older than ``cutoff_ms`` that no kept snapshot of the latest metadata uses.

    The latest metadata is the newest ``vN.metadata.json`` present (the hint may lag a conversion
    that has just published), so nothing a published version uses is ever deleted.
    """
    try:
        listing = storage.list_dir(join(table_root, METADATA_DIR))
    except FileNotFoundError:
        return []
    versions = [v for v in (_file_version(i.path) for i in listing) if v is not None]
    hint = read_hint(storage, table_root)
    if not versions and hint is None:
        return []
    current = metadata_location(table_root, max([*versions, *([hint] if hint is not None else [])]))
    meta = json.loads(storage.read_bytes(current))
    kept = kept_snapshots(meta.get("snapshots", []), meta.get("current-snapshot-id"), cutoff_ms)
    used = {current, *(metadata_location(table_root, v) for v in map(_delta_version, kept) if v is not None)}
    for s in kept:
        used.add(storage_path(s["manifest-list"]))
        for m in avro.read(storage, storage_path(s["manifest-list"]))[0]:
            used.add(storage_path(m["manifest_path"]))
            used.add(sidecar_path(storage_path(m["manifest_path"])))
            if m["content"] == avro.MANIFEST_CONTENT_DELETES:
                used.update(storage_path(e["data_file"]["file_path"])
                            for e in avro.read(storage, storage_path(m["manifest_path"]))[0])
    out = []
    for info in listing:
        name = info.path.rsplit("/", 1)[-1]
        if _OURS.match(name) and info.path not in used and info.mtime_ms < cutoff_ms:
            out.append(info.path)
    return sorted(out)
