"""REORG TABLE … APPLY (PURGE): every file with a DV rewritten (alone too), files without DVs untouched, idempotent."""

from __future__ import annotations

import json
import os

import pytest

import dvlake
from dvlake import DeltaTable
from dvlake.commands.maintenance.reorg import purge
from dvlake.config import OPTIMIZE_MIN_FILE_SIZE
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS, table_rows
from tests.peers import read_with_deltalake, read_with_duckdb, rows


def _make(spark, path, partition_by=None, files=4, n=400, props=DV_PROPS):
    df = spark.createDataFrame([(i, f"s{i}", i % 4) for i in range(n)], "id long, s string, p int")
    dvlake.write(df.repartition(files), path, properties=props, partitionBy=partition_by)



def _commit_info(path, version):
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return next(json.loads(line)["commitInfo"] for line in f if "commitInfo" in line)


@pytest.mark.interop
def test_purge_rewrites_every_dv_file_once_and_only_those(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partition_by=["p"], files=2)  # 2 files in each of 4 partitions
    dt = DeltaTable.forPath(spark, path)
    dt.delete("id = 5")  # one row in one file of partition 1: far below the 5 % ratio, alone in its bin
    dt.delete("id IN (2, 6, 10)")  # partition 2
    before = table_rows(spark, path)
    v_deleted = Snapshot.load(path).version
    snap = Snapshot.load(path)
    dv_files = [a for a in snap.add_files() if a.deletion_vector]
    untouched = {a.path for a in snap.add_files() if not a.deletion_vector}
    assert 2 <= len(dv_files) <= 4

    result = dvlake.sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    m = result.collect()[0].metrics
    assert m.numFilesRemoved == len(dv_files) and m.deletionVectorStats.numDeletionVectorsRemoved == len(dv_files)
    assert m.deletionVectorStats.numDeletionVectorRowsRemoved == 4
    after = Snapshot.load(path)
    assert after.dv_count() == 0 and untouched <= {a.path for a in after.add_files()}
    assert m.numFilesAdded == 2  # outputs coalesced per partition
    info = _commit_info(path, after.version)
    assert info["operation"] == "REORG"
    assert info["operationParameters"] == {"predicate": "[]", "applyPurge": "true"}
    assert info["operationMetrics"]["numDeletionVectorsRemoved"] == str(len(dv_files))
    assert table_rows(spark, path) == before
    ours = sorted(r[0] for r in before)
    assert sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])) == ours
    assert sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])) == ours
    assert table_rows(spark, path, version=v_deleted) == before  # earlier versions unchanged

    # idempotent: nothing carries a DV any more, so nothing is written or committed
    again = purge(spark, path)
    assert again.version is None and again.metrics["numFilesRemoved"] == 0
    assert Snapshot.load(path).version == after.version


def test_purge_where_partition_and_python_method(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partition_by=["p"], files=1)
    dt = DeltaTable.forPath(spark, path)
    dt.delete("id % 5 = 0")  # every partition gets a DV
    spark.conf.set(OPTIMIZE_MIN_FILE_SIZE, "1")  # PURGE ignores the small-file threshold
    try:
        m = dt.reorgPurge("p = 0").collect()[0].metrics
    finally:
        spark.conf.unset(OPTIMIZE_MIN_FILE_SIZE)
    assert m.numFilesRemoved == 1 and m.partitionsOptimized == 1
    snap = Snapshot.load(path)
    with_dv = {a.partition_values["p"] for a in snap.add_files() if a.deletion_vector}
    assert with_dv == {"1", "2", "3"}
    assert len(table_rows(spark, path)) == 320


def test_purge_removes_a_file_whose_dv_deletes_every_row(spark, tmp_path):
    """A DV covering a whole file (another writer may leave one) is purged too, with a removes-only commit."""
    from dataclasses import replace

    import pyroaring

    from dvlake.dv.store import DeletionVectorWriter
    from dvlake.log.stats import with_loose_bounds
    from dvlake.txn.transaction import OptimisticTransaction

    path = str(tmp_path / "t")
    _make(spark, path, files=1, n=50)
    snap = Snapshot.load(path)
    (add,) = snap.add_files()
    with DeletionVectorWriter(snap.table_root) as writer:
        dv = writer.add(pyroaring.BitMap64(range(50)))
    txn = OptimisticTransaction(snap.table_root, snap)
    txn.commit([add.remove(), replace(add, deletion_vector=dv, stats=with_loose_bounds(add.stats))], "DELETE")
    assert table_rows(spark, path) == []
    outcome = purge(spark, path)
    after = Snapshot.load(path)
    assert outcome.version == after.version and after.num_files == 0
    assert outcome.metrics["numFilesRemoved"] == 1 and outcome.metrics["numFilesAdded"] == 0
    assert outcome.metrics["deletionVectorStats"]["numDeletionVectorRowsRemoved"] == 50
