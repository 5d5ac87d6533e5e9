"""UPDATE with deletion vectors and with copy-on-write, against oracles computed with plain Spark on the pre-image."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.config import UPDATE_DVS_PERSISTENT
from dvlake.errors import (
    CastInvalidInputError,
    DeltaInvariantViolationException,
    UnresolvedAssignmentError,
    UnsafeAssignmentCastError,
)
from dvlake.log.snapshot import Snapshot
from dvlake.sql import sql
from tests.helpers import DV_PROPS
from tests.peers import read_with_deltalake, read_with_duckdb, rows

COLS = ["id", "s", "p", "k"]


def _df(spark, n=300):
    return spark.createDataFrame(
        [(i, f"s{i}", i % 3, None if i % 10 == 0 else i % 7) for i in range(n)], "id long, s string, p int, k int")


def _make(spark, path, props=DV_PROPS, partition_by=None, files=3, n=300):
    dvlake.write(_df(spark, n).repartition(files), path, properties=props, partitionBy=partition_by)


def _rows(df, cols=COLS):
    return sorted((tuple(r[c] for c in cols) for r in df.collect()), key=repr)


def _pre_image(spark, path):
    """The table's rows frozen into a local DataFrame (the oracle's input)."""
    df = dvlake.read(spark, path)
    return spark.createDataFrame(df.collect(), df.schema)


def _last_commit(path):
    log = os.path.join(path, "_delta_log")
    last = sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1]
    with open(os.path.join(log, last)) as f:
        return [json.loads(line) for line in f]


def _peers_agree(spark, path, cols=COLS, duckdb=True):
    ours = _rows(dvlake.read(spark, path), cols)
    assert rows(read_with_deltalake(path), cols) == ours
    if duckdb:
        assert rows(read_with_duckdb(path), cols) == ours
    return ours


@pytest.fixture
def cow(spark):
    spark.conf.set(UPDATE_DVS_PERSISTENT, "false")
    yield
    spark.conf.unset(UPDATE_DVS_PERSISTENT)


@pytest.mark.interop
def test_dv_update_marks_rows_writes_only_updated_rows_and_matches_copy_on_write(spark, tmp_path):
    dv_path, cow_path = str(tmp_path / "dv"), str(tmp_path / "cow")
    _make(spark, dv_path)
    DeltaTable.forPath(spark, dv_path).delete("id % 9 = 0")  # earlier deletions: files already carry DVs
    shutil.copytree(dv_path, cow_path)
    pre = _pre_image(spark, dv_path)
    cond = "k = 3 OR s LIKE 's1%'"  # k is NULL on every 10th row: those must stay untouched
    hit = pre.withColumn("hit", F.coalesce(F.expr(cond), F.lit(False)))
    oracle = _rows(hit.withColumn("k", F.when(F.col("hit"), F.col("k") * 10 + F.col("p")).otherwise(F.col("k")))
                   .withColumn("s", F.when(F.col("hit"), F.lit("u")).otherwise(F.col("s"))))

    DeltaTable.forPath(spark, dv_path).update(cond, {"k": "k * 10 + p", "s": F.lit("u")})
    commit = _last_commit(dv_path)
    info = commit[0]["commitInfo"]
    assert info["operation"] == "UPDATE" and json.loads(info["operationParameters"]["predicate"]) == [cond]
    m = info["operationMetrics"]
    updated = pre.filter(cond).count()
    assert int(m["numUpdatedRows"]) == updated and m["numCopiedRows"] == "0"
    assert m["numDeletionVectorsAdded"] == m["numDeletionVectorsRemoved"] == m["numDeletionVectorsUpdated"] == "3"
    re_added = [a["add"] for a in commit if "add" in a and a["add"].get("deletionVector")]
    assert len(re_added) == 3 and all(json.loads(a["stats"])["tightBounds"] is False for a in re_added)
    fresh = [a["add"] for a in commit if "add" in a and not a["add"].get("deletionVector")]
    assert sum(json.loads(a["stats"])["numRecords"] for a in fresh) == updated  # only the updated rows are written
    assert _peers_agree(spark, dv_path) == oracle

    spark.conf.set(UPDATE_DVS_PERSISTENT, "false")
    try:
        DeltaTable.forPath(spark, cow_path).update(cond, {"k": "k * 10 + p", "s": F.lit("u")})
    finally:
        spark.conf.unset(UPDATE_DVS_PERSISTENT)
    cow_commit = _last_commit(cow_path)
    assert not any(a.get("add", {}).get("deletionVector") for a in cow_commit)
    assert int(cow_commit[0]["commitInfo"]["operationMetrics"]["numCopiedRows"]) > 0
    assert _peers_agree(spark, cow_path) == oracle


@pytest.mark.interop
def test_partitioned_update_moves_rows_and_partition_only_update_rewrites_whole_files(spark, tmp_path):
    path = str(tmp_path / "part")
    _make(spark, path, partition_by=["p"])
    pre = _pre_image(spark, path)
    DeltaTable.forPath(spark, path).update("p = 1", {"p": "2", "s": "concat(s, '!')"})  # partition-only: no DVs
    commit = _last_commit(path)
    assert not any(a.get("add", {}).get("deletionVector") for a in commit)
    assert commit[0]["commitInfo"]["operationMetrics"]["numUpdatedRows"] == str(pre.filter("p = 1").count())
    step1 = pre.withColumn("s", F.when(F.col("p") == 1, F.concat("s", F.lit("!"))).otherwise(F.col("s"))) \
        .withColumn("p", F.when(F.col("p") == 1, F.lit(2)).otherwise(F.col("p")))
    assert _rows(dvlake.read(spark, path)) == _rows(step1)

    DeltaTable.forPath(spark, path).update("id < 40 AND k IS NOT NULL", {"p": "0"})  # data predicate: DVs, rows move
    assert Snapshot.load(path).dv_count() > 0
    step2 = step1.withColumn("p", F.when(F.expr("id < 40 AND k IS NOT NULL"), F.lit(0)).otherwise(F.col("p")))
    assert _peers_agree(spark, path) == _rows(step2)


@pytest.mark.interop
def test_column_mapped_table_nested_field_and_sql(spark, tmp_path):
    path = str(tmp_path / "cm")
    data = spark.createDataFrame([(i, (i, f"c{i}"), i % 2) for i in range(60)],
                                 "id long, st struct<a:int,b:string>, p int")
    dvlake.write(data.repartition(2), path, properties={**DV_PROPS, "delta.columnMapping.mode": "name"})
    pre = _pre_image(spark, path)
    DeltaTable.forPath(spark, path).update(F.col("id") % 5 == 0, {"st.b": "upper(st.b)", "`st`.a": F.lit(7)})
    result = sql(spark, f"UPDATE delta.`{path}` AS t SET t.p = t.p + 10 WHERE t.id > 50")
    assert result.collect()[0].num_affected_rows == 9
    cond = F.col("id") % 5 == 0
    oracle = pre.withColumn("st", F.when(cond, F.struct(F.lit(7).alias("a"), F.upper("st.b").alias("b")))
                            .otherwise(F.col("st"))).withColumn("p", F.when(F.col("id") > 50, F.col("p") + 10)
                                                                .otherwise(F.col("p")))
    got = [(r.id, r.st.a, r.st.b, r.p) for r in dvlake.read(spark, path).collect()]
    want = [(r.id, r.st.a, r.st.b, r.p) for r in oracle.collect()]
    assert sorted(got) == sorted(want)
    peer = read_with_deltalake(path).to_pylist()
    assert sorted((r["id"], r["st"]["a"], r["st"]["b"], r["p"]) for r in peer) == sorted(want)


def test_bad_assignments_and_invariants_leave_the_table_unchanged(spark, tmp_path):
    path = str(tmp_path / "strict")
    DeltaTable.create(spark).location(path).addColumn("id", "long", nullable=False).addColumn("s", "string") \
        .addColumn("n", "int").property("delta.enableDeletionVectors", "true").execute()
    dvlake.write(spark.createDataFrame([(i, f"s{i}", i) for i in range(20)], "id long, s string, n int"), path,
                 mode="append")
    version = Snapshot.load(path).version
    dt = DeltaTable.forPath(spark, path)
    with pytest.raises(UnresolvedAssignmentError, match="nope"):
        dt.update("id = 1", {"nope": "1"})
    with pytest.raises(UnsafeAssignmentCastError, match="'n'"):
        dt.update("id = 1", {"n": "DATE'2024-01-01'"})  # Spark's ANSI cast does not turn a date into an int
    with pytest.raises(CastInvalidInputError, match="`n`"):
        dt.update("id = 1", {"n": "'abc'"})  # text is cast to a number (ANSI), and this text is not one
    with pytest.raises(DeltaInvariantViolationException, match="id"):
        dt.update("id > 15", {"id": "CAST(NULL AS BIGINT)"})
    assert Snapshot.load(path).version == version
    dt.update(set={"n": "2.9"})  # no condition; the double 2.9 → int is a store-assignment cast
    assert {r.n for r in dvlake.read(spark, path).collect()} == {2}
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    dt.update("id = 1", {"n": "0"})  # with the change feed on, the commit carries change data (test_cdf_write.py)
    assert int(Snapshot.load(path).history(1)[0]["operationMetrics"]["numAddedChangeFiles"]) >= 1


def test_no_match_commits_nothing_and_stale_update_retries(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=1, n=50)
    version = Snapshot.load(path).version
    DeltaTable.forPath(spark, path).update("id > 1000", {"k": "0"})
    assert Snapshot.load(path).version == version
    from dvlake.commands.dml.update import update_once
    from dvlake.errors import ConcurrentDeleteDeleteException

    stale = Snapshot.load(path)
    DeltaTable.forPath(spark, path).update("id < 10", {"k": "-1"})
    with pytest.raises(ConcurrentDeleteDeleteException):
        update_once(spark, stale, {"k": "-2"}, "id >= 40")
    DeltaTable.forPath(spark, path).update("id >= 40", {"k": "-2"})  # the public API re-runs on the new snapshot
    got = {r.id: r.k for r in dvlake.read(spark, path).collect()}
    assert len(got) == 50 and all(got[i] == -1 for i in range(10)) and all(got[i] == -2 for i in range(40, 50))
