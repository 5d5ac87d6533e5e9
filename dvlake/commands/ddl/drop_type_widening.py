"""DROP FEATURE typeWidening: the pre-downgrade work that gives a widened table back to readers without the feature.

A reader that does not know type widening reads each file with the type the schema names; a file written before a
widening holds the narrow type, and such a reader would fail on it or misread it. So, as delta-spark 4.x's
pre-downgrade for the feature, before the protocol may drop it:

1. unset ``delta.enableTypeWidening`` (no new widening can start; a concurrent one conflicts on the metadata);
2. rewrite every live file whose Parquet footer still holds an older type of a widened column (read with the table's
   types, so the values are widened exactly, DVs applied, and written back with the wide types: REORG's commit shape,
   as delta-spark's REORG … for type widening);
3. remove every ``delta.typeChanges`` from the schema in one metadata commit, once no live file needs it.

Which files to rewrite is read from the footers, not guessed from versions: a file is rewritten when a leaf that has
a recorded change is stored with another type than the schema's. The rest of the drop (barrier checkpoints and
``checkpointProtection``, or TRUNCATE HISTORY) is DROP FEATURE's, shared with deletionVectors (``drop_feature.py``).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from dvlake.commands.common import mode_of
from dvlake.commands.ddl.properties import unset_properties
from dvlake.commands.maintenance.optimize import OptimizeRequest, optimize
from dvlake.log import type_widening
from dvlake.log.schema import physical_name, schema_json
from dvlake.log.snapshot import Snapshot
from dvlake.spark.file_stats import read_footer
from dvlake.storage.paths import absolute_file_location
from dvlake.txn.transaction import OptimisticTransaction


def _delta_name(t: pa.DataType) -> str | None:
    """The Delta atomic type a Parquet column read by pyarrow stands for (None: not one type widening deals with)."""
    names = {pa.int8(): "byte", pa.int16(): "short", pa.int32(): "integer", pa.int64(): "long", pa.float32(): "float",
             pa.float64(): "double", pa.date32(): "date"}
    if t in names:
        return names[t]
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp_ntz" if t.tz is None else "timestamp"
    return None


def _normal(t: Any) -> Any:
    return t.replace(" ", "") if isinstance(t, str) else t


def _leaf(arrow: pa.DataType, steps: list[str]) -> pa.DataType | None:
    for step in steps:
        if step == "element" and (pa.types.is_list(arrow) or pa.types.is_large_list(arrow)):
            arrow = arrow.value_type
        elif step == "key" and pa.types.is_map(arrow):
            arrow = arrow.key_type
        elif step == "value" and pa.types.is_map(arrow):
            arrow = arrow.item_type
        else:
            return None
    return arrow


def _widened_leaves(schema: dict[str, Any], mode: str) -> list[tuple[list[str], list[str], Any]]:
    """(physical path of the struct field, steps below it, its current type there) for every field with a change."""
    out: list[tuple[list[str], list[str], Any]] = []

    def visit(fields: list[dict[str, Any]], prefix: list[str]) -> None:
        for f in fields:
            path = [*prefix, physical_name(f, mode)]
            for change in (f.get("metadata") or {}).get(type_widening.TYPE_CHANGES_KEY) or []:
                steps = str(change.get("fieldPath") or "").split(".") if change.get("fieldPath") else []
                current: Any = f["type"]
                for step in steps:
                    current = current[{"element": "elementType", "key": "keyType", "value": "valueType"}[step]]
                out.append((path, steps, current))
            t = f["type"]
            while isinstance(t, dict) and t.get("type") in ("array", "map"):
                t = t.get("elementType") or t.get("valueType")
            if isinstance(t, dict) and t.get("type") == "struct":
                visit(t["fields"], path)

    visit(schema.get("fields", []), [])
    return out


def _arrow_field(schema: pa.Schema, path: list[str]) -> pa.DataType | None:
    """The arrow type at a physical struct path (through lists/maps of structs too); None when the file lacks it."""
    if path[0] not in schema.names:
        return None
    t = schema.field(path[0]).type
    for name in path[1:]:
        while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
            t = t.value_type if not pa.types.is_map(t) else t.item_type
        if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
            return None
        t = t.field(name).type
    return t


def needs_rewrite(snapshot: Snapshot, arrow_schema: pa.Schema) -> bool:
    """Whether a file with this footer schema holds an older type of a widened leaf (unknown types: rewrite)."""
    for path, steps, current in _widened_leaves(snapshot.schema, mode_of(snapshot.metadata)):
        column = _arrow_field(arrow_schema, path)
        if column is None:
            continue  # the file predates the column: it is read as nulls of the current type
        leaf = _leaf(column, steps)
        if leaf is None or _delta_name(leaf) != _normal(current):
            return True
    return False


def files_to_rewrite(snapshot: Snapshot) -> set[str]:
    """The live files (their ``path`` as the log has it) that still hold an older type of a widened column."""
    if not type_widening.type_changes(snapshot.schema):
        return set()
    out = set()
    for add in snapshot.add_files():
        footer = read_footer(snapshot.storage, absolute_file_location(snapshot.table_root, add.path))
        if needs_rewrite(snapshot, footer.schema.to_arrow_schema()):
            out.add(add.path)
    return out


def traces_left(snapshot: Snapshot) -> str | None:
    """What in ``snapshot`` still uses type widening (the property on, or recorded changes), None when clean."""
    if type_widening.is_enabled(snapshot.configuration):
        return f"set {type_widening.ENABLE_KEY} = true again"
    changes = type_widening.type_changes(snapshot.schema)
    if changes:
        return f"left type changes in the schema of version {snapshot.version} (on {sorted({'.'.join(p) for p, _ in changes})})"
    return None


def metadata_uses(meta: dict[str, Any]) -> bool:
    """Whether a ``metaData`` action uses the feature: recorded type changes in its schema (delta-spark's rule)."""
    text = meta.get("schemaString") or "{}"
    return type_widening.TYPE_CHANGES_KEY in text and bool(type_widening.type_changes(json.loads(text)))


def remove_type_widening_traces(spark: SparkSession, root: str) -> bool:
    """Unset the property, rewrite the files with older types, drop the type-change metadata; True when any was there."""
    snapshot = Snapshot.load(root)
    if traces_left(snapshot) is None:
        return False
    if type_widening.ENABLE_KEY in snapshot.configuration:
        unset_properties(root, [type_widening.ENABLE_KEY], if_exists=True)
    stale = files_to_rewrite(Snapshot.load(root))
    if stale:
        optimize(spark, root, OptimizeRequest(purge=True, rewrite_paths=frozenset(stale)))
    snapshot = Snapshot.load(root)
    left = files_to_rewrite(snapshot)
    if left:  # a concurrent REORG/OPTIMIZE raced us: the caller's re-validation reports it, nothing is dropped
        return True
    if type_widening.type_changes(snapshot.schema):
        txn = OptimisticTransaction(root, snapshot)
        txn.update_metadata(replace(snapshot.metadata,
                                    schema_string=schema_json(type_widening.without_type_changes(snapshot.schema))))
        columns = sorted({".".join(p) for p, _ in type_widening.type_changes(snapshot.schema)})
        txn.commit([], "DROP FEATURE", {"columns": json.dumps(columns)})  # delta-spark's UpdateColumnMetadata
    return True
