"""Managed and external tables by name: CREATE [OR REPLACE | IF NOT EXISTS], CTAS, DROP; the catalog's columns after
every kind of schema change made through a name; names that are not Delta tables; subqueries over names in UPDATE.

All tables live in a database under ``spark.sql.warehouse.dir`` (``catalog_helpers.warehouse_databases``), the faces
on (``dspark``). What plain Spark (or another client of the metastore) sees of a name is read with
``catalog_columns``, the faces off.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.errors import TableAlreadyExistsError
from tests.spark.catalog_helpers import catalog_columns, local_path, rows, warehouse_databases

DB = "cattbl"


@pytest.fixture
def db(dspark: SparkSession) -> Iterator[str]:
    """The database's directory (``<warehouse>/cattbl.db``); it is the current database during the test."""
    with warehouse_databases(dspark, DB, use_first=True) as dirs:
        yield dirs[0]


def _location(spark: SparkSession, name: str) -> str:
    return os.path.realpath(local_path(spark.sql(f"DESCRIBE DETAIL {name}").first().location))  # type: ignore[union-attr]


def test_create_if_not_exists_twice_keeps_the_table_and_its_rows(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE IF NOT EXISTS kept (id BIGINT, note STRING) USING delta")
    dspark.sql("INSERT INTO kept VALUES (1, 'a'), (2, 'b')")
    dspark.sql("CREATE TABLE IF NOT EXISTS kept (other INT) USING delta")  # a no-op: no new version, same columns
    assert rows(dspark.sql("SELECT * FROM kept")) == [(1, "a"), (2, "b")]
    assert DeltaTable.forName(dspark, "kept").snapshot().version == 1
    assert catalog_columns(dspark, "kept") == (["id", "note"], ["id", "note"])
    with pytest.raises(TableAlreadyExistsError):
        dspark.sql("CREATE TABLE kept (id BIGINT) USING delta")


def test_partitioning_and_properties_show_in_describe_detail(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE parted (id BIGINT, day STRING) USING delta PARTITIONED BY (day) "
               "TBLPROPERTIES ('delta.enableDeletionVectors' = true, 'owner' = 'ops')")
    dspark.sql("INSERT INTO parted VALUES (1, 'mon'), (2, 'tue')")
    d = dspark.sql("DESCRIBE DETAIL parted").first()
    assert d.partitionColumns == ["day"] and d.numFiles == 2  # type: ignore[union-attr]
    assert (d.properties["delta.enableDeletionVectors"], d.properties["owner"]) == ("true", "ops")  # type: ignore[union-attr]
    assert _location(dspark, "parted") == os.path.join(db, "parted")


def test_create_or_replace_gives_the_name_the_new_schema(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE swapped (id BIGINT) USING delta")
    dspark.sql("INSERT INTO swapped VALUES (1)")
    location = _location(dspark, "swapped")
    dspark.sql("CREATE OR REPLACE TABLE swapped (label STRING, score DOUBLE) USING delta")
    assert _location(dspark, "swapped") == location and rows(dspark.table("swapped")) == []
    assert catalog_columns(dspark, "swapped") == (["label", "score"], ["label", "score"])
    assert [r[0] for r in dspark.sql("DESCRIBE swapped").collect()] == ["label", "score"]
    dspark.sql("CREATE OR REPLACE TABLE swapped USING delta AS SELECT 'x' AS tag")  # CTAS form, third schema
    assert rows(dspark.table("swapped")) == [("x",)] and catalog_columns(dspark, "swapped") == (["tag"], ["tag"])


def test_ctas_lives_under_the_warehouse_and_drop_table_deletes_it(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE made USING delta AS SELECT id, id * 2 AS twice FROM range(4)")
    where = os.path.join(db, "made")
    assert _location(dspark, "made") == where and os.path.isdir(os.path.join(where, "_delta_log"))
    assert rows(dspark.sql("SELECT twice FROM made WHERE id > 1")) == [(4,), (6,)]
    assert catalog_columns(dspark, "made") == (["id", "twice"], ["id", "twice"])
    dspark.sql("DROP TABLE made")
    assert not os.path.exists(where) and not dspark.catalog.tableExists("made")


def test_drop_table_of_an_external_table_keeps_its_files(dspark: SparkSession, db: str, tmp_path: Path) -> None:
    path = str(tmp_path / "ext")
    dspark.sql(f"CREATE TABLE outside (id BIGINT) USING delta LOCATION '{path}'")
    dspark.sql("INSERT INTO outside VALUES (5), (6)")
    dspark.sql("DROP TABLE outside")
    assert not dspark.catalog.tableExists("outside")
    assert rows(dvlake.read(dspark, path)) == [(5,), (6,)]


def test_builder_create_or_replace_by_name_updates_the_catalog_columns(dspark: SparkSession, db: str) -> None:
    DeltaTable.createOrReplace(dspark).tableName("built").addColumn("id", "long").execute()
    assert catalog_columns(dspark, "built") == (["id"], ["id"])
    DeltaTable.createOrReplace(dspark).tableName("built").addColumn("key", "string").addColumn("n", "int").execute()
    assert catalog_columns(dspark, "built") == (["key", "n"], ["key", "n"])
    assert DeltaTable.forName(dspark, "built").toDF().columns == ["key", "n"]


def _source(spark: SparkSession) -> None:
    spark.createDataFrame([(1, "one", 10.0), (3, "three", 30.0)], "id long, name string, extra double") \
        .createOrReplaceTempView("evolve_src")


def test_merge_with_schema_evolution_into_a_name_updates_the_catalog_columns(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE grown (id BIGINT, name STRING) USING delta")
    dspark.sql("INSERT INTO grown VALUES (1, 'a'), (2, 'b')")
    _source(dspark)
    dspark.sql("MERGE WITH SCHEMA EVOLUTION INTO grown t USING evolve_src s ON t.id = s.id "
               "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert rows(dspark.table("grown")) == [(1, "one", 10.0), (2, "b", None), (3, "three", 30.0)]
    assert catalog_columns(dspark, "grown") == (["id", "name", "extra"], ["id", "name", "extra"])


def test_for_name_merge_with_schema_evolution_updates_the_catalog_columns(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE grown_api (id BIGINT, name STRING) USING delta")
    dspark.sql("INSERT INTO grown_api VALUES (2, 'b')")
    _source(dspark)
    (DeltaTable.forName(dspark, "grown_api").alias("t").merge(dspark.table("evolve_src").alias("s"), "t.id = s.id")
     .whenNotMatchedInsertAll().withSchemaEvolution().execute())
    assert rows(dspark.table("grown_api")) == [(1, "one", 10.0), (2, "b", None), (3, "three", 30.0)]
    assert catalog_columns(dspark, "grown_api") == (["id", "name", "extra"], ["id", "name", "extra"])


def test_restore_and_write_to_append_by_name_update_the_catalog_columns(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE moving (id BIGINT) USING delta")                   # version 0
    dspark.createDataFrame([(1, "x")], "id long, tag string").writeTo("moving").option("mergeSchema", "true").append()
    assert catalog_columns(dspark, "moving") == (["id", "tag"], ["id", "tag"])  # version 1
    dspark.sql("RESTORE TABLE moving TO VERSION AS OF 0")
    assert catalog_columns(dspark, "moving") == (["id"], ["id"]) and rows(dspark.table("moving")) == []
    DeltaTable.forName(dspark, "moving").restoreToVersion(1)
    assert catalog_columns(dspark, "moving") == (["id", "tag"], ["id", "tag"])


def _files_under(directory: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), directory) for d, _, fs in os.walk(directory) for f in fs)


def test_a_name_that_is_not_a_delta_table_is_refused_before_anything_is_written(
        dspark: SparkSession, db: str, tmp_path: Path) -> None:
    dspark.range(3).write.format("parquet").saveAsTable("plain_pq")  # a managed Parquet table: <db>/plain_pq
    directory = os.path.join(db, "plain_pq")
    files = _files_under(directory)
    assert files and not any("_delta_log" in f for f in files)
    elsewhere = str(tmp_path / "elsewhere")
    statements = ["CREATE TABLE plain_pq (id BIGINT) USING delta",
                  "CREATE TABLE plain_pq USING delta AS SELECT id FROM range(9)",
                  "CREATE OR REPLACE TABLE plain_pq (id BIGINT) USING delta",
                  "CREATE OR REPLACE TABLE plain_pq USING delta AS SELECT id FROM range(9)",
                  f"CREATE TABLE plain_pq (id BIGINT) USING delta LOCATION '{elsewhere}'"]
    for statement in statements:
        with pytest.raises(TableAlreadyExistsError, match="not a Delta table") as err:
            dspark.sql(statement)
        assert err.value.error_class == "TABLE_OR_VIEW_ALREADY_EXISTS", statement
    with pytest.raises(TableAlreadyExistsError, match="not a Delta table"):
        dspark.range(9).write.format("delta").mode("overwrite").saveAsTable("plain_pq")
    with pytest.raises(TableAlreadyExistsError, match="not a Delta table"):
        dspark.range(9).writeTo("plain_pq").using("delta").createOrReplace()
    with pytest.raises(TableAlreadyExistsError, match="not a Delta table"):
        DeltaTable.createOrReplace(dspark).tableName("plain_pq").addColumn("id", "long").execute()
    dspark.sql("CREATE TABLE IF NOT EXISTS plain_pq (id BIGINT) USING delta")  # the name exists: nothing happens
    dspark.range(9).write.format("delta").mode("ignore").saveAsTable("plain_pq")
    assert _files_under(directory) == files and not os.path.exists(elsewhere)
    assert rows(dspark.table("plain_pq")) == [(0,), (1,), (2,)]  # still Spark's own Parquet table


def test_update_set_to_a_scalar_subquery_over_catalog_names(dspark: SparkSession, db: str, tmp_path: Path) -> None:
    """Issue 26's third wrong-data shape: the subquery over a name used to read the registration (NULL)."""
    dspark.sql("CREATE TABLE limits (x BIGINT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    dspark.sql("INSERT INTO limits VALUES (4), (40), (7)")
    dspark.sql("DELETE FROM limits WHERE x = 40")  # the max must come from the live rows: 7, never 40 or NULL
    path = str(tmp_path / "by_path")
    dvlake.write(dspark.createDataFrame([(1, 0), (2, 0)], "a long, b long"), path)
    dspark.sql(f"UPDATE delta.`{path}` SET b = (SELECT max(x) FROM limits) WHERE a = 2")
    assert rows(dvlake.read(dspark, path)) == [(1, 0), (2, 7)]
    dspark.sql("CREATE TABLE targets (a BIGINT, b BIGINT) USING delta")
    dspark.sql("INSERT INTO targets VALUES (1, 0), (2, 0)")
    dspark.sql(f"UPDATE {DB}.targets SET b = a + (SELECT min(x) FROM limits) + (SELECT count(*) FROM targets)")
    assert rows(dspark.table("targets")) == [(1, 7), (2, 8)]
    dspark.sql("UPDATE targets t SET b = (SELECT max(l.x) FROM limits l WHERE l.x < t.b) WHERE a = 2")  # correlated
    assert rows(dspark.table("targets")) == [(1, 7), (2, 7)]
    dspark.sql(f"UPDATE targets SET b = (SELECT max(b) FROM delta.`{path}` VERSION AS OF 0) WHERE a = 1")
    assert rows(dspark.table("targets")) == [(1, 0), (2, 7)]
    assert not [t.name for t in dspark.catalog.listTables() if t.name.startswith("dvlake_")]  # its views are gone


def test_views_and_non_delta_tables_fed_from_a_name(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE fed (id BIGINT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    dspark.sql("INSERT INTO fed SELECT id FROM range(6)")
    dspark.sql("DELETE FROM fed WHERE id < 3")
    dspark.sql("CREATE TEMP VIEW fed_view AS SELECT id * 10 AS tens FROM fed")  # read through dvlake, DVs applied
    try:
        assert rows(dspark.sql("SELECT * FROM fed_view")) == [(30,), (40,), (50,)]
    finally:
        dspark.catalog.dropTempView("fed_view")
    with pytest.raises(Exception, match="TEMPORARY VIEW"):  # Spark would store SQL that plain Spark cannot read
        dspark.sql("CREATE VIEW fed_perm AS SELECT * FROM fed")
    dspark.sql("CREATE TABLE fed_copy (id BIGINT) USING parquet")
    dspark.sql("INSERT INTO fed_copy SELECT id FROM fed WHERE id > 3")  # a Parquet target, a Delta source
    assert rows(dspark.table("fed_copy")) == [(4,), (5,)]
    with pytest.raises(Exception, match="USING delta"):
        dspark.sql("CREATE TABLE fed_pq USING parquet AS SELECT * FROM fed")
