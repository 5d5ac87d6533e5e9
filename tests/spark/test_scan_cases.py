"""Scan cases the shared delta-spark tables lack: inline and prefixed DVs, container kinds, split
files, equal-size files, column mapping id, multi-part and V2 checkpoints, odd partition values,
missing and corrupt DV files."""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import shutil
import uuid
from dataclasses import replace

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyroaring
import pytest
from pyspark.sql import functions as F

import dvlake
import dvlake.errors
from dvlake.dv import roaring
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import DeletionVectorWriter
from dvlake.log.checkpoint import build_checkpoint_table
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import with_loose_bounds
from dvlake.txn.transaction import OptimisticTransaction, checkpoint
from tests.peers import read_with_deltalake, read_with_duckdb, rows

DV = {"delta.enableDeletionVectors": "true"}


def _ids(df):
    return sorted(r[0] for r in df.select("id").collect())


def _mark(path, rows_by_file, *, inline=False, prefix_len=0):
    """Commit DVs (rows per file index in path order) with the codec directly."""
    snap = Snapshot.load(path)
    adds = sorted(snap.add_files(), key=lambda a: a.path)
    actions = []
    with DeletionVectorWriter(path, random_prefix_length=prefix_len) as w:
        for i, rws in rows_by_file.items():
            a = adds[i]
            bm = pyroaring.BitMap64(rws)
            if a.deletion_vector is not None:
                from dvlake.dv.store import load_bitmap

                bm |= load_bitmap(a.deletion_vector, path)
            desc = (DeletionVectorDescriptor.inline(roaring.serialize(bm), len(bm)) if inline else w.add(bm))
            actions += [a.remove(), replace(a, deletion_vector=desc, stats=with_loose_bounds(a.stats))]
    OptimisticTransaction(path, snap).commit(actions, "DELETE")
    return adds


def _ids_of_file(spark, path, add):
    """The ids stored in a data file, in physical row order."""
    from dvlake.storage.paths import absolute_file_location

    return pq.read_table(absolute_file_location(path, add.path), columns=["id"]).column("id").to_pylist()


def _expect(spark, path, adds, rows_by_file):
    """All ids minus those at the marked physical rows."""
    gone = set()
    for i, rws in rows_by_file.items():
        ids = _ids_of_file(spark, path, adds[i])
        gone |= {ids[r] for r in rws}
    all_ids = [i for a in adds for i in _ids_of_file(spark, path, a)]
    return sorted(set(all_ids) - gone)


@pytest.mark.interop
def test_inline_dvs(spark, tmp_path):
    path = str(tmp_path / "inline")
    dvlake.write(spark.range(1000).repartition(2), path, properties=DV)
    marks = {0: [0, 1, 2, 499], 1: [7]}
    adds = _mark(path, marks, inline=True)
    snap = Snapshot.load(path)
    assert all(a.deletion_vector.storage_type == "i" for a in snap.add_files() if a.deletion_vector)
    expected = _expect(spark, path, adds, marks)
    assert _ids(dvlake.read(spark, path)) == expected
    assert sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])) == expected
    assert sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])) == expected


@pytest.mark.interop
def test_dv_in_random_prefix_folder(spark, tmp_path):
    path = str(tmp_path / "prefix")
    dvlake.write(spark.range(500).repartition(1), path, properties=DV)
    marks = {0: [3, 4, 5]}
    adds = _mark(path, marks, prefix_len=2)
    [a] = Snapshot.load(path).add_files()
    assert len(a.deletion_vector.path_or_inline_dv) == 22 and "/" in a.deletion_vector.relative_path()
    expected = _expect(spark, path, adds, marks)
    assert _ids(dvlake.read(spark, path)) == expected
    assert sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])) == expected
    assert sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])) == expected


@pytest.mark.interop
@pytest.mark.parametrize("join", ["word", "chunk"])
def test_bitmap_and_run_containers_and_high_chunks(spark, tmp_path, monkeypatch, join):
    from dvlake.spark import dv_scan

    if join == "chunk":  # the fallback for file sizes / row counts the one-long key cannot hold
        monkeypatch.setattr(dv_scan, "WORD_KEY_FILE_BITS", 1)
    path = str(tmp_path / "containers")
    dvlake.write(spark.range(300_000).coalesce(1), path, properties=DV)
    marks = {0: list(range(0, 65536, 3)) + list(range(70_000, 130_000)) + [299_999, 200_000]}
    adds = _mark(path, marks)
    expected = _expect(spark, path, adds, marks)
    assert _ids(dvlake.read(spark, path)) == expected
    assert len(expected) == 300_000 - len(set(marks[0]))
    assert sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])) == expected


def test_large_file_split_across_tasks(spark, tmp_path):
    import hashlib

    import pyarrow as pa

    from dvlake.commands.writes.write import create_table
    from dvlake.log.actions import AddFile
    from dvlake.spark.file_stats import footer_stats

    path = str(tmp_path / "split")
    create_table(path, {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                                     {"name": "pad", "type": "string", "nullable": True, "metadata": {}}]},
                 [], DV)
    n = 400_000
    table = pa.table({"id": pa.array(range(n), pa.int64()),
                      "pad": pa.array([hashlib.sha1(str(i).encode()).hexdigest() for i in range(n)])})
    pq.write_table(table, os.path.join(path, "big.parquet"), row_group_size=25_000)
    stats, _ = footer_stats(os.path.join(path, "big.parquet"), ["id", "pad"], tight_bounds=True)
    OptimisticTransaction(path, Snapshot.load(path)).commit(
        [AddFile("big.parquet", {}, os.path.getsize(os.path.join(path, "big.parquet")), 1, stats=stats)], "WRITE")
    [add] = Snapshot.load(path).add_files()
    md = pq.read_metadata(os.path.join(path, add.path))
    assert md.num_row_groups == 16
    boundaries = [25_000 * k for k in range(1, 16)]
    marks = {0: sorted({r for b in boundaries for r in (b - 2, b - 1, b, b + 1)} | {0, n - 1})}
    _mark(path, marks)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(os.path.getsize(os.path.join(path, "big.parquet")) // 5))
    try:
        df = dvlake.read(spark, path)
        assert df.select(F.spark_partition_id()).distinct().count() >= 4  # DataFrame API: no RDD (Connect)
        got = _ids(df)
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert got == sorted(set(range(n)) - set(marks[0]))


def test_equal_size_files_with_different_dvs(spark, tmp_path):
    path = str(tmp_path / "equal")
    dvlake.write(spark.range(0, 4000, numPartitions=4), path, properties=DV)
    adds = sorted(Snapshot.load(path).add_files(), key=lambda a: a.path)
    assert len({a.size for a in adds}) < len(adds), "the test needs files of equal size"
    marks = {0: [0, 1], 1: [2, 3], 2: [999], 3: list(range(500))}
    _mark(path, marks)
    assert _ids(dvlake.read(spark, path)) == _expect(spark, path, adds, marks)


def test_file_with_every_row_deleted_reads_no_row(spark, tmp_path):
    path = str(tmp_path / "all")
    dvlake.write(spark.range(0, 200, numPartitions=2), path, properties=DV)
    adds = _mark(path, {0: list(range(100))})
    from dvlake.spark.scan import plan_scan

    plan = plan_scan(spark, Snapshot.load(path))
    assert len(plan.files) == 2  # not pruned on cardinality == numRecords: both are unverified log metadata
    assert _ids(dvlake.read(spark, path)) == _expect(spark, path, adds, {0: list(range(100))})


@pytest.mark.interop
def test_column_mapping_id(spark, tmp_path):
    path = str(tmp_path / "cmid")
    df = spark.range(100).select(F.col("id"), (F.col("id") % 3).alias("p"), F.struct(F.col("id").alias("x")).alias("s"))
    dvlake.write(df.select("p", "id", "s"), path, partitionBy=["p"],
                 properties={**DV, "delta.columnMapping.mode": "id"})
    snap = Snapshot.load(path)
    assert snap.column_mapping_mode == "id"
    from dvlake.storage.paths import absolute_file_location

    schema = pq.read_schema(absolute_file_location(path, snap.add_files()[0].path))
    assert all(name.startswith("col-") for name in schema.names)
    assert schema.field(schema.names[0]).metadata[b"PARQUET:field_id"]
    dvlake.DeltaTable.forPath(spark, path).delete("id % 10 = 0")
    got = sorted((r.id, r.p, r.s.x) for r in dvlake.read(spark, path).collect())
    assert got == [(i, i % 3, i) for i in range(100) if i % 10]
    assert sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])) == [g[0] for g in got]


def _table_with_history(spark, path):
    dvlake.write(spark.range(0, 300, numPartitions=3), path, properties=DV)
    dvlake.DeltaTable.forPath(spark, path).delete("id % 7 = 0")
    dvlake.write(spark.range(300, 350), path, mode="append")
    dvlake.DeltaTable.forPath(spark, path).delete("id % 11 = 0")
    return [i for i in range(300) if i % 7 and i % 11] + [i for i in range(300, 350) if i % 11]


def _checkpoint_parts(path, version):
    snap = Snapshot.load(path, version=version)
    return snap, build_checkpoint_table(snap.protocol, snap.metadata, snap.files, snap.tombstones, [], [])


def _drop_commits_up_to(path, version):
    for v in range(version + 1):
        os.unlink(os.path.join(path, "_delta_log", f"{v:020d}.json"))


def _assert_read_from_checkpoint(spark, path, snap, expected):
    """With the commits up to the checkpoint gone, only the checkpoint can give these rows."""
    _drop_commits_up_to(path, 3)
    reloaded = Snapshot.load(path)
    assert reloaded.state.checkpoint_version == 3 and reloaded.num_files == snap.num_files
    assert _ids(dvlake.read(spark, path)) == expected


def test_multi_part_checkpoint(spark, tmp_path):
    path = str(tmp_path / "mp")
    expected = _table_with_history(spark, path)
    snap, table = _checkpoint_parts(path, 3)
    log = os.path.join(path, "_delta_log")
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), os.path.join(log, f"{3:020d}.checkpoint.0000000001.0000000002.parquet"))
    pq.write_table(table.slice(half), os.path.join(log, f"{3:020d}.checkpoint.0000000002.0000000002.parquet"))
    _assert_read_from_checkpoint(spark, path, snap, expected)


def test_v2_checkpoint_with_sidecar(spark, tmp_path):
    path = str(tmp_path / "v2")
    expected = _table_with_history(spark, path)
    snap, table = _checkpoint_parts(path, 3)
    log = os.path.join(path, "_delta_log")
    os.makedirs(os.path.join(log, "_sidecars"))
    sidecar = f"{uuid.uuid4()}.parquet"
    pq.write_table(table.select(["add", "remove"]).filter(pc.is_valid(table.column("add"))),
                   os.path.join(log, "_sidecars", sidecar))
    size = os.path.getsize(os.path.join(log, "_sidecars", sidecar))
    lines = [{"checkpointMetadata": {"version": 3}}, {"protocol": snap.protocol.to_json()},
             {"metaData": snap.metadata.to_json()},
             {"sidecar": {"path": sidecar, "sizeInBytes": size, "modificationTime": 1}}]
    with open(os.path.join(log, f"{3:020d}.checkpoint.{uuid.uuid4()}.json"), "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")
    _assert_read_from_checkpoint(spark, path, snap, expected)


def test_corrupt_last_checkpoint_and_checkpoint_are_tolerated(spark, tmp_path):
    path = str(tmp_path / "cp")
    expected = _table_with_history(spark, path)
    checkpoint(path, 3)
    log = os.path.join(path, "_delta_log")
    with open(os.path.join(log, "_last_checkpoint"), "w") as f:
        f.write("{not json")
    assert _ids(dvlake.read(spark, path)) == expected
    with open(os.path.join(log, f"{3:020d}.checkpoint.parquet"), "wb") as f:
        f.write(b"garbage")
    assert _ids(dvlake.read(spark, path)) == expected  # falls back to the JSON commits


@pytest.mark.interop
def test_partition_values_of_many_types(spark, tmp_path):
    path = str(tmp_path / "ptypes")
    data = [(i, ["a b", "x/y=z", "100%", None][i % 4], dt.date(2024, 1, 1 + i % 2),
             dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC) if i % 3 else None) for i in range(24)]
    df = spark.createDataFrame(data, "id long, s string, d date, ts timestamp")
    dvlake.write(df, path, partitionBy=["s", "d", "ts"], properties=DV)
    dvlake.DeltaTable.forPath(spark, path).delete("id % 5 = 0")
    got = sorted((r.id, r.s, r.d, r.ts) for r in dvlake.read(spark, path).collect())
    want = sorted((i, s, d, ts.replace(tzinfo=None) if ts else None) for i, s, d, ts in data if i % 5)
    assert [(a, b, c) for a, b, c, _ in got] == [(a, b, c) for a, b, c, _ in want]
    assert [t is None for *_, t in got] == [t is None for *_, t in want]
    duck = sorted((r["id"], r["s"], r["d"]) for r in read_with_duckdb(path).to_pylist())
    assert duck == [(a, b, c) for a, b, c, _ in want]
    assert _ids(dvlake.read(spark, path, condition="s = 'x/y=z'")) == [i for i in range(24) if i % 4 == 1 and i % 5]
    assert _ids(dvlake.read(spark, path, condition="s IS NULL")) == [i for i in range(24) if i % 4 == 3 and i % 5]


def _typed(exc: BaseException, name: str) -> bool:
    """DVs are decoded on executors: the typed error (or a narrower one of its kind, e.g. a named integrity check)
    arrives rebuilt, or its name and message inside Spark's wrapper."""
    return isinstance(exc, getattr(dvlake.errors, name)) or name in str(exc)


def test_missing_and_corrupt_dv_files_fail_the_query(spark, tmp_path):
    path = str(tmp_path / "bad")
    dvlake.write(spark.range(100).coalesce(1), path, properties=DV)
    _mark(path, {0: [1, 2, 3]})
    [a] = Snapshot.load(path).add_files()
    dv_file = a.deletion_vector.absolute_path(path)
    data = open(dv_file, "rb").read()
    corrupt = bytearray(data)
    corrupt[-6] ^= 0xFF
    open(dv_file, "wb").write(bytes(corrupt))
    with pytest.raises(Exception) as info:
        dvlake.read(spark, path).collect()
    assert _typed(info.value, "CorruptDeletionVectorError") and dv_file in str(info.value)
    os.unlink(dv_file)
    with pytest.raises(Exception) as info:
        dvlake.read(spark, path).collect()
    assert _typed(info.value, "DeletionVectorNotFoundError") and os.path.basename(dv_file) in str(info.value)
    shutil.rmtree(path)


def test_wrong_size_in_log_still_applies_dvs(spark, tmp_path):
    """The scan keys files by their real size, not by add.size: a lying log cannot un-delete rows."""
    path = str(tmp_path / "size")
    dvlake.write(spark.range(0, 1000, numPartitions=2), path, properties=DV)
    adds = _mark(path, {0: [0, 1, 2], 1: [5]})
    snap = Snapshot.load(path)
    lying = [replace(a, size=a.size + 1) for a in snap.add_files()]
    OptimisticTransaction(path, snap).commit([a.remove() for a in snap.add_files()] + lying, "FIX SIZES")
    assert _ids(dvlake.read(spark, path)) == _expect(spark, path, adds, {0: [0, 1, 2], 1: [5]})


def _forbid_driver_decoding(monkeypatch):
    from dvlake.dv import store
    from dvlake.spark import dv_words

    def forbidden(*args, **kwargs):
        raise AssertionError("a deletion vector was decoded on the driver")

    for module, name in ((store, "load_bitmap"), (store, "read_bitmap_bytes"), (dv_words, "dv_bytes"),
                         (dv_words, "bitmap_from_bytes")):
        monkeypatch.setattr(module, name, forbidden)


def test_driver_never_decodes_dvs_above_the_bound(spark, tmp_path, monkeypatch):
    """DVs above the driver's bound (rows, bytes or the scan's words budget) are decoded on executors only;
    reading and DELETE ship their descriptors, and any decoding in the driver process fails the test. DELETE's
    driver-side DV building counts the rows of the existing DVs it would merge against its own bound."""
    from dvlake.spark import dv_words

    path = str(tmp_path / "driver")
    dvlake.write(spark.range(0, 5000, numPartitions=2), path, properties=DV)
    dvlake.DeltaTable.forPath(spark, path).delete("id % 3 = 0")  # a DV of ~833 rows on each file
    dv_words.CACHE.clear()
    for bound, value in (("DRIVER_DECODE_MAX_ROWS", 100), ("DRIVER_DECODE_MAX_BYTES", 16), ("DRIVER_WORDS_BUDGET", 0)):
        with monkeypatch.context() as m:
            m.setattr(dv_words, bound, value)
            _forbid_driver_decoding(m)
            assert _ids(dvlake.read(spark, path)) == [i for i in range(5000) if i % 3], bound
    # DELETE: its 666 new pairs fit the driver's DML bound of 1000 rows, but the ~1666 rows of the existing DVs it
    # would OR them into do not, so the DVs are merged on executors
    spark.conf.set("spark.dvlake.dml.driverMarkRows", "1000")
    try:
        with monkeypatch.context() as m:
            m.setattr(dv_words, "DRIVER_DECODE_MAX_ROWS", 100)
            _forbid_driver_decoding(m)
            dvlake.DeltaTable.forPath(spark, path).delete("id % 5 = 0")
            assert _ids(dvlake.read(spark, path)) == [i for i in range(5000) if i % 3 and i % 5]
    finally:
        spark.conf.unset("spark.dvlake.dml.driverMarkRows")


def test_small_dvs_are_decoded_once_on_the_driver(spark, tmp_path, monkeypatch, request):
    """Within the bound the driver decodes a DV once; the same read again decodes nothing (the words are
    kept per table and DV), and a DV file rewritten in place is decoded again, never served stale."""
    from dvlake.spark import dv_words

    path = str(tmp_path / "small")
    dvlake.write(spark.range(0, 5000, numPartitions=2), path, properties=DV)
    dvlake.DeltaTable.forPath(spark, path).delete("id % 7 = 0")
    dv_words.CACHE.clear()
    decoded = []
    real = dv_words.bitmap_from_bytes

    def counting(descriptor, raw, where):
        decoded.append(descriptor)
        assert descriptor.cardinality <= dv_words.DRIVER_DECODE_MAX_ROWS
        assert descriptor.size_in_bytes <= dv_words.DRIVER_DECODE_MAX_BYTES
        return real(descriptor, raw, where)

    monkeypatch.setattr(dv_words, "bitmap_from_bytes", counting)
    spark.conf.set("spark.dvlake.scan.native", "false")  # the pure-Python path's driver-side decode is under test
    request.addfinalizer(lambda: spark.conf.unset("spark.dvlake.scan.native"))
    expected = [i for i in range(5000) if i % 7]
    assert _ids(dvlake.read(spark, path)) == expected
    assert len(decoded) == 2
    assert _ids(dvlake.read(spark, path)) == expected
    assert len(decoded) == 2 and dv_words.CACHE.hits >= 2
    dv_file = next(p for p in glob.glob(os.path.join(path, "*.bin")))
    data = bytearray(open(dv_file, "rb").read())
    data[-1] ^= 0xFF  # the last DV's checksum no longer matches
    open(dv_file, "wb").write(bytes(data))
    with pytest.raises(Exception) as info:
        dvlake.read(spark, path).collect()
    assert _typed(info.value, "CorruptDeletionVectorError")


@pytest.mark.parametrize("mode", ["none", "name"])
def test_column_added_later_reads_as_null_from_older_files(spark, tmp_path, mode):
    from dvlake.log.schema import assign_column_mapping, schema_json

    path = str(tmp_path / f"evolve-{mode}")
    props = {**DV, "delta.columnMapping.mode": mode} if mode != "none" else DV
    dvlake.write(spark.range(0, 10, numPartitions=1), path, properties=props)
    snap = Snapshot.load(path)
    schema = snap.schema
    new_field = {"name": "extra", "type": "string", "nullable": True, "metadata": {}}
    if mode != "none":
        wrapped, max_id = assign_column_mapping({"type": "struct", "fields": [new_field]},
                                                int(snap.configuration["delta.columnMapping.maxColumnId"]))
        new_field = wrapped["fields"][0]
    schema = {**schema, "fields": schema["fields"] + [new_field]}
    meta = replace(snap.metadata, schema_string=schema_json(schema))
    if mode != "none":
        meta = meta.with_configuration(**{"delta.columnMapping.maxColumnId": str(max_id)})
    txn = OptimisticTransaction(path, snap)
    txn.update_metadata(meta)
    txn.commit([], "ADD COLUMNS")
    dvlake.write(spark.createDataFrame([(100, "x")], "id long, extra string"), path, mode="append")
    got = sorted((r.id, r.extra) for r in dvlake.read(spark, path).collect())
    assert got == [(i, None) for i in range(10)] + [(100, "x")]
