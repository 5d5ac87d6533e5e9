"""A partitioned table read through the native scan is ONE relation (issue 43's leftover, issue 44's planning cost).

The native format fills the partition columns from dvlake's listing (the log's ``partitionValues``, never the
directory names), so every planned file of a read is one Parquet relation: a query's own ``_metadata`` columns
resolve as on an unpartitioned table, and the plan has one scan however many partitions the files span. Each case
asserts exact rows against an oracle read with plain Spark from the same files, deleted rows removed by the DVs the
log names.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
from collections.abc import Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.dv.roaring import to_numpy
from dvlake.dv.store import load_bitmap
from dvlake.log.snapshot import Snapshot
from dvlake.spark import native
from dvlake.spark.dv_scan import path_key
from tests.conftest import require_native_jar
from tests.helpers import DV_PROPS


@pytest.fixture(autouse=True)
def native_on(spark: SparkSession) -> Iterator[None]:
    require_native_jar(spark.version)
    spark.conf.set(native.SETTING, "true")
    yield
    spark.conf.unset(native.SETTING)


def _plan(df: DataFrame) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def _oracle(spark: SparkSession, path: str) -> list[tuple]:
    """(id, file path, file name, row index) of every live row: each data file read by plain Spark, the rows its DV
    marks deleted removed."""
    snap = Snapshot.load(path)
    field = next(f for f in snap.schema["fields"] if f["name"] == "id")
    id_column = field["metadata"].get("delta.columnMapping.physicalName", "id")  # the name inside the files
    out = []
    for add in snap.add_files():
        location = os.path.join(snap.table_root, add.path)
        dead = set() if add.deletion_vector is None else \
            {int(r) for r in to_numpy(load_bitmap(add.deletion_vector, snap.table_root))}
        rows = spark.read.parquet(location).select(F.col(f"`{id_column}`").alias("id"),
                                                   F.col("_metadata.row_index").alias("r")).collect()
        out += [(r.id, location, os.path.basename(location), r.r) for r in rows if r.r not in dead]
    return sorted(out)


def _partitioned_dv_table(spark: SparkSession, path: str, parts: int = 4, props: dict | None = None) -> None:
    df = spark.range(0, 40, 1, numPartitions=2).withColumn("p", (F.col("id") % parts).cast("string"))
    dvlake.write(df, path, partitionBy="p", properties=props or DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id IN (1, 6, 7, 22, 39)")


def _metadata_rows(df: DataFrame) -> list[tuple]:
    rows = df.select("id", "_metadata.file_path", "_metadata.file_name", "_metadata.row_index").collect()
    return sorted((r.id, path_key(r.file_path), r.file_name, r.row_index) for r in rows)


def test_metadata_columns_of_a_partitioned_dv_table_by_path(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    _partitioned_dv_table(spark, path)
    assert any(a.deletion_vector is not None for a in Snapshot.load(path).add_files())
    df = dvlake.read(spark, path)
    expected = _oracle(spark, path)
    assert len(expected) == 35
    assert _metadata_rows(df) == expected
    assert "Union" not in _plan(df)
    # the partition column is the log's value, beside the metadata of the file it came from
    rows = df.select("id", "p", "_metadata.file_path").collect()
    assert sorted((r.id, r.p) for r in rows) == sorted((i, str(i % 4)) for i in range(40) if i not in {1, 6, 7, 22, 39})
    assert all(f"p={r.p}" in r.file_path for r in rows)


def test_metadata_columns_of_a_partitioned_dv_table_by_name(dspark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "named")
    _partitioned_dv_table(dspark, path)
    try:
        dspark.sql(f"CREATE TABLE onerel_named USING delta LOCATION '{path}'")
        df = dspark.table("onerel_named")
        assert _metadata_rows(df) == _oracle(dspark, path)
        assert sorted(r.id for r in df.where("_metadata.row_index = 0").select("id").collect()) \
            == sorted(i for i, _, _, r in _oracle(dspark, path) if r == 0)
    finally:
        dspark.sql("DROP TABLE IF EXISTS onerel_named")


def test_where_on_a_partition_column_returns_exact_rows(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    _partitioned_dv_table(spark, path)
    df = dvlake.read(spark, path)
    live = [i for i in range(40) if i not in {1, 6, 7, 22, 39}]
    assert sorted(r.id for r in df.where("p = '2'").collect()) == [i for i in live if i % 4 == 2]
    # the partition column in a filter the reader sees beside a data column: Spark keeps it above the scan
    got = df.where("p IN ('1', '3') AND id > 10").select("id", "p", "_metadata.file_name").collect()
    assert sorted((r.id, r.p) for r in got) == [(i, str(i % 4)) for i in live if i % 4 in (1, 3) and i > 10]
    assert sorted(r.id for r in df.where("p IS NULL OR p > '2'").collect()) == [i for i in live if i % 4 == 3]


PARTITION_CASES = [
    # (column DDL type, Python values of the rows' partitions, how Spark gives them back)
    ("string", ["a=b/c d", "x,y%z", "ü\tñ", None]),
    ("int", [-7, 0, 2147483647, None]),
    ("long", [-9223372036854775808, 5, 9223372036854775807, None]),
    ("date", [dt.date(1970, 1, 1), dt.date(2024, 2, 29), dt.date(1900, 3, 1), None]),
    ("timestamp", [dt.datetime(2024, 6, 1, 12, 30, 45, 123456, tzinfo=dt.UTC),
                   dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC), None, None]),
    ("timestamp_ntz", [dt.datetime(2024, 6, 1, 12, 30, 45, 123456), dt.datetime(1900, 1, 1), None, None]),
    ("decimal(12,3)", [decimal.Decimal("-123456789.125"), decimal.Decimal("0.000"), decimal.Decimal("1.500"), None]),
    ("boolean", [True, False, None, None]),
    ("double", [1.5, -0.25, 1e300, None]),
]


@pytest.mark.parametrize(("ddl", "values"), PARTITION_CASES, ids=[c[0] for c in PARTITION_CASES])
def test_each_partition_type_round_trips(spark: SparkSession, tmp_path, ddl: str, values: list) -> None:
    path = str(tmp_path / "t")
    rows = [(i, values[i % len(values)]) for i in range(16)]
    df = spark.createDataFrame(rows, f"id long, v {ddl}")
    dvlake.write(df.repartition(2), path, partitionBy="v", properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id IN (0, 5)")
    out = dvlake.read(spark, path)
    assert out.schema["v"].dataType.simpleString() == spark.createDataFrame([], f"v {ddl}").schema["v"].dataType \
        .simpleString()
    assert "Union" not in _plan(out)

    def norm(v: object) -> object:
        return v.astimezone(dt.UTC) if isinstance(v, dt.datetime) and v.tzinfo is not None else v

    got = sorted(((r.id, norm(r.v)) for r in out.collect()), key=repr)
    if ddl == "timestamp":  # Spark gives local naive datetimes back: compare as instants
        got = sorted(((i, None if v is None else v.astimezone(dt.UTC)) for i, v in
                      ((r.id, r.v) for r in out.collect())), key=repr)
    expected = sorted(((i, v) for i, v in rows if i not in (0, 5)), key=repr)
    assert got == expected
    # and each file's rows carry its own log values: the metadata columns resolve beside them
    assert out.select("_metadata.file_path").distinct().count() == len(Snapshot.load(path).add_files())


def test_column_mapped_partitioned_table(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "cm")
    props = {**DV_PROPS, "delta.columnMapping.mode": "name", "delta.minReaderVersion": "3",
             "delta.minWriterVersion": "7"}
    df = spark.createDataFrame([(i, f"k{i % 3}", i * 10) for i in range(12)], "id long, `Part Key` string, v long")
    dvlake.write(df.repartition(1), path, partitionBy="Part Key", properties=props)
    DeltaTable.forPath(spark, path).delete("id IN (2, 4)")
    snap = Snapshot.load(path)
    adds = snap.add_files()
    assert snap.column_mapping_mode == "name"
    keys = {k for a in adds for k in a.partition_values}
    assert keys and "Part Key" not in keys  # the log keys partitions by physical name
    out = dvlake.read(spark, path)
    assert "Union" not in _plan(out)
    got = sorted(tuple(r) for r in out.select("id", "Part Key", "v", "_metadata.row_index").collect())
    oracle = {(i, loc) for i, loc, _, _ in _oracle(spark, path)}
    assert sorted((i, p, v) for i, p, v, _ in got) == [(i, f"k{i % 3}", i * 10) for i in range(12) if i not in (2, 4)]
    assert {(r.id, path_key(r.file_path)) for r in out.select("id", "_metadata.file_path").collect()} == oracle


def test_many_partitions_are_one_native_relation(spark: SparkSession, tmp_path) -> None:
    """Thirty partitions (a file each; more than the pure-Python path's literal-tagged scans, 16): one scan."""
    path = str(tmp_path / "t")
    df = spark.range(0, 300, 1, numPartitions=1).withColumn("p", F.col("id") % 30)
    dvlake.write(df, path, partitionBy="p", properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 7 = 0")
    out = dvlake.read(spark, path)
    plan = _plan(out)
    assert "Union" not in plan and "Join" not in plan
    assert plan.count("FileScan") == 1 and "DvlakeParquet" in plan
    assert sorted((r.id, r.p) for r in out.collect()) == [(i, i % 30) for i in range(300) if i % 7 != 0]
    assert sorted(r.id for r in out.where("p = 12").collect()) == [i for i in range(12, 300, 30) if i % 7 != 0]
    assert out.select("_metadata.file_path").distinct().count() == 30


def test_a_partitioned_table_without_dvs_is_one_relation_too(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    dvlake.write(spark.range(0, 20, 1, numPartitions=1).withColumn("p", F.col("id") % 5), path, partitionBy="p")
    out = dvlake.read(spark, path)
    assert "Union" not in _plan(out)
    assert _metadata_rows(out) == _oracle(spark, path)


def test_zorder_then_metadata_file_path(spark: SparkSession, tmp_path) -> None:
    """delta-spark's python test flow: Z-order a partitioned table, then ask which files hold the rows."""
    path = str(tmp_path / "z")
    df = spark.createDataFrame([(i, i % 3, chr(97 + i % 2)) for i in range(30)], "col1 long, col2 long, p string")
    dvlake.write(df.repartition(6), path, partitionBy="p", properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("col1 = 4")
    DeltaTable.forPath(spark, path).optimize().executeZOrderBy("col2")
    snap = Snapshot.load(path)
    assert len(snap.add_files()) == 2  # one file per partition after OPTIMIZE
    files = {os.path.join(snap.table_root, a.path) for a in snap.add_files()}
    rows = dvlake.read(spark, path).select("col1", "p", "_metadata.file_path").collect()
    assert sorted((r.col1, r.p) for r in rows) == [(i, chr(97 + i % 2)) for i in range(30) if i != 4]
    assert {path_key(r.file_path) for r in rows} == files
    for r in rows:
        assert f"p={r.p}" in r.file_path


def test_nested_columns_read_as_rows_keep_the_partition_columns_in_place(spark: SparkSession, tmp_path) -> None:
    """A struct column makes the format return rows, not batches: the listed partition values are put back at the
    query's column positions by the row projection, with and without the query's own row index."""
    path = str(tmp_path / "nested")
    df = spark.range(0, 24, 1, numPartitions=2).selectExpr("id", "CAST(id % 3 AS INT) AS p",
                                                           "named_struct('a', id, 'b', CAST(id AS STRING)) AS st")
    dvlake.write(df, path, partitionBy="p", properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id IN (0, 4, 23)")
    out = dvlake.read(spark, path)
    live = [i for i in range(24) if i not in (0, 4, 23)]
    assert out.columns == ["id", "p", "st"]
    assert sorted((r.id, r.p, r.st.a, r.st.b) for r in out.collect()) == [(i, i % 3, i, str(i)) for i in live]
    got = out.select("st", "p", "_metadata.row_index", "id").collect()
    assert sorted((r.id, r.p, r.st.a, r.row_index) for r in got) == \
        sorted((i, i % 3, i, r) for i, _, _, r in _oracle(spark, path))
