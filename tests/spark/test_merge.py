"""MERGE with deletion vectors and with copy-on-write, against oracles computed with plain Spark on the pre-image."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.config import MERGE_DVS_PERSISTENT
from dvlake.errors import MultipleSourceRowMatchingTargetRowError
from dvlake.log.snapshot import Snapshot
from dvlake.sql import sql
from tests.helpers import DV_PROPS
from tests.peers import read_with_deltalake, read_with_duckdb, rows

COLS = ["id", "v", "p"]


def _make(spark, path, props=DV_PROPS, partition_by=None, n=200, files=3):
    data = spark.createDataFrame([(i, None if i % 11 == 0 else i * 10, i % 3) for i in range(n)], "id long, v long, p int")
    dvlake.write(data.repartition(files), path, properties=props, partitionBy=partition_by)


def _rows(df, cols=COLS):
    return sorted((tuple(r[c] for c in cols) for r in df.collect()), key=repr)


def _pre_image(spark, path):
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


def _with_cow(spark, fn):
    spark.conf.set(MERGE_DVS_PERSISTENT, "false")
    try:
        return fn()
    finally:
        spark.conf.unset(MERGE_DVS_PERSISTENT)


def _source(spark):
    # ids 150..249: 150..199 match (some already deleted), 200..249 are new; v NULL on some rows
    return spark.createDataFrame([(i, None if i % 7 == 0 else -i, i % 3) for i in range(150, 250)],
                                 "id long, v long, p int")


def _every_clause(dt, src):
    return (dt.alias("t").merge(src.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.v IS NULL")                                   # first matching clause wins
            .whenMatchedUpdate("t.v > 1700", {"v": "s.v * 2"})
            .whenMatchedUpdateAll()
            .whenNotMatchedInsert("s.id % 2 = 0", {"id": "s.id", "v": "s.v", "p": "s.p"})
            .whenNotMatchedBySourceUpdate("t.id < 20", {"v": "t.v + 1"})
            .whenNotMatchedBySourceDelete("t.v IS NULL OR t.id > 140"))


def _every_clause_oracle(pre, src):
    """The same MERGE with DataFrame operations: full outer join, then the clauses as CASE, in order."""
    t = pre.select(*[F.col(c).alias("t_" + c) for c in COLS])
    s = src.select(*[F.col(c).alias("s_" + c) for c in COLS])
    j = t.join(s, F.col("t_id") == F.col("s_id"), "full_outer")
    matched = F.col("t_id").isNotNull() & F.col("s_id").isNotNull()
    only_s, only_t = F.col("t_id").isNull(), F.col("s_id").isNull()
    c1 = matched & F.col("s_v").isNull()
    c2 = matched & ~c1 & F.coalesce(F.col("t_v") > 1700, F.lit(False))
    c3 = matched & ~c1 & ~c2
    ins = only_s & (F.col("s_id") % 2 == 0)
    n1 = only_t & (F.col("t_id") < 20)
    n2 = only_t & ~n1 & F.coalesce(F.col("t_v").isNull() | (F.col("t_id") > 140), F.lit(False))
    out = j.filter(~c1 & ~n2 & ~(only_s & ~ins)).select(
        F.when(c3 | ins, F.col("s_id")).otherwise(F.col("t_id")).alias("id"),
        F.when(c2, F.col("s_v") * 2).when(c3 | ins, F.col("s_v")).when(n1, F.col("t_v") + 1).otherwise(F.col("t_v")).alias("v"),
        F.when(c3 | ins, F.col("s_p")).otherwise(F.col("t_p")).alias("p"))
    return _rows(out)


@pytest.mark.interop
def test_every_clause_with_dvs_and_copy_on_write_give_the_oracle(spark, tmp_path):
    dv_path, cow_path = str(tmp_path / "dv"), str(tmp_path / "cow")
    _make(spark, dv_path, partition_by=["p"])
    DeltaTable.forPath(spark, dv_path).delete("id % 13 = 0")  # earlier deletions must never resurrect
    shutil.copytree(dv_path, cow_path)
    pre, src = _pre_image(spark, dv_path), _source(spark)
    oracle = _every_clause_oracle(pre, src)

    result = _every_clause(DeltaTable.forPath(spark, dv_path), src).execute().collect()[0]
    commit = _last_commit(dv_path)
    info = commit[0]["commitInfo"]
    m = info["operationMetrics"]
    assert info["operation"] == "MERGE"
    assert [c["actionType"] for c in json.loads(info["operationParameters"]["matchedPredicates"])] == \
        ["delete", "update", "update"]
    assert json.loads(info["operationParameters"]["notMatchedBySourcePredicates"])[1] == \
        {"predicate": "t.v IS NULL OR t.id > 140", "actionType": "delete"}
    assert int(m["numSourceRows"]) == 100 and m["numTargetRowsCopied"] == "0"
    assert result.num_affected_rows == result.num_updated_rows + result.num_deleted_rows + result.num_inserted_rows
    assert result.num_updated_rows == int(m["numTargetRowsMatchedUpdated"]) + int(m["numTargetRowsNotMatchedBySourceUpdated"])
    # 25 even new ids, plus 156 and 182: deleted earlier, so they do not match and are inserted again
    assert result.num_inserted_rows == 27 and int(m["numTargetDeletionVectorsAdded"]) > 0
    assert all(json.loads(a["add"]["stats"])["tightBounds"] is False for a in commit
               if "add" in a and a["add"].get("deletionVector"))
    assert _peers_agree(spark, dv_path) == oracle

    cow_result = _with_cow(spark, lambda: _every_clause(DeltaTable.forPath(spark, cow_path), src).execute().collect()[0])
    assert cow_result == result
    cow_commit = _last_commit(cow_path)
    assert not any(a.get("add", {}).get("deletionVector") for a in cow_commit)
    assert int(cow_commit[0]["commitInfo"]["operationMetrics"]["numTargetRowsCopied"]) > 0
    assert _peers_agree(spark, cow_path) == oracle


def test_each_clause_alone(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=60, files=2)
    src = spark.createDataFrame([(i, -i, 0) for i in range(50, 70)], "id long, v long, p int")
    steps = [
        (lambda b: b.whenMatchedUpdate(set={"v": "s.v"}),
         lambda t: t.withColumn("v", F.when(F.col("id").between(50, 69), -F.col("id")).otherwise(F.col("v")))),
        (lambda b: b.whenMatchedDelete("s.id < 55"), lambda t: t.filter(~F.col("id").between(50, 54))),
        (lambda b: b.whenNotMatchedBySourceUpdate(set={"p": "t.p + 5"}),
         lambda t: t.withColumn("p", F.when(~F.col("id").between(50, 69), F.col("p") + 5).otherwise(F.col("p")))),
        (lambda b: b.whenNotMatchedBySourceDelete("t.id < 10"), lambda t: t.filter(F.col("id") >= 10)),
    ]
    for clause, oracle in steps:
        pre = _pre_image(spark, path)
        clause(DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")).execute()
        assert _rows(dvlake.read(spark, path)) == _rows(oracle(pre))
    assert Snapshot.load(path).dv_count() > 0


def test_insert_only_merge_only_adds_files(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=50, files=1)
    pre = _pre_image(spark, path)
    src = spark.createDataFrame([(i, i, 9) for i in range(40, 60)], "id long, v long, p int")
    sql(spark, f"CREATE OR REPLACE TEMP VIEW ins_src AS SELECT * FROM VALUES {', '.join(f'({i}, {i}, 9)' for i in range(40, 60))}"
        " AS x(id, v, p)")
    got = dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING ins_src s ON t.id = s.id WHEN NOT MATCHED THEN INSERT *")
    assert got.collect()[0].num_inserted_rows == 10
    commit = _last_commit(path)
    assert {next(iter(a)) for a in commit} == {"commitInfo", "add"}
    assert commit[0]["commitInfo"]["operationMetrics"]["numSourceRows"] == "20"
    assert _rows(dvlake.read(spark, path)) == _rows(pre.unionByName(src.filter("id >= 50")))


def test_multiple_matches_raise_before_writing_except_a_lone_unconditional_delete(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=30, files=1)
    version = Snapshot.load(path).version
    src = spark.createDataFrame([(5, 1), (5, 2), (7, 3)], "id long, v long")
    dt = DeltaTable.forPath(spark, path).alias("t")
    with pytest.raises(MultipleSourceRowMatchingTargetRowError) as err:
        dt.merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute()
    assert err.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert Snapshot.load(path).version == version and not [n for n in os.listdir(path) if n.startswith("deletion_vector")]
    result = dt.merge(src.alias("s"), "t.id = s.id").whenMatchedDelete().execute().collect()[0]
    assert result.num_deleted_rows == 2
    assert sorted(r.id for r in dvlake.read(spark, path).collect()) == [i for i in range(30) if i not in (5, 7)]


@pytest.mark.interop
def test_schema_evolution_on_a_column_mapped_table_and_colliding_names(spark, tmp_path):
    path = str(tmp_path / "cm")
    # user columns named like internals of other engines, and like ours
    data = spark.createDataFrame([(i, f"p{i}", i, i % 2) for i in range(40)], "id long, path string, row_index long, p int")
    dvlake.write(data.repartition(2), path, properties={**DV_PROPS, "delta.columnMapping.mode": "name"})
    pre = _pre_image(spark, path)
    src = spark.createDataFrame([(i, f"n{i}", -i, 1, f"x{i}") for i in range(30, 50)],
                                "id long, path string, row_index long, p int, filePath string")
    (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().withSchemaEvolution().execute())
    snap = Snapshot.load(path)
    assert [f["name"] for f in snap.schema["fields"]] == ["id", "path", "row_index", "p", "filePath"]
    cols = ["id", "path", "row_index", "p", "filePath"]
    oracle = pre.filter("id < 30").withColumn("filePath", F.lit(None).cast("string")).unionByName(src)
    assert _rows(dvlake.read(spark, path), cols) == _rows(oracle, cols)
    assert rows(read_with_deltalake(path), cols) == _rows(oracle, cols)


def test_non_deterministic_source_is_read_once(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=100, files=2)
    src = spark.range(50, 150).select(F.col("id"), (F.rand() * 1000).cast("long").alias("v"), F.lit(7).alias("p")) \
        .filter(F.rand() < 0.5)
    result = (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
              .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute().collect()[0])
    m = _last_commit(path)[0]["commitInfo"]["operationMetrics"]
    assert result.num_updated_rows + result.num_inserted_rows == int(m["numSourceRows"])
    got = dvlake.read(spark, path)
    ids = [r.id for r in got.collect()]
    assert len(ids) == len(set(ids)) == 100 + result.num_inserted_rows
    assert got.filter("p = 7").count() == int(m["numSourceRows"])  # every source row landed exactly once


def test_sql_merge_with_subquery_and_not_matched_by_source(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, n=40, files=1)
    pre = _pre_image(spark, path)
    stmt = f"""MERGE INTO delta.`{path}` AS t
        USING (SELECT id, id * 100 AS v, 2 AS p FROM range(30, 45)) s ON t.id = s.id
        WHEN MATCHED AND t.id % 2 = 0 THEN UPDATE SET v = s.v, t.p = s.p
        WHEN NOT MATCHED BY TARGET THEN INSERT (id, v, p) VALUES (s.id, s.v, s.p)
        WHEN NOT MATCHED BY SOURCE AND t.id < 5 THEN DELETE"""
    out = dvlake.sql(spark, stmt).collect()[0]
    assert (out.num_updated_rows, out.num_inserted_rows, out.num_deleted_rows) == (5, 5, 5)
    even = (F.col("id") >= 30) & (F.col("id") % 2 == 0)
    oracle = pre.filter("id >= 5").select(
        "id", F.when(even, F.col("id") * 100).otherwise(F.col("v")).alias("v"),
        F.when(even, F.lit(2)).otherwise(F.col("p")).alias("p")).unionByName(
        spark.range(40, 45).select("id", (F.col("id") * 100).alias("v"), F.lit(2).alias("p")))
    assert _rows(dvlake.read(spark, path)) == _rows(oracle)
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    dvlake.sql(spark, stmt)  # with the change feed on, the commit carries change data (test_cdf_write.py)
    assert int(Snapshot.load(path).history(1)[0]["operationMetrics"]["numTargetChangeFilesAdded"]) >= 1
