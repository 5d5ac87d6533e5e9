"""The Delta schema (Spark's JSON struct format) and column mapping, without Spark.

Delta stores the schema as Spark's JSON; the Spark layer turns it into ``StructType`` directly.
Here we only need what the log itself needs: field names, partition column types, and the
logical ↔ physical naming of column mapping (``delta.columnMapping.physicalName`` / ``.id``).
"""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any

from dvlake.errors import ColumnNotFoundError, DeltaProtocolError
from dvlake.log.actions import Metadata

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
FIELD_ID_KEY = "delta.columnMapping.id"
PARQUET_FIELD_ID_KEY = "parquet.field.id"
MAX_COLUMN_ID_KEY = "delta.columnMapping.maxColumnId"
MODE_KEY = "delta.columnMapping.mode"


def column_mapping_mode(metadata: Metadata) -> str:
    """'none', 'name' or 'id'."""
    mode = metadata.configuration.get(MODE_KEY, "none").lower()
    if mode not in ("none", "name", "id"):
        raise DeltaProtocolError(f"unknown {MODE_KEY} {mode!r}; expected none, name or id")
    return mode


def fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Top-level fields of a struct schema."""
    return list(schema.get("fields", []))


def field_by_name(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """A top-level field by logical name (case-insensitive like Spark)."""
    for f in fields(schema):
        if f["name"].lower() == name.lower():
            return f
    known = ", ".join(f["name"] for f in fields(schema)) or "none"
    raise ColumnNotFoundError(f"column {name!r} is not in the table schema (columns: {known})")


def physical_name(field: dict[str, Any], mode: str) -> str:
    """The name the column has in Parquet files and in partitionValues/stats keys."""
    if mode == "none":
        return field["name"]
    meta = field.get("metadata", {})
    if PHYSICAL_NAME_KEY not in meta:
        raise DeltaProtocolError(f"column {field['name']!r} has no {PHYSICAL_NAME_KEY} under column mapping mode {mode}")
    return meta[PHYSICAL_NAME_KEY]


def physical_schema(schema: dict[str, Any], mode: str, with_field_ids: bool = True) -> dict[str, Any]:
    """The schema as stored in Parquet: physical names at every level, and (for writing) field ids.

    Writers put ``parquet.field.id`` in the files as delta-spark does. Readers match columns by
    physical name (delta-spark writes both), so they ask for ``with_field_ids=False``: Spark
    refuses a read schema with ids against files written without them.
    """
    if mode == "none":
        return schema

    def convert_type(t: Any) -> Any:
        if isinstance(t, dict):
            if t.get("type") == "struct":
                return {"type": "struct", "fields": [convert_field(f) for f in t["fields"]]}
            if t.get("type") == "array":
                return {**t, "elementType": convert_type(t["elementType"])}
            if t.get("type") == "map":
                return {**t, "keyType": convert_type(t["keyType"]), "valueType": convert_type(t["valueType"])}
        return t

    def convert_field(f: dict[str, Any]) -> dict[str, Any]:
        meta = {}
        if with_field_ids and FIELD_ID_KEY in f.get("metadata", {}):
            meta[PARQUET_FIELD_ID_KEY] = int(f["metadata"][FIELD_ID_KEY])
        return {"name": physical_name(f, mode), "type": convert_type(f["type"]), "nullable": f.get("nullable", True),
                "metadata": meta}

    return convert_type(schema)


def assign_column_mapping(schema: dict[str, Any], start_id: int = 0) -> tuple[dict[str, Any], int]:
    """Give every field (nested too) a fresh physical name and id, as delta-spark does for new tables.

    Returns the new schema and the max column id used (``delta.columnMapping.maxColumnId``).
    """
    schema = copy.deepcopy(schema)
    counter = [start_id]

    def visit_type(t: Any) -> None:
        if isinstance(t, dict):
            if t.get("type") == "struct":
                for f in t["fields"]:
                    visit_field(f)
            elif t.get("type") == "array":
                visit_type(t["elementType"])
            elif t.get("type") == "map":
                visit_type(t["keyType"])
                visit_type(t["valueType"])

    def visit_field(f: dict[str, Any]) -> None:
        meta = f.setdefault("metadata", {})
        if FIELD_ID_KEY not in meta:
            counter[0] += 1
            meta[FIELD_ID_KEY] = counter[0]
        meta.setdefault(PHYSICAL_NAME_KEY, f"col-{uuid.uuid4()}")
        visit_type(f["type"])

    visit_type(schema)
    return schema, counter[0]


def strip_column_mapping(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with column-mapping metadata removed (what users see)."""
    schema = copy.deepcopy(schema)

    def visit(t: Any) -> None:
        if isinstance(t, dict):
            for f in t.get("fields", []):
                meta = f.get("metadata", {})
                for k in (PHYSICAL_NAME_KEY, FIELD_ID_KEY, "delta.columnMapping.nested.ids"):
                    meta.pop(k, None)
                visit(f["type"])
            if t.get("type") == "array":
                visit(t["elementType"])
            if t.get("type") == "map":
                visit(t["keyType"])
                visit(t["valueType"])

    visit(schema)
    return schema


def schema_json(schema: dict[str, Any]) -> str:
    """Compact schema string as stored in ``metaData.schemaString``."""
    return json.dumps(schema, separators=(",", ":"))


def column_types(schema: dict[str, Any]) -> dict[str, str]:
    """Lower-cased dotted logical column name → Delta type name, for comparing literals with stats.

    Struct fields are listed by their dotted path; arrays, maps and strings with a collation other
    than Spark's binary order are ``"unsupported"`` (their order is not the one stats were compared in).
    So are CHAR(n) columns (Spark pads the literal to n characters before comparing).
    A double column widened from float (type widening) is ``"float"``: files written before the change
    carry float stats.
    """
    out: dict[str, str] = {}

    def visit(fields: list[dict[str, Any]], prefix: str) -> None:
        for f in fields:
            name, t = prefix + f["name"].lower(), f["type"]
            if isinstance(t, dict):
                if t.get("type") == "struct":
                    visit(t["fields"], name + ".")
                out[name] = "unsupported"
            elif "__COLLATIONS" in (f.get("metadata") or {}):
                out[name] = "unsupported"
            elif str((f.get("metadata") or {}).get("__CHAR_VARCHAR_TYPE_STRING", "")).lower().startswith("char"):
                out[name] = "unsupported"  # CHAR(n): Spark pads literals to n before comparing ('ab' = 'ab   ')
            elif t == "double" and _widened_from_float(f):
                out[name] = "float"  # older files' stats print float32 values (0.7f as 0.7): read them as floats
            else:
                out[name] = str(t)

    visit(schema.get("fields", []), "")
    return out


def _widened_from_float(field: dict[str, Any]) -> bool:
    """Whether type widening changed this field from float (``delta.typeChanges`` in its metadata)."""
    changes = (field.get("metadata") or {}).get("delta.typeChanges") or []
    return any(isinstance(c, dict) and c.get("fromType") == "float" and "fieldPath" not in c for c in changes)


#: Spark's spatial types print as ``geometry(<crs>)`` / ``geography(<crs>, <algorithm>)`` in the schema JSON.
_SPATIAL_PREFIXES = ("geometry", "geography")


def spatial_columns(schema: dict[str, Any]) -> list[str]:
    """Dotted names of the columns (nested ones too) whose type is a geospatial type, or whose elements are.

    dvlake implements none of delta-spark's geospatial support (its statistics, its table feature), so a schema with
    such a column is refused before it is committed rather than written in a form delta-spark would not write."""
    found: list[str] = []

    def visit(t: Any, name: str) -> None:
        if isinstance(t, str):
            if t.lower().startswith(_SPATIAL_PREFIXES):
                found.append(name)
        elif isinstance(t, dict):
            kind = t.get("type")
            if kind == "struct":
                for f in t.get("fields", []):
                    visit(f["type"], f"{name}.{f['name']}" if name else f["name"])
            elif kind == "array":
                visit(t.get("elementType"), f"{name}.element")
            elif kind == "map":
                visit(t.get("keyType"), f"{name}.key")
                visit(t.get("valueType"), f"{name}.value")

    visit(schema, "")
    return found

