"""Statements Spark answered from a Delta name's registration view: SHOW CREATE TABLE, EXPLAIN, CACHE / UNCACHE TABLE
and ANALYZE TABLE, by name and by path, as delta-spark answers them.

Rules checked: SHOW CREATE TABLE prints the Delta DDL (``USING delta``, columns with NOT NULL and COMMENT,
PARTITIONED BY, COMMENT, LOCATION for paths and external tables only, TBLPROPERTIES with protocol versions and
features, sorted); EXPLAIN explains the DV-applying read (no registration ``raise_error`` in the plan); CACHE TABLE
puts the table's read in Spark's cache (EXPLAIN then shows an in-memory scan), a later DELETE is seen through it, and
UNCACHE TABLE takes it out; CACHE TABLE v AS <query> caches a view of the query; ANALYZE TABLE is refused with
NOT_SUPPORTED_COMMAND_FOR_V2_TABLE; statements on Spark's own tables stay Spark's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import DeltaAnalysisException
from dvlake.log.snapshot import Snapshot
from dvlake.spark.catalog import table_location
from tests.spark.catalog_helpers import configured_with_database


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "view_db", str(tmp_path / "view_db")) as session:
        yield session


def _orders(spark: SparkSession, target: str, *, dvs: bool = True, extra: str = "") -> None:
    """Ids 1..3 in one insert (one file), then id 2 deleted (a DV when ``dvs``)."""
    spark.sql(f"CREATE TABLE {target} (id INT NOT NULL COMMENT 'the key', day STRING) USING delta PARTITIONED BY (day) "
              f"{extra}TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dvs).lower()}')")
    spark.sql(f"INSERT INTO {target} VALUES (1, 'mon'), (2, 'mon'), (3, 'tue')")
    spark.sql(f"DELETE FROM {target} WHERE id = 2")


def _ddl(spark: SparkSession, target: str) -> str:
    df = spark.sql(f"SHOW CREATE TABLE {target}")
    assert df.columns == ["createtab_stmt"]
    return str(df.collect()[0][0])


def test_show_create_table_managed_external_and_path(dspark: SparkSession, tmp_path: Path) -> None:
    _orders(dspark, "view_db.m", extra="COMMENT 'daily orders' ")
    assert _ddl(dspark, "view_db.m") == (
        "CREATE TABLE spark_catalog.view_db.m (\n"
        "  id INT NOT NULL COMMENT 'the key',\n"
        "  day STRING)\n"
        "USING delta\n"
        "PARTITIONED BY (day)\n"
        "COMMENT 'daily orders'\n"
        "TBLPROPERTIES (\n"
        "  'delta.enableDeletionVectors' = 'true',\n"
        "  'delta.feature.deletionVectors' = 'supported',\n"
        "  'delta.minReaderVersion' = '3',\n"
        "  'delta.minWriterVersion' = '7')\n")
    external = str(tmp_path / "ext")
    dspark.sql(f"CREATE TABLE view_db.e (`a b` BIGINT, s STRUCT<x: INT, y: STRING>) USING delta LOCATION '{external}'")
    text = _ddl(dspark, "view_db.e")
    assert text.startswith("CREATE TABLE spark_catalog.view_db.e (\n  `a b` BIGINT,\n  s STRUCT<x: INT, y: STRING>)\n"
                           f"USING delta\nLOCATION 'file:{external}'\nTBLPROPERTIES (\n")
    by_path = _ddl(dspark, f"delta.`{external}`")
    assert by_path.startswith(f"CREATE TABLE delta.`{external}` (\n") and f"LOCATION 'file:{external}'" in by_path
    dspark.sql("CREATE TABLE view_db.plain (i INT) USING parquet")
    assert "USING parquet" in _ddl(dspark, "view_db.plain")  # Spark's own table: Spark's answer


def test_explain_reads_through_the_dv_scan(dspark: SparkSession, tmp_path: Path) -> None:
    _orders(dspark, "view_db.x")
    for target in ("view_db.x", f"delta.`{table_location(dspark, 'view_db.x')}`"):
        plan = dspark.sql(f"EXPLAIN SELECT id FROM {target} WHERE id > 0").collect()[0][0]
        assert "== Physical Plan ==" in plan and "raise_error" not in plan and "Scan" in plan
        extended = dspark.sql(f"EXPLAIN EXTENDED SELECT * FROM {target}").collect()[0][0]
        assert "== Analyzed Logical Plan ==" in extended and "raise_error" not in extended
    assert sorted(r.id for r in dspark.sql("SELECT id FROM view_db.x").collect()) == [1, 3]


@pytest.mark.parametrize("dvs", [True, False])
def test_cache_uncache_by_name_and_deletes_seen_through_the_cache(dspark: SparkSession, dvs: bool) -> None:
    _orders(dspark, "view_db.c", dvs=dvs)
    wed = dspark.createDataFrame([(4, "wed"), (5, "wed"), (6, "wed")], "id int, day string").coalesce(1)
    dvlake.write(wed, table_location(dspark, "view_db.c"), "append")  # one file that outlives the DELETE below
    dspark.sql("CACHE TABLE view_db.c")
    plan = dspark.sql("EXPLAIN SELECT * FROM view_db.c").collect()[0][0]
    assert "InMemoryRelation" in plan
    assert sorted(r.id for r in dspark.sql("SELECT * FROM view_db.c").collect()) == [1, 3, 4, 5, 6]
    dspark.sql("DELETE FROM view_db.c WHERE id = 5")  # a DV on a file the cache read (or its rewrite): never old rows
    wed_files = [a for a in Snapshot.load(table_location(dspark, "view_db.c")).add_files()
                 if a.partition_values.get("day") == "wed"]
    assert len(wed_files) == 1 and (wed_files[0].deletion_vector is not None) == dvs
    assert sorted(r.id for r in dspark.sql("SELECT * FROM view_db.c").collect()) == [1, 3, 4, 6]
    dspark.sql("UNCACHE TABLE view_db.c")
    dspark.sql("UNCACHE TABLE IF EXISTS view_db.c")  # nothing cached: nothing to do
    assert "InMemoryRelation" not in dspark.sql("EXPLAIN SELECT * FROM view_db.c").collect()[0][0]
    assert sorted(r.id for r in dspark.sql("SELECT * FROM view_db.c").collect()) == [1, 3, 4, 6]


def test_cache_table_as_query_and_lazy_by_path(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "q")
    _orders(dspark, f"delta.`{path}`")
    dspark.sql(f"CACHE TABLE recent AS SELECT id FROM delta.`{path}` WHERE id > 1")
    try:
        assert [tuple(r) for r in dspark.sql("SELECT * FROM recent").collect()] == [(3,)]
        assert dspark.catalog.isCached("recent")
    finally:
        dspark.sql("UNCACHE TABLE recent")
        dspark.catalog.dropTempView("recent")
    dspark.sql(f"CACHE LAZY TABLE delta.`{path}`")
    assert "InMemoryRelation" in dspark.sql(f"EXPLAIN SELECT * FROM delta.`{path}`").collect()[0][0]
    dspark.sql(f"UNCACHE TABLE delta.`{path}`")


def test_analyze_table_refused_as_delta_spark(dspark: SparkSession, tmp_path: Path) -> None:
    _orders(dspark, "view_db.a")
    for statement in ("ANALYZE TABLE view_db.a COMPUTE STATISTICS",
                      f"ANALYZE TABLE delta.`{table_location(dspark, 'view_db.a')}` COMPUTE STATISTICS NOSCAN"):
        with pytest.raises(DeltaAnalysisException) as refused:
            dspark.sql(statement)
        assert refused.value.error_class == "NOT_SUPPORTED_COMMAND_FOR_V2_TABLE"
        assert "ANALYZE TABLE is not supported for v2 tables" in str(refused.value)
    dspark.sql("CREATE TABLE view_db.p (i INT) USING parquet")
    dspark.sql("ANALYZE TABLE view_db.p COMPUTE STATISTICS")  # Spark's own table: Spark runs it
