"""The widenings of the typeWidening feature (PROTOCOL.md, delta-spark 4.x) and their ``delta.typeChanges`` record."""

from __future__ import annotations

from pathlib import Path

import pytest

from dvlake.log import type_widening as tw


@pytest.mark.parametrize(("old", "new", "ok"), [
    ("byte", "short", True), ("byte", "long", True), ("short", "integer", True), ("integer", "long", True),
    ("long", "integer", False), ("short", "byte", False),
    ("float", "double", True), ("double", "float", False), ("integer", "double", True), ("long", "double", False),
    ("float", "decimal(20,2)", False),
    ("date", "timestamp_ntz", True), ("date", "timestamp", False), ("timestamp_ntz", "date", False),
    ("decimal(5,2)", "decimal(10,4)", True), ("decimal(5,2)", "decimal(6,3)", True), ("decimal(5,2)", "decimal(6,4)", False),
    ("decimal(5,2)", "decimal(5,1)", False), ("decimal(5,2)", "decimal(4,2)", False),
    ("integer", "decimal(10,0)", True), ("integer", "decimal(9,0)", False), ("byte", "decimal(12,2)", True),
    ("integer", "decimal(11,2)", False), ("long", "decimal(20,0)", True), ("long", "decimal(21,2)", False),
    ("string", "binary", False), ("integer", "string", False),
])
def test_widenings_are_protocol_md_list(old: str, new: str, ok: bool) -> None:
    assert tw.is_widening(old, new) is ok


def test_iceberg_subset() -> None:
    assert tw.iceberg_can_widen("integer", "long") and tw.iceberg_can_widen("decimal(5,2)", "decimal(9,2)")
    assert not tw.iceberg_can_widen("integer", "double")
    assert not tw.iceberg_can_widen("date", "timestamp_ntz")
    assert not tw.iceberg_can_widen("decimal(5,2)", "decimal(10,4)")
    assert not tw.iceberg_can_widen("long", "decimal(20,0)")


def test_changes_recorded_on_the_nearest_struct_field_with_field_paths() -> None:
    field = {"name": "e", "type": {"type": "array", "elementType": {"type": "map", "keyType": "string",
                                                                    "valueType": "decimal(6,2)", "valueContainsNull": True},
                                   "containsNull": True}, "nullable": True, "metadata": {"comment": "kept"}}
    new_type = {"type": "array", "elementType": {"type": "map", "keyType": "string", "valueType": "decimal(10,4)",
                                                 "valueContainsNull": True}, "containsNull": True}
    out = tw.widen_field(field, new_type)
    assert out["type"] == new_type
    assert out["metadata"] == {"comment": "kept", "delta.typeChanges": [
        {"fromType": "decimal(6,2)", "toType": "decimal(10,4)", "fieldPath": "element.value"}]}
    again = tw.widen_field({**out, "type": out["type"]}, {**new_type, "elementType": {
        **new_type["elementType"], "valueType": "decimal(12,4)"}})
    assert [c["toType"] for c in again["metadata"]["delta.typeChanges"]] == ["decimal(10,4)", "decimal(12,4)"]
    assert field["metadata"] == {"comment": "kept"}  # the input is not changed


def test_struct_inside_a_column_records_on_the_inner_field_and_refusals_name_the_path() -> None:
    field = {"name": "s", "type": {"type": "struct", "fields": [{"name": "x", "type": "short", "nullable": True,
                                                                 "metadata": {}}]}, "nullable": True, "metadata": {}}
    out = tw.widen_field(field, {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True,
                                                               "metadata": {}}]})
    assert out["metadata"] == {}
    assert out["type"]["fields"][0]["metadata"] == {"delta.typeChanges": [{"fromType": "short", "toType": "long"}]}
    with pytest.raises(tw.TypeChangeRefused) as refused:
        tw.widen_field({"name": "m", "type": {"type": "map", "keyType": "integer", "valueType": "long",
                                              "valueContainsNull": True}, "nullable": True, "metadata": {}},
                       {"type": "map", "keyType": "integer", "valueType": "integer", "valueContainsNull": True})
    assert refused.value.path == "value"
    with pytest.raises(tw.TypeChangeRefused):  # IcebergCompat: Iceberg V2 has no date → timestamp_ntz
        tw.widen_field({"name": "d", "type": "date", "nullable": True, "metadata": {}}, "timestamp_ntz", iceberg=True)


def test_reading_the_record_back_and_removing_it() -> None:
    schema = {"type": "struct", "fields": [
        {"name": "a", "type": "long", "nullable": True, "metadata": {"delta.typeChanges": [
            {"fromType": "integer", "toType": "long"}]}},
        {"name": "s", "type": {"type": "struct", "fields": [{"name": "x", "type": "string", "nullable": True,
                                                             "metadata": {"delta.typeChanges": [
                                                                 {"fromType": "long", "toType": "string"}]}}]},
         "nullable": True, "metadata": {}}]}
    assert tw.type_changes(schema) == [(["a"], {"fromType": "integer", "toType": "long"}),
                                       (["s", "x"], {"fromType": "long", "toType": "string"})]
    assert tw.unsupported_changes(schema) == ["s.x: long → string"]
    clean = tw.without_type_changes(schema)
    assert tw.type_changes(clean) == [] and clean["fields"][0]["metadata"] == {}
    assert tw.type_changes(schema)  # the input keeps its record


def test_a_table_recording_a_change_that_is_no_widening_is_refused(tmp_path: Path) -> None:
    import json

    from dvlake.errors import DeltaAnalysisException
    from dvlake.log.snapshot import Snapshot

    def commit(changes: list[dict]) -> list[dict]:
        schema = {"type": "struct", "fields": [{"name": "a", "type": "string", "nullable": True,
                                                "metadata": {"delta.typeChanges": changes}}]}
        return [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["typeWidening"],
                              "writerFeatures": ["typeWidening"]}},
                {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                              "schemaString": json.dumps(schema), "partitionColumns": [], "configuration": {}}}]

    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in commit([{"fromType": "long", "toType": "string"}])))
    with pytest.raises(DeltaAnalysisException) as refused:
        Snapshot.load(str(tmp_path))
    assert refused.value.error_class == "DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA"
    assert "a: long → string" in str(refused.value)
