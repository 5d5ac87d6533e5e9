"""DROP FEATURE deletionVectors: the rows stay, every DV goes, legacy readers (delta-rs' plain reader) read the table.

The acceptance check is an independent reader that refuses DV tables: ``deltalake.DeltaTable(path).to_pyarrow_table()``.
"""

from __future__ import annotations

import json
import os

import pytest

import dvlake
from dvlake import DeltaTable
from dvlake.commands.ddl.drop_feature import FAST_DROP, drop_feature, dv_tombstones, live_dv_count
from dvlake.commands.maintenance.vacuum import vacuum
from dvlake.errors import DeltaTableFeatureException, DvlakeError, VersionNotFoundError
from dvlake.log.actions import Protocol, now_ms
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS, table_rows
from tests.peers import read_with_deltalake, read_with_duckdb, rows

DV = "deletionVectors"


def _make(spark, path, props=DV_PROPS, n=300):
    df = spark.createDataFrame([(i, f"s{i}", i % 3) for i in range(n)], "id long, s string, p int")
    dvlake.write(df.repartition(3), path, partitionBy=["p"], properties=props)



def _commits(path):
    out = {}
    log = os.path.join(path, "_delta_log")
    for name in sorted(os.listdir(log)):
        if name.endswith(".json") and len(name) == 25:
            with open(os.path.join(log, name)) as f:
                out[int(name[:20])] = [json.loads(line) for line in f if line.strip()]
    return out


def _operation(actions):
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


def _legacy_rows(path):
    """delta-rs' plain reader: it refuses tables whose protocol has deletion vectors."""
    return _legacy_rows_of(path, ["id", "s", "p"])


def _legacy_rows_of(path, columns):
    from deltalake import DeltaTable as RsTable

    return rows(RsTable(path).to_pyarrow_table(), columns)


def _dv_files(path):
    out = set()
    for d, _, names in os.walk(path):
        out |= {os.path.relpath(os.path.join(d, n), path) for n in names if n.startswith("deletion_vector_")}
    return out


@pytest.mark.interop
def test_fast_drop_purges_every_dv_and_legacy_readers_read_the_same_rows(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path)                                                   # v0
    t = DeltaTable.forPath(spark, path)
    t.delete("id % 7 = 0")                                               # v1: a DV on every file
    t.delete("id % 5 = 0")                                               # v2: those DVs replaced: tombstones carry v1's
    before = {v: table_rows(spark, path, v) for v in (1, 2)}
    with pytest.raises(Exception):  # noqa: B017 - whichever error delta-rs gives, it must refuse DV tables
        _legacy_rows(path)
    old_dv_files = _dv_files(path)
    assert len(old_dv_files) == 2

    t.dropFeatureSupport(DV)

    snap = Snapshot.load(path)
    assert live_dv_count(snap) == 0 and "delta.enableDeletionVectors" not in snap.configuration
    assert table_rows(spark, path) == before[2]
    assert snap.protocol == Protocol(1, 7, None, ("checkpointProtection",))
    assert snap.configuration["delta.requireCheckpointProtectionBeforeVersion"] == str(snap.version)
    commits = _commits(path)
    ops = [_operation(commits[v])["operation"] for v in range(3, snap.version + 1)]
    assert ops == ["UNSET TBLPROPERTIES", "REORG", "Deletion Vector Tombstones"] + ["Empty Commit"] * 3 + ["DROP FEATURE"]
    drop = _operation(commits[snap.version])
    assert drop["operationParameters"] == {"featureName": DV, "truncateHistory": "false"}
    assert [a["protocol"] for a in commits[snap.version] if "protocol" in a] == [
        {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["checkpointProtection"]}]
    log = os.path.join(path, "_delta_log")
    for v in range(snap.version - 3, snap.version + 1):  # the three barriers and the drop itself
        assert os.path.exists(os.path.join(log, f"{v:020d}.checkpoint.parquet"))

    # DV tombstones: one path-only remove per DV file a tombstone still references (both DV files here)
    tomb = [a["remove"] for a in commits[snap.version - 4] if "remove" in a]
    assert {r["path"] for r in tomb} == old_dv_files
    assert all(r["dataChange"] is False and "deletionVector" not in r for r in tomb)
    assert dv_tombstones(snap, now_ms()) == []  # nothing left to protect

    # the acceptance check: readers that know nothing of DVs read exactly dvlake's rows
    ours = sorted(table_rows(spark, path), key=repr)
    assert _legacy_rows(path) == ours
    assert rows(read_with_duckdb(path), ["id", "s", "p"]) == ours
    for v, expected in before.items():  # time travel to the DV versions still reads right
        assert table_rows(spark, path, v) == expected

    # a DV-unaware VACUUM (delta-rs, FULL, default 7-day retention) with every file 8 days old: only the DV
    # tombstones keep it off the DV files the tombstoned DV versions still need (it deletes them without)
    from deltalake import DeltaTable as RsTable

    _age_files(path, 8 * 86_400)
    assert RsTable(path).vacuum(dry_run=True, full=True) == []
    vacuum(spark, path)
    assert _dv_files(path) == old_dv_files
    assert table_rows(spark, path, 1) == before[1]

    # the table stays writable by dvlake (checkpointProtection is a writer feature dvlake honours)
    dvlake.write(spark.createDataFrame([(1000, "x", 1)], "id long, s string, p int"), path, mode="append")
    assert _legacy_rows(path) == sorted(before[2] + [(1000, "x", 1)], key=repr)


def _age_files(path, seconds):
    """Make every data and DV file look ``seconds`` older (VACUUM compares file mtimes with the retention)."""
    for d, dirs, names in os.walk(path):
        dirs[:] = [x for x in dirs if x != "_delta_log"]
        for n in names:
            p = os.path.join(d, n)
            st = os.stat(p)
            os.utime(p, (st.st_atime - seconds, st.st_mtime - seconds))


def _age_log(path, seconds):
    """Make every commit look ``seconds`` older (log cleanup reads commit times from file mtimes)."""
    log = os.path.join(path, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".json"):
            p = os.path.join(log, name)
            st = os.stat(p)
            os.utime(p, (st.st_atime - seconds, st.st_mtime - seconds))


@pytest.mark.interop
def test_truncate_history_takes_two_steps_and_waits_for_the_retention(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, {**DV_PROPS, "delta.dropFeatureTruncateHistory.retentionDuration": "interval 2 hours"})
    DeltaTable.forPath(spark, path).delete("id % 4 = 0")
    expected = table_rows(spark, path)
    stmt = f"ALTER TABLE delta.`{path}` DROP FEATURE deletionVectors TRUNCATE HISTORY"

    with pytest.raises(DeltaTableFeatureException) as err:  # run 1: the current version is cleaned, the rest waits
        dvlake.sql(spark, stmt)
    assert err.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
    assert "interval 2 hours" in str(err.value)
    snap = Snapshot.load(path)
    assert live_dv_count(snap) == 0 and DV in snap.protocol.reader_features
    assert _operation(_commits(path)[snap.version])["operation"] == "Empty Commit"

    with pytest.raises(DeltaTableFeatureException) as err:  # run 2 right away: history still has DVs
        dvlake.sql(spark, stmt)
    assert err.value.error_class == "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST"
    assert DV in Snapshot.load(path).protocol.reader_features

    _age_log(path, 1 * 3600)  # not old enough yet
    with pytest.raises(DeltaTableFeatureException) as err:
        dvlake.sql(spark, stmt)
    assert err.value.error_class == "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST"

    _age_log(path, 2 * 3600)  # now every version that used DVs is older than the 2 hours
    assert dvlake.sql(spark, stmt).count() == 0
    snap = Snapshot.load(path)
    assert snap.protocol == Protocol(1, 1)
    info = _operation(_commits(path)[snap.version])
    assert info["operation"] == "DROP FEATURE" and info["operationParameters"]["truncateHistory"] == "true"
    with pytest.raises(VersionNotFoundError):  # the DV versions were truncated
        Snapshot.load(path, version=1)
    assert table_rows(spark, path) == expected
    assert _legacy_rows(path) == sorted(expected, key=repr)


def test_errors_leave_the_table_untouched(spark, tmp_path):
    path = str(tmp_path / "plain")
    _make(spark, path, props={}, n=30)
    t = DeltaTable.forPath(spark, path)
    cases = [("deletionVectors", False, "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"),
             ("noSuchFeature", False, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
             ("delta.enableDeletionVectors", False, "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY"),
             ("appendOnly", False, "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE")]
    for name, truncate, error_class in cases:
        with pytest.raises(DeltaTableFeatureException) as err:
            t.dropFeatureSupport(name, truncate)
        assert err.value.error_class == error_class, name
    t.addFeatureSupport("checkConstraints")
    version = Snapshot.load(path).version
    with pytest.raises(DeltaTableFeatureException) as err:
        dvlake.sql(spark, f"ALTER TABLE delta.`{path}` DROP FEATURE `checkConstraints` TRUNCATE HISTORY")
    assert err.value.error_class == "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED"
    assert Snapshot.load(path).version == version  # refused before anything was committed


def test_second_drop_and_fast_drop_disabled(spark, tmp_path):
    """A drop on a table already clean commits no UNSET/REORG; with fast drop off it is the legacy two-step path."""
    path = str(tmp_path / "t")
    _make(spark, path, n=30)  # DVs supported and enabled, but none written yet
    spark.conf.set(FAST_DROP, "false")
    try:
        with pytest.raises(DeltaTableFeatureException) as err:
            drop_feature(spark, path, DV)
        assert err.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"  # the property was on
        assert "delta.logRetentionDuration" in str(err.value)
    finally:
        spark.conf.unset(FAST_DROP)
    first = Snapshot.load(path).version
    outcome = drop_feature(spark, path, DV)  # fast path now: traces are gone, so no UNSET/REORG/tombstones
    ops = [_operation(a)["operation"] for v, a in sorted(_commits(path).items()) if v > first]
    assert ops == ["Empty Commit"] * 3 + ["DROP FEATURE"] and outcome.version == first + 4
    with pytest.raises(DeltaTableFeatureException) as err:
        drop_feature(spark, path, DV)
    assert err.value.error_class == "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"
    assert _legacy_rows(path) == sorted(table_rows(spark, path), key=repr)


@pytest.mark.interop
def test_drop_on_a_delta_spark_table_with_column_mapping(spark, testdata, tmp_path):
    """delta-spark's ``dv-with-columnmapping`` (15 DELETEs, DVs in a checkpoint and in tombstones), on a copy."""
    from deltalake import DeltaTable as RsTable

    from tests.conftest import copy_table

    path = str(copy_table(testdata / "dv-with-columnmapping", tmp_path / "t"))
    cols = ["part", "col1", "col2"]

    def ours(version=None):
        return sorted(tuple(r) for r in dvlake.read(spark, path, version=version).select(*cols).collect())

    expected, at_10 = ours(), ours(10)
    outcome = drop_feature(spark, path, DV)
    snap = Snapshot.load(path)
    assert outcome.version == snap.version and live_dv_count(snap) == 0
    assert snap.protocol == Protocol(2, 7, None, ("checkpointProtection", "columnMapping"))  # reader 2: column mapping
    assert ours() == expected and ours(10) == at_10
    # delta-rs' plain reader no longer refuses the table; it does not apply column mapping's physical names (a
    # delta-rs limitation: data columns come back null), so the values are compared through its SQL reader and DuckDB
    plain = RsTable(path).to_pyarrow_table()
    assert sorted(plain.column("part").to_pylist()) == sorted(r[0] for r in expected)
    assert rows(read_with_deltalake(path), cols) == rows(read_with_duckdb(path), cols) == sorted(expected, key=repr)


# -- DROP FEATURE checkConstraints (a writer feature: no pre-downgrade work, no history protection) ----------------

CC = "checkConstraints"


def _orders(spark, path):
    df = spark.createDataFrame([(i, 5 * i + 1, "open" if i % 2 else "shipped") for i in range(40)],
                               "order_id long, qty int, state string")
    dvlake.write(df.coalesce(2), path)
    for name, expression in (("qty_positive", "qty > 0"), ("known_state", "state IN ('open', 'shipped')")):
        dvlake.sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT {name} CHECK ({expression})")


@pytest.mark.interop
def test_check_constraints_feature_drops_only_once_no_constraint_is_left(spark, tmp_path):
    """Rule (delta-spark CheckConstraintsPreDowngradeTableFeatureCommand, CheckConstraintsSuite "drop table feature"):
    DROP FEATURE checkConstraints is refused with DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE naming every remaining
    constraint, and changes nothing; once they are all dropped it is one DROP FEATURE commit (no barrier checkpoints,
    no checkpointProtection: readers never needed the feature) whose protocol no longer lists it."""
    path = str(tmp_path / "orders")
    _orders(spark, path)
    stmt = f"ALTER TABLE delta.`{path}` DROP FEATURE checkConstraints"
    expected = table_rows(spark, path)

    def refused(*names):
        before = Snapshot.load(path)
        with pytest.raises(DvlakeError) as err:
            dvlake.sql(spark, stmt)
        assert err.value.getCondition() == "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE"
        assert err.value.getSqlState() == "0AKDE"
        assert "must be dropped first: " + ", ".join(f"`{n}`" for n in names) + "." in str(err.value)
        after = Snapshot.load(path)
        assert (after.version, after.protocol, after.configuration) == (before.version, before.protocol,
                                                                        before.configuration)

    assert Snapshot.load(path).protocol == Protocol(1, 3)
    refused("qty_positive", "known_state")
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` DROP CONSTRAINT qty_positive")
    refused("known_state")
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` DROP CONSTRAINT known_state")

    start = Snapshot.load(path).version
    dvlake.sql(spark, stmt)
    snap = Snapshot.load(path)
    assert snap.version == start + 1
    assert snap.protocol == Protocol(1, 2)  # writer 3 without checkConstraints is what writer 2 implies
    commit = _commits(path)[snap.version]
    assert _operation(commit)["operation"] == "DROP FEATURE"
    assert _operation(commit)["operationParameters"] == {"featureName": CC, "truncateHistory": "false"}
    assert [a["protocol"] for a in commit if "protocol" in a] == [{"minReaderVersion": 1, "minWriterVersion": 2}]
    assert any("metaData" in a for a in commit)  # delta-spark's downgrade commit carries the metadata too
    assert not os.path.exists(os.path.join(path, "_delta_log", f"{snap.version:020d}.checkpoint.parquet"))
    assert "delta.requireCheckpointProtectionBeforeVersion" not in snap.configuration

    assert table_rows(spark, path) == expected
    assert _legacy_rows_of(path, ["order_id", "qty", "state"]) == sorted(expected, key=repr)
    with pytest.raises(DeltaTableFeatureException) as err:  # it is gone: a second drop finds nothing to drop
        dvlake.sql(spark, stmt)
    assert err.value.error_class == "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"


@pytest.mark.interop
def test_check_constraints_drop_keeps_deletion_vectors_and_follows_an_unset_constraint(spark, tmp_path):
    """Rule: delta-spark counts constraints from the table properties (getCheckConstraintNames), so a constraint
    removed with UNSET TBLPROPERTIES no longer blocks the drop; on a table-features protocol only checkConstraints
    leaves the lists, the DVs and their rows stay."""
    path = str(tmp_path / "t")
    _make(spark, path, n=60)
    t = DeltaTable.forPath(spark, path)
    t.delete("id % 6 = 0")
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT id_known CHECK (id IS NOT NULL)")
    assert CC in Snapshot.load(path).protocol.writer_features
    expected = table_rows(spark, path)
    with pytest.raises(DvlakeError, match="`id_known`"):
        t.dropFeatureSupport(CC)

    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ('delta.constraints.id_known')")
    before = Snapshot.load(path).protocol
    t.dropFeatureSupport(CC)
    snap = Snapshot.load(path)
    assert snap.protocol == Protocol(before.min_reader_version, 7, before.reader_features,
                                     tuple(f for f in before.writer_features if f != CC))
    assert DV in snap.protocol.reader_features and snap.dv_count() > 0
    assert table_rows(spark, path) == expected
    assert rows(read_with_deltalake(path), ["id", "s", "p"]) == sorted(expected, key=repr)
