"""Row tracking end to end: ``_metadata.row_id`` / ``row_commit_version`` read through ``dvlake.read`` and
``format("delta")``, kept by every command that rewrites rows, in DV and copy-on-write modes, and enabling it on an
existing table (the backfill). The oracle is the protocol's rule computed here from the log and the files."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.dv.store import load_bitmap
from dvlake.errors import RowTrackingError
from dvlake.log import row_tracking as rt
from dvlake.log.snapshot import Snapshot

ENABLE = {"delta.enableRowTracking": "true"}
DV = {"delta.enableDeletionVectors": "true"}


def ids(spark: SparkSession, path: str) -> dict[int, tuple[int, int]]:
    """id column → (row_id, row_commit_version) as dvlake reads them."""
    rows = dvlake.read(spark, path, row_tracking=True).select("id", "_metadata.row_id", "_metadata.row_commit_version")
    return {r.id: (r.row_id, r.row_commit_version) for r in rows.collect()}


def protocol_ids(path: str) -> dict[int, tuple[int, int]]:
    """The same, computed from the log and the Parquet files by the protocol's rule (no Spark, no dvlake scan)."""
    snap = Snapshot.load(path)
    rid_col, rcv_col = rt.materialized_columns_or_raise(snap.metadata)
    out: dict[int, tuple[int, int]] = {}
    for add in snap.add_files():
        table = pq.read_table(os.path.join(snap.table_root, add.path))
        deleted = set(load_bitmap(add.deletion_vector, snap.table_root)) if add.deletion_vector else set()
        rid = table.column(rid_col).to_pylist() if rid_col in table.column_names else [None] * table.num_rows
        rcv = table.column(rcv_col).to_pylist() if rcv_col in table.column_names else [None] * table.num_rows
        for i, key in enumerate(table.column("id").to_pylist()):
            if i in deleted:
                continue
            out[key] = (rid[i] if rid[i] is not None else add.base_row_id + i,
                        rcv[i] if rcv[i] is not None else add.default_row_commit_version)
    return out


def check_unique(found: dict[int, tuple[int, int]]) -> None:
    row_ids = [v[0] for v in found.values()]
    assert len(set(row_ids)) == len(row_ids)


def test_read_row_ids_of_appends(spark: SparkSession, tmp_path, scan_path: str) -> None:
    path = str(tmp_path / "t")
    dvlake.write(spark.range(0, 6, 1, numPartitions=2), path, properties=ENABLE)
    dvlake.write(spark.range(6, 10, 1, numPartitions=1), path, mode="append")
    found = ids(spark, path)
    assert found == protocol_ids(path)
    assert sorted(v[0] for v in found.values()) == list(range(10))  # consecutive from 0
    assert {found[i][1] for i in range(6)} == {0} and {found[i][1] for i in range(6, 10)} == {1}
    assert rt.high_water_mark(Snapshot.load(path).domains) == 9
    # the hidden columns never show
    assert dvlake.read(spark, path).columns == ["id"]
    assert dvlake.read(spark, path, row_tracking=True).columns == ["id", "_metadata"]
    meta = dvlake.read(spark, path, row_tracking=True).select("_metadata.*").columns
    assert {"row_id", "row_commit_version", "base_row_id", "default_row_commit_version", "row_index"} <= set(meta)


def test_read_through_format_delta_and_refused_without_row_tracking(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    dvlake.write(spark.range(3), path, properties=ENABLE)
    from dvlake import faces

    was_on = faces.enabled(spark)
    dvlake.configure_spark(spark)
    try:
        rows = spark.read.format("delta").option("dvlake.rowTracking", "true").load(path).select("id", "_metadata.row_id")
        assert sorted((r.id, r.row_id) for r in rows.collect()) == sorted((k, v[0]) for k, v in ids(spark, path).items())
    finally:
        if not was_on:
            faces.disable(spark)
    plain = str(tmp_path / "plain")
    dvlake.write(spark.range(3), plain)
    with pytest.raises(RowTrackingError, match="not enabled"):
        dvlake.read(spark, plain, row_tracking=True)


def _versions(found: dict[int, tuple[int, int]]) -> dict[int, int]:
    return {k: v[1] for k, v in found.items()}


@pytest.mark.parametrize("dvs", [True, False], ids=["dv", "copy_on_write"])
def test_ids_survive_update_delete_merge_optimize_purge(spark: SparkSession, tmp_path, dvs: bool) -> None:
    from dvlake.commands.maintenance.reorg import purge

    path = str(tmp_path / "t")
    props = {**ENABLE, **(DV if dvs else {})}
    dvlake.write(spark.range(0, 20, 1, numPartitions=2).withColumn("v", F.lit(0)), path, properties=props)
    table = DeltaTable.forPath(spark, path)
    start = ids(spark, path)
    assert start == protocol_ids(path)

    def step(expected_ids: dict[int, int], changed: set[int], version: int) -> dict[int, tuple[int, int]]:
        """After a command at ``version``: the ids the rows should have; ``changed`` rows carry ``version``."""
        found = ids(spark, path)
        assert found == protocol_ids(path)  # the read agrees with the protocol's rule
        check_unique(found)
        assert {k: v[0] for k, v in found.items() if k in expected_ids} == expected_ids
        for k, (_, cv) in found.items():
            if k in changed:
                assert cv == version, (k, cv, version)
        return found

    before = {k: v[0] for k, v in start.items()}
    table.update("id < 5", {"v": "1"})
    v = Snapshot.load(path).version
    found = step(before, set(range(5)), v)
    assert all(found[k][1] == start[k][1] for k in range(5, 20))  # untouched rows keep their version

    table.delete("id IN (7, 8)")
    kept_ids = {k: i for k, i in before.items() if k not in (7, 8)}
    prev = step(kept_ids, set(), -1)
    assert _versions(prev) == {k: found[k][1] for k in kept_ids}  # a delete changes no remaining row's version

    mark = rt.high_water_mark(Snapshot.load(path).domains)
    source = spark.createDataFrame([(10, 2), (11, 2), (100, 3), (101, 3)], "id long, v int")
    (table.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"v": "s.v"})
     .whenNotMatchedInsertAll().execute())
    v = Snapshot.load(path).version
    found = step(kept_ids, {10, 11, 100, 101}, v)
    assert all(found[k][0] > mark for k in (100, 101))  # inserted rows get fresh ids above the old mark
    assert all(found[k][1] == prev[k][1] for k in kept_ids if k not in (10, 11))

    prev = found
    table.optimize().executeCompaction()
    assert Snapshot.load(path).num_files == 1
    found = step({k: i for k, (i, _) in prev.items()}, set(), -1)
    assert found == prev  # OPTIMIZE keeps ids and versions

    if dvs:
        table.delete("id = 3")
        prev = ids(spark, path)
        purge(spark, path)
        assert all(a.deletion_vector is None for a in Snapshot.load(path).add_files())
        assert step({k: i for k, (i, _) in prev.items()}, set(), -1) == prev  # PURGE keeps both too


def test_alter_enables_row_tracking_on_a_table_with_data_and_dvs(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    dvlake.write(spark.range(0, 12, 1, numPartitions=3), path, properties=DV)
    table = DeltaTable.forPath(spark, path)
    table.delete("id IN (1, 5)")  # files with DVs are backfilled with their DV, deleted rows keep their positions
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    ops = [h["operation"] for h in Snapshot.load(path).history(3)]
    assert ops == ["SET TBLPROPERTIES", rt.BACKFILL_OPERATION, "UPGRADE PROTOCOL"]
    found = ids(spark, path)
    assert found == protocol_ids(path) and sorted(found) == [i for i in range(12) if i not in (1, 5)]
    check_unique(found)
    table.update("id = 0", {"id": "100"})
    after = ids(spark, path)
    assert after[100][0] == found[0][0] and after[100][1] == Snapshot.load(path).version
    assert {k: v for k, v in after.items() if k != 100} == {k: v for k, v in found.items() if k != 0}


@pytest.mark.interop
def test_peers_read_a_row_tracking_table_without_the_hidden_columns(spark: SparkSession, tmp_path) -> None:
    from tests.peers import read_with_deltalake, read_with_duckdb

    path = str(tmp_path / "t")
    dvlake.write(spark.range(0, 10, 1, numPartitions=2).withColumn("v", F.lit(0)), path, properties={**ENABLE, **DV})
    table = DeltaTable.forPath(spark, path)
    table.update("id < 3", {"v": "1"})  # new file with materialized ids, old files with DVs
    table.delete("id = 9")
    rid, rcv = rt.materialized_columns_or_raise(Snapshot.load(path).metadata)
    assert any(rid in pq.read_schema(os.path.join(path, a.path)).names for a in Snapshot.load(path).add_files())
    expected = sorted((r.id, r.v) for r in dvlake.read(spark, path).collect())
    for reader in (read_with_deltalake, read_with_duckdb):
        got = reader(path)
        assert got.column_names == ["id", "v"], reader.__name__  # the hidden columns stay hidden
        assert sorted(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == expected


def test_drop_feature_row_tracking_is_refused_clearly(spark: SparkSession, tmp_path) -> None:
    from dvlake.errors import DeltaTableFeatureException

    path = str(tmp_path / "t")
    dvlake.write(spark.range(3), path, properties=ENABLE)
    with pytest.raises(DeltaTableFeatureException, match="rowTracking") as err:
        dvlake.sql(spark, f"ALTER TABLE delta.`{path}` DROP FEATURE rowTracking")
    assert err.value.error_class == "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"  # removable, but not by dvlake
    assert rt.is_enabled(Snapshot.load(path).protocol, Snapshot.load(path).metadata)


def test_column_mapped_partitioned_table_keeps_ids(spark: SparkSession, tmp_path) -> None:
    """Physical column names differ from logical ones and partition values come from the path: the hidden columns
    pass through both renamings."""
    path = str(tmp_path / "t")
    df = spark.range(0, 12, 1, numPartitions=2).withColumn("p", (F.col("id") % 2).cast("string"))
    dvlake.write(df, path, partitionBy=["p"], properties={**ENABLE, **DV, "delta.columnMapping.mode": "name"})
    table = DeltaTable.forPath(spark, path)
    start = ids(spark, path)
    check_unique(start)
    table.update("id IN (2, 3)", {"id": "id + 100"})
    table.optimize().executeCompaction()
    after = ids(spark, path)
    assert {k: v[0] for k, v in after.items()} == {(k + 100 if k in (2, 3) else k): v[0] for k, v in start.items()}
    assert dvlake.read(spark, path).columns == ["id", "p"]
    snap = Snapshot.load(path)
    rid, _ = rt.materialized_columns_or_raise(snap.metadata)
    assert all(rid in pq.read_schema(os.path.join(path, a.path)).names for a in snap.add_files())


def test_update_with_alias_and_change_feed_keeps_ids_and_writes_plain_change_rows(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    props = {**ENABLE, **DV, "delta.enableChangeDataFeed": "true"}
    dvlake.write(spark.range(0, 6, 1, numPartitions=2).withColumn("v", F.lit(0)), path, properties=props)
    start = ids(spark, path)
    dvlake.sql(spark, f"UPDATE delta.`{path}` AS t SET v = t.v + 1 WHERE t.id < 2")
    version = Snapshot.load(path).version
    after = ids(spark, path)
    assert {k: v[0] for k, v in after.items()} == {k: v[0] for k, v in start.items()}
    assert {k for k, v in after.items() if v[1] == version} == {0, 1}
    changes = dvlake.read_changes(spark, path, startingVersion=version)
    assert {c for c in changes.columns if not c.startswith("_")} == {"id", "v"}
    assert sorted((r.id, r.v, r._change_type) for r in changes.collect()) == [
        (0, 0, "update_preimage"), (0, 1, "update_postimage"), (1, 0, "update_preimage"), (1, 1, "update_postimage")]
