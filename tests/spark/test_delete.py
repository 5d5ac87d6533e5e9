"""DELETE with deletion vectors and with copy-on-write, checked against delta-rs and DuckDB after every round."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.commands.dml.delete import _delete_once
from dvlake.config import DELETE_DVS_PERSISTENT
from dvlake.dv.store import load_bitmap
from dvlake.errors import ConcurrentDeleteDeleteException
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS
from tests.peers import read_with_deltalake, read_with_duckdb, rows


def _df(spark, n=400):
    return spark.createDataFrame(
        [(i, f"s{i}", i % 4, None if i % 10 == 0 else i % 7) for i in range(n)], "id long, s string, p int, k int")


def _make(spark, path, props=DV_PROPS, partition_by=None, files=4, n=400):
    dvlake.write(_df(spark, n).repartition(files), path, properties=props, partitionBy=partition_by)


def _ours(spark, path):
    return sorted(r.id for r in dvlake.read(spark, path).select("id").collect())


def _peers_agree(spark, path):
    ours = _ours(spark, path)
    assert sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])) == ours
    assert sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])) == ours
    return ours


def _last_commit(path):
    log = os.path.join(path, "_delta_log")
    last = sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1]
    with open(os.path.join(log, last)) as f:
        return [json.loads(line) for line in f]


def _new_files(path, before):
    now = set()
    for d, _, names in os.walk(path):
        if "_delta_log" in d:
            continue
        now |= {os.path.join(d, n) for n in names if not n.startswith((".", "_"))}
    return now - before


def _all_files(path):
    return _new_files(path, set())


def _check_dvs_decode(path):
    snap = Snapshot.load(path)
    for a in snap.add_files():
        if a.deletion_vector:
            assert len(load_bitmap(a.deletion_vector, snap.table_root)) == a.deletion_vector.cardinality


@pytest.mark.interop
def test_dv_delete_marks_rows_and_writes_one_dv_file(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path)
    before = _all_files(path)
    DeltaTable.forPath(spark, path).delete("id % 5 = 1")
    new = _new_files(path, before)
    assert len(new) == 1 and next(iter(new)).endswith(".bin"), new
    commit = _last_commit(path)
    adds = [c["add"] for c in commit if "add" in c]
    removes = [c["remove"] for c in commit if "remove" in c]
    assert len(adds) == 4 and len(removes) == 4
    assert all(a["deletionVector"]["storageType"] == "u" and "offset" in a["deletionVector"] for a in adds)
    assert all(json.loads(a["stats"])["tightBounds"] is False for a in adds)
    assert {a["path"] for a in adds} == {r["path"] for r in removes}
    metrics = commit[0]["commitInfo"]["operationMetrics"]
    assert metrics["numDeletedRows"] == "80" and metrics["numDeletionVectorsAdded"] == "4"
    assert metrics["numRemovedFiles"] == "0" and metrics["numAddedFiles"] == "0"
    assert _peers_agree(spark, path) == [i for i in range(400) if i % 5 != 1]
    _check_dvs_decode(path)


@pytest.mark.interop
def test_repeated_deletes_merge_dvs(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=1)
    dt = DeltaTable.forPath(spark, path)
    dt.delete("id < 10")
    dt.delete(F.col("id") >= 390)
    metrics = _last_commit(path)[0]["commitInfo"]["operationMetrics"]
    assert (metrics["numDeletionVectorsAdded"], metrics["numDeletionVectorsRemoved"],
            metrics["numDeletionVectorsUpdated"]) == ("1", "1", "1")
    dt.delete("id = 5")  # already deleted: no change, no commit
    assert Snapshot.load(path).version == 2
    assert _peers_agree(spark, path) == list(range(10, 390))
    _check_dvs_decode(path)


@pytest.mark.interop
def test_deleting_every_row_of_a_file_removes_it(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partition_by=["p"], files=1)
    DeltaTable.forPath(spark, path).delete("k IS NULL OR id = 1")  # gives the file of p=1 a DV too
    DeltaTable.forPath(spark, path).delete("p = 1 AND id >= 0")  # a data predicate covering all of p=1
    commit = _last_commit(path)
    assert not [c for c in commit if "add" in c]
    removes = [c["remove"] for c in commit if "remove" in c]
    assert removes and all(r["deletionVector"] for r in removes)
    assert commit[0]["commitInfo"]["operationMetrics"]["numRemovedFiles"] == str(len(removes))
    assert _peers_agree(spark, path) == [i for i in range(400) if i % 10 != 0 and i % 4 != 1]


@pytest.mark.interop
def test_partition_only_predicate_removes_files_without_dvs(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partition_by=["p"])
    before = _all_files(path)
    dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE p = 2")
    assert not _new_files(path, before)
    commit = _last_commit(path)
    assert not [c for c in commit if "add" in c]
    assert _peers_agree(spark, path) == [i for i in range(400) if i % 4 != 2]


def test_no_match_writes_nothing(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path)
    before = _all_files(path)
    DeltaTable.forPath(spark, path).delete("id > 100000")
    DeltaTable.forPath(spark, path).delete("s = 'nope'")
    assert not _new_files(path, before)
    assert Snapshot.load(path).version == 0


def test_nulls_in_predicate_are_not_deleted(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path)
    DeltaTable.forPath(spark, path).delete("k = 3")  # k is NULL for every 10th row: those stay
    assert _ours(spark, path) == [i for i in range(400) if i % 10 == 0 or i % 7 != 3]


def test_delete_everything(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path)
    DeltaTable.forPath(spark, path).delete()
    assert _ours(spark, path) == [] and Snapshot.load(path).num_files == 0


@pytest.mark.interop
def test_column_mapped_table(spark, tmp_path):
    path = str(tmp_path / "cm")
    _make(spark, path, props={**DV_PROPS, "delta.columnMapping.mode": "name"}, partition_by=["p"])
    DeltaTable.forPath(spark, path).delete("s LIKE 's1%' AND k > 2")
    expected = [i for i in range(400) if not (str(i).startswith("1") and i % 10 != 0 and i % 7 > 2)]
    assert _peers_agree(spark, path) == expected
    _check_dvs_decode(path)


@pytest.mark.slow  # three tables, two conditions and both peers: copy-on-write stays in make test-quick elsewhere
@pytest.mark.interop
def test_copy_on_write_gives_the_same_rows(spark, tmp_path):
    dv_path, cow_path, off_path = str(tmp_path / "dv"), str(tmp_path / "cow"), str(tmp_path / "off")
    _make(spark, dv_path, partition_by=["p"])
    shutil.copytree(dv_path, cow_path)  # the same DV-enabled table; the session setting makes its DELETEs rewrite
    _make(spark, off_path, props={}, partition_by=["p"])
    for cond in ("id % 3 = 0", "k = 1 OR s = 's7'"):
        DeltaTable.forPath(spark, dv_path).delete(cond)
        spark.conf.set(DELETE_DVS_PERSISTENT, "false")
        try:
            DeltaTable.forPath(spark, cow_path).delete(cond)
        finally:
            spark.conf.unset(DELETE_DVS_PERSISTENT)
        DeltaTable.forPath(spark, off_path).delete(cond)
    assert Snapshot.load(cow_path).dv_count() == 0 and Snapshot.load(off_path).dv_count() == 0
    assert Snapshot.load(dv_path).dv_count() > 0
    expected = _peers_agree(spark, dv_path)
    assert _peers_agree(spark, cow_path) == expected == _peers_agree(spark, off_path)
    metrics = _last_commit(cow_path)[0]["commitInfo"]["operationMetrics"]
    assert int(metrics["numCopiedRows"]) > 0 and int(metrics["numAddedFiles"]) > 0


def test_concurrent_deletes_on_the_same_file(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=1)
    stale = Snapshot.load(path)
    DeltaTable.forPath(spark, path).delete("id < 100")
    with pytest.raises(ConcurrentDeleteDeleteException):
        _delete_once(spark, stale, "id >= 300")
    # the public API re-runs the DELETE on the winner's result and commits the union
    DeltaTable.forPath(spark, path).delete("id >= 300")
    assert _ours(spark, path) == list(range(100, 300))
    _check_dvs_decode(path)


def test_delete_racing_an_append_commits(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=1)
    stale = Snapshot.load(path)
    dvlake.write(_df(spark, 10).withColumn("id", F.col("id") + 1000), path, mode="append")
    _delete_once(spark, stale, "id < 50")
    assert _ours(spark, path) == list(range(50, 400)) + list(range(1000, 1010))


@pytest.mark.interop
def test_copy_on_write_on_a_column_mapped_partitioned_table(spark, tmp_path):
    path = str(tmp_path / "cmcow")
    _make(spark, path, props={"delta.columnMapping.mode": "name"}, partition_by=["p"])
    DeltaTable.forPath(spark, path).delete("k = 2 AND s != 's9'")
    assert Snapshot.load(path).dv_count() == 0
    expected = [i for i in range(400) if not (i % 10 != 0 and i % 7 == 2 and i != 9)]
    assert _ours(spark, path) == expected
    assert sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])) == expected
