"""Delta versions as Iceberg v3 snapshots: ``<table>/metadata/v<deltaVersion>.metadata.json`` and its files.

Each converted Delta version V becomes one Iceberg snapshot, published as ``vV.metadata.json``
(with every earlier converted snapshot in it) and named in ``version-hint.text``. A step from the
previously converted version P to V is incremental: the data and delete manifests of P's snapshot
are reused unless they mention a file V no longer has (or whose DV changed), in which case a data
manifest is rewritten with its survivors as EXISTING entries (their sequence numbers and row ids
kept) and a delete manifest is retired whole, its still-valid DVs copied into V's Puffin file.
So no manifest a snapshot uses ever names a stale DV or a removed file, and a Puffin file a
snapshot uses holds only current DVs. A step learns what changed from the Delta commit's own
add/remove actions, so its cost follows the commit, not the table (manifests and Puffin files
are written in bounded chunks, which bounds what one changed file makes a later step rewrite).
What a step needs of the manifests it keeps (the paths they name) comes from each manifest's key
sidecar (``uniform/keys.py``), so a new process reads the manifest list, the sidecars and only the
manifests it rewrites, not every manifest of the table.

On an IcebergCompatV3 table the row lineage is Delta's own: a data file's ``first_row_id`` is its
add's ``baseRowId``, its data sequence number its ``defaultRowCommitVersion``, a snapshot's sequence
number its Delta version (as delta-spark's converter does) and ``next-row-id`` the row-tracking
high-water mark + 1 (from the commit's ``delta.rowTracking`` domain action, else unchanged). Iceberg's
``_row_id`` (first_row_id + position, unless the file's materialized row-id column, written under the
reserved field id, holds one) is then Delta's row id, and ``_last_updated_sequence_number`` its row
commit version. A file a commit re-adds with other row ids (a row-tracking backfill) is removed and
added again. Elsewhere the converter numbers rows and snapshots itself (from 1, as Iceberg writers do).
On a V3 table, Delta version 0 is published with sequence number 0: the spec asks only that snapshot
sequence numbers increase (Java's validation exempts a parentless first snapshot, which this is), and
starting at 1 would put every later snapshot one above its Delta version, breaking the identity
between row commit versions (materialized in files under Iceberg's reserved field id) and
``_last_updated_sequence_number``. DVs still apply: a DV's data sequence number is the version that
publishes it, never below the data sequence number (``defaultRowCommitVersion``) of its data file.

Files are written first and the metadata JSON last, created only if absent: a conversion that
fails leaves the previous Iceberg state as it was, and of two conversions of the same version the
first to publish stands (the other removes its files and continues from it). The Delta commit is
never touched (see ``after_commit``).
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from dvlake.config import deleted_file_retention_ms
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import bitmap_from_bytes, dv_bytes
from dvlake.errors import UniformConversionError
from dvlake.log import row_tracking
from dvlake.log.actions import Metadata, now_ms
from dvlake.log.replay import read_commit
from dvlake.log.segment import commit_file_name, log_path
from dvlake.log.snapshot import ICT_ENABLED, Snapshot
from dvlake.log.stats import parse_stats
from dvlake.storage.base import Storage, storage_for
from dvlake.storage.paths import absolute_file_location, join, normalize_table_root
from dvlake.uniform import avro, compat
from dvlake.uniform.expire import expire_in_metadata
from dvlake.uniform.keys import KEYS_DIGEST, digest, entry_keys, sidecar_path
from dvlake.uniform.puffin import PuffinBuilder
from dvlake.uniform.schema import (
    bound_columns,
    bounds,
    iceberg_fields,
    max_field_id,
    name_mapping,
    partition_avro_fields,
    partition_record,
    partition_spec,
    spec_json,
)
from dvlake.uniform.state import (
    DELTA_VERSION,
    METADATA_DIR,
    VERSION_HINT,
    IcebergState,
    Manifest,
    forget,
    from_entries,
    load_state,
    load_state_at,
    metadata_location,
    read_hint,
    remember,
    sidecar_bytes,
    storage_path,
)

log = logging.getLogger(__name__)

ENABLED_FORMATS = "delta.universalFormat.enabledFormats"
DELTA_TIMESTAMP = "delta-timestamp"
NAME_MAPPING = "schema.name-mapping.default"
#: Iceberg table property marking a history whose row ids and sequence numbers are Delta's (IcebergCompatV3); a
#: history without it (the converter's own numbering) is not continued by a V3 conversion but started afresh
ROW_LINEAGE = "dvlake.row-lineage"
DELTA_ROW_LINEAGE = "delta-row-tracking"
FORMAT_VERSION = 3
__all__ = ["METADATA_DIR", "VERSION_HINT", "IcebergState", "after_commit", "iceberg_enabled", "metadata_location",
           "sync"]
#: entries per data manifest written in one step: a commit removing one file rewrites at most this many
MAX_MANIFEST_ENTRIES = 4096
#: DV blobs per Puffin file: retiring one for a stale DV re-copies at most this many still-valid blobs
MAX_PUFFIN_BLOBS = 512


def iceberg_enabled(configuration: dict[str, str]) -> bool:
    """The table asks for Iceberg metadata after every commit (``delta.universalFormat.enabledFormats``)."""
    formats = configuration.get(ENABLED_FORMATS, "")
    return "iceberg" in {f.strip().lower() for f in formats.split(",")}


def iceberg_location(location: str) -> str:
    """A file location as Iceberg metadata spells it: a URI as dvlake has it, a local file as its absolute path.

    Local files stay plain paths, not ``file://`` URIs: a URI would have to percent-encode the
    literal ``%XX`` of Hive-escaped partition folders, and readers differ in whether they decode a
    ``file://`` path (pyiceberg does not), while both read a plain absolute path as it is.
    """
    return location


# --- Delta's side ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DeltaFile:
    location: str  # as Iceberg metadata names it
    storage_location: str
    partition: dict[str, str | None]
    size: int
    stats: str | None
    dv: DeletionVectorDescriptor | None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    @property
    def dv_id(self) -> str | None:
        return self.dv.unique_id if self.dv is not None else None


def _delta_file(table_root: str, path: str, partition: Any, size: Any, stats: str | None,
                raw_dv: dict[str, Any] | None, base_row_id: Any = None,
                default_row_commit_version: Any = None) -> _DeltaFile:
    where = absolute_file_location(table_root, path)
    dv = DeletionVectorDescriptor.from_json(raw_dv) if raw_dv else None
    if dv is not None and dv.cardinality == 0:
        dv = None
    parts = partition.items() if isinstance(partition, dict) else (partition or [])
    return _DeltaFile(iceberg_location(where), where, dict(parts), int(size), stats, dv,
                      None if base_row_id is None else int(base_row_id),
                      None if default_row_commit_version is None else int(default_row_commit_version))


def _delta_files(snapshot: Snapshot) -> dict[str, _DeltaFile]:
    cols = ["path", "partitionValues", "size", "stats", "deletionVector", "baseRowId", "defaultRowCommitVersion"]
    out = {}
    for row in snapshot.files.select(cols).to_pylist():
        f = _delta_file(snapshot.table_root, row["path"], row["partitionValues"], row["size"], row["stats"],
                        row.get("deletionVector"), row["baseRowId"], row["defaultRowCommitVersion"])
        out[f.location] = f
    return out


@dataclass
class _Target:
    """The Delta version a step publishes: its metadata and timestamp, its files when a step needs them all, and
    its row-tracking high-water mark when a V3 step cannot learn it from the commit and the previous snapshot."""

    version: int
    metadata: Metadata
    timestamp: int
    load_files: Callable[[], dict[str, _DeltaFile]]
    load_high_water_mark: Callable[[], int]


@dataclass
class _CommitChange:
    """One Delta commit's effect on the files, from its own add/remove actions (not a diff of two snapshots)."""

    adds: dict[str, _DeltaFile]
    #: removed location -> the removed DV's unique id (None without one)
    removes: dict[str, str | None]
    #: the row-tracking high-water mark the commit sets (None when it leaves the domain alone)
    high_water_mark: int | None = None


def _commit_change(table_root: str, lines: list[dict[str, Any]]) -> _CommitChange:
    adds: dict[str, _DeltaFile] = {}
    removes: dict[str, str | None] = {}
    for line in lines:
        if "add" in line:
            a = line["add"]
            f = _delta_file(table_root, a["path"], a.get("partitionValues"), a.get("size", 0), a.get("stats"),
                            a.get("deletionVector"), a.get("baseRowId"), a.get("defaultRowCommitVersion"))
            adds[f.location] = f
        elif "remove" in line:
            r = line["remove"]
            raw = r.get("deletionVector")
            dv = DeletionVectorDescriptor.from_json(raw) if raw else None
            removes[iceberg_location(absolute_file_location(table_root, r["path"]))] = (
                dv.unique_id if dv is not None and dv.cardinality else None)
    return _CommitChange(adds, removes, row_tracking.high_water_mark_in(lines))


def _lineage(f: _DeltaFile, table: str) -> tuple[int, int]:
    """(first_row_id, data sequence number) of a V3 table's data file: its ``baseRowId`` and ``defaultRowCommitVersion``."""
    if f.base_row_id is None or f.default_row_commit_version is None:
        raise UniformConversionError(
            f"{table}: {f.location} has no baseRowId/defaultRowCommitVersion although IcebergCompatV3 needs row "
            "tracking enabled; its rows have no ids to publish. Rewrite the file with a row-tracking writer.")
    return f.base_row_id, f.default_row_commit_version


def _record_count(f: _DeltaFile, storage: Storage) -> int:
    stats = parse_stats(f.stats)
    if stats and stats.get("numRecords") is not None:
        return int(stats["numRecords"])
    import pyarrow.parquet as pq

    handle = storage.open_input(f.storage_location)
    try:
        return int(pq.ParquetFile(handle).metadata.num_rows)
    finally:
        handle.close()


# --- one step ------------------------------------------------------------------------------------------


@dataclass
class _Step:
    """The files one conversion step writes, named after its snapshot (listed, so a lost race can remove them)."""

    storage: Storage
    root: str
    snapshot_id: int
    seq: int
    spec: list[dict[str, Any]]
    schema_json: dict[str, Any]
    spec_id: int
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    counter: int = 0
    written: list[str] = field(default_factory=list)
    #: earlier Puffin files read this step (a retired file's still-valid blobs are copied from it)
    old_puffins: dict[str, bytes] = field(default_factory=dict)

    def path(self, suffix: str) -> str:
        self.counter += 1
        return join(self.root, METADATA_DIR, f"{self.seq:05d}-{self.tag}-m{self.counter}{suffix}")

    def write(self, path: str, data: bytes) -> None:
        self.written.append(path)
        self.storage.write(path, data)

    def discard(self) -> None:
        """Remove what this step wrote (another conversion published the same version first)."""
        for path in self.written:
            try:
                self.storage.delete(path)
            except FileNotFoundError:
                pass

    def write_manifest(self, entries: list[dict[str, Any]], content: int) -> dict[str, Any]:
        """Write a manifest; returns its manifest-list record (first_row_id assigned by the caller unless V3's)."""
        path = self.path(".avro")
        meta = {"schema": json.dumps(self.schema_json), "schema-id": str(self.schema_json["schema-id"]),
                "partition-spec": json.dumps(spec_json(self.spec)), "partition-spec-id": str(self.spec_id),
                "format-version": str(FORMAT_VERSION),
                "content": "data" if content == avro.MANIFEST_CONTENT_DATA else "deletes",
                # binds the key sidecar to this manifest: its keys are trusted only when they hash to this
                KEYS_DIGEST: digest(entry_keys(entries, content))}
        data = avro.encode(avro.manifest_entry_schema(partition_avro_fields(self.spec)), entries, meta)
        self.write(path, data)
        added = [e for e in entries if e["status"] == avro.STATUS_ADDED]
        existing = [e for e in entries if e["status"] == avro.STATUS_EXISTING]
        return {
            "manifest_path": iceberg_location(path), "manifest_length": len(data), "partition_spec_id": self.spec_id,
            "content": content, "sequence_number": self.seq,
            "min_sequence_number": min((e["sequence_number"] for e in entries), default=self.seq),
            "added_snapshot_id": self.snapshot_id, "added_files_count": len(added),
            "existing_files_count": len(existing), "deleted_files_count": 0,
            "added_rows_count": sum(e["data_file"]["record_count"] for e in added),
            "existing_rows_count": sum(e["data_file"]["record_count"] for e in existing),
            "deleted_rows_count": 0, "partitions": None, "key_metadata": None,
            # entries with Delta's explicit ids (V3): the manifest starts at the lowest, so no reader assigns others
            "first_row_id": min((e["data_file"]["first_row_id"] for e in entries
                                 if e["data_file"].get("first_row_id") is not None), default=None),
        }


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _data_file(content: int, location: str, file_format: str, partition: dict[str, Any], record_count: int,
               size: int, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "content": content, "file_path": location, "file_format": file_format, "partition": partition,
        "record_count": record_count, "file_size_in_bytes": size, "column_sizes": None, "value_counts": None,
        "null_value_counts": None, "nan_value_counts": None, "lower_bounds": None, "upper_bounds": None,
        "key_metadata": None, "split_offsets": None, "equality_ids": None, "sort_order_id": None,
        "first_row_id": None, "referenced_data_file": None, "content_offset": None, "content_size_in_bytes": None,
    }
    out.update(extra)
    return out


_Written = list[tuple[dict[str, Any], list[dict[str, Any]]]]  # manifests written this step: (record, entries)


def _surviving_data(step: _Step, plan: _Plan) -> tuple[list[Manifest], list[str], _Written]:
    """Data manifests kept by reference, the live paths they and the rewrites list, and the rewritten manifests.

    Only a manifest naming a removed file is read in full (``m.entries``) and rewritten without it.
    """
    kept: list[Manifest] = []
    live_data: list[str] = []
    rewritten: _Written = []
    for m in plan.data_manifests:
        paths = m.keys
        if plan.removed.isdisjoint(paths):
            kept.append(m)
            live_data.extend(paths)
            continue
        survivors = [{**e, "status": avro.STATUS_EXISTING} for e in m.entries
                     if e["data_file"]["file_path"] not in plan.removed]
        for chunk in _chunks(survivors, MAX_MANIFEST_ENTRIES):
            rewritten.append((step.write_manifest(chunk, avro.MANIFEST_CONTENT_DATA), chunk))
            live_data.extend(e["data_file"]["file_path"] for e in chunk)
    return kept, live_data, rewritten


def _added_data(step: _Step, plan: _Plan, target: _Target, root: str, lineage: bool, storage: Storage) -> _Written:
    """Manifests of the commit's added data files, with their bounds and (V3) Delta's row lineage."""
    if not plan.added:
        return []
    bound_cols = bound_columns(target.metadata)
    entries = []
    for loc in sorted(plan.added):
        f = plan.added[loc]
        lower, upper = bounds(parse_stats(f.stats), bound_cols)
        first_row_id, data_seq = _lineage(f, root) if lineage else (None, step.seq)
        entries.append({"status": avro.STATUS_ADDED, "snapshot_id": step.snapshot_id, "sequence_number": data_seq,
                        "file_sequence_number": step.seq,
                        "data_file": _data_file(avro.CONTENT_DATA, loc, "PARQUET", partition_record(step.spec, f.partition),
                                                _record_count(f, storage), f.size, lower_bounds=lower,
                                                upper_bounds=upper, first_row_id=first_row_id)})
    return [(step.write_manifest(chunk, avro.MANIFEST_CONTENT_DATA), chunk)
            for chunk in _chunks(entries, MAX_MANIFEST_ENTRIES)]


def _surviving_deletes(plan: _Plan) -> tuple[list[Manifest], list[str], list[tuple[str, _DeltaFile | dict[str, Any]]]]:
    """Delete manifests kept by reference, the data files they cover, and the DVs to (re)write, sorted by data file.

    A delete manifest naming a removed file or a file whose DV changed is dropped; its other entries are carried
    into the step's new Puffin files together with the commit's fresh DVs.
    """
    stale = plan.removed | plan.dv_changed.keys()
    kept_deletes: list[Manifest] = []
    live_dvs: list[str] = []
    carry: list[dict[str, Any]] = []
    for m in plan.delete_manifests:
        refs = m.keys
        if stale.isdisjoint(refs):
            kept_deletes.append(m)
            live_dvs.extend(refs)
        else:
            carry.extend(e for e in m.entries if e["data_file"]["referenced_data_file"] not in stale)
    fresh = {k: f for k, f in {**plan.added, **plan.dv_changed}.items() if f.dv is not None}
    emit: list[tuple[str, _DeltaFile | dict[str, Any]]] = sorted(
        [*fresh.items(), *((e["data_file"]["referenced_data_file"], e) for e in carry)], key=lambda t: t[0])
    return kept_deletes, live_dvs, emit


def convert_step(storage: Storage, root: str, prev: IcebergState | None, target: _Target,
                 change: _CommitChange | None, *, replace: bool = False) -> IcebergState:
    """Publish Delta version ``target`` as the next Iceberg snapshot after ``prev`` (from scratch when None).

    With ``change`` (the actions of the one commit between ``prev`` and ``target``) the step costs
    what the commit changed: only the manifests and Puffin files naming a changed file are
    rewritten, and the table's other files are never listed. Without it (or when the partition
    spec changed, or the commit does not fit ``prev``), every file of ``target`` is published anew.
    """
    fields = iceberg_fields(target.metadata, root)
    lineage = compat.is_v3(target.metadata.configuration)
    if lineage and prev is not None and prev.metadata.get("properties", {}).get(ROW_LINEAGE) != DELTA_ROW_LINEAGE:
        prev, change = None, None  # the converter's own row ids and sequence numbers cannot be continued
    old_meta = prev.metadata if prev else None
    schema_id, schemas = _schema_entry(old_meta, fields)
    last_partition_id = int(old_meta["last-partition-id"]) if old_meta else 999
    spec = partition_spec(target.metadata, fields, root)
    spec_id, specs, last_partition_id = _spec_entry(old_meta, spec, last_partition_id)
    seq = int(old_meta["last-sequence-number"]) + 1 if old_meta else 1
    if lineage:  # Delta versions as sequence numbers: they order the snapshots, and row commit versions are them
        seq = max(target.version, int(old_meta["last-sequence-number"]) + 1 if old_meta else 0)
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    schema_json = next(s for s in schemas if s["schema-id"] == schema_id)
    step = _Step(storage, root, snapshot_id, seq, spec, schema_json, spec_id)

    plan = _plan(prev, change, spec_id == _default_spec_id(old_meta), target, root, lineage)
    kept, live_data, rewritten = _surviving_data(step, plan)
    added_manifests = _added_data(step, plan, target, root, lineage, storage)
    live_data.extend(sorted(plan.added))
    new_data = [*added_manifests, *rewritten]
    kept_deletes, live_dvs, emit = _surviving_deletes(plan)
    new_deletes = [_write_dvs(step, chunk, root) for chunk in _chunks(emit, MAX_PUFFIN_BLOBS)]
    live_dvs.extend(loc for loc, _ in emit)

    _check_complete(live_data, live_dvs, plan.expect_files, plan.expect_dvs, root, target.version)
    next_row_id = int(old_meta.get("next-row-id", 0)) if old_meta else 0
    first_row_id = next_row_id
    if lineage:  # every entry has Delta's first_row_id; the snapshot spans the ids Delta handed out since the last one
        next_row_id = max(first_row_id, _high_water_mark(prev, change, target) + 1)
    else:
        for rec, _ in new_data:
            rec["first_row_id"] = next_row_id
            next_row_id += rec["added_rows_count"] + rec["existing_rows_count"]
    written_data = [from_entries(rec, entries) for rec, entries in new_data]
    written_deletes = [from_entries(rec, entries) for rec, entries in new_deletes]
    for m in [*written_data, *written_deletes]:  # before the manifest list: a published manifest has its sidecar
        step.write(sidecar_path(storage_path(m.record["manifest_path"])), sidecar_bytes(m))
    manifest_list = [*(r for r, _ in new_data), *(m.record for m in kept), *(r for r, _ in new_deletes),
                     *(m.record for m in kept_deletes)]
    parent = old_meta.get("current-snapshot-id") if old_meta else None
    list_path = join(root, METADATA_DIR, f"snap-{snapshot_id}-{seq}-{step.tag}.avro")
    step.write(list_path, avro.encode(avro.MANIFEST_FILE_SCHEMA, manifest_list, {
        "snapshot-id": str(snapshot_id), "parent-snapshot-id": str(parent) if parent is not None else "null",
        "sequence-number": str(seq), "first-row-id": str(first_row_id), "format-version": str(FORMAT_VERSION)}))

    timestamp = target.timestamp
    summary = {
        "operation": _operation(plan.added.keys(), plan.removed, plan.dv_changed.keys()),
        DELTA_VERSION: str(target.version),
        "added-data-files": str(len(plan.added)), "deleted-data-files": str(len(plan.removed)),
        "added-delete-files": str(len(emit)), "total-data-files": str(len(live_data)),
        "total-delete-files": str(len(live_dvs)),
    }
    snap_json: dict[str, Any] = {
        "snapshot-id": snapshot_id, **({"parent-snapshot-id": parent} if parent is not None else {}),
        "sequence-number": seq, "timestamp-ms": timestamp, "manifest-list": iceberg_location(list_path),
        "summary": summary, "schema-id": schema_id, "first-row-id": first_row_id, "added-rows": next_row_id - first_row_id,
    }
    location = metadata_location(root, target.version)
    meta = {
        "format-version": FORMAT_VERSION,
        "table-uuid": old_meta["table-uuid"] if old_meta else str(uuid.uuid4()),
        "location": iceberg_location(root),
        "last-sequence-number": seq,
        "last-updated-ms": max(timestamp, now_ms()),
        "last-column-id": max(max_field_id(fields), int(old_meta["last-column-id"]) if old_meta else 0),
        "current-schema-id": schema_id, "schemas": schemas,
        "default-spec-id": spec_id, "partition-specs": specs, "last-partition-id": last_partition_id,
        "properties": _properties(old_meta, target, timestamp, lineage),
        "current-snapshot-id": snapshot_id,
        "snapshots": [*(old_meta["snapshots"] if old_meta else []), snap_json],
        "snapshot-log": [*(old_meta["snapshot-log"] if old_meta else []),
                         {"timestamp-ms": timestamp, "snapshot-id": snapshot_id}],
        "metadata-log": [*(old_meta["metadata-log"] if old_meta else []),
                         *([{"timestamp-ms": old_meta["last-updated-ms"], "metadata-file": iceberg_location(prev.location)}]
                           if old_meta and prev else [])],
        "sort-orders": [{"order-id": 0, "fields": []}], "default-sort-order-id": 0,
        "refs": {"main": {"snapshot-id": snapshot_id, "type": "branch"}},
        "next-row-id": next_row_id,
    }
    expire_in_metadata(meta, now_ms() - deleted_file_retention_ms(target.metadata.configuration))
    raw = json.dumps(meta, indent=2).encode("utf-8")
    if replace:
        storage.write(location, raw)
    else:
        try:
            storage.write_if_absent(location, raw)
        except FileExistsError:  # another conversion published this version first: its snapshot stands
            step.discard()
            log.info("%s was published by a concurrent conversion; continuing from it", location)
            return load_state_at(storage, location)
    _advance_hint(storage, root, target.version, force=prev is None)
    state = IcebergState(meta, location, target.version, [*written_data, *kept], [*written_deletes, *kept_deletes])
    remember(location, raw, state)
    return state


def _high_water_mark(prev: IcebergState | None, change: _CommitChange | None, target: _Target) -> int:
    """The row-tracking high-water mark of ``target`` (V3): the commit's domain action, else (the commit left the
    domain alone) the previous V3 snapshot's ``next-row-id`` - 1, else the target's replayed domains."""
    if change is not None and change.high_water_mark is not None:
        return change.high_water_mark
    if change is not None and prev is not None:
        return int(prev.metadata.get("next-row-id", 0)) - 1
    return target.load_high_water_mark()


def _properties(old_meta: dict[str, Any] | None, target: _Target, timestamp: int, lineage: bool) -> dict[str, str]:
    """The Iceberg table properties: the previous ones with this version's, and the row-lineage marker under V3."""
    out = {**(old_meta["properties"] if old_meta else {}), DELTA_VERSION: str(target.version),
           DELTA_TIMESTAMP: str(timestamp), NAME_MAPPING: json.dumps(name_mapping(target.metadata))}
    out.pop(ROW_LINEAGE, None)
    if lineage:
        out[ROW_LINEAGE] = DELTA_ROW_LINEAGE
    return out


def _advance_hint(storage: Storage, root: str, version: int, force: bool) -> None:
    """Name ``version`` in ``version-hint.text`` unless a newer one is named already (a fresh history always)."""
    try:
        hint = read_hint(storage, root)
    except UniformConversionError:  # an unreadable hint (a regeneration repairs it)
        hint = None
    if hint is None or hint < version or force:
        storage.write(join(root, METADATA_DIR, VERSION_HINT), str(version).encode("utf-8"))


@dataclass
class _Plan:
    """Which files a step adds, removes and re-publishes the DV of, and the manifests it starts from."""

    added: dict[str, _DeltaFile]
    removed: set[str]
    dv_changed: dict[str, _DeltaFile]
    data_manifests: list[Manifest]
    delete_manifests: list[Manifest]
    expect_files: set[str]
    expect_dvs: set[str]


def _plan(prev: IcebergState | None, change: _CommitChange | None, same_spec: bool, target: _Target,
          root: str, lineage: bool = False) -> _Plan:
    if prev is not None and change is not None and same_spec:
        live = {k for m in prev.data for k in m.keys}
        removed = {k for k in change.removes if k not in change.adds}
        if removed <= live:
            added = {k: f for k, f in change.adds.items() if k not in live}
            if lineage:  # a file re-added with other row ids (a backfill) is a new Iceberg data file
                published = {k: ids for m in prev.data for k, ids in zip(m.keys, m.lineage or [], strict=True)}
                renumbered = {k: f for k, f in change.adds.items()
                              if k in live and (f.base_row_id, f.default_row_commit_version) != published[k]}
                removed |= renumbered.keys()
                added |= renumbered
            # a re-added file: a new (or no) DV unless the commit removed it with the very DV it adds back
            dv_changed = {k: f for k, f in change.adds.items()
                          if k in live and k not in added
                          and (k not in change.removes or change.removes[k] != f.dv_id)}
            old_dvs = {k for m in prev.deletes for k in m.keys}
            stale = removed | dv_changed.keys()
            return _Plan(added, removed, dv_changed, prev.data, prev.deletes, (live - removed) | added.keys(),
                         (old_dvs - stale) | {k for k, f in {**added, **dv_changed}.items() if f.dv is not None})
        log.info("%s version %s removes files the Iceberg snapshot of version %s does not list; publishing every file",
                 root, target.version, prev.delta_version)
    files = target.load_files()
    return _Plan(files, set(), {}, [], [], set(files), {k for k, f in files.items() if f.dv is not None})


def _write_dvs(step: _Step, emit: list[tuple[str, _DeltaFile | dict[str, Any]]],
               table: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One Puffin file with the DVs of ``emit`` and its delete manifest (record, entries).

    A DV new in this step is read from its Delta DV file (bytes verified against CRC and
    cardinality); a still-valid DV of a retired Puffin file is copied from that file's blob (CRC
    checked), which costs a read of the old Puffin file, not of every Delta DV file behind it.
    """
    puffin = PuffinBuilder()
    partitions: list[dict[str, Any]] = []
    for loc, source in emit:
        if isinstance(source, _DeltaFile):
            dv = source.dv
            assert dv is not None
            raw, where = dv_bytes(dv, table, step.storage)
            bitmap_from_bytes(dv, raw, where)  # refuses a DV whose bytes disagree with its descriptor
            if raw is None:
                raise UniformConversionError(f"{where}: an empty deletion vector is not published")
            puffin.add_dv(loc, raw, dv.cardinality)
            partitions.append(partition_record(step.spec, source.partition))
        else:
            f = source["data_file"]
            path = storage_path(f["file_path"])
            if path not in step.old_puffins:
                step.old_puffins[path] = step.storage.read_bytes(path)
            start = f["content_offset"]
            puffin.add_blob(loc, step.old_puffins[path][start:start + f["content_size_in_bytes"]], f["record_count"], path)
            partitions.append(f["partition"])
    data = puffin.render()
    path = step.path(".puffin")
    step.write(path, data)
    entries = []
    for blob, partition in zip(puffin.blobs, partitions, strict=True):
        entries.append({"status": avro.STATUS_ADDED, "snapshot_id": step.snapshot_id, "sequence_number": step.seq,
                        "file_sequence_number": step.seq,
                        "data_file": _data_file(avro.CONTENT_POSITION_DELETES, iceberg_location(path), "PUFFIN",
                                                partition, blob.cardinality, len(data),
                                                referenced_data_file=blob.referenced_data_file,
                                                content_offset=blob.offset, content_size_in_bytes=blob.length)})
    return step.write_manifest(entries, avro.MANIFEST_CONTENT_DELETES), entries


def _check_complete(live_data: list[str], live_dvs: list[str], expect_files: set[str], expect_dvs: set[str],
                    table: str, version: int) -> None:
    """Never publish a snapshot whose files or DVs differ from the Delta version's (a wrong answer for readers)."""
    if (len(live_data) != len(expect_files) or set(live_data) != expect_files
            or len(live_dvs) != len(expect_dvs) or set(live_dvs) != expect_dvs):
        raise UniformConversionError(
            f"{table} version {version}: the Iceberg snapshot would list {len(live_data)} data files and {len(live_dvs)} "
            f"deletion vectors but the Delta version has {len(expect_files)} and {len(expect_dvs)}; nothing was "
            "published. Regenerate with `dvlake uniform sync --full`.")


def _operation(added: Collection[str], removed: Collection[str], dv_changed: Collection[str]) -> str:
    if not removed and not dv_changed:
        return "append"
    if not added:
        return "delete"
    return "overwrite"


def _schema_entry(old: dict[str, Any] | None, fields: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    schemas = list(old["schemas"]) if old else []
    for s in schemas:
        if s["fields"] == fields:
            return int(s["schema-id"]), schemas
    new_id = max((int(s["schema-id"]) for s in schemas), default=-1) + 1
    schemas.append({"type": "struct", "schema-id": new_id, "fields": fields})
    return new_id, schemas


def _default_spec_id(old: dict[str, Any] | None) -> int | None:
    return int(old["default-spec-id"]) if old else None


def _spec_entry(old: dict[str, Any] | None, spec: list[dict[str, Any]],
                last_partition_id: int) -> tuple[int, list[dict[str, Any]], int]:
    """The spec id for these identity fields; a changed partitioning gets new partition field ids."""
    specs = list(old["partition-specs"]) if old else []
    shape = [(f["name"], f["source-id"]) for f in spec]
    for s in specs:
        if [(f["name"], f["source-id"]) for f in s["fields"]] == shape:
            for f, g in zip(spec, s["fields"], strict=True):
                f["field-id"] = g["field-id"]
            return int(s["spec-id"]), specs, last_partition_id
    if old is not None:
        for i, f in enumerate(spec):
            f["field-id"] = last_partition_id + 1 + i
    new_id = max((int(s["spec-id"]) for s in specs), default=-1) + 1
    specs.append({"spec-id": new_id, "fields": spec_json(spec)})
    return new_id, specs, max([last_partition_id, *(f["field-id"] for f in spec)])


# --- entry points --------------------------------------------------------------------------------------


def sync(table_root: str, storage: Storage | None = None, *, version: int | None = None, full: bool = False,
         metadata: Metadata | None = None) -> int:
    """Publish Iceberg metadata for every Delta version after the last converted one, up to ``version``.

    Without earlier Iceberg metadata (or with ``full``) only the target version is converted,
    as a fresh Iceberg history. Returns the Delta version the Iceberg metadata now reflects.
    ``metadata`` is the table's metadata at ``version`` when the caller knows it (the committing
    transaction): converting the one commit after the last converted version then reads only that
    commit's file, never the whole log.
    """
    root = normalize_table_root(table_root)
    storage = storage or storage_for(root)
    if full:
        forget(root)
    state = None if full else load_state(storage, root)
    if state is not None and version is not None and metadata is not None and state.delta_version == version - 1:
        lines = read_commit(storage, join(log_path(root), commit_file_name(version)))
        md = next((Metadata.from_json(ln["metaData"]) for ln in lines if "metaData" in ln), metadata)
        target = _lazy_target(version, md, _timestamp(storage, root, version, md, lines, state),
                              lambda: Snapshot.load(root, version=version, storage=storage))
        convert_step(storage, root, state, target, _commit_change(root, lines))
        return version
    snap = Snapshot.load(root, version=version, storage=storage)
    if state is not None and state.delta_version >= snap.version:
        return state.delta_version
    if state is None:
        convert_step(storage, root, None, _target_of(snap, snap.version), None, replace=full)
        return snap.version
    commits = _commits_between(storage, snap, state.delta_version)
    if commits is None:  # a commit's file is gone (log cleanup): publish the target's files after the history
        log.info("the Delta log of %s no longer has every commit after version %s; publishing version %s whole",
                 root, state.delta_version, snap.version)
        convert_step(storage, root, state, _target_of(snap, snap.version), None)
        return snap.version
    metadata_now: Metadata | None = None
    if any("metaData" in ln for lines in commits for ln in lines):
        metadata_now = Snapshot.load(root, version=state.delta_version, storage=storage).metadata
    for v, lines in enumerate(commits, start=state.delta_version + 1):
        metadata_now = next((Metadata.from_json(ln["metaData"]) for ln in lines if "metaData" in ln),
                            metadata_now or snap.metadata)
        target = _target_of(snap, v, metadata_now)
        state = convert_step(storage, root, state, target, _commit_change(root, lines))
    return snap.version


def _target_of(snap: Snapshot, version: int, metadata: Metadata | None = None) -> _Target:
    """Version ``version`` (at most ``snap``'s) with ``snap``'s log; its files are loaded only if a step needs them."""
    root, storage = snap.table_root, snap.storage

    def load() -> Snapshot:
        return snap if version == snap.version else Snapshot.load(root, version=version, storage=storage)

    return _lazy_target(version, metadata or snap.metadata, snap.commit_timestamp(version), load)


def _lazy_target(version: int, metadata: Metadata, timestamp: int, load: Callable[[], Snapshot]) -> _Target:
    """A target whose snapshot is loaded once, and only when a step needs its files or high-water mark."""
    snapshot = functools.cache(load)
    return _Target(version, metadata, timestamp, lambda: _delta_files(snapshot()),
                   lambda: row_tracking.high_water_mark(snapshot().domains))


def _commits_between(storage: Storage, snap: Snapshot, after: int) -> list[list[dict[str, Any]]] | None:
    """The actions of each commit after ``after`` up to ``snap``'s version (None when one is no longer in the log)."""
    out = []
    for v in range(after + 1, snap.version + 1):
        if v not in snap.listing.commits:
            return None
        try:
            out.append(read_commit(storage, snap.listing.commits[v][0]))
        except FileNotFoundError:
            return None
    return out


def _timestamp(storage: Storage, root: str, version: int, metadata: Metadata, lines: list[dict[str, Any]],
               prev: IcebergState) -> int:
    """The commit's timestamp as ``Snapshot.commit_timestamp`` gives it, from the commit file alone.

    The in-commit timestamp where the table has them; else the file's modification time, kept above
    the previous version's (delta-spark makes file times monotonic the same way).
    """
    if metadata.configuration.get(ICT_ENABLED, "false").lower() == "true":
        ict = next((ln["commitInfo"].get("inCommitTimestamp") for ln in lines if "commitInfo" in ln), None)
        if ict is not None:
            return int(ict)
    info = storage.stat(join(log_path(root), commit_file_name(version)))
    mtime = info.mtime_ms if info is not None else now_ms()
    before = prev.metadata.get("properties", {}).get(DELTA_TIMESTAMP)
    return max(mtime, int(before) + 1) if before is not None else mtime


def after_commit(table_root: str, version: int, storage: Storage, metadata: Metadata | None = None) -> None:
    """Convert after a commit on a UniForm table; a failure is logged, never raised (the commit stands).

    ``metadata``: the table's metadata as of the commit (lets the step read only the commit's own file).
    """
    try:
        sync(table_root, storage, version=version, metadata=metadata)
    except Exception as exc:  # noqa: BLE001 - Iceberg metadata is derived; the Delta commit must stand
        log.warning("commit %s of %s succeeded but its Iceberg metadata was not written: %s. Run `dvlake uniform sync "
                    "%s` to retry.", version, table_root, exc, table_root)
