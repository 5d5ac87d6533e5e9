"""Writing the change feed: UPDATE/MERGE (DV path too) and copy-on-write DELETE write cdc files in their
commit; DV DELETE and insert-only MERGE write none; enabling the feed upgrades the protocol as delta-spark."""

from __future__ import annotations

import json
import os
from collections import Counter

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.errors import ReservedCdcColumnsOnWriteError
from dvlake.log.snapshot import Snapshot

CDF_DV = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true"}


def _commit(path: str, version: int) -> list[dict]:
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f]


def _actions(path: str, version: int, kind: str) -> list[dict]:
    return [ln[kind] for ln in _commit(path, version) if kind in ln]


def _changes(spark, path: str, version: int, *cols: str) -> Counter:
    df = dvlake.read_changes(spark, path, version, version)
    return Counter(tuple(r) for r in df.select(*cols, "_change_type").collect())


def _make(spark, path: str, props: dict, partition_by: str | None = None, n: int = 40) -> None:
    df = spark.range(n).select("id", (F.col("id") % 4).cast("int").alias("v"),
                               (F.col("id") % 2).cast("string").alias("p")).repartition(2, "id")
    dvlake.write(df, path, partitionBy=partition_by, properties=props)


def test_dv_update_writes_pre_and_post_images_in_its_commit(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, CDF_DV)
    DeltaTable.forPath(spark, path).update("id in (3, 7)", {"v": "v * 10"})
    adds, cdc = _actions(path, 1, "add"), _actions(path, 1, "cdc")
    assert any(a.get("deletionVector") for a in adds)  # the DV path ran
    assert cdc and all(c["path"].startswith("_change_data/") and c["dataChange"] is False for c in cdc)
    assert all(c["size"] == os.path.getsize(os.path.join(path, c["path"])) for c in cdc)
    on_disk = Counter()
    for c in cdc:
        t = pq.read_table(os.path.join(path, c["path"]))
        assert t.column_names == ["id", "v", "p", "_change_type"]
        on_disk.update(tuple(r.values()) for r in t.to_pylist())
    expected = Counter({(3, 3, "1", "update_preimage"): 1, (3, 30, "1", "update_postimage"): 1,
                        (7, 3, "1", "update_preimage"): 1, (7, 30, "1", "update_postimage"): 1})
    assert on_disk == expected
    assert _changes(spark, path, 1, "id", "v", "p") == expected
    metrics = Snapshot.load(path).history(1)[0]["operationMetrics"]
    assert int(metrics["numAddedChangeFiles"]) == len(cdc)


def test_dv_delete_writes_no_change_files_and_copy_on_write_delete_writes_only_deleted_rows(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, CDF_DV)
    dt = DeltaTable.forPath(spark, path)
    dt.delete("id < 2")                                   # v1: DVs, the DV diff is the change
    assert not _actions(path, 1, "cdc") and any(a.get("deletionVector") for a in _actions(path, 1, "add"))
    assert _changes(spark, path, 1, "id") == Counter({(0, "delete"): 1, (1, "delete"): 1})
    dt.setProperties({"delta.enableDeletionVectors": "false"})   # v2
    dt.delete("id in (10, 11)")                           # v3: copy-on-write, copied rows are not changes
    cdc = _actions(path, 3, "cdc")
    assert cdc and not any(a.get("deletionVector") for a in _actions(path, 3, "add"))
    assert _changes(spark, path, 3, "id", "v") == Counter({(10, 2, "delete"): 1, (11, 3, "delete"): 1})
    assert int(Snapshot.load(path).history(1)[0]["operationMetrics"]["numAddedChangeFiles"]) == len(cdc)


def test_merge_on_a_partitioned_column_mapped_table_writes_every_kind_of_change(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, {**CDF_DV, "delta.columnMapping.mode": "name"}, partition_by="p", n=20)
    dt = DeltaTable.forPath(spark, path)
    src = spark.createDataFrame([(2, 9, "0"), (3, -1, "1"), (100, 1, "0")], "id long, v int, p string")
    (dt.alias("t").merge(src.alias("s"), "t.id = s.id")
       .whenMatchedUpdate(condition="s.v >= 0", set={"v": "s.v"}).whenMatchedDelete()
       .whenNotMatchedInsertAll().whenNotMatchedBySourceDelete(condition="t.id = 19").execute())
    cdc = _actions(path, 1, "cdc")
    assert cdc and all(c["path"].startswith("_change_data/") for c in cdc)
    keys = {k for c in cdc for k in c["partitionValues"]}
    assert len(keys) == 1 and keys != {"p"}  # keyed by the partition column's physical name
    for c in cdc:  # column-mapped: the files hold physical names, _change_type is not mapped
        names = pq.read_schema(os.path.join(path, c["path"])).names
        assert "_change_type" in names and "v" not in names
    assert _changes(spark, path, 1, "id", "v", "p") == Counter({
        (2, 2, "0", "update_preimage"): 1, (2, 9, "0", "update_postimage"): 1, (3, 3, "1", "delete"): 1,
        (100, 1, "0", "insert"): 1, (19, 3, "1", "delete"): 1})
    metrics = Snapshot.load(path).history(1)[0]["operationMetrics"]
    assert int(metrics["numTargetChangeFilesAdded"]) == len(cdc)
    dt.alias("t").merge(spark.createDataFrame([(200, 1, "1")], "id long, v int, p string").alias("s"),
                        "t.id = s.id").whenNotMatchedInsertAll().execute()   # v2: insert-only, plain adds
    assert not _actions(path, 2, "cdc")
    assert _changes(spark, path, 2, "id") == Counter({(200, "insert"): 1})
    dt.update("p = '1'", {"v": "v + 1000"})   # v3: partition-only: whole files rewritten, change files still written
    assert _actions(path, 3, "cdc")
    changed = _changes(spark, path, 3, "id", "v")
    pre = {i: v for (i, v, kind) in changed if kind == "update_preimage"}
    post = {i: v for (i, v, kind) in changed if kind == "update_postimage"}
    assert sorted(pre) == sorted(post) == [1, 5, 7, 9, 11, 13, 15, 17, 200]  # 3 and 19 were deleted by the MERGE
    assert all(post[i] == pre[i] + 1000 for i in pre) and sum(changed.values()) == 18


def test_enabling_the_feed_upgrades_the_protocol_as_delta_spark(spark, tmp_path):
    plain = str(tmp_path / "plain")
    _make(spark, plain, {}, n=4)
    assert Snapshot.load(plain).protocol.to_json() == {"minReaderVersion": 1, "minWriterVersion": 2}
    DeltaTable.forPath(spark, plain).setProperties({"delta.enableChangeDataFeed": "true"})
    assert Snapshot.load(plain).protocol.to_json() == {"minReaderVersion": 1, "minWriterVersion": 4}
    fresh = str(tmp_path / "fresh")
    _make(spark, fresh, {"delta.enableChangeDataFeed": "true"}, n=4)
    assert Snapshot.load(fresh).protocol.to_json() == {"minReaderVersion": 1, "minWriterVersion": 4}
    dv = str(tmp_path / "dv")
    _make(spark, dv, {"delta.enableDeletionVectors": "true"}, n=4)
    DeltaTable.forPath(spark, dv).setProperties({"delta.enableChangeDataFeed": "true"})
    proto = Snapshot.load(dv).protocol
    assert (proto.min_reader_version, proto.min_writer_version, proto.reader_features) == (3, 7, ("deletionVectors",))
    # Protocol.merge with (1, 4): the legacy features (1, 4) implies become explicit writer features
    assert set(proto.writer_features or ()) == {"deletionVectors", "changeDataFeed", "appendOnly", "invariants",
                                                "checkConstraints", "generatedColumns"}


def test_a_column_named_like_the_feed_columns_is_refused_before_anything_is_written(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame([(1, "x")], "id long, _change_type string"), path,
                 properties={"delta.enableChangeDataFeed": "true"})
    version = Snapshot.load(path).version
    with pytest.raises(ReservedCdcColumnsOnWriteError, match="RESERVED_CDC_COLUMNS_ON_WRITE.*_change_type"):
        DeltaTable.forPath(spark, path).update("id = 1", {"id": "2"})
    assert Snapshot.load(path).version == version and not os.path.exists(os.path.join(path, "_change_data"))
