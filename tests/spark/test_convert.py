"""CONVERT TO DELTA: Parquet directories become Delta tables in place, with footer stats; bad input is refused."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import IntegerType, StructField, StructType

import dvlake
from dvlake import DeltaTable
from dvlake.errors import ConvertToDeltaError
from dvlake.log.snapshot import Snapshot
from dvlake.sql import sql
from tests.peers import read_with_deltalake, rows


def _parquet_files(path):
    out = {}
    for d, dirs, names in os.walk(path):
        dirs[:] = [x for x in dirs if not x.startswith(("_", "."))]
        for n in names:
            if n.endswith(".parquet"):
                full = os.path.join(d, n)
                st = os.stat(full)
                out[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _commit0(path):
    with open(os.path.join(path, "_delta_log", f"{0:020d}.json")) as f:
        return [json.loads(line) for line in f]


def test_convert_unpartitioned_in_place_with_footer_stats(spark, tmp_path):
    p = str(tmp_path / "plain")
    df = spark.range(30).selectExpr("id", "cast(id * 1.5 AS double) AS x", "IF(id % 7 = 0, NULL, 'v' || id) AS s")
    df.repartition(3).write.parquet(p)
    assert os.path.exists(os.path.join(p, "_SUCCESS"))
    before = _parquet_files(p)

    table = DeltaTable.convertToDelta(spark, f"parquet.`{p}`")

    assert _parquet_files(p) == before  # not one byte rewritten, not one file moved
    snap = Snapshot.load(p)
    assert snap.version == 0 and sorted(a.path for a in snap.add_files()) == sorted(before)
    stats = [json.loads(a.stats) for a in snap.add_files()]
    assert sum(s["numRecords"] for s in stats) == 30
    assert min(s["minValues"]["id"] for s in stats) == 0 and max(s["maxValues"]["id"] for s in stats) == 29
    assert sum(s["nullCount"]["s"] for s in stats) == 5
    info = next(a["commitInfo"] for a in _commit0(p) if "commitInfo" in a)
    assert info["operation"] == "CONVERT" and info["operationParameters"]["numFiles"] == "3"
    assert sorted(tuple(r) for r in table.toDF().collect()) == sorted(tuple(r) for r in df.collect())
    assert DeltaTable.convertToDelta(spark, f"parquet.`{p}`").toDF().count() == 30  # already Delta: a no-op
    assert Snapshot.load(p).version == 0


def test_convert_partitioned_with_sql(spark, tmp_path):
    p = str(tmp_path / "parts")
    df = spark.createDataFrame([(i, f"n{i}", None if i == 5 else f"2024-01-0{1 + i % 2}", i % 3) for i in range(12)],
                               "id long, name string, day string, region int")
    df.selectExpr("id", "name", "cast(day AS date) AS day", "region").write.partitionBy("day", "region").parquet(p)
    before = _parquet_files(p)
    sql(spark, f"CONVERT TO DELTA parquet.`{p}` PARTITIONED BY (day DATE, region INT)")
    assert _parquet_files(p) == before
    snap = Snapshot.load(p)
    assert snap.partition_columns == ["day", "region"]
    assert [f["name"] for f in snap.schema["fields"]] == ["id", "name", "day", "region"]
    assert {a.partition_values["day"] for a in snap.add_files()} == {"2024-01-01", "2024-01-02", None}
    got = sorted((r.id, r.name, str(r.day) if r.day else None, r.region) for r in dvlake.read(spark, p).collect())
    assert got == sorted((i, f"n{i}", None if i == 5 else f"2024-01-0{1 + i % 2}", i % 3) for i in range(12))
    pruned = dvlake.read(spark, p, condition="region = 1")
    assert sorted(r.id for r in pruned.collect()) == [1, 4, 7, 10]


def _write_parts(spark, path, folder):
    spark.range(4).write.mode("overwrite").parquet(os.path.join(path, folder))


@pytest.mark.parametrize("layout, schema, error_class", [
    (["k=1"], None, "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME"),
    (["k=1/j=2"], "k INT", "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME"),
    (["other=1"], "k INT", "DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME"),
    (["k=abc"], StructType([StructField("k", IntegerType())]), "DELTA_FAILED_CAST_PARTITION_VALUE"),
])
def test_partition_folders_that_do_not_match_the_schema_are_refused(spark, tmp_path, layout, schema, error_class):
    p = str(tmp_path / "bad")
    for folder in layout:
        _write_parts(spark, p, folder)
    with pytest.raises(ConvertToDeltaError) as err:
        DeltaTable.convertToDelta(spark, f"parquet.`{p}`", schema)
    assert err.value.error_class == error_class
    assert layout[0].split("/")[0] in str(err.value)
    assert not os.path.exists(os.path.join(p, "_delta_log", f"{0:020d}.json"))


def test_invalid_parquet_empty_directories_and_other_formats_are_refused(spark, tmp_path):
    p = str(tmp_path / "junk")
    spark.range(3).write.parquet(p)
    with open(os.path.join(p, "notes.txt"), "w") as f:
        f.write("not parquet")
    with pytest.raises(ConvertToDeltaError) as err:
        sql(spark, f"CONVERT TO DELTA parquet.`{p}`")
    assert err.value.error_class == "FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER" and "notes.txt" in str(err.value)
    assert not os.path.exists(os.path.join(p, "_delta_log", f"{0:020d}.json"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConvertToDeltaError) as err:
        DeltaTable.convertToDelta(spark, f"parquet.`{empty}`")
    assert err.value.error_class == "DELTA_EMPTY_DIRECTORY"
    with pytest.raises(ConvertToDeltaError) as err:
        sql(spark, f"CONVERT TO DELTA orc.`{p}`")
    assert err.value.error_class == "DELTA_CONVERT_NON_PARQUET_TABLE"
    q = tmp_path / "clash"
    q.mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), q / "a.parquet")
    pq.write_table(pa.table({"id": pa.array(["1"], pa.string())}), q / "b.parquet")
    with pytest.raises(ConvertToDeltaError) as err:
        DeltaTable.convertToDelta(spark, f"parquet.`{q}`")
    assert err.value.error_class == "CANNOT_MERGE_SCHEMAS" and "b.parquet" in str(err.value)


@pytest.mark.interop
def test_dv_delete_after_convert_is_read_back_by_delta_rs(spark, tmp_path):
    p = str(tmp_path / "conv")
    spark.range(50).selectExpr("id", "id % 5 AS g").repartition(2).write.parquet(p)
    sql(spark, f"CONVERT TO DELTA parquet.`{p}`")
    sql(spark, f"ALTER TABLE delta.`{p}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    sql(spark, f"DELETE FROM delta.`{p}` WHERE g = 3")
    assert any(a.deletion_vector for a in Snapshot.load(p).add_files())
    expected = sorted((i, i % 5) for i in range(50) if i % 5 != 3)
    assert sorted(tuple(r) for r in dvlake.read(spark, p).collect()) == expected
    assert sorted(rows(read_with_deltalake(p), ["id", "g"])) == expected
