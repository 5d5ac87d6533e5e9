"""UniForm's Spark-free parts: DV blobs are the Delta DV records, Puffin layout, Avro field ids, schema and rules."""

from __future__ import annotations

import io
import json
import struct
import zlib

import fastavro
import pyroaring
import pytest

from dvlake.dv.store import DeletionVectorWriter, read_bitmap_bytes
from dvlake.errors import IcebergCompatViolationError, UniformConversionError, UniversalFormatViolationError
from dvlake.log.actions import Metadata
from dvlake.log.schema import assign_column_mapping, schema_json
from dvlake.storage.base import storage_for
from dvlake.uniform import avro, compat
from dvlake.uniform.puffin import MAGIC, PuffinBuilder, dv_blob
from dvlake.uniform.schema import (
    bound_columns,
    bounds,
    iceberg_fields,
    partition_avro_fields,
    partition_record,
    partition_spec,
)

SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {}},
    {"name": "day", "type": "date", "nullable": True, "metadata": {}},
    {"name": "s", "type": {"type": "struct", "fields": [{"name": "x", "type": "string", "nullable": True, "metadata": {}}]},
     "nullable": True, "metadata": {}},
]}


def _metadata(conf: dict[str, str], mapped: bool = True, partition: tuple[str, ...] = ()) -> Metadata:
    schema = assign_column_mapping(SCHEMA)[0] if mapped else SCHEMA
    if mapped:
        conf = {"delta.columnMapping.mode": "name", **conf}
    return Metadata(id="t", schema_string=schema_json(schema), partition_columns=partition, configuration=conf)


def test_dv_blob_is_the_delta_dv_record_byte_for_byte(tmp_path):
    root = str(tmp_path)
    with DeletionVectorWriter(root) as w:
        first = w.add(pyroaring.BitMap64([1, 5, 9]))
        second = w.add(pyroaring.BitMap64([0, 2**33 + 7]))
    raw = (tmp_path / w.files_written[0].rsplit("/", 1)[1]).read_bytes()
    storage = storage_for(root)
    for d in (first, second):
        record = raw[d.offset: d.offset + 4 + d.size_in_bytes + 4]
        assert dv_blob(read_bitmap_bytes(storage, w.files_written[0], d)) == record
        assert record[4:8] == bytes([0xD1, 0xD3, 0x39, 0x64])


def test_puffin_footer_locates_each_blob():
    builder = PuffinBuilder()
    bitmaps = [b"\x01\x02\x03\x04abc", b"\xd1\xd3\x39\x64" + b"x" * 20]
    blobs = [builder.add_dv(f"file:///t/{i}.parquet", bm, i + 1) for i, bm in enumerate(bitmaps)]
    data = builder.render()
    assert data[:4] == MAGIC and data[-4:] == MAGIC and data[-8:-4] == b"\x00" * 4
    size = struct.unpack("<i", data[-12:-8])[0]
    assert data[-12 - size - 4: -12 - size] == MAGIC
    footer = json.loads(data[-12 - size: -12])
    for blob, meta, bm in zip(blobs, footer["blobs"], bitmaps, strict=True):
        assert (meta["offset"], meta["length"]) == (blob.offset, blob.length)
        assert meta["type"] == "deletion-vector-v1" and meta["snapshot-id"] == -1 and meta["sequence-number"] == -1
        assert meta["properties"] == {"referenced-data-file": blob.referenced_data_file, "cardinality": str(blob.cardinality)}
        payload = data[blob.offset: blob.offset + blob.length]
        assert payload[4:-4] == bm and struct.unpack(">I", payload[-4:])[0] == zlib.crc32(bm)


def test_manifest_avro_keeps_field_ids():
    """pyiceberg resolves manifest fields by field-id: the written schema must carry every id."""
    spec = [{"name": "day", "_type": "date", "field-id": 1000}]
    data = avro.encode(avro.manifest_entry_schema(partition_avro_fields(spec)), [], {"format-version": "3"})
    written = json.loads(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"])
    data_file = next(f for f in written["fields"] if f["name"] == "data_file")
    ids = {f["name"]: f["field-id"] for f in data_file["type"]["fields"]}
    assert ids["referenced_data_file"] == 143 and ids["content_offset"] == 144 and ids["first_row_id"] == 142
    partition = next(f for f in data_file["type"]["fields"] if f["name"] == "partition")
    assert partition["type"]["fields"][0]["field-id"] == 1000


def test_schema_uses_column_mapping_ids():
    md = _metadata({}, partition=("day",))
    fields = iceberg_fields(md, "t")
    assert [(f["id"], f["name"], f["required"]) for f in fields] == [(1, "id", True), (2, "day", False), (3, "s", False)]
    assert fields[2]["type"]["fields"][0]["id"] == 4
    spec = partition_spec(md, fields, "t")
    assert [(f["source-id"], f["transform"]) for f in spec] == [(2, "identity")]
    key = spec[0]["_key"]
    assert partition_record(spec, {key: "1970-01-11"}) == {"day": 10}
    assert partition_record(spec, {key: None}) == {"day": None}


def test_schema_without_column_mapping_is_refused():
    with pytest.raises(IcebergCompatViolationError, match="WRONG_REQUIRED_TABLE_PROPERTY"):
        iceberg_fields(_metadata({}, mapped=False), "t")


def test_array_columns_are_refused_not_guessed():
    schema = {"type": "struct", "fields": [
        {"name": "a", "type": {"type": "array", "elementType": "long", "containsNull": True}, "nullable": True,
         "metadata": {}}]}
    md = Metadata(id="t", schema_string=schema_json(assign_column_mapping(schema)[0]),
                  configuration={"delta.columnMapping.mode": "name"})
    with pytest.raises(UniformConversionError, match="array"):
        iceberg_fields(md, "t")


@pytest.mark.parametrize("column_type", [
    {"type": "array", "elementType": "long", "containsNull": True},
    {"type": "struct", "fields": [{"name": "m", "type": {"type": "map", "keyType": "string", "valueType": "long",
                                                         "valueContainsNull": True}, "nullable": True, "metadata": {}}]},
], ids=["array", "map-in-struct"])
def test_v2_refuses_arrays_and_maps_at_enabling_time(column_type):
    """Conversion cannot publish them (no nested field ids), so enabling refuses them instead of every commit's
    conversion failing after the commit landed."""
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                           {"name": "a", "type": column_type, "nullable": True, "metadata": {}}]}
    conf = {"delta.columnMapping.mode": "name", "delta.enableIcebergCompatV2": "true",
            "delta.universalFormat.enabledFormats": "iceberg"}
    md = Metadata(id="t", schema_string=schema_json(assign_column_mapping(schema)[0]), configuration=conf)
    with pytest.raises(IcebergCompatViolationError, match=r"UNSUPPORTED_DATA_TYPE[\s\S]*(array|map)"):
        compat.check_metadata(md, {"icebergCompatV2", "columnMapping"}, 0, "t")


@pytest.mark.parametrize(("conf", "error", "match"), [
    ({"delta.universalFormat.enabledFormats": "iceberg"}, UniversalFormatViolationError, "ICEBERG_COMPAT_REQUIRED"),
    ({"delta.enableIcebergCompatV3": "true"}, IcebergCompatViolationError, "MISSING_REQUIRED_TABLE_FEATURE.*icebergCompatV3"),
    ({"delta.enableIcebergCompatV2": "true", "delta.enableIcebergCompatV3": "true"}, IcebergCompatViolationError,
     "VERSION_MUTUAL_EXCLUSIVE"),
    ({"delta.enableIcebergCompatV2": "true", "delta.enableDeletionVectors": "true"}, IcebergCompatViolationError,
     "DELETION_VECTORS_SHOULD_BE_DISABLED"),
])
def test_enabling_rules(conf, error, match):
    with pytest.raises(error, match=match):
        compat.check_metadata(_metadata(conf), {"icebergCompatV2"}, 0, "t")


V3 = {"delta.enableIcebergCompatV3": "true", "delta.universalFormat.enabledFormats": "iceberg",
      "delta.enableDeletionVectors": "true", "delta.enableRowTracking": "true"}
V3_FEATURES = {"icebergCompatV3", "rowTracking", "domainMetadata", "columnMapping", "deletionVectors"}


def test_v3_allows_dvs_and_requires_row_tracking_and_column_mapping():
    compat.check_metadata(_metadata(V3), V3_FEATURES, 5, "t")  # DVs enabled and live: fine in V3
    with pytest.raises(IcebergCompatViolationError, match="MISSING_REQUIRED_TABLE_FEATURE.*rowTracking"):
        compat.check_metadata(_metadata(V3), V3_FEATURES - {"rowTracking"}, 0, "t")
    with pytest.raises(IcebergCompatViolationError, match="WRONG_REQUIRED_TABLE_PROPERTY.*enableRowTracking.*'false'"):
        compat.check_metadata(_metadata({**V3, "delta.enableRowTracking": "false"}), V3_FEATURES, 0, "t")
    with pytest.raises(IcebergCompatViolationError, match="IcebergCompatV3 requires table property 'delta.columnMapping"):
        compat.check_metadata(_metadata(V3, mapped=False), V3_FEATURES, 0, "t")
    assert compat.writer_features_for(V3) == {"icebergCompatV3", "rowTracking", "domainMetadata"}


def test_v3_turns_row_tracking_on_unless_the_table_already_tracks_rows():
    assert compat.properties_to_set(None, V3 | {"delta.enableRowTracking": "x"}, "t") == {}  # the user's value stays
    conf = {k: v for k, v in V3.items() if k != "delta.enableRowTracking"}
    assert compat.properties_to_set(None, conf, "t") == {"delta.enableRowTracking": "true"}
    assert compat.properties_to_set(_metadata({}), conf, "t") == {"delta.enableRowTracking": "true"}
    assert compat.properties_to_set(_metadata(V3), conf, "t") == {}  # already V3
    with pytest.raises(IcebergCompatViolationError, match="DVLAKE_ICEBERG_COMPAT_V3_ROW_TRACKING_ALREADY_ENABLED"):
        compat.properties_to_set(_metadata({"delta.enableRowTracking": "true"}), conf, "t")


def test_v3_cannot_be_disabled():
    compat.check_not_disabled(_metadata(V3), _metadata(V3), "t")
    compat.check_not_disabled(None, _metadata({}), "t")
    with pytest.raises(IcebergCompatViolationError, match="DVLAKE_ICEBERG_COMPAT_CANNOT_BE_DISABLED"):
        compat.check_not_disabled(_metadata(V3), _metadata({**V3, "delta.enableIcebergCompatV3": "false"}), "t")


def test_v2_rules_pass_and_catch_live_dvs_and_missing_feature():
    conf = {"delta.enableIcebergCompatV2": "true", "delta.universalFormat.enabledFormats": "iceberg"}
    compat.check_metadata(_metadata(conf), {"icebergCompatV2", "columnMapping"}, 0, "t")
    with pytest.raises(IcebergCompatViolationError, match="DELETION_VECTORS_NOT_PURGED"):
        compat.check_metadata(_metadata(conf), {"icebergCompatV2"}, 3, "t")
    with pytest.raises(IcebergCompatViolationError, match="MISSING_REQUIRED_TABLE_FEATURE"):
        compat.check_metadata(_metadata(conf), {"columnMapping"}, 0, "t")
    with pytest.raises(IcebergCompatViolationError, match="WRONG_REQUIRED_TABLE_PROPERTY"):
        compat.check_metadata(_metadata(conf, mapped=False), {"icebergCompatV2"}, 0, "t")


def test_bounds_only_for_exact_integer_and_date_stats():
    schema = {"type": "struct", "fields": [
        {"name": "i", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "l", "type": "long", "nullable": True, "metadata": {}},
        {"name": "d", "type": "date", "nullable": True, "metadata": {}},
        {"name": "s", "type": "string", "nullable": True, "metadata": {}},
        {"name": "t", "type": "timestamp", "nullable": True, "metadata": {}}]}
    mapped = assign_column_mapping(schema)[0]
    md = Metadata(id="t", schema_string=schema_json(mapped), configuration={"delta.columnMapping.mode": "name"})
    cols = bound_columns(md)
    phys = {f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in mapped["fields"]}
    assert sorted(i for i, _ in cols.values()) == [1, 2, 3]
    stats = {"minValues": {phys["i"]: -2, phys["l"]: 2**40, phys["d"]: "1970-01-03", phys["s"]: "a"},
             "maxValues": {phys["i"]: 7, phys["d"]: "1970-02-01", phys["t"]: "2024-01-01T00:00:00.000Z"}}
    lower, upper = bounds(stats, cols)
    assert {e["key"]: e["value"] for e in lower} == {1: struct.pack("<i", -2), 2: struct.pack("<q", 2**40),
                                                      3: struct.pack("<i", 2)}
    assert {e["key"]: e["value"] for e in upper} == {1: struct.pack("<i", 7), 3: struct.pack("<i", 31)}
    assert bounds(None, cols) == (None, None)
