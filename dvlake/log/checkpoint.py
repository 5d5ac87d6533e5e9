"""Reading every checkpoint kind, and writing classic single-file checkpoints.

Read: classic (``N.checkpoint.parquet``), multi-part (``N.checkpoint.i.n.parquet``) and V2
(``N.checkpoint.<uuid>.json|parquet`` whose ``sidecar`` actions name Parquet files under
``_delta_log/_sidecars``). Write: classic, with the ``deletionVector`` struct in the ``add`` and
``remove`` columns exactly as delta-spark lays it out, so delta-rs and DuckDB accept it.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvlake.errors import CorruptLogError, NotARegularFileError, PathOutsideTableRootError
from dvlake.log.actions import DomainMetadata, Metadata, Protocol, Sidecar, Txn
from dvlake.log.arrow import ADD_SCHEMA, ADD_TYPE, REMOVE_SCHEMA, REMOVE_TYPE, STRING_MAP, conform, rows_to_table, struct_to_table
from dvlake.log.segment import Checkpoint, log_path
from dvlake.storage.base import Storage
from dvlake.storage.confine import check_local_files, is_inside, normalize_location
from dvlake.storage.paths import has_scheme, join

SIDECAR_DIR = "_sidecars"
_MAP_KEYS = {"partitionValues", "configuration", "options", "tags"}


def _maps_to_dicts(value: Any) -> Any:
    """pyarrow returns maps as lists of (key, value) tuples; actions want dicts."""
    if isinstance(value, dict):
        return {k: (dict(v) if k in _MAP_KEYS and isinstance(v, list) else _maps_to_dicts(v)) for k, v in value.items()}
    return value


@dataclass
class CheckpointContents:
    """The reconciled state a checkpoint stores."""

    adds: pa.Table
    removes: pa.Table
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: dict[str, Txn] = field(default_factory=dict)
    domains: dict[str, DomainMetadata] = field(default_factory=dict)


_COLUMNS = ("add", "remove", "metaData", "protocol", "txn", "domainMetadata", "sidecar", "checkpointMetadata")


def _read_parquet_actions(storage: Storage, path: str) -> pa.Table:
    data = storage.read_bytes(path)
    pf = pq.ParquetFile(io.BytesIO(data))
    present = [c for c in _COLUMNS if c in pf.schema_arrow.names]
    return pf.read(columns=present)


def read_checkpoint(storage: Storage, table_root: str, checkpoint: Checkpoint) -> CheckpointContents:
    """Load one checkpoint (any kind); CorruptLogError if it cannot be read."""
    try:
        return _read_checkpoint(storage, table_root, checkpoint)
    except (CorruptLogError, PathOutsideTableRootError, NotARegularFileError):
        raise  # a hostile sidecar is refused, never an excuse to fall back quietly
    except Exception as exc:  # noqa: BLE001 - any decoding failure means "this checkpoint is unusable"
        raise CorruptLogError(f"checkpoint {checkpoint.files[0]} of version {checkpoint.version} is unreadable: {exc}") from exc


def sidecar_location(storage: Storage, table_root: str, raw: str) -> str:
    """Where a V2 checkpoint's ``sidecar.path`` lives: the protocol keeps sidecars in ``_delta_log/_sidecars/``
    (a bare name, or an absolute path there). Anything resolving elsewhere (``..``, another table's checkpoint,
    a symlink out of the log) is refused, as is a file that is not regular; the error names the path."""
    folder = join(log_path(table_root), SIDECAR_DIR)
    location = normalize_location(raw if has_scheme(raw) or raw.startswith("/") else join(folder, raw))
    if not is_inside(folder, location):
        raise PathOutsideTableRootError(
            f"a V2 checkpoint of {table_root} names sidecar {raw!r}, which resolves to "
            f"{location}, outside {folder}; the Delta protocol keeps sidecars there, so this checkpoint is refused.")
    if storage.is_local:
        def missing(loc: str) -> CorruptLogError:
            return CorruptLogError(f"sidecar {loc} named by a V2 checkpoint of {table_root} does not exist")

        check_local_files(log_path(table_root), [location], confine=True, missing=missing)
    return location


def _read_checkpoint(storage: Storage, table_root: str, checkpoint: Checkpoint) -> CheckpointContents:
    add_parts: list[pa.Table] = []
    remove_parts: list[pa.Table] = []
    other_rows: list[dict[str, Any]] = []
    sidecars: list[Sidecar] = []

    def take_parquet(table: pa.Table) -> None:
        if "add" in table.column_names:
            col = table.column("add")
            col = col.filter(pc.is_valid(col))
            add_parts.append(struct_to_table(conform(col, ADD_TYPE), ADD_SCHEMA))
        if "remove" in table.column_names:
            col = table.column("remove")
            col = col.filter(pc.is_valid(col))
            remove_parts.append(struct_to_table(conform(col, REMOVE_TYPE), REMOVE_SCHEMA))
        for name in ("metaData", "protocol", "txn", "domainMetadata", "sidecar"):
            if name in table.column_names:
                col = table.column(name)
                col = col.filter(pc.is_valid(col))
                other_rows.extend({name: _maps_to_dicts(v)} for v in col.to_pylist())

    if checkpoint.kind == "v2" and checkpoint.files[0].endswith(".json"):
        lines = [json.loads(ln) for ln in storage.read_bytes(checkpoint.files[0]).decode("utf-8").splitlines() if ln.strip()]
        add_parts.append(rows_to_table([ln["add"] for ln in lines if ln.get("add")], ADD_SCHEMA))
        remove_parts.append(rows_to_table([ln["remove"] for ln in lines if ln.get("remove")], REMOVE_SCHEMA))
        other_rows.extend(ln for ln in lines if not (ln.get("add") or ln.get("remove")))
    else:
        for path in checkpoint.files:
            take_parquet(_read_parquet_actions(storage, path))

    for row in other_rows:
        if row.get("sidecar"):
            sidecars.append(Sidecar.from_json(row["sidecar"]))
    for sc in sidecars:
        take_parquet(_read_parquet_actions(storage, sidecar_location(storage, table_root, sc.path)))

    contents = CheckpointContents(
        adds=pa.concat_tables(add_parts) if add_parts else ADD_SCHEMA.empty_table(),
        removes=pa.concat_tables(remove_parts) if remove_parts else REMOVE_SCHEMA.empty_table(),
    )
    for row in other_rows:
        _take_non_file_action(contents, row)
    if contents.protocol is None or contents.metadata is None:
        raise CorruptLogError(f"checkpoint {checkpoint.files[0]} has no protocol or metaData action")
    return contents


def _take_non_file_action(contents: CheckpointContents, row: dict[str, Any]) -> None:
    """Record one protocol, metaData, txn or domainMetadata row of a checkpoint (sidecar rows were followed already)."""
    if row.get("protocol"):
        contents.protocol = Protocol.from_json(row["protocol"])
    elif row.get("metaData"):
        contents.metadata = Metadata.from_json(row["metaData"])
    elif row.get("txn"):
        t = Txn.from_json(row["txn"])
        contents.txns[t.app_id] = t
    elif row.get("domainMetadata"):
        d = DomainMetadata.from_json(row["domainMetadata"])
        contents.domains[d.domain] = d


# --- writing ---------------------------------------------------------------------------------

PROTOCOL_TYPE = pa.struct([
    ("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
    ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string())),
])
METADATA_TYPE = pa.struct([
    ("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
    ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
    ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
    ("configuration", STRING_MAP), ("createdTime", pa.int64()),
])
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
DOMAIN_TYPE = pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])
CHECKPOINT_SCHEMA = pa.schema([
    ("txn", TXN_TYPE), ("add", ADD_TYPE), ("remove", REMOVE_TYPE), ("metaData", METADATA_TYPE),
    ("protocol", PROTOCOL_TYPE), ("domainMetadata", DOMAIN_TYPE),
])


def _one_column_table(column: str, values: pa.Array) -> pa.Table:
    n = len(values)
    return pa.table({f.name: (values if f.name == column else pa.nulls(n, f.type)) for f in CHECKPOINT_SCHEMA},
                    schema=CHECKPOINT_SCHEMA)


def build_checkpoint_table(protocol: Protocol, metadata: Metadata, adds: pa.Table, removes: pa.Table,
                           txns: list[Txn], domains: list[DomainMetadata]) -> pa.Table:
    """All rows of a classic checkpoint: one action per row, the other columns null."""
    proto = protocol.to_json()
    proto.setdefault("readerFeatures", None)
    proto.setdefault("writerFeatures", None)
    meta = metadata.to_json()
    meta_row = {f.name: meta.get(f.name) for f in METADATA_TYPE}
    meta_row["format"] = {"provider": metadata.format_provider, "options": metadata.format_options}
    parts = [
        _one_column_table("protocol", pa.array([proto], PROTOCOL_TYPE)),
        _one_column_table("metaData", pa.array([meta_row], METADATA_TYPE)),
    ]
    if txns:
        parts.append(_one_column_table("txn", pa.array([t.to_json() for t in txns], TXN_TYPE)))
    if domains:
        parts.append(_one_column_table("domainMetadata", pa.array([d.to_json() for d in domains], DOMAIN_TYPE)))
    if adds.num_rows:
        add_struct = conform(adds.select(ADD_SCHEMA.names).cast(ADD_SCHEMA).to_struct_array(), ADD_TYPE)
        add_struct = pa.StructArray.from_arrays([add_struct.field(i) for i in range(add_struct.type.num_fields)],
                                                fields=list(ADD_TYPE))
        parts.append(_one_column_table("add", add_struct))
    if removes.num_rows:
        rm = conform(removes.select(REMOVE_SCHEMA.names).cast(REMOVE_SCHEMA).to_struct_array(), REMOVE_TYPE)
        rm = pa.StructArray.from_arrays([rm.field(i) for i in range(rm.type.num_fields)], fields=list(REMOVE_TYPE))
        parts.append(_one_column_table("remove", rm))
    return pa.concat_tables(parts)


def classic_checkpoint_path(table_root: str, version: int) -> str:
    """Where the classic checkpoint of ``version`` lives (``N.checkpoint.parquet``)."""
    return join(log_path(table_root), f"{version:020d}.checkpoint.parquet")


def write_checkpoint(storage: Storage, table_root: str, version: int, table: pa.Table, num_adds: int) -> bool:
    """Write ``N.checkpoint.parquet`` (never over an existing one) and point ``_last_checkpoint`` at it; whether
    this call wrote it (False: someone had)."""
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="snappy")
    data = buf.getvalue()
    path = classic_checkpoint_path(table_root, version)
    try:
        storage.write_if_absent(path, data)
    except FileExistsError:
        return False  # a checkpoint of a version is deterministic in content; someone wrote it already
    hint = {"version": version, "size": table.num_rows, "sizeInBytes": len(data), "numOfAddFiles": num_adds}
    storage.write(join(log_path(table_root), "_last_checkpoint"), json.dumps(hint).encode("utf-8"))
    return True
