"""Which schema changes a Delta stream may read across: delta-spark's source rules, from the log alone.

A stream reads every file with one schema: the table's at the version that was the latest when the
query (re)started (delta-spark's ``snapshotAtSourceInit``). Files written under another schema are
read with it, so each ``metaData`` action between the stream's position and that version, and the
schema at the position the query resumes from, is checked against it (``checkReadIncompatibleSchemaChanges``):

* **column mapping changes** (a column renamed or dropped: a physical column with another logical
  name, or gone; a changed partitioning; a column mapping downgrade) cannot be read across at all: old
  files would come back under the new names, or without the dropped column. delta-spark asks for a
  ``schemaTrackingLocation`` (``DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG``), which
  dvlake does not have, so the error says to start a new query from the version of the change;
* **read compatibility**: every column of the files' schema must be in the read schema, with the same
  type and no tighter nullability (``SchemaUtils.isReadCompatible``). Reading older files with a newer
  schema that only added columns is fine (they read as null); a change after the read schema fails the
  query with ``DELTA_SCHEMA_CHANGED_WITH_VERSION`` (a restart takes the new schema), or, when the query
  was told where to start, ``DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS``.

Pure functions over the log's schema JSON; no Spark.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dvlake.errors import (
    DifferentTableReadByStreamError,
    StreamingIncompatibleSchemaChangeError,
    StreamingSchemaChangedError,
    StreamingSchemaChangedWithStartingOptionsError,
)
from dvlake.log.schema import MODE_KEY, PHYSICAL_NAME_KEY


@dataclass(frozen=True)
class TableSchema:
    """What the rules compare of one ``metaData``: table id, schema JSON, partition columns, column mapping mode."""

    table_id: str
    schema: dict[str, Any]
    partition_columns: tuple[str, ...]
    mapping_mode: str

    @classmethod
    def from_action(cls, metadata: dict[str, Any]) -> TableSchema:
        """From a ``metaData`` action as the log stores it."""
        mode = str((metadata.get("configuration") or {}).get(MODE_KEY, "none")).lower()
        return cls(str(metadata["id"]), json.loads(metadata["schemaString"]),
                   tuple(metadata.get("partitionColumns") or ()), mode)


def check_readable(read: TableSchema, read_version: int, data: TableSchema, version: int, root: str,
                   starting_options: bool) -> None:
    """Raise when the files of ``data`` (the table's schema at ``version``) cannot be read with ``read`` (the stream's
    schema, the table's at ``read_version``).

    Raises:
        DifferentTableReadByStreamError: the two belong to different tables (the table was re-created).
        StreamingIncompatibleSchemaChangeError: a column was renamed or dropped (column mapping), or the
            partitioning changed, between the two versions.
        StreamingSchemaChangedError / StreamingSchemaChangedWithStartingOptionsError: ``data`` has a column the
            read schema lacks, or another type or a nullable column the read schema says is not null.
    """
    backfilling = version < read_version
    old, new = (data, read) if backfilling else (read, data)
    if new.table_id != old.table_id:
        raise DifferentTableReadByStreamError(
            f"the stream on {root} read table id {read.table_id}, but version {version} belongs to table id "
            f"{data.table_id} (the table was re-created); start the query with a new checkpoint location")
    change = column_mapping_change(new, old)
    if change is not None:
        raise StreamingIncompatibleSchemaChangeError(
            f"the stream on {root} cannot read across version {version}: {change} between version "
            f"{min(version, read_version)} and version {max(version, read_version)}, and the stream reads every file "
            f"with the schema of version {read_version} (old files would come back under the new column names, or "
            f"without the dropped columns). Streaming reads of non-additive schema changes need delta-spark's "
            f"schemaTrackingLocation, which dvlake does not support: start a new query (new checkpoint) with "
            f"startingVersion at or after the version of the change. Read schema: {_columns(read.schema)}; schema at "
            f"version {version}: {_columns(data.schema)}")
    problem = read_incompatibility(data.schema, read.schema)
    if problem is None and tuple(data.partition_columns) != tuple(read.partition_columns):
        problem = f"the partition columns changed from {list(old.partition_columns)} to {list(new.partition_columns)}"
    if problem is None:
        return
    what = (f"the schema of {root} at version {version} cannot be read with the stream's schema (of version "
            f"{read_version}): {problem}. Read schema: {_columns(read.schema)}; schema at version {version}: "
            f"{_columns(data.schema)}.")
    if starting_options:
        raise StreamingSchemaChangedWithStartingOptionsError(
            f"{what} The query was given startingVersion or startingTimestamp: start it at or after version "
            f"{version} so that every file it reads has the new schema, or restart it (a restart reads with the "
            "table's latest schema)")
    if backfilling:
        raise StreamingSchemaChangedError(
            f"{what} The stream is behind a schema change its read schema cannot cover; start a new query (new "
            f"checkpoint) with startingVersion at or after version {version}")
    raise StreamingSchemaChangedError(f"{what} Restart the query (from the same checkpoint) to read the new schema")


def column_mapping_change(new: TableSchema, old: TableSchema) -> str | None:
    """What non-additive change lies between ``old`` and the later ``new`` (delta-spark's
    ``hasNoColumnMappingSchemaChanges``), or None: a rename, a drop, a repartition, a column mapping downgrade."""
    if old.mapping_mode == "none" and new.mapping_mode == "none":
        return None
    if new.mapping_mode == "none":
        return "column mapping was turned off"
    old_columns = _physical_columns(old.schema, old.mapping_mode != "none")
    new_columns = _physical_columns(new.schema, True)
    for path, name in old_columns.items():
        if path not in new_columns:
            return f"column {name!r} was dropped"
        if new_columns[path] != name:
            return f"column {name!r} was renamed to {new_columns[path]!r}"
    if tuple(new.partition_columns) != tuple(old.partition_columns):
        return f"the partition columns changed from {list(old.partition_columns)} to {list(new.partition_columns)}"
    return None


def _physical_columns(schema: dict[str, Any], mapped: bool) -> dict[tuple[str, ...], str]:
    """Every column (nested ones too) by its physical path -> its logical dotted name. Without column mapping the
    physical name is the logical one (what enabling column mapping on an existing table keeps)."""
    out: dict[tuple[str, ...], str] = {}
    for physical, logical in _walk(schema, (), (), mapped):
        out[physical] = ".".join(logical)
    return out


def _walk(t: Any, physical: tuple[str, ...], logical: tuple[str, ...],
          mapped: bool) -> Iterator[tuple[tuple[str, ...], tuple[str, ...]]]:
    if not isinstance(t, dict):
        return
    kind = t.get("type")
    if kind == "struct":
        for f in t.get("fields", []):
            name = str(f["name"])
            phys = str((f.get("metadata") or {}).get(PHYSICAL_NAME_KEY, name)) if mapped else name
            yield (*physical, phys), (*logical, name)
            yield from _walk(f["type"], (*physical, phys), (*logical, name), mapped)
    elif kind == "array":
        yield from _walk(t.get("elementType"), (*physical, "element"), (*logical, "element"), mapped)
    elif kind == "map":
        yield from _walk(t.get("keyType"), (*physical, "key"), (*logical, "key"), mapped)
        yield from _walk(t.get("valueType"), (*physical, "value"), (*logical, "value"), mapped)


def read_incompatibility(existing: dict[str, Any], read: dict[str, Any], at: str = "") -> str | None:
    """Why files of schema ``existing`` cannot be read with schema ``read`` (delta-spark's ``isReadCompatible`` with
    tightened nullability forbidden), or None when they can: a column missing from ``read``, another type, or a
    column ``read`` says is not null that ``existing`` allows nulls in."""
    read_fields = {str(f["name"]).lower(): f for f in read.get("fields", [])}
    for f in existing.get("fields", []):
        name = str(f["name"])
        if name.lower() not in read_fields:
            return f"column {at}{name} is not in the read schema"
        r = read_fields[name.lower()]
        if str(r["name"]) != name:
            return f"column {at}{name} is named {at}{r['name']} in the read schema"
        if bool(f.get("nullable", True)) and not bool(r.get("nullable", True)):
            return f"column {at}{name} may hold nulls but the read schema says it is not null"
        problem = _type_incompatibility(f["type"], r["type"], f"{at}{name}")
        if problem is not None:
            return problem
    return None


def _type_incompatibility(existing: Any, read: Any, at: str) -> str | None:
    if isinstance(existing, dict) and isinstance(read, dict) and existing.get("type") == read.get("type"):
        kind = existing.get("type")
        if kind == "struct":
            return read_incompatibility(existing, read, at + ".")
        if kind == "array":
            if existing.get("containsNull", True) and not read.get("containsNull", True):
                return f"the elements of {at} may be null but the read schema says they are not"
            return _type_incompatibility(existing.get("elementType"), read.get("elementType"), f"{at}.element")
        if kind == "map":
            if existing.get("valueContainsNull", True) and not read.get("valueContainsNull", True):
                return f"the values of {at} may be null but the read schema says they are not"
            return (_type_incompatibility(existing.get("keyType"), read.get("keyType"), f"{at}.key")
                    or _type_incompatibility(existing.get("valueType"), read.get("valueType"), f"{at}.value"))
    if existing != read:
        return f"column {at} has type {_type_name(existing)}, the read schema has {_type_name(read)}"
    return None


def _type_name(t: Any) -> str:
    return t if isinstance(t, str) else str(t.get("type")) if isinstance(t, dict) else repr(t)


def _columns(schema: dict[str, Any]) -> str:
    """A short form of a schema for messages: ``id long, s struct, ...``."""
    return ", ".join(f"{f['name']} {_type_name(f['type'])}" for f in schema.get("fields", []))
