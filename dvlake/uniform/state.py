"""What the last conversion published: the Iceberg metadata JSON and its current snapshot's live manifest entries.

The next conversion step needs every live entry of the current snapshot (to know which manifests
a change touches), which means reading every manifest of a table with thousands of files. A
process that commits repeatedly to one table would redo that before each commit's conversion, so
the state a step produces is kept in a small per-process cache keyed by the metadata file's
location and validated by its bytes: ``vN.metadata.json`` is created once (write-if-absent) and
never changed in place, except by a ``--full`` regeneration, whose different bytes miss the cache.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from dvlake.errors import UniformConversionError
from dvlake.storage.base import Storage
from dvlake.storage.paths import join
from dvlake.uniform import avro

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
#: Iceberg table property delta-spark's converter records (the Delta version a snapshot reflects)
DELTA_VERSION = "delta-version"
#: how many tables' states one process keeps (each holds its live entries: ~1 kB per data file)
_CACHE_SIZE = 4


@dataclass
class Manifest:
    """One manifest of the current snapshot: its manifest-list record and its live entries (resolved)."""

    record: dict[str, Any]
    entries: list[dict[str, Any]]


@dataclass
class IcebergState:
    """What the last conversion published: the metadata JSON and its current snapshot's manifests."""

    metadata: dict[str, Any]
    location: str
    delta_version: int
    data: list[Manifest] = field(default_factory=list)
    deletes: list[Manifest] = field(default_factory=list)


_cache: OrderedDict[str, tuple[bytes, IcebergState]] = OrderedDict()
_lock = threading.Lock()


def metadata_location(table_root: str, delta_version: int) -> str:
    return join(table_root, METADATA_DIR, f"v{delta_version}.metadata.json")


def storage_path(location: str) -> str:
    return location[len("file://"):] if location.startswith("file://") else location


def read_hint(storage: Storage, table_root: str) -> int | None:
    try:
        text = storage.read_bytes(join(table_root, METADATA_DIR, VERSION_HINT)).decode("utf-8").strip()
    except FileNotFoundError:
        return None
    try:
        return int(text)
    except ValueError as exc:
        raise UniformConversionError(f"{table_root}/{METADATA_DIR}/{VERSION_HINT} holds {text[:40]!r}, not a version") from exc


def load_state(storage: Storage, table_root: str) -> IcebergState | None:
    """The Iceberg state named by ``version-hint.text`` (None when nothing was converted yet)."""
    hint = read_hint(storage, table_root)
    return None if hint is None else load_state_at(storage, metadata_location(table_root, hint))


def load_state_at(storage: Storage, location: str) -> IcebergState:
    """The state published in the metadata file at ``location`` (from the cache when its bytes are unchanged)."""
    raw = storage.read_bytes(location)
    with _lock:
        hit = _cache.get(location)
        if hit is not None and hit[0] == raw:
            _cache.move_to_end(location)
            return hit[1]
    meta = json.loads(raw)
    state = IcebergState(meta, location, int(meta["properties"][DELTA_VERSION]))
    current = meta.get("current-snapshot-id")
    snap = next((s for s in meta.get("snapshots", []) if s["snapshot-id"] == current), None)
    if snap is not None:
        records, _ = avro.read(storage, storage_path(snap["manifest-list"]))
        for rec in records:
            entries, _ = avro.read(storage, storage_path(rec["manifest_path"]))
            add_manifest(state, rec, [e for e in entries if e["status"] != avro.STATUS_DELETED])
    remember(location, raw, state)
    return state


def add_manifest(state: IcebergState, record: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    """Add one manifest's live entries to ``state`` with their inherited fields made explicit."""
    live = [resolve(e, record) for e in entries]
    assign_inherited_row_ids(live, record)
    (state.data if record["content"] == avro.MANIFEST_CONTENT_DATA else state.deletes).append(Manifest(record, live))


def remember(location: str, raw: bytes, state: IcebergState) -> None:
    with _lock:
        _cache[location] = (raw, state)
        _cache.move_to_end(location)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def forget(table_root: str) -> None:
    """Drop a table's cached states (after a regeneration or a cleanup of ``metadata/``)."""
    prefix = join(table_root, METADATA_DIR) + "/"
    with _lock:
        for key in [k for k in _cache if k.startswith(prefix)]:
            del _cache[key]


def resolve(entry: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """Make the inherited fields explicit (spec: null snapshot id / sequence numbers of ADDED entries)."""
    out = dict(entry)
    if out.get("snapshot_id") is None:
        out["snapshot_id"] = manifest["added_snapshot_id"]
    if out.get("sequence_number") is None:
        out["sequence_number"] = manifest["sequence_number"]
    if out.get("file_sequence_number") is None:
        out["file_sequence_number"] = manifest["sequence_number"]
    return out


def assign_inherited_row_ids(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
    """v3 row lineage: a data file without first_row_id starts at the manifest's plus the rows before it."""
    base = manifest.get("first_row_id")
    if base is None or manifest["content"] != avro.MANIFEST_CONTENT_DATA:
        return
    for e in entries:
        data_file = e["data_file"]
        if data_file.get("first_row_id") is None:
            e["data_file"] = {**data_file, "first_row_id": base}
            base += data_file["record_count"]
