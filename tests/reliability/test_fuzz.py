"""Fuzzing the parsers a hostile table feeds: DV bitmaps, DV files, Z85, descriptors, commit JSON,
checkpoints. The only exceptions allowed out are dvlake's typed errors, and memory stays bounded
(a size field of 2**31 must never allocate 2 GiB).

CI runs a fixed, derandomized sample (``DVLAKE_FUZZ_EXAMPLES`` per target, default 200); set it
higher (e.g. 20000) for a long run on demand, and ``DVLAKE_FUZZ_RANDOM=1`` for fresh seeds.
"""

from __future__ import annotations

import gc
import io
import json
import os
import resource
import struct
import tempfile
import zlib

import pyroaring
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvlake.dv import roaring, z85
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import read_bitmap_bytes
from dvlake.errors import (
    CorruptDeletionVectorError,
    CorruptLogError,
    DeletionVectorError,
    DvlakeError,
    InvalidDescriptorError,
)
from dvlake.log.checkpoint import read_checkpoint
from dvlake.log.replay import read_commit
from dvlake.log.segment import Checkpoint
from dvlake.log.snapshot import Snapshot
from dvlake.storage.base import storage_for

EXAMPLES = int(os.environ.get("DVLAKE_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=os.environ.get("DVLAKE_FUZZ_RANDOM") != "1", deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture], database=None)
MAX_RSS_GROWTH_KB = 512 * 1024  # far below the 2 GiB a trusted size field would ask for


def _rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@pytest.fixture
def bounded_memory():
    """Peak-RSS growth bound, for the tests that feed huge size fields. Not autouse: the peak is process-wide, so
    work still finishing from an earlier test file (a timed-out read thread) would be blamed on the first fuzz test."""
    gc.collect()
    before = _rss_kb()
    yield
    grown = _rss_kb() - before
    assert grown < MAX_RSS_GROWTH_KB, f"peak memory grew by {grown // 1024} MiB while fuzzing"


def _valid_bitmap_bytes(rows: list[int]) -> bytes:
    return roaring.serialize(pyroaring.BitMap64(rows))


SAMPLE = _valid_bitmap_bytes([0, 3, 4, 70_000, 1 << 33])


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` with a few bytes overwritten, inserted or cut (closer to real damage than pure noise)."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["set", "cut", "insert", "u32"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif op == "cut":
            del data[at:at + draw(st.integers(1, 8))]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif len(data) >= at + 4:  # a size or count field set to something huge
            data[at:at + 4] = struct.pack("<I", draw(st.sampled_from([2**31, 2**32 - 1, 2**16, 0])))
    return bytes(data)


# --- DV bitmaps --------------------------------------------------------------------------------


@FUZZ
@given(st.one_of(st.binary(max_size=256), mutated(SAMPLE), mutated(struct.pack("<I", roaring.MAGIC_NATIVE) + b"\x01" * 40)))
def test_bitmap_decoder_raises_only_typed_errors(data: bytes) -> None:
    try:
        bm = roaring.deserialize(data)
    except CorruptDeletionVectorError:
        return
    assert isinstance(bm, pyroaring.BitMap64)


@pytest.mark.usefixtures("bounded_memory")
@pytest.mark.parametrize("field", [2**31, 2**32 - 1, 2**63])
def test_huge_counts_do_not_allocate(field: int) -> None:
    magic = struct.pack("<I", roaring.MAGIC_PORTABLE)
    for body in (struct.pack("<Q", field), struct.pack("<Q", 1) + struct.pack("<I", 0) + struct.pack("<I", field & 0xFFFFFFFF)):
        with pytest.raises(CorruptDeletionVectorError):
            roaring.deserialize(magic + body)
    native = struct.pack("<I", roaring.MAGIC_NATIVE) + struct.pack("<I", (field & 0xFFFFFFFF) or 1) + struct.pack("<I", 2**31)
    with pytest.raises(CorruptDeletionVectorError):
        roaring.deserialize(native)


@FUZZ
@given(st.lists(st.integers(0, 2**40), max_size=200))
def test_bitmap_round_trip(rows: list[int]) -> None:
    assert sorted(set(rows)) == list(roaring.deserialize(_valid_bitmap_bytes(rows)))


# --- DV files ----------------------------------------------------------------------------------


def _dv_file(bitmap: bytes) -> bytes:
    return b"\x01" + struct.pack(">I", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap) & 0xFFFFFFFF)


@pytest.mark.usefixtures("bounded_memory")
@FUZZ
@given(st.one_of(st.binary(max_size=128), mutated(_dv_file(SAMPLE))), st.integers(-5, 200),
       st.sampled_from([len(SAMPLE), 0, 1, 2**31, 2**32 - 1, -1]))
def test_dv_file_reader_raises_only_typed_errors(content: bytes, offset: int, size: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "dv.bin")
        with open(path, "wb") as f:
            f.write(content)
        desc = DeletionVectorDescriptor("u", "0" * 20, size, 5, offset)
        try:
            data = read_bitmap_bytes(storage_for(d), path, desc)
        except DeletionVectorError:
            return
        assert len(data) == size


# --- Z85 and descriptors -----------------------------------------------------------------------


@FUZZ
@given(st.text(max_size=60))
def test_z85_decoder_raises_only_typed_errors(text: str) -> None:
    try:
        z85.decode(text)
    except InvalidDescriptorError:
        pass


@FUZZ
@given(st.binary(max_size=64))
def test_z85_round_trip(data: bytes) -> None:
    assert z85.decode(z85.encode(data))[: len(data)] == data


JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats(allow_nan=True) | st.text(max_size=30),
                    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children,
                                                                                       max_size=4), max_leaves=12)
DESCRIPTOR_FIELDS = st.fixed_dictionaries({}, optional={
    "storageType": st.sampled_from(["u", "p", "i", "x", ""]) | JSON,
    "pathOrInlineDv": st.text(alphabet=z85.ALPHABET + "/.~", max_size=45) | JSON,
    "offset": st.integers(-10, 2**40) | JSON,
    "sizeInBytes": st.integers(-10, 2**40) | JSON,
    "cardinality": st.integers(-10, 2**40) | JSON,
})


@FUZZ
@given(st.one_of(DESCRIPTOR_FIELDS, JSON))
def test_descriptor_parsing_raises_only_typed_errors(d: object) -> None:
    try:
        desc = DeletionVectorDescriptor.from_json(d)  # type: ignore[arg-type]
        if desc.storage_type == "u":
            desc.relative_path()
        elif desc.storage_type == "i":
            desc.inline_bitmap_bytes()
        desc.absolute_path("/tmp/table")
    except InvalidDescriptorError:
        pass


# --- commits and checkpoints -------------------------------------------------------------------


def _table_with_commit(d: str, commit: bytes) -> str:
    log = os.path.join(d, "_delta_log")
    os.makedirs(log)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
    first = [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                           "writerFeatures": ["deletionVectors"]}},
             {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                           "partitionColumns": [], "configuration": {"delta.enableDeletionVectors": "true"}}}]
    with open(os.path.join(log, f"{0:020d}.json"), "w") as f:
        f.write("\n".join(json.dumps(x) for x in first) + "\n")
    with open(os.path.join(log, f"{1:020d}.json"), "wb") as f:
        f.write(commit)
    return d


GOOD_ADD = {"add": {"path": "a.parquet", "partitionValues": {}, "size": 10, "modificationTime": 1, "dataChange": True,
                    "stats": '{"numRecords": 3}', "deletionVector": {"storageType": "u", "pathOrInlineDv": "0" * 20,
                                                                      "offset": 1, "sizeInBytes": 10, "cardinality": 1}}}
ACTION = st.one_of(
    st.builds(lambda k, v: {k: v}, st.sampled_from(["add", "remove", "protocol", "metaData", "txn", "domainMetadata",
                                                    "commitInfo", "cdc", "sidecar"]), JSON),
    st.builds(lambda field, v: {"add": {**GOOD_ADD["add"], field: v}},
              st.sampled_from(list(GOOD_ADD["add"])), JSON),
    st.just(GOOD_ADD),
)


@FUZZ
@given(st.one_of(st.binary(max_size=200), st.lists(ACTION, max_size=5).map(
    lambda acts: "\n".join(json.dumps(a) for a in acts).encode())))
def test_commit_parsing_raises_only_typed_errors(commit: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = _table_with_commit(d, commit)
        try:
            read_commit(storage_for(root), os.path.join(root, "_delta_log", f"{1:020d}.json"))
            snap = Snapshot.load(root)
            snap.add_files()
            snap.num_records()
            snap.dv_cardinalities()
        except DvlakeError:
            pass


def _checkpoint_bytes() -> bytes:
    import pyarrow.parquet as pq

    from dvlake.log.actions import Metadata, Protocol
    from dvlake.log.arrow import ADD_SCHEMA, REMOVE_SCHEMA
    from dvlake.log.checkpoint import build_checkpoint_table

    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
    table = build_checkpoint_table(Protocol(1, 2), Metadata("x", schema), ADD_SCHEMA.empty_table(),
                                   REMOVE_SCHEMA.empty_table(), [], [])
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


CHECKPOINT = _checkpoint_bytes()


@FUZZ
@given(st.one_of(st.binary(max_size=300), mutated(CHECKPOINT)))
def test_checkpoint_parsing_raises_only_typed_errors(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{0:020d}.checkpoint.parquet")
        with open(path, "wb") as f:
            f.write(data)
        try:
            read_checkpoint(storage_for(d), d, Checkpoint(0, "classic", (path,)))
        except CorruptLogError:
            pass


def test_map_field_with_a_null_entry_is_a_typed_error_not_an_abort() -> None:
    """Found by the fuzzer: pyarrow aborts the process on a map entry without a key."""
    add = {**GOOD_ADD["add"], "partitionValues": [None]}
    with tempfile.TemporaryDirectory() as d:
        root = _table_with_commit(d, json.dumps({"add": add}).encode())
        with pytest.raises(CorruptLogError, match="partitionValues"):
            Snapshot.load(root)
