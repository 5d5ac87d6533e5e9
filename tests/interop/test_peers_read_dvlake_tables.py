"""Tables written by dvlake are read row-identically by delta-rs and DuckDB (and their checkpoints accepted)."""

from __future__ import annotations

import datetime as dt
import json

import pyroaring
import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake.dv.store import DeletionVectorWriter
from dvlake.log.actions import AddFile
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import with_loose_bounds
from dvlake.txn.transaction import OptimisticTransaction
from tests.peers import read_with_deltalake, read_with_duckdb, rows

# every test here compares dvlake's own read with the peers'. The tables with DVs are read on both of dvlake's read
# paths; the ones without (plain, partitioned, column-mapped) on the native scan only: what the pure-Python path
# reads of those shapes is pinned against the native scan by the differential core (test_native_scan.py:
# test_partitions_odd_paths_and_every_row_deleted_in_a_file, also in the minors tier; test_column_mapping)
pytestmark = [pytest.mark.interop, pytest.mark.slow, pytest.mark.usefixtures("scan_path")]
NATIVE_ONLY = pytest.mark.parametrize("scan_path", ["native"], indirect=True)


def _data(spark, n=200):
    return spark.createDataFrame(
        [(i, f"name {i}", i * 0.5, ["x/y", "a b", "c%d", "ü"][i % 4], dt.date(2024, 1, 1 + i % 3)) for i in range(n)],
        "id long, name string, value double, cat string, day date")


def _check_all_readers(spark, path, columns, expected=None, version=None):
    ours = dvlake.read(spark, path, version=version).toPandas()
    ours_rows = sorted((tuple(r[c] for c in columns) for r in ours.to_dict("records")), key=repr)
    if expected is not None:
        assert ours_rows == sorted(expected, key=repr)
    assert rows(read_with_deltalake(path, version), columns) == ours_rows
    assert rows(read_with_duckdb(path, version), columns) == ours_rows
    return ours_rows


@NATIVE_ONLY
def test_plain_table(spark, tmp_path):
    path = str(tmp_path / "plain")
    dvlake.write(_data(spark).drop("day"), path)
    _check_all_readers(spark, path, ["id", "name", "value", "cat"])


@NATIVE_ONLY
def test_partitioned_table_with_special_characters(spark, tmp_path):
    path = str(tmp_path / "part")
    dvlake.write(_data(spark), path, partitionBy=["cat", "day"])
    got = _check_all_readers(spark, path, ["id", "name", "value", "cat", "day"])
    assert len(got) == 200


@NATIVE_ONLY
def test_column_mapping_name(spark, tmp_path):
    path = str(tmp_path / "cm")
    data = _data(spark).select("cat", "id", "name", "value", "day")  # partition column first: see the next test
    dvlake.write(data, path, partitionBy=["cat"], properties={"delta.columnMapping.mode": "name"})
    snap = Snapshot.load(path)
    assert snap.column_mapping_mode == "name"
    assert "columnMapping" in snap.protocol.reader_features
    _check_all_readers(spark, path, ["id", "name", "value", "cat", "day"])


@NATIVE_ONLY
def test_column_mapping_with_partition_column_not_first(spark, tmp_path):
    """delta-rs reads it; DuckDB's delta extension 1.5.5 returns NULL partition values for a
    column-mapped table whose partition column is not the first column (a DuckDB bug: the log
    keys partitionValues by physical name exactly as delta-spark's golden table does)."""
    path = str(tmp_path / "cm2")
    dvlake.write(_data(spark), path, partitionBy=["cat"], properties={"delta.columnMapping.mode": "name"})
    cols = ["id", "name", "value", "cat", "day"]
    ours = sorted((tuple(r[c] for c in cols) for r in dvlake.read(spark, path).collect()), key=repr)
    assert rows(read_with_deltalake(path), cols) == ours
    duck = read_with_duckdb(path).column("cat").to_pylist()
    assert set(duck) == {None}, "DuckDB now reads this case: fold it into test_column_mapping_name"


def test_dv_table_past_checkpoint_with_dvs(spark, tmp_path):
    path = str(tmp_path / "dv")
    props = {"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "3"}
    dvlake.write(_data(spark, 100).repartition(2), path, properties=props)
    for i in range(3):
        dvlake.write(_data(spark, 20).withColumn("id", F.col("id") + 100 + i * 20), path, mode="append")
    # mark rows deleted by hand with the codec (DELETE has its own tests): every 7th row of each file
    snap = Snapshot.load(path)
    txn = OptimisticTransaction(path, snap)
    actions = []
    with DeletionVectorWriter(path) as writer:
        for a in snap.add_files():
            n = json.loads(a.stats)["numRecords"]
            desc = writer.add(pyroaring.BitMap64(range(0, n, 7)))
            actions += [a.remove(), AddFile(**{**a.__dict__, "deletion_vector": desc,
                                               "stats": with_loose_bounds(a.stats)})]
    txn.commit(actions, "DELETE", {"predicate": "[]"})
    for i in range(3):
        dvlake.write(_data(spark, 5).withColumn("id", F.lit(1000 + i).cast("long")), path, mode="append")
    snap = Snapshot.load(path)
    assert snap.state.checkpoint_version is not None and snap.dv_count() > 0
    got = _check_all_readers(spark, path, ["id", "name", "value", "cat", "day"])
    total = 160 + 15
    assert len(got) < total
    # time travel to before the DVs
    _check_all_readers(spark, path, ["id", "name", "value", "cat", "day"], version=3)


def test_many_types_round_trip(spark, tmp_path):
    import decimal

    path = str(tmp_path / "types")
    rows_in = [(i, decimal.Decimal(f"{i}.25"), dt.datetime(2024, 1, 2, 3, 4, 5, i), i % 2 == 0, float(i) / 3,
                bytes([i, 255]), [i, i + 1], {"k": i}, (i, f"n{i}")) for i in range(5)]
    df = spark.createDataFrame(rows_in, "id long, d decimal(10,2), ntz timestamp_ntz, b boolean, f float, bin binary, "
                                        "arr array<int>, m map<string,int>, st struct<x:int,y:string>")
    dvlake.write(df, path, properties={"delta.enableDeletionVectors": "true"})
    snap = Snapshot.load(path)
    assert "timestampNtz" in snap.protocol.reader_features
    dvlake.DeltaTable.forPath(spark, path).delete("id = 2")
    got = sorted(dvlake.read(spark, path).collect(), key=lambda r: r.id)
    assert [r.id for r in got] == [0, 1, 3, 4]
    assert got[1].d == decimal.Decimal("1.25") and got[1].ntz == dt.datetime(2024, 1, 2, 3, 4, 5, 1)
    assert got[1].arr == [1, 2] and got[1].m == {"k": 1} and got[1].st.y == "n1" and bytes(got[1].bin) == bytes([1, 255])
    peer = sorted(read_with_deltalake(path).select(["id", "d", "ntz"]).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["d"], r["ntz"]) for r in peer] == [(r.id, r.d, r.ntz) for r in got]
    duck = sorted(read_with_duckdb(path).select(["id", "d"]).to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["d"]) for r in duck] == [(r.id, r.d) for r in got]
