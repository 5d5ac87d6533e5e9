"""The DV codec: Z85, the RoaringBitmapArray format, descriptors and DV files (no Spark)."""

from __future__ import annotations

import struct
import uuid
import zlib

import pyroaring
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvlake.dv import roaring, z85
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import DeletionVectorWriter, load_bitmap, read_bitmap_bytes
from dvlake.errors import CorruptDeletionVectorError, DeletionVectorNotFoundError, InvalidDescriptorError
from dvlake.storage import storage_for

INLINE = "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"
REAL_FILE_0_9 = bytes.fromhex("01" "00000024" "d1d33964" "0100000000000000" "00000000" "3a300000" "01000000"
                              "0000" "0100" "10000000" "0000" "0900" "2a671846")


# --- Z85 ---------------------------------------------------------------------------------------

def test_z85_spec_vector():
    assert z85.encode(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    assert z85.decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")


def test_z85_pads_to_four_bytes():
    assert z85.encode(bytes([1, 2, 3, 4, 5])) == "0rJua1POJ5"
    assert z85.encode(bytes([1, 2, 3, 4])) == "0rJua"
    assert z85.decode("0rJua1POJ5")[:5] == bytes([1, 2, 3, 4, 5])


@pytest.mark.parametrize("bad,why", [("abcd", "multiple of 5"), ("abc\"d", "invalid Z85 character"),
                                     ("#####", "above 2\\*\\*32-1")])
def test_z85_rejects_bad_input(bad, why):
    with pytest.raises(InvalidDescriptorError, match=why):
        z85.decode(bad)


@given(st.binary(max_size=64))
def test_z85_round_trip(data):
    assert z85.decode(z85.encode(data))[: len(data)] == data


def test_uuid_tokens():
    u = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert z85.decode_uuid(z85.encode_uuid(u)) == u
    assert len(z85.encode_uuid(uuid.uuid4())) == 20


# --- RoaringBitmapArray ------------------------------------------------------------------------

def test_inline_example_from_the_design():
    d = DeletionVectorDescriptor("i", INLINE, 44, 6)
    assert sorted(load_bitmap(d, "/unused")) == [3, 4, 7, 11, 18, 29]
    assert d.unique_id == "i" + INLINE


def test_protocol_md_example_3_is_rejected():
    # PROTOCOL.md's "JSON Example 3" is the legacy layout written big-endian: not a valid DV
    bad = b"\x64\x39\xd3\xd0" + struct.pack(">I", 1) + struct.pack(">I", 28) + b"\x3a\x30\x00\x00" + b"\x00" * 24
    d = DeletionVectorDescriptor.inline(bad, 6)
    with pytest.raises(CorruptDeletionVectorError, match="magic"):
        load_bitmap(d, "/unused")


def test_serialization_matches_delta_spark_bytes():
    assert roaring.serialize(pyroaring.BitMap64([0, 9])) == REAL_FILE_0_9[5:-4]


def test_legacy_native_layout_is_refused():
    # PROTOCOL.md defines one bitmap layout for DVs (magic 1681511377); delta-spark's in-memory "native" layout is
    # not a DV format: refused with the native scan's words (tests/spark/test_native_scan.py checks both paths)
    bm32 = pyroaring.BitMap([1, 5, 70000])
    body = bm32.serialize()
    empty = pyroaring.BitMap().serialize()
    data = struct.pack("<I", roaring.MAGIC_NATIVE) + struct.pack("<I", 2) + struct.pack("<I", len(empty)) \
        + empty + struct.pack("<I", len(body)) + body
    with pytest.raises(CorruptDeletionVectorError, match="1681511376 is delta-spark's non-portable"):
        roaring.deserialize(data)


row_sets = st.one_of(
    st.just([]),
    st.integers(0, 2**40).map(lambda x: [x]),
    st.tuples(st.integers(0, 2**33), st.integers(1, 200_000)).map(lambda t: list(range(t[0], t[0] + t[1]))),
    st.lists(st.integers(0, 2**32 - 1), max_size=3000),
    st.lists(st.integers(0, 5 * 2**32 + 100), max_size=500),
)


@settings(max_examples=60, deadline=None)
@given(row_sets)
def test_roaring_round_trip(rows):
    bm = pyroaring.BitMap64(rows)
    data = roaring.serialize(bm)
    assert data[:4] == b"\xd1\xd3\x39\x64"
    assert roaring.deserialize(data) == pyroaring.BitMap64(rows)
    if not rows or max(rows) < 2**32:
        ref = pyroaring.BitMap64(rows)
        ref.run_optimize()
        assert data == b"\xd1\xd3\x39\x64" + ref.serialize()


def test_roaring_containers_array_bitmap_run():
    for rows in (range(0, 4000, 2), range(0, 65536, 3), range(100, 60000)):  # array, bitmap, run containers
        assert roaring.deserialize(roaring.serialize(pyroaring.BitMap64(rows))) == pyroaring.BitMap64(rows)


def test_garbage_bitmap_is_an_error():
    for data in (b"", b"\xd1\xd3", b"\x00\x00\x00\x00rest", b"\xd1\xd3\x39\x64\xff\xff\xff"):
        with pytest.raises(CorruptDeletionVectorError):
            roaring.deserialize(data)


# --- descriptors -------------------------------------------------------------------------------

def test_relative_path_with_random_prefix():
    d = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 40, 6, 4)
    assert d.relative_path() == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert d.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    for root in ("/t", "/t/", "s3://bucket/t", "s3://bucket/t/"):
        assert d.absolute_path(root).endswith("/t/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin")
        assert "//ab" not in d.absolute_path(root)


def test_absolute_path_descriptor_is_percent_decoded():
    d = DeletionVectorDescriptor("p", "file:/x/folder%26with%25special%20char/deletion_vector_1.bin", 10, 1, 1)
    assert d.absolute_path("/whatever") == "/x/folder&with%special char/deletion_vector_1.bin"
    s3 = DeletionVectorDescriptor("p", "s3://b/a%20b/dv.bin", 10, 1, 1)
    assert s3.absolute_path("/t") == "s3://b/a b/dv.bin"


def test_json_round_trip_never_writes_max_row_index():
    j = {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": 1, "sizeInBytes": 36, "cardinality": 2,
         "maxRowIndex": 9}
    d = DeletionVectorDescriptor.from_json(j)
    assert d.to_json() == {k: v for k, v in j.items() if k != "maxRowIndex"}
    assert list(d.to_json()) == ["storageType", "pathOrInlineDv", "offset", "sizeInBytes", "cardinality"]
    assert DeletionVectorDescriptor.from_json({**j, "offset": None}).offset is None
    with pytest.raises(InvalidDescriptorError):
        DeletionVectorDescriptor.from_json({**j, "storageType": "x"})


# --- DV files ----------------------------------------------------------------------------------

def test_writer_reproduces_delta_spark_file(tmp_path):
    with DeletionVectorWriter(str(tmp_path)) as w:
        d = w.add(pyroaring.BitMap64([0, 9]))
    [path] = w.files_written
    assert open(path, "rb").read() == REAL_FILE_0_9
    assert (d.storage_type, d.offset, d.size_in_bytes, d.cardinality) == ("u", 1, 36, 2)
    assert d.absolute_path(str(tmp_path)) == path


def test_writer_packs_and_rolls(tmp_path):
    with DeletionVectorWriter(str(tmp_path), target_file_size=200) as w:
        ds = [w.add(pyroaring.BitMap64(range(i, i + 3))) for i in range(0, 60, 10)]
    assert ds[0].offset == 1 and ds[1].offset == 1 + 4 + ds[0].size_in_bytes + 4
    assert len(w.files_written) == 2
    for i, d in enumerate(ds):
        assert sorted(load_bitmap(d, str(tmp_path))) == list(range(i * 10, i * 10 + 3))


def test_no_file_without_dvs(tmp_path):
    with DeletionVectorWriter(str(tmp_path)) as w:
        pass
    assert w.files_written == [] and list(tmp_path.iterdir()) == []


def test_random_prefix_folder(tmp_path):
    with DeletionVectorWriter(str(tmp_path), random_prefix_length=2) as w:
        d = w.add(pyroaring.BitMap64([7]))
    assert len(d.path_or_inline_dv) == 22 and "/" in d.relative_path()
    assert sorted(load_bitmap(d, str(tmp_path))) == [7]


def _one_dv(tmp_path, rows=(1, 2, 3, 100_000)):
    with DeletionVectorWriter(str(tmp_path)) as w:
        d = w.add(pyroaring.BitMap64(rows))
    return d, w.files_written[0]


def test_every_flipped_byte_is_detected(tmp_path):
    d, path = _one_dv(tmp_path)
    original = open(path, "rb").read()
    for i in range(len(original)):
        corrupt = bytearray(original)
        corrupt[i] ^= 0x5A
        open(path, "wb").write(bytes(corrupt))
        with pytest.raises(CorruptDeletionVectorError) as info:
            load_bitmap(d, str(tmp_path))
        assert path in str(info.value)
    open(path, "wb").write(original)
    assert len(load_bitmap(d, str(tmp_path))) == 4


@pytest.mark.parametrize("damage,match", [
    (lambda b: b[:-3], "needs bytes"),
    (lambda b: b"\x02" + b[1:], "version"),
])
def test_truncation_and_version(tmp_path, damage, match):
    d, path = _one_dv(tmp_path)
    original = open(path, "rb").read()
    open(path, "wb").write(damage(original))
    with pytest.raises(CorruptDeletionVectorError, match=match):
        load_bitmap(d, str(tmp_path))


def test_offset_past_end_and_cardinality_mismatch(tmp_path):
    d, path = _one_dv(tmp_path)
    with pytest.raises(CorruptDeletionVectorError, match="needs bytes"):
        load_bitmap(DeletionVectorDescriptor(d.storage_type, d.path_or_inline_dv, d.size_in_bytes, 4, 500), str(tmp_path))
    with pytest.raises(CorruptDeletionVectorError, match="cardinality mismatch"):
        load_bitmap(DeletionVectorDescriptor(d.storage_type, d.path_or_inline_dv, d.size_in_bytes, 5, d.offset),
                    str(tmp_path))
    with pytest.raises(CorruptDeletionVectorError, match="size mismatch"):
        wrong_size = DeletionVectorDescriptor("u", d.path_or_inline_dv, d.size_in_bytes - 2, 4, d.offset)
        read_bitmap_bytes(storage_for(str(tmp_path)), path, wrong_size)


def test_missing_file(tmp_path):
    d, path = _one_dv(tmp_path)
    import os

    os.unlink(path)
    with pytest.raises(DeletionVectorNotFoundError, match="does not exist"):
        load_bitmap(d, str(tmp_path))


def test_crc_is_standard_crc32(tmp_path):
    d, path = _one_dv(tmp_path)
    raw = open(path, "rb").read()
    body = raw[5:5 + d.size_in_bytes]
    assert struct.unpack(">I", raw[5 + d.size_in_bytes:])[0] == zlib.crc32(body)
