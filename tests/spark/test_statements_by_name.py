"""Statements that used to reach Spark's registration view: TRUNCATE TABLE, by name and by path, as delta-spark runs them.

Rules checked: TRUNCATE TABLE removes every live file in one ``TRUNCATE`` commit (DVs or not), the schema, properties
and history stay (time travel still reads the rows), the change feed reads the rows as deletes, an empty table commits
nothing, ``PARTITION (…)`` is refused, and a name that is not a Delta table is Spark's business.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import DeltaSqlError
from dvlake.log.snapshot import Snapshot
from dvlake.spark.catalog import table_location
from tests.peers import read_with_deltalake
from tests.spark.catalog_helpers import configured_with_database


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "stmt_db", str(tmp_path / "stmt_db")) as session:
        yield session


def _orders(spark: SparkSession, target: str, *, dvs: bool, partitioned: bool = False, cdf: bool = False) -> None:
    """Ids 1..4 in two inserts (two files at least), then id 2 deleted (a DV when ``dvs``)."""
    props = f"'delta.enableDeletionVectors' = '{str(dvs).lower()}', 'delta.enableChangeDataFeed' = '{str(cdf).lower()}'"
    parts = " PARTITIONED BY (day)" if partitioned else ""
    spark.sql(f"CREATE TABLE {target} (id INT, day STRING) USING delta{parts} TBLPROPERTIES ({props})")
    path = target[len("delta.`"):-1] if target.startswith("delta.`") else table_location(spark, target)
    dvlake.write(spark.createDataFrame([(1, "mon"), (2, "mon")], "id int, day string").coalesce(1), path, "append")
    spark.sql(f"INSERT INTO {target} VALUES (3, 'tue'), (4, 'wed')")
    spark.sql(f"DELETE FROM {target} WHERE id = 2")


def _commit_info(path: str) -> dict:
    snapshot = Snapshot.load(path)
    text = (Path(path) / "_delta_log" / f"{snapshot.version:020d}.json").read_text()
    return next(json.loads(line)["commitInfo"] for line in text.splitlines() if '"commitInfo"' in line)


@pytest.mark.parametrize("dvs", [True, False])
def test_truncate_by_name_removes_every_row_in_one_commit(dspark: SparkSession, dvs: bool) -> None:
    _orders(dspark, "stmt_db.orders", dvs=dvs)
    path = table_location(dspark, "stmt_db.orders")
    before = Snapshot.load(path)
    assert (before.dv_count() > 0) == dvs
    live_files = len(before.add_files())
    dspark.sql("TRUNCATE TABLE stmt_db.orders")
    after = Snapshot.load(path)
    assert after.version == before.version + 1 and after.add_files() == []
    assert after.schema == before.schema and after.configuration == before.configuration
    info = _commit_info(path)
    assert info["operation"] == "TRUNCATE" and info["operationParameters"] == {}
    assert info["operationMetrics"]["numRemovedFiles"] == str(live_files)
    assert info["operationMetrics"]["numDeletedRows"] == "3"
    assert dspark.sql("SELECT * FROM stmt_db.orders").collect() == []
    assert sorted(r.id for r in dspark.sql(f"SELECT id FROM stmt_db.orders VERSION AS OF {before.version}").collect()) == \
        [1, 3, 4]
    dspark.sql("INSERT INTO stmt_db.orders VALUES (9, 'fri')")  # the table goes on
    assert [tuple(r) for r in dspark.sql("SELECT * FROM stmt_db.orders").collect()] == [(9, "fri")]
    assert read_with_deltalake(path).to_pylist() == [{"id": 9, "day": "fri"}]


def test_truncate_by_path_partitioned_with_change_feed(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    target = f"delta.`{path}`"
    _orders(dspark, target, dvs=True, partitioned=True, cdf=True)
    version = Snapshot.load(path).version
    dspark.sql(f"TRUNCATE TABLE {target}")
    assert dspark.sql(f"SELECT * FROM {target}").collect() == []
    assert Snapshot.load(path).metadata.partition_columns == ("day",)
    changes = dvlake.read_changes(dspark, path, startingVersion=version + 1)
    assert sorted((r.id, r.day, r._change_type) for r in changes.collect()) == [
        (1, "mon", "delete"), (3, "tue", "delete"), (4, "wed", "delete")]
    assert read_with_deltalake(path).num_rows == 0


def test_truncate_of_an_empty_table_commits_nothing_and_partition_spec_is_refused(dspark: SparkSession,
                                                                                  tmp_path: Path) -> None:
    path = str(tmp_path / "orders")
    dspark.sql(f"CREATE TABLE delta.`{path}` (id INT, day STRING) USING delta PARTITIONED BY (day)")
    dspark.sql(f"TRUNCATE TABLE delta.`{path}`")
    assert Snapshot.load(path).version == 0
    dspark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 'mon'), (2, 'tue')")
    with pytest.raises(DeltaSqlError, match="PARTITION"):
        dspark.sql(f"TRUNCATE TABLE delta.`{path}` PARTITION (day = 'mon')")
    assert Snapshot.load(path).version == 1
    assert sorted(r.id for r in dspark.sql(f"SELECT id FROM delta.`{path}`").collect()) == [1, 2]


def test_truncate_of_a_spark_table_stays_sparks(dspark: SparkSession) -> None:
    dspark.sql("CREATE TABLE stmt_db.plain (id INT) USING parquet")
    dspark.sql("INSERT INTO stmt_db.plain VALUES (1), (2)")
    dspark.sql("TRUNCATE TABLE stmt_db.plain")
    assert dspark.sql("SELECT * FROM stmt_db.plain").collect() == []


def test_show_partitions_typed_columns_by_name_and_path(dspark: SparkSession, tmp_path: Path) -> None:
    dspark.sql("CREATE TABLE stmt_db.events (id INT, day STRING, hour INT) USING delta PARTITIONED BY (day, hour) "
               "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'name')")
    dspark.sql("INSERT INTO stmt_db.events VALUES (1, 'mon', 9), (2, 'mon', 10), (3, 'tue', 9), (4, NULL, 1)")
    dspark.sql("DELETE FROM stmt_db.events WHERE day = 'tue'")  # a whole partition gone: not listed any more
    got = dspark.sql("SHOW PARTITIONS stmt_db.events")
    assert [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [("day", "string"), ("hour", "int")]
    assert [tuple(r) for r in got.collect()] == [(None, 1), ("mon", 9), ("mon", 10)]
    assert [tuple(r) for r in dspark.sql("SHOW PARTITIONS stmt_db.events PARTITION (day = 'mon')").collect()] == \
        [("mon", 9), ("mon", 10)]
    assert [tuple(r) for r in dspark.sql("SHOW PARTITIONS stmt_db.events PARTITION (hour = 10)").collect()] == \
        [("mon", 10)]
    path = table_location(dspark, "stmt_db.events")
    assert [tuple(r) for r in dspark.sql(f"SHOW PARTITIONS delta.`{path}`").collect()] == \
        [(None, 1), ("mon", 9), ("mon", 10)]
    from dvlake.errors import DeltaAnalysisException

    with pytest.raises(DeltaAnalysisException) as column:
        dspark.sql("SHOW PARTITIONS stmt_db.events PARTITION (id = 1)")
    assert column.value.error_class == "DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_COLUMN"
    plain = str(tmp_path / "plain")
    dspark.sql(f"CREATE TABLE delta.`{plain}` (id INT) USING delta")
    with pytest.raises(DeltaAnalysisException) as table:
        dspark.sql(f"SHOW PARTITIONS delta.`{plain}`")
    assert table.value.error_class == "DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_TABLE"


def test_rename_to_moves_a_managed_table_and_renames_an_external_one(dspark: SparkSession, tmp_path: Path) -> None:
    from dvlake.errors import TableAlreadyExistsError

    _orders(dspark, "stmt_db.r1", dvs=True)
    old_location = table_location(dspark, "stmt_db.r1")
    dspark.sql("ALTER TABLE stmt_db.r1 RENAME TO r2")  # the new name stays in stmt_db
    assert not dspark.catalog.tableExists("stmt_db.r1")
    new_location = table_location(dspark, "stmt_db.r2")
    assert Path(new_location) == tmp_path / "stmt_db" / "r2" and not Path(old_location).exists()
    assert sorted(r.id for r in dspark.sql("SELECT id FROM stmt_db.r2").collect()) == [1, 3, 4]
    assert Snapshot.load(new_location).dv_count() == 1  # the DV still applies after the move
    dspark.sql("DROP TABLE stmt_db.r2")  # still managed: its files go with it
    assert not Path(new_location).exists()

    external = str(tmp_path / "ext")
    dspark.sql(f"CREATE TABLE stmt_db.e1 (id INT, day STRING) USING delta LOCATION '{external}'")
    dspark.sql("INSERT INTO stmt_db.e1 VALUES (5, 'sat')")
    dspark.sql("CREATE TABLE stmt_db.taken (id INT) USING parquet")
    with pytest.raises(TableAlreadyExistsError):
        dspark.sql("ALTER TABLE stmt_db.e1 RENAME TO stmt_db.taken")
    dspark.sql("ALTER TABLE stmt_db.e1 RENAME TO stmt_db.e2")
    assert Path(table_location(dspark, "stmt_db.e2")) == Path(external)
    assert [tuple(r) for r in dspark.sql("SELECT * FROM stmt_db.e2").collect()] == [(5, "sat")]
    dspark.sql("DROP TABLE stmt_db.e2")  # external: the files stay
    assert [tuple(r) for r in dspark.sql(f"SELECT * FROM delta.`{external}`").collect()] == [(5, "sat")]
    with pytest.raises(DeltaSqlError):
        dspark.sql(f"ALTER TABLE delta.`{external}` RENAME TO stmt_db.e3")
