"""ALTER TABLE … RENAME COLUMN / DROP COLUMN(S) through ``spark.sql`` after ``configure_spark``, as delta-spark does them.

Rules checked: under column mapping both are one metadata commit (no file added or removed, physical names and ids
unchanged), reads give the renamed column's data (DVs applied), delta-rs reads the result; without column mapping,
on a partition column (drop) or on a column a CHECK constraint or generated column reads, delta-spark's error class.
Tables are small orders (``id``, ``label``, ``amount``, ``day``, a struct ``addr`` with ``city``/``zip``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import ColumnNotFoundError, DeltaAnalysisException, SchemaMismatchError
from dvlake.log.schema import PHYSICAL_NAME_KEY
from dvlake.log.snapshot import Snapshot
from dvlake.spark.catalog import table_location
from tests.peers import read_with_deltalake, rows
from tests.spark.catalog_helpers import configured_with_database

COLUMNS = "id INT, label STRING, amount INT, day STRING, addr STRUCT<city: STRING, zip: STRING>"
VALUES = ("(1, 'a', 10, 'mon', named_struct('city', 'Oslo', 'zip', '01')), "
          "(2, 'b', 20, 'mon', named_struct('city', 'Rome', 'zip', '02')), "
          "(3, 'c', 30, 'tue', named_struct('city', 'Lima', 'zip', '03'))")


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "alter_db", str(tmp_path / "alter_db")) as session:
        yield session


def _create(spark: SparkSession, target: str, *, mode: str | None = "name", dvs: bool = True,
            partitioned: bool = False, extra: str = "") -> None:
    """The orders table with ids 1..3, then id 2 deleted (a DV when ``dvs``)."""
    props = {"delta.enableDeletionVectors": str(dvs).lower()}
    if mode is not None:
        props["delta.columnMapping.mode"] = mode
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
    parts = " PARTITIONED BY (day)" if partitioned else ""
    spark.sql(f"CREATE TABLE {target} ({COLUMNS}{extra}) USING delta{parts} TBLPROPERTIES ({listed})")
    spark.sql(f"INSERT INTO {target} (id, label, amount, day, addr) VALUES {VALUES}")
    spark.sql(f"DELETE FROM {target} WHERE id = 2")


def _by_path(tmp_path: Path) -> tuple[str, str]:
    path = str(tmp_path / "orders")
    return f"delta.`{path}`", path


def _physical(path: str) -> dict[str, str]:
    return {f["name"]: f["metadata"][PHYSICAL_NAME_KEY] for f in Snapshot.load(path).schema["fields"]}


def _last_commit(path: str) -> list[dict]:
    snapshot = Snapshot.load(path)
    text = (Path(path) / "_delta_log" / f"{snapshot.version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize(("mode", "dvs"), [("name", True), ("id", True), ("name", False)])
def test_rename_column_by_path_is_metadata_only(dspark: SparkSession, tmp_path: Path, mode: str, dvs: bool) -> None:
    target, path = _by_path(tmp_path)
    _create(dspark, target, mode=mode, dvs=dvs)
    before = _physical(path)
    files = {(a.path, a.deletion_vector is not None) for a in Snapshot.load(path).add_files()}
    assert (True in {dv for _, dv in files}) == dvs
    dspark.sql(f"ALTER TABLE {target} RENAME COLUMN label TO name")
    assert dspark.sql(f"SELECT id, name, amount FROM {target}").orderBy("id").collect() == [(1, "a", 10), (3, "c", 30)]
    after = _physical(path)
    assert after["name"] == before["label"] and "label" not in after
    actions = _last_commit(path)
    assert not any("add" in a or "remove" in a for a in actions)
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "RENAME COLUMN"
    assert info["operationParameters"] == {"oldColumnPath": "label", "newColumnPath": "name"}
    assert {(a.path, a.deletion_vector is not None) for a in Snapshot.load(path).add_files()} == files
    assert rows(read_with_deltalake(path), ["id", "name"]) == [(1, "a"), (3, "c")]


def test_rename_nested_field_and_partition_column(dspark: SparkSession, tmp_path: Path) -> None:
    target, path = _by_path(tmp_path)
    _create(dspark, target, partitioned=True)
    dspark.sql(f"ALTER TABLE {target} RENAME COLUMN addr.city TO town")
    dspark.sql(f"ALTER TABLE {target} RENAME COLUMN day TO weekday")
    got = dspark.sql(f"SELECT id, addr.town, addr.zip, weekday FROM {target}").orderBy("id").collect()
    assert [tuple(r) for r in got] == [(1, "Oslo", "01", "mon"), (3, "Lima", "03", "tue")]
    assert Snapshot.load(path).metadata.partition_columns == ("weekday",)
    assert dspark.sql(f"SELECT id FROM {target} WHERE weekday = 'tue'").collect() == [(3,)]
    info = next(a["commitInfo"] for a in _last_commit(path) if "commitInfo" in a)
    assert info["operationParameters"] == {"oldColumnPath": "day", "newColumnPath": "weekday"}
    history = dspark.sql(f"DESCRIBE HISTORY {target} LIMIT 2").collect()
    assert history[1]["operationParameters"] == {"oldColumnPath": "addr.city", "newColumnPath": "addr.town"}
    assert rows(read_with_deltalake(path), ["id", "weekday"]) == [(1, "mon"), (3, "tue")]


def test_drop_columns_by_name_then_add_back_reads_nulls(dspark: SparkSession) -> None:
    _create(dspark, "alter_db.orders")
    dspark.sql("ALTER TABLE alter_db.orders DROP COLUMNS (amount, addr.zip)")
    got = dspark.sql("SELECT * FROM alter_db.orders").orderBy("id").collect()
    assert [r.asDict(recursive=True) for r in got] == [
        {"id": 1, "label": "a", "day": "mon", "addr": {"city": "Oslo"}},
        {"id": 3, "label": "c", "day": "tue", "addr": {"city": "Lima"}}]
    assert [r[0] for r in dspark.sql("DESCRIBE TABLE alter_db.orders").collect()] == ["id", "label", "day", "addr"]
    path = table_location(dspark, "alter_db.orders")
    info = next(a["commitInfo"] for a in _last_commit(path) if "commitInfo" in a)
    assert info["operation"] == "DROP COLUMNS" and info["operationParameters"] == {"columns": '["amount", "addr.zip"]'}
    # a new column of the old name is a new physical column: the dropped data does not come back
    dspark.sql("ALTER TABLE alter_db.orders ADD COLUMNS (amount INT)")
    assert dspark.sql("SELECT id, amount FROM alter_db.orders").orderBy("id").collect() == [(1, None), (3, None)]
    dspark.sql("ALTER TABLE alter_db.orders DROP COLUMN label")
    dspark.sql("ALTER TABLE alter_db.orders RENAME COLUMN day TO weekday")
    assert dspark.sql("SELECT * FROM alter_db.orders WHERE id = 3").collect()[0].asDict(recursive=True) == \
        {"id": 3, "weekday": "tue", "addr": {"city": "Lima"}, "amount": None}
    assert rows(read_with_deltalake(path), ["id", "weekday"]) == [(1, "mon"), (3, "tue")]


def test_drop_column_if_exists_of_a_missing_column_commits_nothing(dspark: SparkSession, tmp_path: Path) -> None:
    target, path = _by_path(tmp_path)
    _create(dspark, target)
    version = Snapshot.load(path).version
    dspark.sql(f"ALTER TABLE {target} DROP COLUMN IF EXISTS nothere")
    assert Snapshot.load(path).version == version
    with pytest.raises(ColumnNotFoundError):
        dspark.sql(f"ALTER TABLE {target} DROP COLUMN nothere")
    with pytest.raises(ColumnNotFoundError):
        dspark.sql(f"ALTER TABLE {target} RENAME COLUMN nothere TO x")
    with pytest.raises(SchemaMismatchError) as taken:
        dspark.sql(f"ALTER TABLE {target} RENAME COLUMN label TO AMOUNT")
    assert taken.value.error_class == "FIELD_ALREADY_EXISTS"
    assert Snapshot.load(path).version == version


@pytest.mark.parametrize("by_name", [False, True])
def test_without_column_mapping_refused_with_advice(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    target, path = ("alter_db.plain", "") if by_name else _by_path(tmp_path)
    _create(dspark, target, mode=None)
    for statement, error_class in ((f"ALTER TABLE {target} RENAME COLUMN label TO name", "DELTA_UNSUPPORTED_RENAME_COLUMN"),
                                   (f"ALTER TABLE {target} DROP COLUMN label", "DELTA_UNSUPPORTED_DROP_COLUMN")):
        with pytest.raises(DeltaAnalysisException) as err:
            dspark.sql(statement)
        assert err.value.error_class == error_class
        assert "delta.columnMapping.mode" in str(err.value)
    assert dspark.sql(f"SELECT label FROM {target}").orderBy("label").collect() == [("a",), ("c",)]


def test_partition_constraint_and_generated_dependents_refused(dspark: SparkSession, tmp_path: Path) -> None:
    target, path = _by_path(tmp_path)
    _create(dspark, target, partitioned=True, extra=", amount2 INT GENERATED ALWAYS AS (amount * 2)")
    dspark.sql(f"ALTER TABLE {target} ADD CONSTRAINT positive CHECK (id > 0)")
    version = Snapshot.load(path).version
    cases = [(f"ALTER TABLE {target} DROP COLUMN day", "DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN"),
             (f"ALTER TABLE {target} RENAME COLUMN id TO key", "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE"),
             (f"ALTER TABLE {target} DROP COLUMN id", "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE"),
             (f"ALTER TABLE {target} RENAME COLUMN amount TO total", "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE"),
             (f"ALTER TABLE {target} DROP COLUMNS (label, amount)", "DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE")]
    for statement, error_class in cases:
        with pytest.raises(DeltaAnalysisException) as err:
            dspark.sql(statement)
        assert err.value.error_class == error_class, statement
    assert Snapshot.load(path).version == version
    # the generated column itself and columns nothing reads may go
    dspark.sql(f"ALTER TABLE {target} DROP COLUMN amount2")
    dspark.sql(f"ALTER TABLE {target} RENAME COLUMN amount TO total")
    assert dspark.sql(f"SELECT id, total FROM {target}").orderBy("id").collect() == [(1, 10), (3, 30)]


def test_last_field_cannot_be_dropped(dspark: SparkSession, tmp_path: Path) -> None:
    target, _ = _by_path(tmp_path)
    _create(dspark, target)
    dspark.sql(f"ALTER TABLE {target} DROP COLUMN addr.zip")
    with pytest.raises(SchemaMismatchError):
        dspark.sql(f"ALTER TABLE {target} DROP COLUMN addr.city")
    dspark.sql(f"ALTER TABLE {target} DROP COLUMNS (id, label, amount, addr)")
    with pytest.raises(SchemaMismatchError):
        dspark.sql(f"ALTER TABLE {target} DROP COLUMN day")
    assert dspark.sql(f"SELECT * FROM {target}").orderBy("day").collect() == [("mon",), ("tue",)]


def test_change_feed_across_a_rename_is_refused_and_reads_either_side(dspark: SparkSession, tmp_path: Path) -> None:
    target, path = _by_path(tmp_path)
    _create(dspark, target)  # v0 create, v1 insert, v2 delete
    dspark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")  # v3
    dspark.sql(f"UPDATE {target} SET amount = 11 WHERE id = 1")  # v4
    dspark.sql(f"ALTER TABLE {target} RENAME COLUMN amount TO total")  # v5
    dspark.sql(f"DELETE FROM {target} WHERE id = 3")  # v6
    from dvlake.errors import CdfIncompatibleSchemaChangeError

    for start in (3, 4):  # ranges that hold the rename
        with pytest.raises(CdfIncompatibleSchemaChangeError) as err:
            dvlake.read_changes(dspark, path, startingVersion=start, endingVersion=6)
        assert err.value.error_class == "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"
    before = dvlake.read_changes(dspark, path, startingVersion=4, endingVersion=4)
    assert sorted((r["id"], r["amount"], r["_change_type"]) for r in before.collect()) == [
        (1, 10, "update_preimage"), (1, 11, "update_postimage")]
    after = dvlake.read_changes(dspark, path, startingVersion=5, endingVersion=6)  # from the rename's version on
    assert [(r["id"], r["total"], r["_change_type"]) for r in after.collect()] == [(3, 30, "delete")]
