"""RESTORE diffs by (path, DV id): un-deleted rows come back, the protocol is never downgraded, missing files fail early."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

import dvlake
from dvlake import DeltaTable
from dvlake.commands.maintenance.restore import RESULT_COLUMNS
from dvlake.errors import RestoreError, RestoreMissingFilesError
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS
from tests.peers import read_with_deltalake, read_with_duckdb, rows


def _ids(spark, path, version=None):
    return sorted(r.id for r in dvlake.read(spark, path, version=version).select("id").collect())


def _commit(path, version):
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(ln) for ln in f]


def _peers(path):
    return (sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])),
            sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])))


@pytest.mark.interop
def test_restore_brings_back_rows_a_dv_hid(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.range(200).repartition(2), path, properties=DV_PROPS)  # v0
    t = DeltaTable.forPath(spark, path)
    t.delete("id % 5 = 0")                                                      # v1: DV1 on both files
    v1 = _ids(spark, path)
    t.delete("id % 5 = 1")                                                      # v2: DV2 replaces DV1
    out = t.restoreToVersion(1).collect()                                       # v3
    assert _ids(spark, path) == v1
    commit = _commit(path, 3)
    removes = {(c["remove"]["path"], c["remove"]["deletionVector"]["pathOrInlineDv"]) for c in commit if "remove" in c}
    adds = {(c["add"]["path"], c["add"]["deletionVector"]["pathOrInlineDv"]) for c in commit if "add" in c}
    snap1, snap2 = Snapshot.load(path, version=1), Snapshot.load(path, version=2)
    assert adds == {(a.path, a.deletion_vector.path_or_inline_dv) for a in snap1.add_files()}
    assert removes == {(a.path, a.deletion_vector.path_or_inline_dv) for a in snap2.add_files()}
    assert all(c["add"]["dataChange"] for c in commit if "add" in c)
    info = next(c["commitInfo"] for c in commit if "commitInfo" in c)
    assert info["operation"] == "RESTORE" and info["operationParameters"]["version"] == "1"
    size = sum(a.size for a in snap1.add_files())
    expected = {"tableSizeAfterRestore": size, "numOfFilesAfterRestore": 2, "numRemovedFiles": 2, "numRestoredFiles": 2,
                "removedFilesSize": size, "restoredFilesSize": size}
    assert info["operationMetrics"] == {k: str(v) for k, v in expected.items()}
    assert out[0].asDict() == dict(zip(RESULT_COLUMNS, expected.values(), strict=True))
    assert _peers(path) == (v1, v1)


@pytest.mark.interop
def test_restore_across_the_version_that_enabled_dvs(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.range(100).repartition(2), path)                          # v0: no DVs, protocol (1, 2)
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)")  # v1
    DeltaTable.forPath(spark, path).delete("id < 30")                            # v2: DVs
    res = dvlake.sql(spark, f"RESTORE TABLE delta.`{path}` TO VERSION AS OF 0").collect()          # v3
    assert res[0].num_restored_files == 2 and res[0].num_removed_files == 2
    snap = Snapshot.load(path)
    assert "deletionVectors" in (snap.protocol.reader_features or ()), "RESTORE must never downgrade the protocol"
    assert "delta.enableDeletionVectors" not in snap.configuration
    assert snap.dv_count() == 0
    assert _ids(spark, path) == list(range(100))
    assert _peers(path) == (list(range(100)),) * 2
    # and forward again: the DVs of version 2 come back, with the property
    dvlake.sql(spark, f"RESTORE delta.`{path}` VERSION AS OF 2")                # v4
    assert _ids(spark, path) == list(range(30, 100))
    assert Snapshot.load(path).configuration["delta.enableDeletionVectors"] == "true"
    with pytest.raises(RestoreError):
        DeltaTable.forPath(spark, path).restoreToVersion(4)  # not older than the latest version


def test_restore_refuses_missing_dv_and_data_files_before_committing(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.range(50).repartition(1), path, properties=DV_PROPS)     # v0
    t = DeltaTable.forPath(spark, path)
    t.delete("id = 1")                                                          # v1
    t.delete("id = 2")                                                          # v2
    dv1 = Snapshot.load(path, version=1).add_files()[0].deletion_vector.absolute_path(path)
    os.rename(dv1, dv1 + ".moved")
    with pytest.raises(RestoreMissingFilesError, match="deletion vector file"):
        t.restoreToVersion(1)
    assert Snapshot.load(path).version == 2, "nothing may be committed"
    os.rename(dv1 + ".moved", dv1)
    data = os.path.join(path, Snapshot.load(path, version=0).add_files()[0].path)
    os.rename(data, data + ".moved")
    with pytest.raises(RestoreMissingFilesError, match="data file"):
        t.restoreToVersion(0)
    os.rename(data + ".moved", data)
    ts = dt.datetime.fromtimestamp(Snapshot.load(path).commit_timestamp(1) / 1000, dt.UTC)
    dvlake.sql(spark, f"RESTORE delta.`{path}` TO TIMESTAMP AS OF '{ts.isoformat()}'")
    assert _ids(spark, path) == [i for i in range(50) if i != 1]


def test_restore_racing_a_dv_delete_on_an_untouched_file_is_refused(spark, tmp_path, monkeypatch):
    """RESTORE paused just before its commit; a DELETE that only adds a DV to a file RESTORE keeps commits first.
    No serial order of the two gives RESTORE's commit on top of the DELETE, so RESTORE must fail (as delta-spark's)."""
    from dvlake.errors import ConcurrentDeleteReadException
    from dvlake.txn.transaction import OptimisticTransaction

    path = str(tmp_path / "t")
    dvlake.write(spark.range(0, 1000).coalesce(1), path, properties=DV_PROPS)           # v0: one file
    dvlake.write(spark.range(1000, 1100).coalesce(1), path, mode="append")              # v1: RESTORE removes this one
    original = OptimisticTransaction.commit
    raced = []

    def paused(self, actions, operation, *args, **kwargs):
        if operation == "RESTORE" and not raced:
            raced.append(DeltaTable.forPath(spark, path).delete("id = 5"))  # v2: a DV on the v0 file
        return original(self, actions, operation, *args, **kwargs)

    monkeypatch.setattr(OptimisticTransaction, "commit", paused)
    with pytest.raises(ConcurrentDeleteReadException):
        DeltaTable.forPath(spark, path).restoreToVersion(0)
    monkeypatch.setattr(OptimisticTransaction, "commit", original)
    assert Snapshot.load(path).version == 2
    assert _ids(spark, path) == [i for i in range(1100) if i != 5]
    DeltaTable.forPath(spark, path).restoreToVersion(0)                                  # serial: after the DELETE
    assert _ids(spark, path) == list(range(1000))
