"""Iceberg manifests and manifest lists as Avro files (format version 3), written with fastavro.

Why fastavro and not pyiceberg's writers: pyiceberg (0.12 and its main branch) refuses to write
format-version 3 manifests and manifest lists (``write_manifest`` raises for version 3), and it
would pull a catalog client stack into every commit; fastavro is a small, widely used Avro
library with a C encoder. The schemas below are the Iceberg spec's tables ("Manifests",
"Manifest Lists") written out with their field ids: readers such as pyiceberg resolve manifest
fields by ``field-id``, so every field carries one, and map-typed stats use Iceberg's
array-of-key/value-records encoding.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from typing import Any

import fastavro

from dvlake.storage.base import Storage

STATUS_EXISTING, STATUS_ADDED, STATUS_DELETED = 0, 1, 2
CONTENT_DATA, CONTENT_POSITION_DELETES = 0, 1
MANIFEST_CONTENT_DATA, MANIFEST_CONTENT_DELETES = 0, 1


def _opt(name: str, avro_type: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None, "field-id": field_id}


def _req(name: str, avro_type: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": avro_type, "field-id": field_id}


def _map(key_id: int, value_id: int, key_type: str, value_type: str) -> dict[str, Any]:
    """Iceberg writes maps with non-string keys as arrays of key/value records (logicalType map)."""
    return {"type": "array", "logicalType": "map", "items": {
        "type": "record", "name": f"k{key_id}_v{value_id}",
        "fields": [_req("key", key_type, key_id), _req("value", value_type, value_id)]}}


def _list(element_id: int, element_type: str) -> dict[str, Any]:
    return {"type": "array", "items": element_type, "element-id": element_id}


def manifest_entry_schema(partition_fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The v3 ``manifest_entry`` record; ``partition_fields`` are Avro fields of the partition struct (r102)."""
    data_file = {"type": "record", "name": "r2", "fields": [
        _req("content", "int", 134),
        _req("file_path", "string", 100),
        _req("file_format", "string", 101),
        _req("partition", {"type": "record", "name": "r102", "fields": partition_fields}, 102),
        _req("record_count", "long", 103),
        _req("file_size_in_bytes", "long", 104),
        _opt("column_sizes", _map(117, 118, "int", "long"), 108),
        _opt("value_counts", _map(119, 120, "int", "long"), 109),
        _opt("null_value_counts", _map(121, 122, "int", "long"), 110),
        _opt("nan_value_counts", _map(138, 139, "int", "long"), 137),
        _opt("lower_bounds", _map(126, 127, "int", "bytes"), 125),
        _opt("upper_bounds", _map(129, 130, "int", "bytes"), 128),
        _opt("key_metadata", "bytes", 131),
        _opt("split_offsets", _list(133, "long"), 132),
        _opt("equality_ids", _list(136, "int"), 135),
        _opt("sort_order_id", "int", 140),
        _opt("first_row_id", "long", 142),
        _opt("referenced_data_file", "string", 143),
        _opt("content_offset", "long", 144),
        _opt("content_size_in_bytes", "long", 145),
    ]}
    return {"type": "record", "name": "manifest_entry", "fields": [
        _req("status", "int", 0),
        _opt("snapshot_id", "long", 1),
        _opt("sequence_number", "long", 3),
        _opt("file_sequence_number", "long", 4),
        _req("data_file", data_file, 2),
    ]}


MANIFEST_FILE_SCHEMA: dict[str, Any] = {"type": "record", "name": "manifest_file", "fields": [
    _req("manifest_path", "string", 500),
    _req("manifest_length", "long", 501),
    _req("partition_spec_id", "int", 502),
    _req("content", "int", 517),
    _req("sequence_number", "long", 515),
    _req("min_sequence_number", "long", 516),
    _req("added_snapshot_id", "long", 503),
    _req("added_files_count", "int", 504),
    _req("existing_files_count", "int", 505),
    _req("deleted_files_count", "int", 506),
    _req("added_rows_count", "long", 512),
    _req("existing_rows_count", "long", 513),
    _req("deleted_rows_count", "long", 514),
    _opt("partitions", {"type": "array", "element-id": 508, "items": {
        "type": "record", "name": "r508", "fields": [
            _req("contains_null", "boolean", 509),
            _opt("contains_nan", "boolean", 518),
            _opt("lower_bound", "bytes", 510),
            _opt("upper_bound", "bytes", 511)]}}, 507),
    _opt("key_metadata", "bytes", 519),
    _opt("first_row_id", "long", 520),
]}


def encode(schema: dict[str, Any], records: Iterable[dict[str, Any]], metadata: dict[str, str]) -> bytes:
    """One Avro object container file (deflate, as Iceberg writers default to) as bytes."""
    buf = io.BytesIO()
    parsed = fastavro.parse_schema(schema)
    fastavro.writer(buf, parsed, records, codec="deflate", metadata=metadata)
    return buf.getvalue()


def write(storage: Storage, path: str, schema: dict[str, Any], records: Iterable[dict[str, Any]],
          metadata: dict[str, str]) -> int:
    """Write an Avro file; returns its length (manifest lists record each manifest's length)."""
    data = encode(schema, records, metadata)
    storage.write(path, data)
    return len(data)


def read(storage: Storage, path: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Records and file metadata of an Avro file written by ``write`` (the previous conversion's state)."""
    reader = fastavro.reader(io.BytesIO(storage.read_bytes(path)))
    records = list(reader)
    meta = {k: v.decode("utf-8") if isinstance(v, bytes) else v for k, v in reader.metadata.items()}
    return records, meta  # type: ignore[return-value]


def read_header(storage: Storage, path: str) -> dict[str, str]:
    """The file metadata of an Avro file, reading its header only (not its records)."""
    f = storage.open_input(path)
    try:
        reader = fastavro.reader(f)  # type: ignore[arg-type]  # parses the header; records are read lazily
        return {k: v.decode("utf-8") if isinstance(v, bytes) else v for k, v in reader.metadata.items()}
    finally:
        f.close()
