"""VACUUM on tables dvlake wrote with DV and copy-on-write DELETEs: versions inside retention read exactly."""

from __future__ import annotations

import json
import os
import time

import pytest

import dvlake
from dvlake import DeltaTable
from dvlake.commands.maintenance.vacuum import vacuum
from dvlake.config import DELETE_DVS_PERSISTENT, RETENTION_CHECK, deleted_file_retention_ms
from dvlake.errors import VacuumRetentionError
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS
from tests.peers import read_with_deltalake, read_with_duckdb, rows


def _ids(spark, path, version=None):
    return sorted(r.id for r in dvlake.read(spark, path, version=version).select("id").collect())


def _rs_ids(path, version):
    return sorted(r[0] for r in rows(read_with_deltalake(path, version), ["id"]))


def _table_files(path):
    out = set()
    for d, dirs, names in os.walk(path):
        dirs[:] = [x for x in dirs if not x.startswith(("_", "."))]
        out |= {os.path.relpath(os.path.join(d, n), path) for n in names if not n.startswith((".", "_"))}
    return out


def _needed(path, version):
    """Relative data and DV files a version reads."""
    snap = Snapshot.load(path, version=version)
    out = set()
    for a in snap.add_files():
        out.add(a.path)
        if a.deletion_vector and a.deletion_vector.storage_type == "u":
            out.add(a.deletion_vector.relative_path())
    return out


def _commit_ts(path, version):
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return next(json.loads(ln)["commitInfo"]["timestamp"] for ln in f if "commitInfo" in ln)


@pytest.mark.interop
def test_vacuum_after_deletes_keeps_every_version_inside_retention(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(i, i % 4) for i in range(400)], "id long, p int")
    dvlake.write(df.repartition(4), path, properties=DV_PROPS)                   # v0
    t = DeltaTable.forPath(spark, path)
    t.delete("id % 10 = 1")                                                        # v1: DV file D1 on all files
    try:
        spark.conf.set(DELETE_DVS_PERSISTENT, "false")
        t.delete("id < 50")                                                        # v2: copy-on-write, drops D1 there
    finally:
        spark.conf.unset(DELETE_DVS_PERSISTENT)
    time.sleep(0.05)  # files written from here on are newer than the horizon
    t.delete("id % 10 = 2")                                                        # v3: DVs replace D1
    t.delete("id % 10 = 3")                                                        # v4: DVs replace v3's
    # versions are read by delta-rs (a fast independent oracle; it applies DVs), the latest by dvlake too
    before = {v: _rs_ids(path, v) for v in range(5)}
    assert before[4] == _ids(spark, path)
    needed = set().union(*(_needed(path, v) for v in (2, 3, 4)))
    all_before = _table_files(path)

    horizon = _commit_ts(path, 2) + 1
    now = horizon + deleted_file_retention_ms(Snapshot.load(path).configuration)
    dry = vacuum(spark, path, dry_run=True, now=now)
    result = vacuum(spark, path, now=now)

    after = _table_files(path)
    assert needed <= after, "a file a version inside retention needs was deleted"
    deleted = all_before - after
    assert any(f.endswith(".bin") for f in deleted) and any(f.endswith(".parquet") for f in deleted)
    assert deleted == (_needed(path, 0) | _needed(path, 1)) - needed
    assert {os.path.relpath(p, path) for p in dry.paths} == deleted
    assert result.num_deleted == len(deleted)
    for v in (2, 3, 4):
        assert _rs_ids(path, v) == before[v]
    with pytest.raises(Exception):  # noqa: B017 - version 1 lost its DV file: any read error will do
        _rs_ids(path, 1)
    ours = before[4]
    assert _ids(spark, path) == ours
    assert sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])) == ours


def test_vacuum_sql_forms_and_history(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.range(100).repartition(2), path, properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 3 = 0")
    DeltaTable.forPath(spark, path).delete("id % 3 = 1")  # the first DV file is now stale
    with pytest.raises(VacuumRetentionError) as err:
        dvlake.sql(spark, f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    assert err.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        dry = dvlake.sql(spark, f"VACUUM delta.`{path}` DRY RUN RETAIN 0 HOURS").collect()
        assert len(dry) == 1 and dry[0].path.endswith(".bin")
        stale_size = os.path.getsize(dry[0].path)
        out = dvlake.sql(spark, f"VACUUM delta.`{path}` FULL RETAIN 0 HOURS").collect()
        assert [r.path for r in out] == [path]
        assert not os.path.exists(dry[0].path)
        assert DeltaTable.forPath(spark, path).vacuum(0).count() == 0  # delta-spark's Python returns an empty frame
    finally:
        spark.conf.unset(RETENTION_CHECK)
    hist = DeltaTable.forPath(spark, path).history().collect()
    ops = [(h.operation, h.operationParameters.get("status")) for h in hist[:4]]
    assert ops == [("VACUUM END", "COMPLETED"), ("VACUUM START", None)] * 2
    start = hist[3]
    assert start.operationMetrics == {"numFilesToDelete": "1", "sizeOfDataToDelete": str(stale_size)}
    assert start.operationParameters["specifiedRetentionMillis"] == "0"
    assert hist[2].operationMetrics["numDeletedFiles"] == "1"
    assert _ids(spark, path) == [i for i in range(100) if i % 3 == 2]
    with pytest.raises(Exception, match="cannot parse VACUUM"):
        dvlake.sql(spark, f"VACUUM delta.`{path}` RETAIN 0 DAYS")


@pytest.mark.interop
def test_vacuum_after_restore_keeps_the_restored_dv_files(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.range(60).repartition(2), path, properties=DV_PROPS)     # v0
    t = DeltaTable.forPath(spark, path)
    t.delete("id % 4 = 0")                                                      # v1: DV1
    dv1 = {a.deletion_vector.relative_path() for a in Snapshot.load(path).add_files()}
    t.delete("id % 4 = 1")                                                      # v2: DV2; remove(path, DV1) in the log
    dv2 = {a.deletion_vector.relative_path() for a in Snapshot.load(path).add_files()}
    t.restoreToVersion(1)                                                       # v3: DV1 live again, DV2 tombstoned
    expected = [i for i in range(60) if i % 4 != 0]
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        lite = vacuum(spark, path, 0, "LITE")  # its candidates include DV1 (from v2's removes): it must stay
        files = _table_files(path)
        assert dv1 <= files and not (dv2 & files)
        assert lite.num_deleted == len(dv2)
        vacuum(spark, path, 0, "FULL")
        assert _table_files(path) == _needed(path, Snapshot.load(path).version)
    finally:
        spark.conf.unset(RETENTION_CHECK)
    assert _ids(spark, path) == expected
    assert sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])) == expected
    assert sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])) == expected
