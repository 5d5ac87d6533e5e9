"""OPTIMIZE: bin-packing with deletion vectors, partition filters, Z-order, auto-compaction, metrics, peers."""

from __future__ import annotations

import json
import os

import pytest

import dvlake
from dvlake import DeltaTable
from dvlake.commands.maintenance.optimize import OptimizeSettings, pack_bins, select_for_compaction
from dvlake.config import OPTIMIZE_MAX_FILE_SIZE, OPTIMIZE_MIN_FILE_SIZE
from dvlake.errors import NonPartitionColumnReferenceError, ZOrderingOnPartitionColumnError
from dvlake.log.actions import AddFile
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import build_stats
from tests.helpers import DV_PROPS, table_rows
from tests.peers import read_with_deltalake, read_with_duckdb, rows


def _df(spark, n=400):
    return spark.createDataFrame(
        [(i, f"s{i}", i % 4, None if i % 10 == 0 else i % 7) for i in range(n)], "id long, s string, p int, k int")


def _make(spark, path, props=DV_PROPS, partition_by=None, files=4, n=400):
    dvlake.write(_df(spark, n).repartition(files), path, properties=props, partitionBy=partition_by)



def _commit(path, version):
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f]


def _peer_ids(path):
    return (sorted(r[0] for r in rows(read_with_deltalake(path), ["id"])),
            sorted(r[0] for r in rows(read_with_duckdb(path), ["id"])))


def _add(path, size, records=None, deleted=0, part="0"):
    from dvlake.dv.descriptor import DeletionVectorDescriptor

    dv = None
    if deleted:
        dv = DeletionVectorDescriptor.from_json({"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                                                 "offset": 1, "sizeInBytes": 10, "cardinality": deleted})
    return AddFile(path=path, partition_values={"p": part}, size=size, modification_time=0,
                   stats=build_stats(records) if records is not None else None, deletion_vector=dv)


def test_selection_and_bins_follow_delta_spark_with_lone_dv_files_purged():
    s = OptimizeSettings(min_file_size=100, max_file_size=250, max_deleted_rows_ratio=0.05)
    small, big = _add("a", 50, 10), _add("b", 500, 10)
    few_deleted, many_deleted, unknown = _add("c", 500, 100, deleted=5), _add("d", 500, 100, deleted=6), _add("e", 500, None, 1)
    assert [select_for_compaction(a, s) for a in (small, big, few_deleted, many_deleted, unknown)] == [
        True, False, False, True, True]
    # per partition, ascending size, greedy up to max size; a lone small file is left alone
    files = [_add("x1", 100), _add("x2", 120), _add("x3", 90), _add("y", 60, part="1")]
    bins = pack_bins(files, 250)
    assert [[a.path for a in b] for b in bins] == [["x3", "x1"]]
    # a lone file above the deleted ratio is rewritten anyway (delta-spark would skip it: trino#29041)
    assert [[a.path for a in b] for b in pack_bins([many_deleted], 250)] == [["d"]]
    assert pack_bins([_add("z", 60)], 250, keep_single=True) == [[_add("z", 60)]]


@pytest.mark.interop
def test_compaction_applies_dvs_and_logs_like_delta_spark(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=4)
    DeltaTable.forPath(spark, path).delete("id % 5 = 1")  # 20 % of every file: DVs on all 4
    before = table_rows(spark, path)
    v_before = Snapshot.load(path).version
    old_adds = {a.path: a for a in Snapshot.load(path).add_files()}
    assert all(a.deletion_vector for a in old_adds.values())

    result = DeltaTable.forPath(spark, path).optimize().executeCompaction()
    assert result.columns == ["path", "metrics"]
    m = result.collect()[0].metrics
    assert (m.numFilesAdded, m.numFilesRemoved, m.numBins, m.totalConsideredFiles) == (1, 4, 1, 4)
    assert m.deletionVectorStats.numDeletionVectorsRemoved == 4
    assert m.deletionVectorStats.numDeletionVectorRowsRemoved == 80
    assert m.filesRemoved.totalFiles == 4 and m.filesAdded.totalSize > 0

    snap = Snapshot.load(path)
    assert snap.version == v_before + 1 and snap.dv_count() == 0 and snap.num_files == 1
    assert table_rows(spark, path) == before
    commit = _commit(path, snap.version)
    info = next(c["commitInfo"] for c in commit if "commitInfo" in c)
    assert info["operation"] == "OPTIMIZE" and info["isolationLevel"] == "SnapshotIsolation"
    assert info["operationParameters"] == {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": "false"}
    om = info["operationMetrics"]
    assert om["numDeletionVectorsRemoved"] == "4" and om["numRemovedFiles"] == "4" and om["numAddedFiles"] == "1"
    assert set(om) == {"numAddedFiles", "numRemovedFiles", "numAddedBytes", "numRemovedBytes", "minFileSize",
                       "p25FileSize", "p50FileSize", "p75FileSize", "maxFileSize", "numDeletionVectorsRemoved"}
    removes = [c["remove"] for c in commit if "remove" in c]
    adds = [c["add"] for c in commit if "add" in c]
    assert not any(r["dataChange"] for r in removes + adds)
    for r in removes:  # each remove carries exactly the DV of the add it replaces
        assert r["deletionVector"] == old_adds[r["path"]].deletion_vector.to_json()
        assert json.loads(r["stats"]) == {"numRecords": 100}
    stats = json.loads(adds[0]["stats"])
    assert stats["numRecords"] == 320 and stats["tightBounds"] is True and "deletionVector" not in adds[0]
    assert stats["minValues"]["id"] == 0 and stats["maxValues"]["id"] == 399
    ours = [r[0] for r in before]
    assert _peer_ids(path) == (ours, ours)
    # time travel: the version before OPTIMIZE still reads the same rows through its DVs
    assert table_rows(spark, path, version=v_before) == before
    assert sorted(r[0] for r in rows(read_with_deltalake(path, v_before), ["id"])) == ours


def test_second_compaction_finds_nothing_and_big_files_are_skipped(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=3)
    dt = DeltaTable.forPath(spark, path)
    dt.optimize().executeCompaction()
    version = Snapshot.load(path).version
    m = dt.optimize().executeCompaction().collect()[0].metrics
    assert (m.numFilesAdded, m.numFilesRemoved, m.totalConsideredFiles, m.totalFilesSkipped) == (0, 0, 1, 1)
    assert m.deletionVectorStats is None
    assert Snapshot.load(path).version == version  # nothing to do: no commit
    # with a tiny minFileSize nothing is "small": files with few deleted rows stay as they are
    _make(spark, str(tmp_path / "u"), files=3)
    spark.conf.set(OPTIMIZE_MIN_FILE_SIZE, "1")
    try:
        DeltaTable.forPath(spark, str(tmp_path / "u")).delete("id = 7")
        m = DeltaTable.forPath(spark, str(tmp_path / "u")).optimize().executeCompaction().collect()[0].metrics
        assert m.numFilesRemoved == 0
        DeltaTable.forPath(spark, str(tmp_path / "u")).delete("id % 3 = 0")  # now > 5 % deleted everywhere
        m = DeltaTable.forPath(spark, str(tmp_path / "u")).optimize().executeCompaction().collect()[0].metrics
        assert m.numFilesRemoved == 3 and Snapshot.load(str(tmp_path / "u")).dv_count() == 0
    finally:
        spark.conf.unset(OPTIMIZE_MIN_FILE_SIZE)


@pytest.mark.interop
def test_partition_filter_sql_and_column_mapping(spark, tmp_path):
    path = str(tmp_path / "t")
    props = {**DV_PROPS, "delta.columnMapping.mode": "name"}
    _make(spark, path, props=props, partition_by=["p"], files=3)
    dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE k = 3")
    before = table_rows(spark, path)
    files_before = Snapshot.load(path).add_files()
    out = dvlake.sql(spark, f"OPTIMIZE delta.`{path}` WHERE p = 1 OR p = 2")
    m = out.collect()[0].metrics
    assert m.partitionsOptimized == 2 and m.numFilesAdded == 2
    snap = Snapshot.load(path)
    by_part: dict = {}
    for a in snap.add_files():
        by_part.setdefault(next(iter(a.partition_values.values())), []).append(a)
    assert len(by_part["1"]) == len(by_part["2"]) == 1 and len(by_part["0"]) == 3
    assert all(a.deletion_vector is None for a in by_part["1"] + by_part["2"])
    assert sum(1 for a in files_before if a.deletion_vector) - 2 * 3 == snap.dv_count()
    assert table_rows(spark, path) == before
    ours = sorted(r[0] for r in before)
    assert _peer_ids(path) == (ours, ours)
    info = next(c["commitInfo"] for c in _commit(path, snap.version) if "commitInfo" in c)
    assert info["operationParameters"]["predicate"] == json.dumps(["(('p = 1) OR ('p = 2))"])  # Catalyst's text
    with pytest.raises(NonPartitionColumnReferenceError, match=r"DELTA_NON_PARTITION_COLUMN_REFERENCE\] Predicate "
                       r"references non-partition column 'k'. Only the partition columns may be referenced: \[p\]"):
        DeltaTable.forPath(spark, path).optimize().where("k = 1").executeCompaction()
    assert Snapshot.load(path).version == snap.version


def test_bins_respect_max_file_size(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=8, n=4000)
    sizes = sorted(a.size for a in Snapshot.load(path).add_files())
    spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(sizes[0] * 2 + sizes[1]))
    try:
        m = DeltaTable.forPath(spark, path).optimize().executeCompaction().collect()[0].metrics
    finally:
        spark.conf.unset(OPTIMIZE_MAX_FILE_SIZE)
    assert m.numBins == 4 and m.numFilesAdded == 4 and m.numFilesRemoved == 8
    assert sorted(r.id for r in dvlake.read(spark, path).select("id").collect()) == list(range(4000))


def test_zorder_rejects_partition_columns(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partition_by=["p"], files=1)
    with pytest.raises(ZOrderingOnPartitionColumnError, match="DELTA_ZORDERING_ON_PARTITION_COLUMN"):
        DeltaTable.forPath(spark, path).optimize().executeZOrderBy("p")


def _files_read(spark, path, condition):
    from dvlake.spark.scan import plan_scan

    return len(plan_scan(spark, Snapshot.load(path), condition).files)


@pytest.mark.interop
def test_zorder_clusters_strings_dates_and_nulls_so_skipping_reads_fewer_files(spark, tmp_path):
    import datetime as dt
    import random

    rnd = random.Random(7)
    n = 6000
    data = [(i, rnd.randrange(100_000), None if i % 13 == 0 else f"key{rnd.randrange(100_000):06d}",
             dt.date(2024, 1, 1) + dt.timedelta(days=rnd.randrange(366))) for i in range(n)]
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame(data, "id long, x int, s string, d date").repartition(8), path, properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 50 = 0")  # Z-order rewrites through the DVs too
    before = table_rows(spark, path)
    predicates = ["x < 10000", "s < 'key010000'", "d < DATE '2024-02-05'"]
    read_before = [_files_read(spark, path, p) for p in predicates]
    assert read_before == [8, 8, 8]  # randomly spread: every file spans every range
    total = sum(a.size for a in Snapshot.load(path).add_files())
    spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(total // 8 + 1))
    try:
        m = DeltaTable.forPath(spark, path).optimize().executeZOrderBy("x", "s", "d").collect()[0].metrics
    finally:
        spark.conf.unset(OPTIMIZE_MAX_FILE_SIZE)
    assert m.numFilesRemoved == 8 and m.numFilesAdded >= 6 and m.zOrderStats.strategyName == "all"
    assert m.deletionVectorStats.numDeletionVectorsRemoved == 8
    read_after = [_files_read(spark, path, p) for p in predicates]
    # every predicate now skips files; with 3 columns over ~8 files each column gets about one bit of the curve,
    # so about half the files are the ideal (row-count cuts do not fall exactly on the curve's octants)
    assert all(a < b for a, b in zip(read_after, read_before, strict=True)) and sum(read_after) <= 16, read_after
    assert table_rows(spark, path) == before
    snap = Snapshot.load(path)
    assert snap.dv_count() == 0
    info = next(c["commitInfo"] for c in _commit(path, snap.version) if "commitInfo" in c)
    assert info["operationParameters"]["zOrderBy"] == json.dumps(["x", "s", "d"])
    ours = [r[0] for r in before]
    assert _peer_ids(path) == (ours, ours)
    # one column, through SQL: the x predicate prunes at least as well as with three columns
    spark.conf.set(OPTIMIZE_MAX_FILE_SIZE, str(total // 8 + 1))
    try:
        dvlake.sql(spark, f"OPTIMIZE delta.`{path}` ZORDER BY (x)")
    finally:
        spark.conf.unset(OPTIMIZE_MAX_FILE_SIZE)
    assert _files_read(spark, path, "x < 10000") <= 2
    assert table_rows(spark, path) == before


def test_auto_compaction_follows_a_delete_only_when_enabled(spark, tmp_path, monkeypatch):
    on, off = str(tmp_path / "on"), str(tmp_path / "off")
    _make(spark, on, props={**DV_PROPS, "delta.autoOptimize.autoCompact": "true"}, files=2)
    _make(spark, off, files=2)
    for path in (on, off):
        DeltaTable.forPath(spark, path).delete("id % 10 = 3")  # 10 % of each file: above the 5 % ratio
    snap_on, snap_off = Snapshot.load(on), Snapshot.load(off)
    assert snap_off.version == 1 and snap_off.dv_count() == 2
    assert snap_on.version == 2 and snap_on.dv_count() == 0
    info = next(c["commitInfo"] for c in _commit(on, 2) if "commitInfo" in c)
    assert info["operation"] == "OPTIMIZE" and info["operationParameters"]["auto"] == "true"
    assert table_rows(spark, on) == table_rows(spark, off)
    assert table_rows(spark, on, version=1) == table_rows(spark, on)
    # a failing follow-up never fails (or undoes) the DELETE
    import dvlake.commands.maintenance.auto_compact as ac

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(ac, "optimize", boom)
    DeltaTable.forPath(spark, on).delete("id % 10 = 4")
    assert Snapshot.load(on).version == 3 and Snapshot.load(on).history()[0]["operation"] == "DELETE"
    assert not any(r[0] % 10 in (3, 4) for r in table_rows(spark, on))


@pytest.mark.parametrize("command", ["update", "merge"])
def test_auto_compaction_follows_update_and_merge_once_as_it_follows_delete(spark, tmp_path, command):
    """The row-level template runs auto-compaction once after the committed version, for every command."""
    path = str(tmp_path / command)
    _make(spark, path, props={**DV_PROPS, "delta.autoOptimize.autoCompact": "true"}, files=2)
    before = table_rows(spark, path)
    table = DeltaTable.forPath(spark, path)
    if command == "update":
        table.update("id % 10 = 3", {"id": "id + 1000000"})  # 10 % of each file marked: above the 5 % ratio
    else:
        source = spark.range(0, 10**6).filter("id % 10 = 3")
        (table.alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedUpdate(set={"id": "t.id + 1000000"}).execute())
    snap = Snapshot.load(path)
    assert snap.version == 2 and snap.dv_count() == 0
    operations = [c["commitInfo"]["operation"] for v in (1, 2) for c in _commit(path, v) if "commitInfo" in c]
    assert operations == [command.upper(), "OPTIMIZE"]
    expected = sorted((r[0] + 1000000 if r[0] % 10 == 3 else r[0], *r[1:]) for r in before)
    assert table_rows(spark, path) == expected


def test_auto_compaction_of_a_partition_with_many_small_files(spark, tmp_path):
    from dvlake.config import AUTO_COMPACT_MIN_NUM_FILES

    path = str(tmp_path / "t")
    _make(spark, path, props={**DV_PROPS, "delta.autoOptimize.autoCompact": "auto"}, files=4)
    DeltaTable.forPath(spark, path).delete("id = 1")  # 1 row in 100: below the ratio, and 4 < 50 small files
    assert Snapshot.load(path).version == 1
    spark.conf.set(AUTO_COMPACT_MIN_NUM_FILES, "4")
    try:
        DeltaTable.forPath(spark, path).delete("id = 2")
    finally:
        spark.conf.unset(AUTO_COMPACT_MIN_NUM_FILES)
    snap = Snapshot.load(path)
    assert snap.version == 3 and snap.num_files == 1 and snap.dv_count() == 0
    assert sorted(r[0] for r in table_rows(spark, path)) == [i for i in range(400) if i not in (1, 2)]
