"""What the last conversion published: the Iceberg metadata JSON and its current snapshot's manifests.

The next conversion step needs every live data file and DV of the current snapshot (to check the
commit against it and to know which manifests a change touches), but rewrites only those few
manifests. So a manifest is loaded as its manifest-list record plus the paths its entries name,
taken from its key sidecar (``uniform/keys.py``) when that is intact, and its full entries are read
only when a step rewrites it. A manifest without an intact sidecar (written before sidecars
existed, or damaged) is read whole, as before, and its sidecar written back for the next process.

A process that commits repeatedly to one table keeps the state a step produced in a small
per-process cache keyed by the metadata file's location and validated by its bytes:
``vN.metadata.json`` is created once (write-if-absent) and never changed in place, except by a
``--full`` regeneration, whose different bytes miss the cache.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from dvlake.errors import NotARegularFileError, UniformConversionError
from dvlake.storage.base import Storage
from dvlake.storage.paths import join
from dvlake.uniform import avro, keys

log = logging.getLogger(__name__)

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
#: Iceberg table property delta-spark's converter records (the Delta version a snapshot reflects)
DELTA_VERSION = "delta-version"
#: how many tables' states one process keeps (each holds its live entries: ~1 kB per data file)
_CACHE_SIZE = 4


@dataclass
class Manifest:
    """One manifest of the current snapshot: its manifest-list record, the paths its live entries name, and the
    entries themselves (inherited fields resolved), read from storage only when a step needs them."""

    record: dict[str, Any]
    #: data manifests: each live entry's data file path; delete manifests: each entry's referenced data file
    keys: list[str]
    #: data manifests: each entry's (first_row_id, data sequence number); None for delete manifests
    lineage: list[tuple[int | None, int]] | None
    _entries: list[dict[str, Any]] | None = None
    _storage: Storage | None = None

    @property
    def entries(self) -> list[dict[str, Any]]:
        """The live entries, resolved; read now if only the sidecar was (a sidecar that disagrees is removed)."""
        if self._entries is None:
            assert self._storage is not None
            full = from_entries(self.record, _read_live(self._storage, self.record))
            if full.keys != self.keys or full.lineage != self.lineage:
                where = keys.sidecar_path(storage_path(self.record["manifest_path"]))
                try:
                    self._storage.delete(where)
                except FileNotFoundError:
                    pass
                _forget_holding(self)
                raise UniformConversionError(
                    f"{where} does not list the entries of {self.record['manifest_path']}; it was removed and nothing "
                    "was published. Run `dvlake uniform sync` again (it reads the manifest itself).")
            self._entries = full.entries
        return self._entries


def from_entries(record: dict[str, Any], entries: list[dict[str, Any]]) -> Manifest:
    """A manifest from its live entries, with their inherited fields made explicit."""
    live = [resolve(e, record) for e in entries]
    assign_inherited_row_ids(live, record)
    if record["content"] == avro.MANIFEST_CONTENT_DATA:
        return Manifest(record, [e["data_file"]["file_path"] for e in live],
                        [(e["data_file"].get("first_row_id"), e["sequence_number"]) for e in live], live)
    return Manifest(record, [e["data_file"]["referenced_data_file"] for e in live], None, live)


def sidecar_bytes(manifest: Manifest) -> bytes:
    """The key sidecar of ``manifest`` (written beside it; see ``uniform/keys.py``)."""
    return keys.encode(manifest.record, manifest.keys, manifest.lineage)


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
            manifest = load_manifest(storage, rec)
            (state.data if rec["content"] == avro.MANIFEST_CONTENT_DATA else state.deletes).append(manifest)
    remember(location, raw, state)
    return state


def load_manifest(storage: Storage, record: dict[str, Any]) -> Manifest:
    """The manifest ``record`` names: from its sidecar when intact and bound to the manifest (its keys hash to the
    digest in the manifest's header), else read whole and its sidecar written back (an entry that is not a regular
    file, such as a directory or a FIFO, is replaced)."""
    where = keys.sidecar_path(storage_path(record["manifest_path"]))
    odd = False
    try:
        found = keys.decode(storage.read_bytes(where), record)
    except FileNotFoundError:
        found = None
    except (NotARegularFileError, IsADirectoryError):  # a hint, never a reason to stop: read the manifest instead
        found, odd = None, True
    if found is not None and _bound(storage, record, found[0]):
        return Manifest(record, found[0], found[1], None, storage)
    log.debug("%s has no intact key sidecar bound to it; reading it whole", record["manifest_path"])
    manifest = from_entries(record, _read_live(storage, record))
    try:  # a repair for the next process; this conversion does not depend on it
        if odd:
            _remove_entry(storage, where)
        storage.write(where, sidecar_bytes(manifest))
    except Exception as exc:  # noqa: BLE001 - the sidecar only saves reads
        log.info("could not write %s: %s", where, exc)
    return manifest


def _bound(storage: Storage, record: dict[str, Any], sidecar_keys: list[str]) -> bool:
    """Whether the sidecar's keys are the manifest's: they hash to the digest in its header (read alone)."""
    header = avro.read_header(storage, storage_path(record["manifest_path"]))
    return header.get(keys.KEYS_DIGEST) == keys.digest(sidecar_keys)


def _remove_entry(storage: Storage, path: str) -> None:
    """Remove what stands at a sidecar's path but is not a regular file (a FIFO is unlinked, a directory removed)."""
    try:
        storage.delete(path)
    except (IsADirectoryError, PermissionError):  # unlink of a directory: EISDIR (Linux), EPERM (macOS)
        storage.delete_dir(path)


def _read_live(storage: Storage, record: dict[str, Any]) -> list[dict[str, Any]]:
    entries, _ = avro.read(storage, storage_path(record["manifest_path"]))
    return [e for e in entries if e["status"] != avro.STATUS_DELETED]


def remember(location: str, raw: bytes, state: IcebergState) -> None:
    with _lock:
        _cache[location] = (raw, state)
        _cache.move_to_end(location)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def _forget_holding(manifest: Manifest) -> None:
    """Drop the cached states that hold ``manifest`` (its sidecar lied: the next attempt must read it whole)."""
    with _lock:
        for key in [k for k, (_, st) in _cache.items() if any(m is manifest for m in [*st.data, *st.deletes])]:
            del _cache[key]


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
