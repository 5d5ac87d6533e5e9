"""MERGE schema evolution (``withSchemaEvolution``, autoMerge): the table schema a MERGE may grow into, as delta-
spark's ``canEvolveSchema`` allows.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession

from dvlake.commands.dml.merge.spec import MATCHED, NOT_MATCHED, MergeSpec
from dvlake.commands.dml.shared import (
    split_name,
)
from dvlake.commands.writes.options import AUTO_MERGE_CONF
from dvlake.commands.writes.type_evolution import evolved_fields
from dvlake.log.actions import Metadata
from dvlake.log.schema import MAX_COLUMN_ID_KEY, assign_column_mapping, schema_json
from dvlake.log.snapshot import Snapshot
from dvlake.log.type_widening import AUTOMATIC_ALWAYS


def evolves(spark: SparkSession, spec: MergeSpec) -> bool:
    """Schema evolution is on: asked for (``withSchemaEvolution``, ``MERGE WITH SCHEMA EVOLUTION``) or by the session
    (``spark.databricks.delta.schema.autoMerge.enabled``), as delta-spark's ``canEvolveSchema``."""
    return spec.schema_evolution or str(spark.conf.get(AUTO_MERGE_CONF, "false")).strip().lower() == "true"


def evolved_metadata(snapshot: Snapshot, spec: MergeSpec, evolving: bool,
                     widening_mode: str = AUTOMATIC_ALWAYS) -> Metadata | None:
    """With schema evolution: the metadata with the source's new columns and nested struct fields added (inside
    arrays and maps too), after the existing ones, as delta-spark's schema merge does; None when nothing is new.
    On a typeWidening table a source type wider than its column widens the column too (``widening_mode``:
    ``writes.type_evolution``); any other type difference keeps the column's type (the value is cast to it).

    As in delta-spark only source fields a MATCHED UPDATE or NOT MATCHED INSERT clause assigns count: all of
    them with a ``*`` clause, otherwise those whose name path is an assigned column (``SET t.c = …`` brings
    the source's ``c``, nested fields included)."""
    if not evolving:
        return None
    clauses = [c for c in spec.clauses if c.kind in (MATCHED, NOT_MATCHED) and c.action != "delete"]
    star = any(c.assignments is None for c in clauses)
    assigned = [_target_path(k, spec.target_alias) for c in clauses for k in (c.assignments or {})]
    src_fields = _assigned_fields(json.loads(spec.source.schema.json())["fields"], assigned, star, ())
    merged = evolved_fields(snapshot, _merged_fields(snapshot.schema["fields"], src_fields, top=True), src_fields,
                            widening_mode)
    if merged == snapshot.schema["fields"]:
        return None
    md = snapshot.metadata
    conf = dict(md.configuration)
    schema = {**snapshot.schema, "fields": merged}
    if snapshot.column_mapping_mode != "none":  # only the new fields lack an id and a physical name
        schema, max_id = assign_column_mapping(schema, start_id=int(conf.get(MAX_COLUMN_ID_KEY, "0")))
        conf[MAX_COLUMN_ID_KEY] = str(max_id)
    from dataclasses import replace

    return replace(md, schema_string=schema_json(schema), configuration=conf)


def _target_path(key: str, alias: str | None) -> tuple[str, ...]:
    parts = split_name(key)
    if alias and len(parts) > 1 and parts[0].lower() == alias.lower():
        parts = parts[1:]
    return tuple(p.lower() for p in parts)


def _assigned_fields(fields: list[dict[str, Any]], assigned: list[tuple[str, ...]], star: bool,
                     prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    """The source fields schema evolution considers: all with ``*``, else the assigned paths (and their parents)."""
    if star:
        return fields
    out = []
    for f in fields:
        path = (*prefix, f["name"].lower())
        if path in assigned:
            out.append(f)
        elif isinstance(f["type"], dict) and f["type"].get("type") == "struct" and \
                any(a[:len(path)] == path for a in assigned):
            out.append({**f, "type": {**f["type"], "fields": _assigned_fields(f["type"]["fields"], assigned, star,
                                                                             path)}})
    return out


def _merged_fields(target: list[dict[str, Any]], source: list[dict[str, Any]], top: bool = False) -> list[dict[str, Any]]:
    """``target``'s fields, each struct merged with the source field of the same name, then the source's new ones
    (nullable: the rows already there have none)."""
    out = [dict(f) for f in target]
    where = {f["name"].lower(): i for i, f in enumerate(out)}
    for f in source:
        i = where.get(f["name"].lower())
        if i is None:
            out.append({**f, "nullable": True, "metadata": {} if top else f.get("metadata", {})})
        else:
            out[i]["type"] = _merged_type(out[i]["type"], f["type"])
    return out


def _merged_type(target: Any, source: Any) -> Any:
    """A target type with the source's new nested fields; any other difference keeps the target's type (the
    values are cast to it)."""
    if not isinstance(target, dict) or not isinstance(source, dict) or target.get("type") != source.get("type"):
        return target
    kind = target["type"]
    if kind == "struct":
        return {**target, "fields": _merged_fields(target["fields"], source["fields"])}
    if kind == "array":
        return {**target, "elementType": _merged_type(target["elementType"], source["elementType"])}
    if kind == "map":
        return {**target, "keyType": _merged_type(target["keyType"], source["keyType"]),
                "valueType": _merged_type(target["valueType"], source["valueType"])}
    return target
