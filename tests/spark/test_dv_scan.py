"""The physical scan (``dvlake.spark.dv_scan.scan_files``) on Parquet files written by Spark with DVs
written by the codec's writer: exact rows against expected sets, no Delta log involved."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import glob
import io
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyroaring
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import DateType, DecimalType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from dvlake.dv import roaring
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import DeletionVectorWriter
from dvlake.spark import dv_scan
from dvlake.spark.dv_scan import FILE_INDEX_COL, ROW_INDEX_COL, ScanFile, scan_files

ID_SCHEMA = StructType([StructField("id", LongType())])
NO_PARTITIONS = StructType([])


def _write(spark, root: str, name: str, df) -> list[str]:
    """Write ``df`` as Parquet under root/name; the data files, sorted."""
    out = os.path.join(root, name)
    df.write.mode("overwrite").parquet(out)
    return sorted(glob.glob(os.path.join(out, "*.parquet")))


def _ids_in_file(path: str) -> list[int]:
    """ids in physical row order (row index = list position)."""
    return pq.read_table(path, columns=["id"]).column("id").to_pylist()


def _scan_file(path: str, dv=None, partition_values: tuple = ()) -> ScanFile:
    return ScanFile(path=path, size=os.path.getsize(path), num_records=pq.ParquetFile(path).metadata.num_rows, dv=dv,
                    partition_values=partition_values)


def _dvs(root: str, marks: dict[str, list[int]], **writer_args) -> dict[str, DeletionVectorDescriptor]:
    """One DV per file (path → deleted row indexes), written with the codec's writer."""
    out = {}
    with DeletionVectorWriter(root, **writer_args) as w:
        for path, rows in marks.items():
            out[path] = w.add(pyroaring.BitMap64(rows))
    return out


def _expected(paths: list[str], marks: dict[str, list[int]]) -> list[int]:
    out = []
    for p in paths:
        dead = set(marks.get(p, ()))
        out += [v for i, v in enumerate(_ids_in_file(p)) if i not in dead]
    return sorted(out)


def _ids(df) -> list[int]:
    return sorted(r[0] for r in df.select("id").collect())


def _plan(df) -> str:
    """The physical plan as ``explain`` prints it: public API, so it works on classic and Spark Connect."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        df.explain()
    return out.getvalue()


@pytest.fixture
def root(tmp_path) -> str:
    return str(tmp_path)


def test_no_dvs_is_a_plain_parquet_scan(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 3000, numPartitions=3))
    df = scan_files(spark, [_scan_file(p) for p in paths], ID_SCHEMA, NO_PARTITIONS, root)
    assert df.columns == ["id"]
    assert _ids(df) == list(range(3000))
    plan = _plan(df)
    assert "Join" not in plan and "Python" not in plan and "ArrowEval" not in plan and "_metadata" not in plan
    assert "MapInArrow" not in plan


def test_dvs_in_some_files(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 4000, numPartitions=4))
    marks = {paths[0]: [0, 1, 2, 999], paths[2]: list(range(10, 500, 7))}
    dvs = _dvs(root, marks)
    files = [_scan_file(p, dvs.get(p)) for p in paths]
    df = scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, root)
    assert _ids(df) == _expected(paths, marks)
    assert df.count() == 4000 - 4 - len(marks[paths[2]])


def test_dv_deleting_every_row_reads_no_row(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 300, numPartitions=3))
    n0 = pq.ParquetFile(paths[0]).metadata.num_rows
    marks = {paths[0]: list(range(n0)), paths[1]: [5]}
    dvs = _dvs(root, marks)
    files = [_scan_file(p, dvs.get(p)) for p in paths]
    expected = _expected(paths, marks)
    # the file is read with its DV applied, not skipped on the strength of cardinality == numRecords
    # (unverified log metadata: a lie there would hide live rows; tests/reliability/test_regressions.py)
    assert _ids(scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, root)) == expected
    # every file fully deleted: no row, the right schema
    assert scan_files(spark, files[:1], ID_SCHEMA, NO_PARTITIONS, root).collect() == []


def test_empty_file_list(spark, root):
    schema = StructType([StructField("id", LongType()), StructField("s", StringType())])
    parts = StructType([StructField("p", IntegerType())])
    df = scan_files(spark, [], schema, parts, root)
    assert df.schema.names == ["id", "s", "p"] and df.collect() == []


def test_inline_dv(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 1000, numPartitions=2))
    rows = [3, 4, 7, 11, 18, 29, 499]
    bitmap = pyroaring.BitMap64(rows)
    inline = DeletionVectorDescriptor.inline(roaring.serialize(bitmap), len(bitmap))
    files = [_scan_file(paths[0], inline), _scan_file(paths[1])]
    assert _ids(scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, root)) == _expected(paths, {paths[0]: rows})


@pytest.mark.parametrize("key", ["one long", "two columns"])
def test_bitmap_and_run_containers(spark, root, monkeypatch, key):
    if key == "two columns":  # the key for file sizes / row counts the one-long key cannot hold
        monkeypatch.setattr(dv_scan, "WORD_KEY_FILE_BITS", 1)
    paths = _write(spark, root, "t", spark.range(0, 300_000, numPartitions=1))
    dense = list(range(0, 65536, 3))            # 21,846 rows in chunk 0: a bitmap container
    run = list(range(70_000, 130_000))           # a deleted range: run containers
    scattered = [131_071, 131_072, 200_000, 262_143, 299_999]
    marks = {paths[0]: dense + run + scattered}
    dvs = _dvs(root, marks)
    containers = pyroaring.BitMap(marks[paths[0]])  # rows < 2**32: the same containers as the DV's one bucket
    containers.run_optimize()
    stats = containers.get_statistics()
    assert stats["n_bitset_containers"] >= 1 and stats["n_run_containers"] >= 1
    df = scan_files(spark, [_scan_file(paths[0], dvs[paths[0]])], ID_SCHEMA, NO_PARTITIONS, root)
    got = _ids(df)
    assert got == _expected(paths, marks)
    assert len(got) == 300_000 - len(set(marks[paths[0]]))


def test_large_file_split_across_tasks(spark, root):
    n, group = 240_000, 10_000
    path = os.path.join(root, "big", "big.parquet")
    os.makedirs(os.path.dirname(path))
    rng = np.random.default_rng(3)
    ids = rng.permutation(n).astype(np.int64)  # ids unrelated to positions
    pad = pa.array([f"{v:016x}{v * 7919:016x}" for v in ids.tolist()])
    pq.write_table(pa.table({"id": ids, "pad": pad}), path, row_group_size=group)
    # Spark gives each split the row groups whose midpoint falls in its byte range, so every split starts
    # at a row-group boundary: deleting rows on both sides of each covers every split boundary
    boundaries = range(0, n + 1, group)
    dead = sorted({r for b in boundaries for r in (b - 2, b - 1, b, b + 1) if 0 <= r < n})
    dvs = _dvs(root, {path: dead})
    schema = StructType([StructField("id", LongType()), StructField("pad", StringType())])
    size = os.path.getsize(path)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(size // 9))
    spark.conf.set("spark.sql.files.openCostInBytes", "0")
    try:
        df = scan_files(spark, [_scan_file(path, dvs[path])], schema, NO_PARTITIONS, root)
        tasks = df.select(F.spark_partition_id().alias("p")).distinct().count()
        got = sorted(r[0] for r in df.select("id").collect())
        # the same rows when a pushed-down filter lets the reader skip row groups
        filtered = scan_files(spark, [_scan_file(path, dvs[path])], schema, NO_PARTITIONS, root,
                              data_filter=F.col("pad") >= "8")
        got_filtered = sorted(r[0] for r in filtered.select("id").collect())
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
        spark.conf.unset("spark.sql.files.openCostInBytes")
    assert tasks >= 4
    keep = np.ones(n, bool)
    keep[dead] = False
    assert got == sorted(ids[keep].tolist())
    pads = np.array(pad.to_pylist())
    assert got_filtered == sorted(ids[keep & (pads >= "8")].tolist())


def test_equal_size_files_with_different_dvs(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 4000, numPartitions=4))
    sizes = [os.path.getsize(p) for p in paths]
    assert len(set(sizes)) < len(sizes), "the test needs files of equal size"
    marks = {paths[0]: [0, 1], paths[1]: [2, 3], paths[2]: [999], paths[3]: list(range(500))}
    dvs = _dvs(root, marks)
    files = [_scan_file(p, dvs[p]) for p in paths]
    assert _ids(scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, root)) == _expected(paths, marks)
    with_index = scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, root, include_row_index=True).collect()
    for r in with_index:
        assert _ids_in_file(paths[r[FILE_INDEX_COL]])[r[ROW_INDEX_COL]] == r["id"]
    assert sorted(r["id"] for r in with_index) == _expected(paths, marks)


PARTITION_SCHEMA = StructType([StructField("s", StringType()), StructField("d", DateType()),
                               StructField("n", IntegerType()), StructField("x", DecimalType(10, 2)),
                               StructField("ts", TimestampType())])
PARTITION_VALUES = [
    ("a b/c=d%20é'\"", dt.date(2024, 1, 1), 1, decimal.Decimal("1.25"),
     dt.datetime(2024, 5, 6, 7, 8, 9, tzinfo=dt.UTC)),
    (None, dt.date(2024, 2, 29), None, None, None),
    ("", None, -7, decimal.Decimal("-0.01"), dt.datetime(1970, 1, 1, tzinfo=dt.UTC)),
    ("x", dt.date(2024, 1, 1), 2, decimal.Decimal("99999999.99"), None),
]


def _partitioned(spark, root, many: bool = False):
    """Files with partition values of several types (incl. nulls); DVs on every other file. With
    ``many``, 40 files of distinct sizes, each with its own partition tuple."""
    if many:
        n = 40
        out = os.path.join(root, "many")
        (spark.range(0, n * n).withColumn("g", F.floor(F.sqrt("id"))).repartition("g")
         .write.partitionBy("g").parquet(out))  # file g holds 2g+1 rows: distinct sizes
        paths = sorted(glob.glob(os.path.join(out, "g=*", "*.parquet")), key=lambda p: int(p.split("g=")[1].split("/")[0]))
    else:
        paths = _write(spark, root, "t", spark.range(0, 400 * len(PARTITION_VALUES), numPartitions=len(PARTITION_VALUES)))
    marks = {p: [0, 3, 50] for k, p in enumerate(paths) if k % 2 == 0}
    marks = {p: [r for r in rows if r < pq.ParquetFile(p).metadata.num_rows] or [0] for p, rows in marks.items()}
    dvs = _dvs(root, marks)
    values = [PARTITION_VALUES[k % len(PARTITION_VALUES)] for k in range(len(paths))]
    if many:  # a distinct tuple per file
        values = [(f"{v[0]}-{k}", *v[1:]) for k, v in enumerate(values)]
    files = [_scan_file(p, dvs.get(p), v) for p, v in zip(paths, values, strict=True)]
    expected = []
    for p, v in zip(paths, values, strict=True):
        dead = set(marks.get(p, ()))
        expected += [(i, *v) for k, i in enumerate(_ids_in_file(p)) if k not in dead]
    return files, sorted(expected, key=lambda r: r[0])


def _rows(df):
    out = []
    for r in df.collect():
        ts = r["ts"]
        out.append((r["id"], r["s"], r["d"], r["n"], r["x"], ts.replace(tzinfo=dt.UTC) if ts else None))
    return sorted(out, key=lambda r: r[0])


@pytest.mark.parametrize("mode", ["literal scans", "joined by key"])
def test_partition_values_of_several_types(spark, root, monkeypatch, mode):
    if mode == "joined by key":
        monkeypatch.setattr(dv_scan, "MAX_LITERAL_PARTITION_GROUPS", 1)
    files, expected = _partitioned(spark, root)
    df = scan_files(spark, files, ID_SCHEMA, PARTITION_SCHEMA, root)
    assert df.schema.names == ["id", "s", "d", "n", "x", "ts"]
    assert [f.dataType for f in df.schema.fields[1:]] == [f.dataType for f in PARTITION_SCHEMA.fields]
    assert _rows(df) == expected


def test_many_partition_groups_are_joined_not_unioned(spark, root, scan_path):
    files, expected = _partitioned(spark, root, many=True)
    assert len({f.size for f in files}) == len(files) > 2 * dv_scan.MAX_LITERAL_PARTITION_GROUPS
    df = scan_files(spark, files, ID_SCHEMA, PARTITION_SCHEMA, root)
    plan = _plan(df)
    if scan_path == "native":  # one relation, the values filled from the listing: no join, no union
        assert "Join" not in plan and "Union" not in plan and plan.count("FileScan dvlake_parquet") == 1
    else:
        assert "BroadcastHashJoin" in plan and plan.count("FileScan") == 2  # DV-free files, files with a DV
    assert _rows(df) == expected


def test_data_filter(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 5000, numPartitions=4).withColumn("m", F.col("id") % 10))
    marks = {paths[0]: list(range(0, 1250, 2)), paths[3]: [1, 2, 3]}
    dvs = _dvs(root, marks)
    schema = StructType([StructField("id", LongType()), StructField("m", LongType())])
    files = [_scan_file(p, dvs.get(p)) for p in paths]
    df = scan_files(spark, files, schema, NO_PARTITIONS, root, data_filter=F.col("m") == 3)
    assert _ids(df) == [i for i in _expected(paths, marks) if i % 10 == 3]
    assert "EqualTo(m,3)" in _plan(df)  # pushed into the Parquet reader


def test_missing_columns_come_back_null(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 100, numPartitions=1))
    dvs = _dvs(root, {paths[0]: [0]})
    schema = StructType([StructField("id", LongType()), StructField("added_later", StringType())])
    rows = scan_files(spark, [_scan_file(paths[0], dvs[paths[0]])], schema, NO_PARTITIONS, root).collect()
    assert len(rows) == 99 and all(r["added_later"] is None for r in rows)


def test_include_row_index(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 3000, numPartitions=3))
    marks = {paths[1]: [0, 10, 999]}
    dvs = _dvs(root, marks)
    files = [_scan_file(p, dvs.get(p)) for p in paths]
    rows = scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, root, include_row_index=True).collect()
    assert sorted(r["id"] for r in rows) == _expected(paths, marks)
    by_file = [_ids_in_file(p) for p in paths]
    assert all(by_file[r[FILE_INDEX_COL]][r[ROW_INDEX_COL]] == r["id"] for r in rows)


@pytest.mark.parametrize("budget", ["groups", "shuffled"])
def test_bounded_broadcast(spark, root, monkeypatch, budget):
    """DVs above the broadcast budget: split into several scan groups, or (one file alone above it)
    joined with a shuffled hash join; the rows are the same."""
    monkeypatch.setattr(dv_scan, "MAX_BROADCAST_BYTES", 0 if budget == "shuffled" else 3 * dv_scan._BLOCK_ROW_BYTES)
    spark.conf.set("spark.dvlake.scan.native", "false")  # the pure-Python path's broadcast groups are under test
    try:
        paths = _write(spark, root, "t", spark.range(0, 40_000, numPartitions=4))
        marks = {p: [1, 5000, 9000] for p in paths}
        dvs = _dvs(root, marks)
        df = scan_files(spark, [_scan_file(p, dvs[p]) for p in paths], ID_SCHEMA, NO_PARTITIONS, root)
        assert _ids(df) == _expected(paths, marks)
        plan = _plan(df)
    finally:
        spark.conf.unset("spark.dvlake.scan.native")
    assert ("BroadcastExchange" not in plan) if budget == "shuffled" else (plan.count("FileScan") >= 2)


def _one_dv_file(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 100, numPartitions=1))
    dvs = _dvs(root, {paths[0]: [1, 2, 3]})
    desc = dvs[paths[0]]
    return paths, desc, desc.absolute_path(root)


def test_corrupt_dv_fails_the_query_naming_the_file(spark, root):
    paths, desc, dv_file = _one_dv_file(spark, root)
    with open(dv_file, "rb") as fh:
        data = bytearray(fh.read())
    data[-6] ^= 0xFF  # a byte of the bitmap: the CRC no longer matches
    with open(dv_file, "wb") as fh:
        fh.write(bytes(data))
    with pytest.raises(Exception) as info:
        scan_files(spark, [_scan_file(paths[0], desc)], ID_SCHEMA, NO_PARTITIONS, root).collect()
    text = f"{type(info.value).__name__}: {info.value}"  # typed by dvlake's hook, or Spark's text naming the class
    # a failed CRC is delta-spark's named check: the corrupt-DV kind narrowed to its integrity class
    assert "DeletionVectorIntegrityError" in text and "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH" in text
    assert dv_file in text and "checksum" in text


def test_missing_dv_file_fails_the_query_naming_the_file(spark, root):
    paths, desc, dv_file = _one_dv_file(spark, root)
    os.unlink(dv_file)
    with pytest.raises(Exception) as info:
        scan_files(spark, [_scan_file(paths[0], desc)], ID_SCHEMA, NO_PARTITIONS, root).collect()
    text = f"{type(info.value).__name__}: {info.value}"
    assert "DeletionVectorNotFoundError" in text and dv_file in text


def test_wrong_cardinality_in_descriptor_fails(spark, root):
    paths, desc, _ = _one_dv_file(spark, root)
    from dataclasses import replace

    lying = replace(desc, cardinality=2)
    with pytest.raises(Exception) as info:
        scan_files(spark, [_scan_file(paths[0], lying)], ID_SCHEMA, NO_PARTITIONS, root).collect()
    text = f"{type(info.value).__name__}: {info.value}"
    assert "DeletionVectorIntegrityError" in text and "DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH" in text


def test_wrong_add_size_still_applies_the_dv(spark, root):
    """Rows are keyed by the real file size; a log's wrong ``size`` cannot un-delete rows."""
    from dataclasses import replace

    paths = _write(spark, root, "t", spark.range(0, 2000, numPartitions=2))
    marks = {paths[0]: [0, 1, 2], paths[1]: [7]}
    dvs = _dvs(root, marks)
    files = [replace(_scan_file(p, dvs[p]), size=os.path.getsize(p) + 13) for p in paths]
    assert _ids(scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, root)) == _expected(paths, marks)


def test_dv_in_a_random_prefix_folder_and_uri_paths(spark, root):
    paths = _write(spark, root, "t", spark.range(0, 1000, numPartitions=2))
    marks = {paths[0]: [9, 10], paths[1]: [0]}
    dvs = _dvs(root, marks, random_prefix_length=2)
    assert all(d.path_or_inline_dv[:2].isalnum() and len(d.path_or_inline_dv) == 22 for d in dvs.values())
    files = [ScanFile("file://" + p, os.path.getsize(p), 500, dvs[p], ()) for p in paths]
    assert _ids(scan_files(spark, files, ID_SCHEMA, NO_PARTITIONS, "file://" + root)) == _expected(paths, marks)
    shutil.rmtree(os.path.join(root, "t"))
