"""Geospatial columns are refused before anything is committed (README: geospatial types are left out).

dvlake implements none of delta-spark's geospatial support, so a schema naming GEOMETRY or GEOGRAPHY anywhere (nested
in a struct, an array or a map too) must not reach the log: creating such a table, or adding such a column to an
existing one, raises and the table stays as it was."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from dvlake.commands.writes.write import create_table
from dvlake.errors import UnsupportedFeatureError
from dvlake.log.schema import spatial_columns
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction


def _schema(*extra: dict) -> dict:
    return {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}, *extra]}


def _field(name: str, t: object) -> dict:
    return {"name": name, "type": t, "nullable": True, "metadata": {}}


def test_spatial_columns_are_found_at_every_depth() -> None:
    schema = _schema(
        _field("g", "geometry(OGC:CRS84)"),
        _field("s", {"type": "struct", "fields": [_field("h", "geography(OGC:CRS84, SPHERICAL)"), _field("x", "int")]}),
        _field("a", {"type": "array", "elementType": "geometry(4326)", "containsNull": True}),
        _field("m", {"type": "map", "keyType": "string", "valueType": "geography(4326)", "valueContainsNull": True}),
        _field("plain", {"type": "map", "keyType": "string", "valueType": "binary", "valueContainsNull": True}))
    assert spatial_columns(schema) == ["g", "s.h", "a.element", "m.value"]
    assert spatial_columns(_schema(_field("geometry", "string"))) == []  # a column *named* geometry is fine


def test_creating_a_table_with_a_geometry_column_is_refused(tmp_path) -> None:
    root = str(tmp_path / "t")
    with pytest.raises(UnsupportedFeatureError, match=r"column\(s\) g have a geospatial type"):
        create_table(root, _schema(_field("g", "geometry(OGC:CRS84)")))
    assert not os.path.exists(os.path.join(root, "_delta_log", "00000000000000000000.json"))


def test_adding_a_geography_column_is_refused_and_the_table_keeps_its_schema(tmp_path) -> None:
    root = str(tmp_path / "t")
    create_table(root, _schema())
    before = Snapshot.load(root)
    txn = OptimisticTransaction(root, before)
    spatial = _schema(_field("h", "geography(OGC:CRS84, SPHERICAL)"))
    txn.update_metadata(dataclasses.replace(before.metadata, schema_string=json.dumps(spatial)))
    with pytest.raises(UnsupportedFeatureError, match=r"column\(s\) h have a geospatial type"):
        txn.commit([], "ADD COLUMNS")
    after = Snapshot.load(root)
    assert after.version == before.version and after.metadata.schema == before.metadata.schema
