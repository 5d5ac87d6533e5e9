"""Delta versions as Iceberg v3 snapshots: ``<table>/metadata/v<deltaVersion>.metadata.json`` and its files.

Each converted Delta version V becomes one Iceberg snapshot, published as ``vV.metadata.json``
(with every earlier converted snapshot in it) and named in ``version-hint.text``. A step from the
previously converted version P to V is incremental: the data and delete manifests of P's snapshot
are reused unless they mention a file V no longer has (or whose DV changed), in which case a data
manifest is rewritten with its survivors as EXISTING entries (their sequence numbers and row ids
kept) and a delete manifest is retired whole, its still-valid DVs published again in V's Puffin
file. So no manifest a snapshot uses ever names a stale DV or a removed file, and a Puffin file a
snapshot uses holds only current DVs.

On an IcebergCompatV3 table the row lineage is Delta's own: a data file's ``first_row_id`` is its
add's ``baseRowId``, its data sequence number its ``defaultRowCommitVersion``, a snapshot's sequence
number its Delta version (as delta-spark's converter does) and ``next-row-id`` the row-tracking
high-water mark + 1. Iceberg's ``_row_id`` (first_row_id + position, unless the file's materialized
row-id column, written under the reserved field id, holds one) is then Delta's row id, and
``_last_updated_sequence_number`` its row commit version. Elsewhere the converter numbers rows and
snapshots itself.

Files are written first and the metadata JSON last, so a conversion that fails leaves the previous
Iceberg state as it was (the Delta commit is never touched; see ``after_commit``).
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import bitmap_from_bytes, dv_bytes
from dvlake.errors import UniformConversionError
from dvlake.log import row_tracking
from dvlake.log.actions import now_ms
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import parse_stats
from dvlake.storage.base import Storage, storage_for
from dvlake.storage.paths import absolute_file_location, join, normalize_table_root
from dvlake.uniform import avro, compat
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

log = logging.getLogger(__name__)

METADATA_DIR = "metadata"
VERSION_HINT = "version-hint.text"
ENABLED_FORMATS = "delta.universalFormat.enabledFormats"
#: Iceberg table properties delta-spark's converter records (the Delta version a snapshot reflects)
DELTA_VERSION = "delta-version"
DELTA_TIMESTAMP = "delta-timestamp"
NAME_MAPPING = "schema.name-mapping.default"
#: Iceberg table property marking a history whose row ids and sequence numbers are Delta's (IcebergCompatV3); a
#: history without it (the converter's own numbering) is not continued by a V3 conversion but started afresh
ROW_LINEAGE = "dvlake.row-lineage"
DELTA_ROW_LINEAGE = "delta-row-tracking"
FORMAT_VERSION = 3


def iceberg_enabled(configuration: dict[str, str]) -> bool:
    """The table asks for Iceberg metadata after every commit (``delta.universalFormat.enabledFormats``)."""
    formats = configuration.get(ENABLED_FORMATS, "")
    return "iceberg" in {f.strip().lower() for f in formats.split(",")}


def metadata_location(table_root: str, delta_version: int) -> str:
    return join(table_root, METADATA_DIR, f"v{delta_version}.metadata.json")


def iceberg_location(location: str) -> str:
    """A file location as Iceberg metadata spells it: a URI as dvlake has it, a local file as its absolute path.

    Local files stay plain paths, not ``file://`` URIs: a URI would have to percent-encode the
    literal ``%XX`` of Hive-escaped partition folders, and readers differ in whether they decode a
    ``file://`` path (pyiceberg does not), while both read a plain absolute path as it is.
    """
    return location


# --- the previous conversion -------------------------------------------------------------------------


@dataclass
class _Manifest:
    """One manifest of the current snapshot: its manifest-list record and its live entries (resolved)."""

    record: dict[str, Any]
    entries: list[dict[str, Any]]


@dataclass
class IcebergState:
    """What the last conversion published: the metadata JSON and its current snapshot's manifests."""

    metadata: dict[str, Any]
    location: str
    delta_version: int
    data: list[_Manifest] = field(default_factory=list)
    deletes: list[_Manifest] = field(default_factory=list)


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
    if hint is None:
        return None
    location = metadata_location(table_root, hint)
    meta = json.loads(storage.read_bytes(location))
    state = IcebergState(meta, location, int(meta["properties"][DELTA_VERSION]))
    current = meta.get("current-snapshot-id")
    snap = next((s for s in meta.get("snapshots", []) if s["snapshot-id"] == current), None)
    if snap is None:
        return state
    records, _ = avro.read(storage, _storage_path(snap["manifest-list"]))
    for rec in records:
        entries, _ = avro.read(storage, _storage_path(rec["manifest_path"]))
        live = [_resolve(e, rec) for e in entries if e["status"] != avro.STATUS_DELETED]
        _assign_inherited_row_ids(live, rec)
        (state.data if rec["content"] == avro.MANIFEST_CONTENT_DATA else state.deletes).append(_Manifest(rec, live))
    return state


def _storage_path(location: str) -> str:
    return location[len("file://"):] if location.startswith("file://") else location


def _resolve(entry: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """Make the inherited fields explicit (spec: null snapshot id / sequence numbers of ADDED entries)."""
    out = dict(entry)
    if out.get("snapshot_id") is None:
        out["snapshot_id"] = manifest["added_snapshot_id"]
    if out.get("sequence_number") is None:
        out["sequence_number"] = manifest["sequence_number"]
    if out.get("file_sequence_number") is None:
        out["file_sequence_number"] = manifest["sequence_number"]
    return out


def _assign_inherited_row_ids(entries: list[dict[str, Any]], manifest: dict[str, Any]) -> None:
    """v3 row lineage: a data file without first_row_id starts at the manifest's plus the rows before it."""
    base = manifest.get("first_row_id")
    if base is None or manifest["content"] != avro.MANIFEST_CONTENT_DATA:
        return
    for e in entries:
        data_file = e["data_file"]
        if data_file.get("first_row_id") is None:
            e["data_file"] = {**data_file, "first_row_id": base}
            base += data_file["record_count"]


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


def _delta_files(snapshot: Snapshot) -> dict[str, _DeltaFile]:
    out: dict[str, _DeltaFile] = {}
    cols = ["path", "partitionValues", "size", "stats", "deletionVector", "baseRowId", "defaultRowCommitVersion"]
    for row in snapshot.files.select(cols).to_pylist():
        where = absolute_file_location(snapshot.table_root, row["path"])
        raw_dv = row.get("deletionVector")
        dv = DeletionVectorDescriptor.from_json(raw_dv) if raw_dv else None
        if dv is not None and dv.cardinality == 0:
            dv = None
        loc = iceberg_location(where)
        out[loc] = _DeltaFile(loc, where, dict(row["partitionValues"] or []), int(row["size"]), row["stats"], dv,
                              row["baseRowId"], row["defaultRowCommitVersion"])
    return out


def _row_ids(f: _DeltaFile) -> tuple[int | None, int | None]:
    return f.base_row_id, f.default_row_commit_version


def _lineage(f: _DeltaFile, table: str) -> tuple[int, int]:
    """(first_row_id, data sequence number) of a V3 table's data file: its ``baseRowId`` and ``defaultRowCommitVersion``."""
    if f.base_row_id is None or f.default_row_commit_version is None:
        raise UniformConversionError(
            f"{table}: {f.location} has no baseRowId/defaultRowCommitVersion although IcebergCompatV3 needs row "
            "tracking enabled; its rows have no ids to publish. Rewrite the file with a row-tracking writer.")
    return int(f.base_row_id), int(f.default_row_commit_version)


def _properties(old_meta: dict[str, Any] | None, snapshot: Snapshot, timestamp: int, lineage: bool) -> dict[str, str]:
    out = {**(old_meta["properties"] if old_meta else {}), DELTA_VERSION: str(snapshot.version),
           DELTA_TIMESTAMP: str(timestamp), NAME_MAPPING: json.dumps(name_mapping(snapshot.metadata))}
    out.pop(ROW_LINEAGE, None)
    if lineage:
        out[ROW_LINEAGE] = DELTA_ROW_LINEAGE
    return out


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
    """The files one conversion step writes, named after its snapshot."""

    storage: Storage
    root: str
    snapshot_id: int
    seq: int
    spec: list[dict[str, Any]]
    schema_json: dict[str, Any]
    spec_id: int
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    counter: int = 0

    def path(self, suffix: str) -> str:
        self.counter += 1
        return join(self.root, METADATA_DIR, f"{self.seq:05d}-{self.tag}-m{self.counter}{suffix}")

    def write_manifest(self, entries: list[dict[str, Any]], content: int) -> dict[str, Any]:
        """Write a manifest; returns its manifest-list record (first_row_id assigned by the caller)."""
        path = self.path(".avro")
        meta = {"schema": json.dumps(self.schema_json), "schema-id": str(self.schema_json["schema-id"]),
                "partition-spec": json.dumps(spec_json(self.spec)), "partition-spec-id": str(self.spec_id),
                "format-version": str(FORMAT_VERSION),
                "content": "data" if content == avro.MANIFEST_CONTENT_DATA else "deletes"}
        length = avro.write(self.storage, path, avro.manifest_entry_schema(partition_avro_fields(self.spec)),
                            entries, meta)
        added = [e for e in entries if e["status"] == avro.STATUS_ADDED]
        existing = [e for e in entries if e["status"] == avro.STATUS_EXISTING]
        return {
            "manifest_path": iceberg_location(path), "manifest_length": length, "partition_spec_id": self.spec_id,
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


def convert_step(storage: Storage, root: str, prev: IcebergState | None, prev_snapshot: Snapshot | None,
                 snapshot: Snapshot) -> IcebergState:
    """Publish ``snapshot`` as the next Iceberg snapshot after ``prev`` (from scratch when ``prev`` is None)."""
    table = snapshot.table_root
    fields = iceberg_fields(snapshot.metadata, table)
    lineage = compat.is_v3(snapshot.metadata.configuration)
    if lineage and prev is not None and prev.metadata.get("properties", {}).get(ROW_LINEAGE) != DELTA_ROW_LINEAGE:
        prev = prev_snapshot = None  # the converter's own row ids and sequence numbers cannot be continued
    old_meta = prev.metadata if prev else None
    schema_id, schemas = _schema_entry(old_meta, fields)
    last_partition_id = int(old_meta["last-partition-id"]) if old_meta else 999
    spec = partition_spec(snapshot.metadata, fields, table)
    spec_id, specs, last_partition_id = _spec_entry(old_meta, spec, last_partition_id)
    seq = int(old_meta["last-sequence-number"]) + 1 if old_meta else 1
    if lineage:  # Delta versions as sequence numbers: they order the snapshots, and row commit versions are them
        seq = max(snapshot.version, int(old_meta["last-sequence-number"]) + 1 if old_meta else 0)
    snapshot_id = uuid.uuid4().int & ((1 << 63) - 1)
    schema_json = next(s for s in schemas if s["schema-id"] == schema_id)
    step = _Step(storage, root, snapshot_id, seq, spec, schema_json, spec_id)

    cur = _delta_files(snapshot)
    incremental = prev is not None and prev_snapshot is not None and spec_id == _default_spec_id(old_meta)
    if incremental:
        assert prev is not None and prev_snapshot is not None
        old = _delta_files(prev_snapshot)
        removed = old.keys() - cur.keys()
        added = cur.keys() - old.keys()
        dv_changed = {k for k in cur.keys() & old.keys() if cur[k].dv_id != old[k].dv_id}
        if lineage:  # a file re-committed with other row ids (a backfill) is a new Iceberg data file
            renumbered = {k for k in cur.keys() & old.keys() if _row_ids(cur[k]) != _row_ids(old[k])}
            removed, added = removed | renumbered, added | renumbered
        data_manifests, delete_manifests = prev.data, prev.deletes
    else:
        removed, added, dv_changed = set(), set(cur), set()
        data_manifests, delete_manifests = [], []

    new_data: list[dict[str, Any]] = []  # manifest-list records written in this step (row ids to assign)
    kept: list[dict[str, Any]] = []
    live_data: list[str] = []
    for m in data_manifests:
        paths = [e["data_file"]["file_path"] for e in m.entries]
        if removed.isdisjoint(paths):
            kept.append(m.record)
            live_data.extend(paths)
            continue
        survivors = [{**e, "status": avro.STATUS_EXISTING} for e in m.entries if e["data_file"]["file_path"] not in removed]
        if survivors:
            new_data.append(step.write_manifest(survivors, avro.MANIFEST_CONTENT_DATA))
            live_data.extend(e["data_file"]["file_path"] for e in survivors)
    if added:
        entries = []
        bound_cols = bound_columns(snapshot.metadata)
        for loc in sorted(added):
            f = cur[loc]
            lower, upper = bounds(parse_stats(f.stats), bound_cols)
            first_row_id, data_seq = _lineage(f, table) if lineage else (None, seq)
            entries.append({"status": avro.STATUS_ADDED, "snapshot_id": snapshot_id, "sequence_number": data_seq,
                            "file_sequence_number": seq,
                            "data_file": _data_file(avro.CONTENT_DATA, loc, "PARQUET", partition_record(spec, f.partition),
                                                    _record_count(f, storage), f.size, lower_bounds=lower,
                                                    upper_bounds=upper, first_row_id=first_row_id)})
        new_data.insert(0, step.write_manifest(entries, avro.MANIFEST_CONTENT_DATA))
        live_data.extend(sorted(added))

    stale = removed | dv_changed
    kept_deletes: list[dict[str, Any]] = []
    live_dvs: list[str] = []
    carry: set[str] = set()
    for m in delete_manifests:
        refs = [e["data_file"]["referenced_data_file"] for e in m.entries]
        if stale.isdisjoint(refs):
            kept_deletes.append(m.record)
            live_dvs.extend(refs)
        else:
            carry.update(r for r in refs if r not in stale)
    emit = sorted({k for k in added | dv_changed if cur[k].dv is not None} | carry)
    new_deletes: list[dict[str, Any]] = []
    if emit:
        new_deletes.append(_write_dvs(step, cur, emit, table))
        live_dvs.extend(emit)

    _check_complete(cur, live_data, live_dvs, table, snapshot.version)
    next_row_id = int(old_meta.get("next-row-id", 0)) if old_meta else 0
    first_row_id = next_row_id
    if lineage:  # every entry has Delta's first_row_id; the snapshot spans the ids Delta handed out since the last one
        next_row_id = max(first_row_id, row_tracking.high_water_mark(snapshot.domains) + 1)
    else:
        for rec in new_data:
            rec["first_row_id"] = next_row_id
            next_row_id += rec["added_rows_count"] + rec["existing_rows_count"]
    manifest_list = [*new_data, *kept, *new_deletes, *kept_deletes]
    parent = old_meta.get("current-snapshot-id") if old_meta else None
    list_path = join(root, METADATA_DIR, f"snap-{snapshot_id}-{seq}-{step.tag}.avro")
    avro.write(storage, list_path, avro.MANIFEST_FILE_SCHEMA, manifest_list, {
        "snapshot-id": str(snapshot_id), "parent-snapshot-id": str(parent) if parent is not None else "null",
        "sequence-number": str(seq), "first-row-id": str(first_row_id), "format-version": str(FORMAT_VERSION)})

    timestamp = snapshot.commit_timestamp()
    summary = {
        "operation": _operation(added, removed, dv_changed), DELTA_VERSION: str(snapshot.version),
        "added-data-files": str(len(added)), "deleted-data-files": str(len(removed)),
        "added-delete-files": str(len(emit)), "total-data-files": str(len(cur)),
        "total-delete-files": str(sum(1 for f in cur.values() if f.dv is not None)),
    }
    snap_json: dict[str, Any] = {
        "snapshot-id": snapshot_id, **({"parent-snapshot-id": parent} if parent is not None else {}),
        "sequence-number": seq, "timestamp-ms": timestamp, "manifest-list": iceberg_location(list_path),
        "summary": summary, "schema-id": schema_id, "first-row-id": first_row_id, "added-rows": next_row_id - first_row_id,
    }
    location = metadata_location(root, snapshot.version)
    meta = {
        "format-version": FORMAT_VERSION,
        "table-uuid": old_meta["table-uuid"] if old_meta else str(uuid.uuid4()),
        "location": iceberg_location(root),
        "last-sequence-number": seq,
        "last-updated-ms": max(timestamp, now_ms()),
        "last-column-id": max(max_field_id(fields), int(old_meta["last-column-id"]) if old_meta else 0),
        "current-schema-id": schema_id, "schemas": schemas,
        "default-spec-id": spec_id, "partition-specs": specs, "last-partition-id": last_partition_id,
        "properties": _properties(old_meta, snapshot, timestamp, lineage),
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
    storage.write(location, json.dumps(meta, indent=2).encode("utf-8"))
    try:
        hint = read_hint(storage, root)
    except UniformConversionError:  # an unreadable hint (a regeneration repairs it)
        hint = None
    if hint is None or hint < snapshot.version or prev is None:
        storage.write(join(root, METADATA_DIR, VERSION_HINT), str(snapshot.version).encode("utf-8"))
    return _state_after(meta, location, snapshot.version, storage)


def _state_after(meta: dict[str, Any], location: str, version: int, storage: Storage) -> IcebergState:
    """The state just written (re-read from the files, so the next step sees exactly what readers see)."""
    state = IcebergState(meta, location, version)
    snap = meta["snapshots"][-1]
    records, _ = avro.read(storage, _storage_path(snap["manifest-list"]))
    for rec in records:
        entries, _ = avro.read(storage, _storage_path(rec["manifest_path"]))
        live = [_resolve(e, rec) for e in entries if e["status"] != avro.STATUS_DELETED]
        _assign_inherited_row_ids(live, rec)
        (state.data if rec["content"] == avro.MANIFEST_CONTENT_DATA else state.deletes).append(_Manifest(rec, live))
    return state


def _write_dvs(step: _Step, cur: dict[str, _DeltaFile], emit: list[str], table: str) -> dict[str, Any]:
    """One Puffin file with the DVs of ``emit`` (bytes verified against CRC and cardinality) and its delete manifest."""
    puffin = PuffinBuilder()
    for loc in emit:
        dv = cur[loc].dv
        assert dv is not None
        raw, where = dv_bytes(dv, table, step.storage)
        bitmap_from_bytes(dv, raw, where)  # refuses a DV whose bytes disagree with its descriptor
        if raw is None:
            raise UniformConversionError(f"{where}: an empty deletion vector is not published")
        puffin.add_dv(loc, raw, dv.cardinality)
    data = puffin.render()
    path = step.path(".puffin")
    step.storage.write(path, data)
    entries = []
    for blob in puffin.blobs:
        f = cur[blob.referenced_data_file]
        entries.append({"status": avro.STATUS_ADDED, "snapshot_id": step.snapshot_id, "sequence_number": step.seq,
                        "file_sequence_number": step.seq,
                        "data_file": _data_file(avro.CONTENT_POSITION_DELETES, iceberg_location(path), "PUFFIN",
                                                partition_record(step.spec, f.partition), blob.cardinality, len(data),
                                                referenced_data_file=blob.referenced_data_file,
                                                content_offset=blob.offset, content_size_in_bytes=blob.length)})
    return step.write_manifest(entries, avro.MANIFEST_CONTENT_DELETES)


def _check_complete(cur: dict[str, _DeltaFile], live_data: list[str], live_dvs: list[str], table: str,
                    version: int) -> None:
    """Never publish a snapshot whose files or DVs differ from the Delta version's (a wrong answer for readers)."""
    want_dvs = sorted(k for k, f in cur.items() if f.dv is not None)
    if sorted(live_data) != sorted(cur) or sorted(live_dvs) != want_dvs:
        raise UniformConversionError(
            f"{table} version {version}: the Iceberg snapshot would list {len(live_data)} data files and {len(live_dvs)} "
            f"deletion vectors but the Delta version has {len(cur)} and {len(want_dvs)}; nothing was published. "
            "Regenerate with `dvlake uniform sync --full`.")


def _operation(added: set[str], removed: set[str], dv_changed: set[str]) -> str:
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


def sync(table_root: str, storage: Storage | None = None, *, version: int | None = None, full: bool = False) -> int:
    """Publish Iceberg metadata for every Delta version after the last converted one, up to ``version``.

    Without earlier Iceberg metadata (or with ``full``) only the target version is converted,
    as a fresh Iceberg history. Returns the Delta version the Iceberg metadata now reflects.
    """
    root = normalize_table_root(table_root)
    storage = storage or storage_for(root)
    target = Snapshot.load(root, version=version, storage=storage)
    state = None if full else load_state(storage, root)
    if state is not None and state.delta_version >= target.version:
        return state.delta_version
    if state is None:
        convert_step(storage, root, None, None, target)
        return target.version
    try:
        prev_snapshot: Snapshot | None = Snapshot.load(root, version=state.delta_version, storage=storage)
    except Exception as exc:  # noqa: BLE001 - the old version's log may be gone: start a fresh history
        log.info("Delta version %s of %s is not loadable (%s); converting %s from scratch", state.delta_version, root,
                 exc, target.version)
        convert_step(storage, root, None, None, target)
        return target.version
    for v in range(state.delta_version + 1, target.version + 1):
        snap = target if v == target.version else Snapshot.load(root, version=v, storage=storage)
        state = convert_step(storage, root, state, prev_snapshot, snap)
        prev_snapshot = snap
    return target.version


def after_commit(table_root: str, version: int, storage: Storage) -> None:
    """Convert after a commit on a UniForm table; a failure is logged, never raised (the commit stands)."""
    try:
        sync(table_root, storage, version=version)
    except Exception as exc:  # noqa: BLE001 - Iceberg metadata is derived; the Delta commit must stand
        log.warning("commit %s of %s succeeded but its Iceberg metadata was not written: %s. Run `dvlake uniform sync "
                    "%s` to retry.", version, table_root, exc, table_root)
