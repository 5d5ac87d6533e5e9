"""The Delta schema and partitioning as Iceberg's: field ids from column mapping, identity partition spec.

Iceberg readers find columns in Parquet by field id, and dvlake writes ``delta.columnMapping.id``
into its Parquet files as the field id under column mapping, so the Iceberg ids are exactly the
column-mapping ids. Without column mapping a file's columns have no ids: conversion is refused
(delta-spark's IcebergCompat requires column mapping too). A name mapping over the physical
names is published as well, for files written before column mapping was enabled.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
from typing import Any

from dvlake.errors import IcebergCompatViolationError, UniformConversionError
from dvlake.log.actions import Metadata
from dvlake.log.schema import FIELD_ID_KEY, column_mapping_mode, physical_name

PARTITION_FIELD_ID_START = 1000
_PRIMITIVES = {
    "boolean": "boolean", "byte": "int", "short": "int", "integer": "int", "long": "long", "float": "float",
    "double": "double", "date": "date", "timestamp": "timestamptz", "timestamp_ntz": "timestamp", "string": "string",
    "binary": "binary",
}
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
#: identity partition values dvlake can put in a manifest's partition struct (Avro type per Iceberg type)
_PARTITION_AVRO = {"int": "int", "long": "long", "string": "string", "boolean": "boolean", "float": "float",
                   "double": "double", "date": {"type": "int", "logicalType": "date"}}
_EPOCH = dt.date(1970, 1, 1)


def require_column_mapping(metadata: Metadata, table: str) -> str:
    mode = column_mapping_mode(metadata)
    if mode not in ("name", "id"):
        raise IcebergCompatViolationError(
            f"{table}: Iceberg metadata needs column mapping (Iceberg readers find Parquet columns by field id): "
            f"table property 'delta.columnMapping.mode' must be 'name' or 'id'; current value: '{mode}'. "
            "Set it with ALTER TABLE ... SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name').",
            "DELTA_ICEBERG_COMPAT_VIOLATION.WRONG_REQUIRED_TABLE_PROPERTY")
    return mode


def _iceberg_type(delta_type: Any, where: str, mode: str) -> Any:
    if isinstance(delta_type, str):
        if delta_type in _PRIMITIVES:
            return _PRIMITIVES[delta_type]
        m = _DECIMAL.match(delta_type)
        if m:
            return f"decimal({m.group(1)}, {m.group(2)})"
        raise UniformConversionError(f"column {where}: the Delta type {delta_type!r} has no Iceberg equivalent here")
    if delta_type.get("type") == "struct":
        return {"type": "struct", "fields": [_field(f, f"{where}.{f['name']}", mode) for f in delta_type["fields"]]}
    raise UniformConversionError(
        f"column {where}: {delta_type.get('type')} columns are not converted to Iceberg yet (their element/key/value "
        "ids need delta.columnMapping.nested.ids); the table keeps its Delta form only")


def _field(f: dict[str, Any], where: str, mode: str) -> dict[str, Any]:
    meta = f.get("metadata", {})
    if FIELD_ID_KEY not in meta:
        raise UniformConversionError(f"column {where} has no {FIELD_ID_KEY}; the table's column mapping is incomplete")
    return {"id": int(meta[FIELD_ID_KEY]), "name": f["name"], "required": not f.get("nullable", True),
            "type": _iceberg_type(f["type"], where, mode)}


def iceberg_fields(metadata: Metadata, table: str) -> list[dict[str, Any]]:
    """The Iceberg schema's fields (logical names, column-mapping ids)."""
    mode = require_column_mapping(metadata, table)
    return [_field(f, f["name"], mode) for f in metadata.schema.get("fields", [])]


def max_field_id(fields: list[dict[str, Any]]) -> int:
    out = 0
    for f in fields:
        out = max(out, f["id"])
        if isinstance(f["type"], dict):
            out = max(out, max_field_id(f["type"]["fields"]))
    return out


def name_mapping(metadata: Metadata) -> list[dict[str, Any]]:
    """``schema.name-mapping.default``: each id under its physical name (files without Parquet field ids)."""
    mode = column_mapping_mode(metadata)

    def visit(fields: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for f in fields:
            entry: dict[str, Any] = {"field-id": int(f["metadata"][FIELD_ID_KEY]),
                                     "names": sorted({physical_name(f, mode), f["name"]})}
            if isinstance(f["type"], dict) and f["type"].get("type") == "struct":
                entry["fields"] = visit(f["type"]["fields"])
            out.append(entry)
        return out

    return visit(metadata.schema.get("fields", []))


def avro_name(name: str) -> str:
    """A valid Avro name for a partition field (Iceberg's rule: invalid characters become ``_x<HEX>``)."""
    out = []
    for i, c in enumerate(name):
        ok = c == "_" or c.isascii() and (c.isalpha() or (c.isdigit() and i > 0))
        out.append(c if ok else ("_" + c if c.isdigit() else f"_x{ord(c):X}"))
    return "".join(out) or "_"


def partition_spec(metadata: Metadata, fields: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    """Identity partition fields for the Delta partition columns, with their Avro type and physical key."""
    by_name = {f["name"].lower(): f for f in fields}
    raw = {f["name"].lower(): f for f in metadata.schema.get("fields", [])}
    mode = column_mapping_mode(metadata)
    out = []
    for i, col in enumerate(metadata.partition_columns):
        f = by_name.get(col.lower())
        if f is None:
            raise UniformConversionError(f"{table}: partition column {col!r} is not in the schema")
        if not isinstance(f["type"], str) or f["type"] not in _PARTITION_AVRO:
            raise UniformConversionError(
                f"{table}: partition column {col!r} of Iceberg type {f['type']} is not converted yet "
                f"(supported: {sorted(_PARTITION_AVRO)})")
        out.append({"name": avro_name(f["name"]), "transform": "identity", "source-id": f["id"],
                    "field-id": PARTITION_FIELD_ID_START + i, "_type": f["type"],
                    "_key": physical_name(raw[col.lower()], mode)})
    return out


def spec_json(spec: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in f.items() if not k.startswith("_")} for f in spec]


def partition_avro_fields(spec: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": f["name"], "type": ["null", _PARTITION_AVRO[f["_type"]]], "default": None,
             "field-id": f["field-id"]} for f in spec]


def partition_record(spec: list[dict[str, Any]], values: dict[str, str | None]) -> dict[str, Any]:
    """A Delta ``partitionValues`` map (strings, by physical name) as the manifest's partition struct."""
    return {f["name"]: _parse(values.get(f["_key"]), f["_type"]) for f in spec}


def _parse(value: str | None, iceberg_type: str) -> Any:
    if value is None or value == "":  # Delta writes a null partition value as null or ""
        return None
    if iceberg_type in ("int", "long"):
        return int(value)
    if iceberg_type in ("float", "double"):
        return float(value)
    if iceberg_type == "boolean":
        return value.lower() == "true"
    if iceberg_type == "date":
        return (dt.date.fromisoformat(value[:10]) - _EPOCH).days
    return value


#: Iceberg's single-value binary form of the types whose Delta min/max are exact values (little endian)
_BOUND_FORMATS = {"int": "<i", "long": "<q", "date": "<i"}


def bound_columns(metadata: Metadata) -> dict[str, tuple[int, str]]:
    """Top-level columns whose Delta min/max become Iceberg lower/upper bounds: physical name -> (field id, type).

    Only integer and date columns: their Delta statistics are exact values (a file with a DV keeps
    bounds that are still valid for the whole physical file, which is what Iceberg bounds describe).
    Strings (Delta truncates them) and timestamps (Delta keeps milliseconds) are left without bounds,
    since a wrong bound would let a reader skip a file it needs.
    """
    mode = column_mapping_mode(metadata)
    out = {}
    for f in metadata.schema.get("fields", []):
        t = f["type"]
        iceberg = _PRIMITIVES.get(t) if isinstance(t, str) else None
        if iceberg in _BOUND_FORMATS and FIELD_ID_KEY in f.get("metadata", {}):
            out[physical_name(f, mode)] = (int(f["metadata"][FIELD_ID_KEY]), iceberg)
    return out


def bounds(stats: dict[str, Any] | None, columns: dict[str, tuple[int, str]]) -> tuple[list[dict[str, Any]] | None, ...]:
    """(lower_bounds, upper_bounds) of a data file as manifest map entries, from its Delta stats."""
    if not stats or not columns:
        return None, None
    out: list[list[dict[str, Any]]] = [[], []]
    for i, key in enumerate(("minValues", "maxValues")):
        values = stats.get(key) or {}
        for name, (field_id, iceberg) in columns.items():
            value = values.get(name)
            if value is None or isinstance(value, (dict, list, bool)):
                continue
            if iceberg == "date":
                value = (dt.date.fromisoformat(str(value)[:10]) - _EPOCH).days
            out[i].append({"key": field_id, "value": struct.pack(_BOUND_FORMATS[iceberg], int(value))})
    return out[0] or None, out[1] or None
