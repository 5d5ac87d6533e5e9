"""dvlake.sql with sqlglot's parser: queries over Delta paths at versions, DDL, INSERT, MERGE, utility statements."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

import dvlake
from dvlake.errors import (
    DeltaAnalysisException,
    DeltaSqlError,
    DeltaSqlParseError,
    SchemaMismatchError,
    TableAlreadyExistsError,
)
from dvlake.log import features
from dvlake.log.snapshot import Snapshot
from dvlake.sql import sql

DV = "'delta.enableDeletionVectors' = true"


def _ids(df, col="id"):
    return sorted(r[col] for r in df.collect())


def _last_commit_info(path):
    log = os.path.join(path, "_delta_log")
    last = sorted(f for f in os.listdir(log) if f.endswith(".json"))[-1]
    with open(os.path.join(log, last)) as f:
        return next(json.loads(line)["commitInfo"] for line in f if "commitInfo" in line)


def _no_leftover_views(spark):
    names = [t.name for t in spark.catalog.listTables()]
    assert not [n for n in names if n.startswith(("dvlake_", "_pyspark_"))], names


def test_quickstart_sql_as_a_delta_spark_user_writes_it(spark, tmp_path):
    """The steps of delta-spark's SQL quickstart, written afresh, on a path table."""
    p = str(tmp_path / "events")
    sql(spark, f"CREATE TABLE IF NOT EXISTS delta.`{p}` (id BIGINT) USING DELTA TBLPROPERTIES ({DV})")
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (0), (1), (2), (3), (4)")
    assert _ids(sql(spark, f"SELECT * FROM delta.`{p}`")) == [0, 1, 2, 3, 4]
    sql(spark, f"INSERT OVERWRITE delta.`{p}` SELECT id FROM range(5, 10)")
    sql(spark, f"UPDATE delta.`{p}` SET id = id + 100 WHERE id % 2 = 0")
    assert any(f.deletion_vector for f in Snapshot.load(p).add_files())  # the UPDATE marked its rows in a DV
    out = sql(spark, f"DELETE FROM delta.`{p}` WHERE id % 2 = 0;").collect()
    assert out[0].num_affected_rows == 2  # 106 and 108
    spark.range(0, 20).createOrReplaceTempView("qs_new")
    merged = sql(spark, f"""MERGE INTO delta.`{p}` AS old USING qs_new AS new ON old.id = new.id
                           WHEN MATCHED THEN UPDATE SET id = new.id
                           WHEN NOT MATCHED THEN INSERT (id) VALUES (new.id)""").collect()[0]
    assert (merged.num_updated_rows, merged.num_inserted_rows) == (3, 17)
    assert _ids(sql(spark, f"SELECT * FROM delta.`{p}`")) == list(range(20))
    assert _ids(sql(spark, f"SELECT * FROM delta.`{p}` VERSION AS OF 1")) == [0, 1, 2, 3, 4]
    hist = sql(spark, f"DESCRIBE HISTORY delta.`{p}` LIMIT 2").collect()
    assert [h.operation for h in hist] == ["MERGE", "DELETE"]
    _no_leftover_views(spark)


def test_join_of_two_paths_at_different_versions_with_cte_and_subquery(spark, tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    dvlake.write(spark.range(10).selectExpr("id", "id * 10 AS v"), a)                      # a v0
    sql(spark, f"UPDATE delta.`{a}` SET v = -1")                                            # a v1
    dvlake.write(spark.range(0, 6).selectExpr("id", "'x' AS tag"), b)                      # b v0
    sql(spark, f"DELETE FROM delta.`{b}` WHERE id < 3")                                     # b v1
    got = sql(spark, f"""
        WITH old_a AS (SELECT id, v FROM delta.`{a}` VERSION AS OF 0)
        SELECT o.id, o.v, n.v AS now_v, bb.tag
        FROM old_a o
        JOIN delta.`{a}` n ON o.id = n.id
        JOIN delta.`{b}@v0` bb ON bb.id = o.id
        WHERE o.id IN (SELECT id FROM delta.`{b}` WHERE id % 2 = 1)
    """).collect()
    assert sorted((r.id, r.v, r.now_v, r.tag) for r in got) == [(3, 30, -1, "x"), (5, 50, -1, "x")]
    assert sql(spark, f"SELECT count(*) AS n FROM delta.`{b}` VERSION AS OF 0").collect()[0].n == 6
    union = sql(spark, f"SELECT id FROM delta.`{b}` VERSION AS OF 0 EXCEPT SELECT id FROM delta.`{b}`")
    assert _ids(union) == [0, 1, 2]
    assert sql(spark, "SELECT '{not a placeholder}' AS s").collect()[0].s == "{not a placeholder}"
    braces = sql(spark, f"SELECT '{{id}}' AS s, count(*) AS n FROM delta.`{b}`").collect()[0]
    assert (braces.s, braces.n) == ("{id}", 3)
    _no_leftover_views(spark)


def test_timestamp_as_of_literal_and_expression(spark, tmp_path):
    p = str(tmp_path / "t")
    dvlake.write(spark.range(3), p)
    sql(spark, f"INSERT INTO delta.`{p}` SELECT id FROM range(3, 5)")
    import datetime as dt

    ts = [dt.datetime.fromtimestamp(_commit_ms(p, v) / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] for v in (0, 1)]
    assert sql(spark, f"SELECT count(*) AS n FROM delta.`{p}` TIMESTAMP AS OF '{ts[0]}'").first().n == 3
    expr = f"TIMESTAMP AS OF CAST('{ts[1]}' AS TIMESTAMP) - INTERVAL 0 SECONDS"  # an expression Spark evaluates
    assert sql(spark, f"SELECT count(*) AS n FROM delta.`{p}` {expr}").first().n == 5
    with pytest.raises(Exception, match="DELTA_TIMESTAMP_GREATER_THAN_COMMIT"):  # as delta-spark: no future versions
        sql(spark, f"SELECT * FROM delta.`{p}` TIMESTAMP AS OF current_timestamp() + INTERVAL 1 HOUR")


def _commit_ms(path, version):
    return Snapshot.load(path).commit_timestamp(version)  # what time travel resolves against (the file's mtime)


def test_create_table_forms(spark, tmp_path):
    p = str(tmp_path / "c")
    sql(spark, f"""CREATE TABLE IF NOT EXISTS delta.`{p}` (id BIGINT NOT NULL COMMENT 'key', day DATE, name STRING)
                   USING delta COMMENT 'people' PARTITIONED BY (day) TBLPROPERTIES ({DV}, 'owner' = 'me')""")
    snap = Snapshot.load(p)
    assert snap.partition_columns == ["day"] and snap.metadata.description == "people"
    assert snap.configuration["delta.enableDeletionVectors"] == "true" and snap.configuration["owner"] == "me"
    fields = {f["name"]: f for f in snap.schema["fields"]}
    assert fields["id"]["nullable"] is False and fields["id"]["metadata"]["comment"] == "key"
    sql(spark, f"CREATE TABLE IF NOT EXISTS delta.`{p}` (x INT) USING delta")  # exists: nothing happens
    assert Snapshot.load(p).version == 0
    with pytest.raises(TableAlreadyExistsError):
        sql(spark, f"CREATE TABLE delta.`{p}` (x INT) USING delta")
    sql(spark, f"CREATE OR REPLACE TABLE delta.`{p}` USING delta PARTITIONED BY (k) AS SELECT id, id % 2 AS k FROM range(4)")
    snap = Snapshot.load(p)
    assert snap.version == 1 and snap.partition_columns == ["k"] and [f["name"] for f in snap.schema["fields"]] == ["id", "k"]
    assert _ids(dvlake.read(spark, p)) == [0, 1, 2, 3]
    q = str(tmp_path / "ctas")
    sql(spark, f"CREATE TABLE delta.`{q}` USING delta TBLPROPERTIES ({DV}) AS SELECT * FROM delta.`{p}` WHERE k = 1")
    assert _ids(dvlake.read(spark, q)) == [1, 3]
    assert Snapshot.load(q).configuration["delta.enableDeletionVectors"] == "true"
    # no LOCATION: a managed table under the database's location, as delta-spark places it; DROP TABLE deletes its files
    sql(spark, f"CREATE DATABASE IF NOT EXISTS sql_managed LOCATION '{tmp_path / 'db'}'")
    spark.catalog.setCurrentDatabase("sql_managed")
    sql(spark, "CREATE TABLE no_location_tbl (id INT, amount DOUBLE) USING delta")
    try:
        sql(spark, "INSERT INTO no_location_tbl VALUES (1, 2.5), (2, 3.5)")
        assert sql(spark, "SELECT count(*) FROM no_location_tbl").collect()[0][0] == 2
        assert sql(spark, "SELECT sum(t.amount) FROM no_location_tbl t WHERE t.id > 1").collect()[0][0] == 3.5
        location = dvlake.DeltaTable.forName(spark, "no_location_tbl").path
        assert os.path.isdir(os.path.join(location, "_delta_log")) and location.startswith(str(tmp_path / "db"))
        with pytest.raises(Exception, match="already exists"):
            sql(spark, "CREATE TABLE no_location_tbl (id INT) USING delta")
    finally:
        sql(spark, "DROP TABLE IF EXISTS no_location_tbl")
    assert not os.path.exists(location)
    assert not spark.catalog.tableExists("no_location_tbl")
    sql(spark, f"CREATE TABLE ctas_tbl USING delta AS SELECT * FROM delta.`{p}` WHERE k = 1")
    try:
        assert sql(spark, "SELECT count(*) FROM ctas_tbl").collect()[0][0] == 2
    finally:
        sql(spark, "DROP TABLE ctas_tbl")
        spark.catalog.setCurrentDatabase("default")


def test_insert_forms(spark, tmp_path):
    p = str(tmp_path / "i")
    sql(spark, f"CREATE TABLE delta.`{p}` (id BIGINT, name STRING, part STRING) USING delta PARTITIONED BY (part)")
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (1, 'a', 'x'), (2, 'b', 'y')")
    sql(spark, f"INSERT INTO TABLE delta.`{p}` (id, part) VALUES (3, 'x')")                     # name → NULL
    sql(spark, f"INSERT INTO delta.`{p}` PARTITION (part = 'z') SELECT 4, 'd'")                 # static partition
    sql(spark, f"INSERT INTO delta.`{p}` BY NAME SELECT 'y' AS part, 5 AS id, 'e' AS name")
    rows = sorted(tuple(r) for r in sql(spark, f"SELECT id, name, part FROM delta.`{p}`").collect())
    assert rows == [(1, "a", "x"), (2, "b", "y"), (3, None, "x"), (4, "d", "z"), (5, "e", "y")]
    src = str(tmp_path / "src")
    dvlake.write(spark.createDataFrame([(9, "q", "w")], "id long, name string, part string"), src)
    sql(spark, f"INSERT OVERWRITE delta.`{p}` SELECT * FROM delta.`{src}`")
    assert [tuple(r) for r in sql(spark, f"SELECT * FROM delta.`{p}`").collect()] == [(9, "q", "w")]
    with pytest.raises(DeltaSqlError) as err:
        sql(spark, f"INSERT INTO delta.`{p}` SELECT 1, 2")
    assert err.value.error_class == "INSERT_COLUMN_ARITY_MISMATCH"
    overwrite_part = f"INSERT OVERWRITE delta.`{p}` PARTITION (part = 'w') SELECT 1, 'x'"
    if importlib.util.find_spec("dvlake.commands.writes.options") is None:  # no replaceWhere writer in this build
        with pytest.raises(DeltaSqlError, match="replaceWhere") as err:
            sql(spark, overwrite_part)
        assert (err.value.line, err.value.column) == (1, len(f"INSERT OVERWRITE delta.`{p}` PARTITION (") + 1)
        assert Snapshot.load(p).version == 5
        return
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (8, 'k', 'v')")
    sql(spark, overwrite_part)                                                     # only partition w is replaced
    sql(spark, f"INSERT INTO delta.`{p}` REPLACE WHERE id >= 8 SELECT 80, 'k', 'v'")
    assert sorted(tuple(r) for r in sql(spark, f"SELECT * FROM delta.`{p}`").collect()) == [(1, "x", "w"), (80, "k", "v")]


def test_views_alter_describe_and_show(spark, tmp_path):
    p = str(tmp_path / "v")
    dvlake.write(spark.range(4).selectExpr("id", "id * 2 AS twice"), p)
    sql(spark, f"CREATE OR REPLACE TEMP VIEW sql_v (a, b) AS SELECT * FROM delta.`{p}` VERSION AS OF 0 WHERE id > 1")
    assert sorted(tuple(r) for r in spark.sql("SELECT a, b FROM sql_v").collect()) == [(2, 4), (3, 6)]
    with pytest.raises(DeltaSqlError, match="TEMPORARY VIEW"):
        sql(spark, f"CREATE VIEW sql_perm AS SELECT * FROM delta.`{p}`")
    sql(spark, f"ALTER TABLE delta.`{p}` ADD COLUMNS (note STRING COMMENT 'free text', score DOUBLE)")
    sql(spark, f"ALTER TABLE delta.`{p}` SET TBLPROPERTIES ('a.b' = 'c', delta.appendOnly = false)")
    sql(spark, f"ALTER TABLE delta.`{p}` SET TBLPROPERTIES (delta.feature.deletionVectors = 'supported')")  # FEATURE as a word
    assert "deletionVectors" in features.writer_features(Snapshot.load(p).protocol)
    sql(spark, f"ALTER TABLE delta.`{p}` UNSET TBLPROPERTIES IF EXISTS ('a.b', 'nope')")
    assert _last_commit_info(p)["operation"] == "UNSET TBLPROPERTIES"
    desc = {r.col_name: (r.data_type, r.comment) for r in sql(spark, f"DESCRIBE delta.`{p}`").collect()}
    assert desc == {"id": ("bigint", None), "twice": ("bigint", None), "note": ("string", "free text"),
                    "score": ("double", None)}
    props = {r.key: r.value for r in sql(spark, f"SHOW TBLPROPERTIES delta.`{p}`").collect()}
    assert props == {"delta.appendOnly": "false"}
    row = dvlake.read(spark, p).filter("id = 0").first()
    assert (row.note, row.score) == (None, None)
    with pytest.raises(SchemaMismatchError):
        sql(spark, f"ALTER TABLE delta.`{p}` ADD COLUMNS (ID INT)")
    with pytest.raises(DeltaAnalysisException) as refused:  # no column mapping: a rename would need a rewrite
        sql(spark, f"ALTER TABLE delta.`{p}` RENAME COLUMN note TO remark")
    assert refused.value.error_class == "DELTA_UNSUPPORTED_RENAME_COLUMN"
    with pytest.raises(DeltaSqlError, match="ALTER TABLE") as err:
        sql(spark, f"ALTER TABLE delta.`{p}` REPLACE COLUMNS (id BIGINT)")
    assert err.value.error_class == "DVLAKE_UNSUPPORTED_DELTA_STATEMENT"


def test_merge_with_delta_source_at_a_version_and_schema_evolution(spark, tmp_path):
    t, s = str(tmp_path / "t"), str(tmp_path / "s")
    dvlake.write(spark.range(6).selectExpr("id", "0 AS v"), t, properties={"delta.enableDeletionVectors": "true"})
    dvlake.write(spark.range(3, 9).selectExpr("id", "id AS v", "'new' AS extra"), s)         # s v0
    sql(spark, f"DELETE FROM delta.`{s}`")                                                    # s v1: empty
    out = sql(spark, f"""MERGE WITH SCHEMA EVOLUTION INTO delta.`{t}` t
        USING delta.`{s}` VERSION AS OF 0 AS src ON t.id = src.id
        WHEN MATCHED AND src.id = 3 THEN DELETE
        WHEN MATCHED THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *
        WHEN NOT MATCHED BY SOURCE AND t.id < 2 THEN UPDATE SET v = -1""").collect()[0]
    assert (out.num_deleted_rows, out.num_updated_rows, out.num_inserted_rows) == (1, 4, 3)
    got = sorted(tuple(r) for r in dvlake.read(spark, t).select("id", "v", "extra").collect())
    assert got == [(0, -1, None), (1, -1, None), (2, 0, None), (4, 4, "new"), (5, 5, "new"), (6, 6, "new"),
                   (7, 7, "new"), (8, 8, "new")]


def test_utility_statements(spark, tmp_path):
    p = str(tmp_path / "u")
    dvlake.write(spark.range(40).selectExpr("id", "id % 2 AS k", "cast(id AS string) AS s").repartition(4), p,
                 partitionBy="k", properties={"delta.enableDeletionVectors": "true"})
    sql(spark, f"DELETE FROM delta.`{p}` WHERE id % 5 = 0")
    out = sql(spark, f"OPTIMIZE delta.`{p}` WHERE k = 1 ZORDER BY s, id").collect()
    assert out[0].metrics.numFilesRemoved > 0
    assert json.loads(_last_commit_info(p)["operationParameters"]["zOrderBy"]) == ["s", "id"]
    sql(spark, f"REORG TABLE delta.`{p}` APPLY (PURGE)")
    assert not any(f.deletion_vector for f in Snapshot.load(p).add_files())
    detail = sql(spark, f"DESC DETAIL delta.`{p}`").first()
    assert detail.partitionColumns == ["k"]
    restored = sql(spark, f"RESTORE TABLE delta.`{p}` TO VERSION AS OF 0").first()
    assert restored.num_restored_files > 0
    assert sql(spark, f"SELECT count(*) AS n FROM delta.`{p}`").first().n == 40
    dry = sql(spark, f"VACUUM delta.`{p}` DRY RUN").collect()
    assert dry == []  # nothing is older than the 7-day retention


def test_unsupported_and_malformed_statements_name_statement_and_position(spark, tmp_path):
    p = str(tmp_path / "e")
    dvlake.write(spark.range(3), p)
    cases = [
        (f"OPTIMIZE delta.`{p}` ZORDER (id)", DeltaSqlParseError, "OPTIMIZE", (1, len(f"OPTIMIZE delta.`{p}` ") + 1)),
        (f"SELECT *\nFROM delta.`{p}` VERSION AS OF 'x'", DeltaSqlError, "SELECT",
         (2, len(f"FROM delta.`{p}` VERSION AS OF ") + 1)),
        (f"REORG TABLE delta.`{p}` APPLY (UPGRADE UNIFORM(ICEBERG_COMPAT_VERSION = 2))", DeltaSqlError, "REORG TABLE",
         (1, len(f"REORG TABLE delta.`{p}` APPLY ") + 1)),
        (f"UPDATE delta.`{p}` SET id = 1 FROM x", DeltaSqlError, "UPDATE", None),
        (f"DELETE FROM delta.`{p}` WHERE", DeltaSqlParseError, "DELETE", (1, len(f"DELETE FROM delta.`{p}` ") + 1)),
    ]
    for stmt, cls, name, pos in cases:
        with pytest.raises(cls) as err:
            sql(spark, stmt)
        assert err.value.statement == name, stmt
        assert str(err.value).startswith(f"[{err.value.error_class}] {name} (line "), str(err.value)
        if pos is not None:
            assert (err.value.line, err.value.column) == pos, (stmt, str(err.value))
    assert Snapshot.load(p).version == 0


def test_statements_without_delta_tables_go_to_spark_unchanged(spark):
    assert sql(spark, "SELECT 1 AS x").first().x == 1
    sql(spark, "CREATE OR REPLACE TEMP VIEW plain_v AS SELECT 2 AS y")
    assert sql(spark, "SELECT * FROM plain_v").first().y == 2
    assert sql(spark, "SELECT :a + 1 AS z", {"a": 41}).first().z == 42
    assert sql(spark, "SELECT {n} AS w", n=7).first().w == 7
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):  # Spark's own error for Spark's own tables
        sql(spark, "SELECT * FROM no_such_table_here")


def test_a_spark_sql_hook_reaches_the_original_for_non_delta_statements(spark, tmp_path):
    """How a hook routing spark.sql to dvlake.sql must be installed (the session set-up does this)."""
    from dvlake.compat import pyspark_hooks
    from dvlake.sql import register_original_sql

    p = str(tmp_path / "h")
    dvlake.write(spark.range(5), p)
    cls = type(spark)
    original = cls.sql
    registered = pyspark_hooks._originals.pop((cls, "sql"), None)  # configure_spark may have recorded it already
    register_original_sql(cls, original)
    cls.sql = lambda self, q, args=None, **kw: dvlake.sql(self, q, args, **kw)  # type: ignore[method-assign]
    try:
        assert spark.sql(f"SELECT count(*) AS n FROM delta.`{p}` WHERE id > 1").first().n == 3
        assert spark.sql("SELECT 5 AS f").first().f == 5
    finally:
        cls.sql = original  # type: ignore[method-assign]
        pyspark_hooks._originals.pop((cls, "sql"), None)
        if registered is not None:
            pyspark_hooks._originals[(cls, "sql")] = registered


def test_table_changes(spark, tmp_path):
    api = pytest.importorskip("dvlake.api")
    if not hasattr(api, "read_changes"):
        pytest.skip("dvlake.api.read_changes (the change data feed reader) is not in this build yet")
    p = str(tmp_path / "cdf")
    dvlake.write(spark.range(3), p, properties={"delta.enableChangeDataFeed": "true"})
    sql(spark, f"INSERT INTO delta.`{p}` VALUES (7)")
    rows = sql(spark, f"SELECT id, _change_type FROM table_changes('delta.`{p}`', 1)").collect()
    assert [(r.id, r._change_type) for r in rows] == [(7, "insert")]


def test_catalog_names(spark, tmp_path):
    if pytest.importorskip("importlib").util.find_spec("dvlake.spark.catalog") is None:
        pytest.skip("dvlake.spark.catalog (catalog table names) is not in this build yet")
    p = str(tmp_path / "named")
    sql(spark, f"CREATE TABLE sql_named_tbl (id BIGINT) USING delta LOCATION '{p}'")
    try:
        sql(spark, "INSERT INTO sql_named_tbl VALUES (1), (2)")
        sql(spark, "UPDATE sql_named_tbl SET id = id * 10 WHERE id = 2")
        assert _ids(sql(spark, "SELECT * FROM sql_named_tbl VERSION AS OF 1")) == [1, 2]
        assert _ids(dvlake.read(spark, p)) == [1, 20]
    finally:
        spark.sql("DROP TABLE IF EXISTS sql_named_tbl")


def test_unfiltered_count_is_answered_from_the_log(spark, tmp_path, monkeypatch):
    """SELECT COUNT(*) of a Delta table (any version) = Σ numRecords − Σ DV cardinality, without a scan;
    a filter, or delta-spark's optimizeMetadataQuery switched off, counts the rows themselves."""
    path = str(tmp_path / "t")
    dvlake.write(spark.range(0, 3000, numPartitions=3), path, properties={"delta.enableDeletionVectors": "true"})
    dvlake.DeltaTable.forPath(spark, path).delete("id % 7 = 0")
    dvlake.DeltaTable.forPath(spark, path).delete("id < 100")
    expected = {v: dvlake.read(spark, path, version=v).count() for v in (0, 1, 2)}
    assert expected == {0: 3000, 1: 3000 - 429, 2: 3000 - 429 - 85}
    from dvlake import api as dvlake_api

    def no_scan(*args, **kwargs):
        raise AssertionError("the count scanned the table")

    with monkeypatch.context() as m:
        m.setattr(dvlake_api, "read", no_scan)
        assert sql(spark, f"SELECT COUNT(*) FROM delta.`{path}`").collect()[0][0] == expected[2]
        row = sql(spark, f"SELECT count(1) AS n FROM delta.`{path}` VERSION AS OF 1").collect()[0]
        assert row.n == expected[1]
        assert sql(spark, f"select count(*) from delta.`{path}@v0`").collect()[0][0] == expected[0]
    assert sql(spark, f"SELECT COUNT(*) FROM delta.`{path}` WHERE id >= 1000").collect()[0][0] == \
        sum(1 for i in range(1000, 3000) if i % 7)
    spark.conf.set("spark.databricks.delta.optimizeMetadataQuery.enabled", "false")
    try:
        with monkeypatch.context() as m:
            m.setattr(dvlake_api, "read", no_scan)
            with pytest.raises(AssertionError, match="scanned"):
                sql(spark, f"SELECT COUNT(*) FROM delta.`{path}`")
    finally:
        spark.conf.unset("spark.databricks.delta.optimizeMetadataQuery.enabled")
