"""ALTER TABLE … ALTER [COLUMN] COMMENT | FIRST | AFTER | SET/DROP NOT NULL | TYPE, through ``spark.sql``, as delta-spark 4.x.

Rules checked: every change is one metadata commit (``CHANGE COLUMN``, ``CHANGE COLUMNS`` for several) with no file
added or removed; the comment lands in the field's metadata beside column mapping's (nested fields too); FIRST/AFTER
reorder the schema with and without column mapping and reads still give each column its own values (DVs applied);
DROP NOT NULL makes a field nullable; SET NOT NULL on a nullable column and a change of type are refused with
delta-spark's DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP (nothing committed), a missing AFTER column with
DELTA_COLUMN_NOT_FOUND_IN_SCHEMA. By path and by catalog name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvlake.errors import ColumnNotFoundError, DeltaAnalysisException
from dvlake.log.schema import PHYSICAL_NAME_KEY
from dvlake.log.snapshot import Snapshot
from dvlake.spark.catalog import table_location
from tests.peers import read_with_deltalake, rows
from tests.spark.catalog_helpers import configured_with_database

COLUMNS = "id INT NOT NULL, label STRING, amount INT, addr STRUCT<city: STRING, zip: STRING>"
VALUES = ("(1, 'a', 10, named_struct('city', 'Oslo', 'zip', '01')), "
          "(2, NULL, 20, named_struct('city', 'Rome', 'zip', '02')), "
          "(3, 'c', 30, named_struct('city', 'Lima', 'zip', '03'))")


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "altc_db", str(tmp_path / "altc_db")) as session:
        yield session


def _create(spark: SparkSession, target: str, *, mapping: bool = True, dvs: bool = True) -> str:
    """Ids 1..3, then id 2 (the one with a NULL label) deleted: a DV when ``dvs``. Returns the table root."""
    props = [f"'delta.enableDeletionVectors' = '{str(dvs).lower()}'"]
    if mapping:
        props.append("'delta.columnMapping.mode' = 'name'")
    spark.sql(f"CREATE TABLE {target} ({COLUMNS}) USING delta TBLPROPERTIES ({', '.join(props)})")
    spark.sql(f"INSERT INTO {target} VALUES {VALUES}")
    spark.sql(f"DELETE FROM {target} WHERE id = 2")
    path = target[len("delta.`"):-1] if target.startswith("delta.`") else table_location(spark, target)
    assert (Snapshot.load(path).dv_count() == 1) == dvs
    return path


def _last_commit(path: str) -> list[dict]:
    snapshot = Snapshot.load(path)
    text = (Path(path) / "_delta_log" / f"{snapshot.version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _commit_info(path: str) -> dict:
    actions = _last_commit(path)
    assert not any("add" in a or "remove" in a for a in actions)  # metadata only
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


def _fields(path: str) -> list[dict]:
    return Snapshot.load(path).schema["fields"]


@pytest.mark.parametrize("dvs", [True, False])
def test_comment_top_level_and_nested_by_path(dspark: SparkSession, tmp_path: Path, dvs: bool) -> None:
    path = str(tmp_path / "t")
    _create(dspark, f"delta.`{path}`", dvs=dvs)
    physical = {f["name"]: f["metadata"][PHYSICAL_NAME_KEY] for f in _fields(path)}
    dspark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN label COMMENT 'shown to users'")
    label = next(f for f in _fields(path) if f["name"] == "label")
    assert label["metadata"]["comment"] == "shown to users"
    assert label["metadata"][PHYSICAL_NAME_KEY] == physical["label"]  # column mapping's metadata kept
    info = _commit_info(path)
    assert info["operation"] == "CHANGE COLUMN"
    column = json.loads(info["operationParameters"]["column"])
    assert (column["name"], column["type"], column["nullable"], column["metadata"]["comment"]) == \
        ("label", "string", True, "shown to users")
    assert "position" not in info["operationParameters"]

    dspark.sql(f"ALTER TABLE delta.`{path}` ALTER addr.city COMMENT 'it''s the city'")
    addr = next(f for f in _fields(path) if f["name"] == "addr")
    city = next(f for f in addr["type"]["fields"] if f["name"] == "city")
    assert city["metadata"]["comment"] == "it's the city"
    assert json.loads(_commit_info(path)["operationParameters"]["column"])["name"] == "addr.city"
    described = {r.col_name: r.comment for r in dspark.sql(f"DESCRIBE delta.`{path}`").collect()}
    assert described["label"] == "shown to users" and described["id"] is None
    assert [tuple(r) for r in dspark.sql(f"SELECT id, label FROM delta.`{path}` ORDER BY id").collect()] == \
        [(1, "a"), (3, "c")]


@pytest.mark.parametrize("mapping", [True, False])
def test_first_and_after_reorder_and_reads_keep_values_by_name(dspark: SparkSession, mapping: bool) -> None:
    path = _create(dspark, "altc_db.o", mapping=mapping)
    dspark.sql("ALTER TABLE altc_db.o ALTER COLUMN amount FIRST")
    assert [f["name"] for f in _fields(path)] == ["amount", "id", "label", "addr"]
    assert _commit_info(path)["operationParameters"]["position"] == "FIRST"
    dspark.sql("ALTER TABLE altc_db.o ALTER COLUMN amount AFTER label")
    assert [f["name"] for f in _fields(path)] == ["id", "label", "amount", "addr"]
    dspark.sql("ALTER TABLE altc_db.o ALTER COLUMN addr.zip FIRST")
    addr = next(f for f in _fields(path) if f["name"] == "addr")
    assert [f["name"] for f in addr["type"]["fields"]] == ["zip", "city"]
    assert _commit_info(path)["operationParameters"]["position"] == "FIRST"
    df = dspark.sql("SELECT * FROM altc_db.o ORDER BY id")
    assert df.columns == ["id", "label", "amount", "addr"]
    assert [(r.id, r.label, r.amount, r.addr.zip, r.addr.city) for r in df.collect()] == \
        [(1, "a", 10, "01", "Oslo"), (3, "c", 30, "03", "Lima")]
    dspark.sql("INSERT INTO altc_db.o VALUES (4, 'd', 40, named_struct('zip', '04', 'city', 'Kyiv'))")
    assert [(r.id, r.amount, r.addr.city) for r in dspark.sql("SELECT * FROM altc_db.o ORDER BY id").collect()] == \
        [(1, 10, "Oslo"), (3, 30, "Lima"), (4, 40, "Kyiv")]
    assert rows(read_with_deltalake(path), ["id", "amount"]) == [(1, 10), (3, 30), (4, 40)]


def test_several_changes_are_one_change_columns_commit(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _create(dspark, f"delta.`{path}`")
    before = Snapshot.load(path).version
    dspark.sql(f"ALTER TABLE delta.`{path}` ALTER COLUMN label COMMENT 'x', amount AFTER id")
    assert Snapshot.load(path).version == before + 1
    info = _commit_info(path)
    assert info["operation"] == "CHANGE COLUMNS"
    listed = json.loads(info["operationParameters"]["columns"])
    assert [(c["name"], c.get("position")) for c in listed] == [("label", None), ("amount", "AFTER id")]
    assert [f["name"] for f in _fields(path)] == ["id", "amount", "label", "addr"]


def test_not_null_rules_as_delta_spark(dspark: SparkSession) -> None:
    path = _create(dspark, "altc_db.n")
    dspark.sql("ALTER TABLE altc_db.n ALTER COLUMN id DROP NOT NULL")
    assert next(f for f in _fields(path) if f["name"] == "id")["nullable"] is True
    assert json.loads(_commit_info(path)["operationParameters"]["column"])["nullable"] is True
    dspark.sql("INSERT INTO altc_db.n (id, label, amount) VALUES (NULL, 'z', 1)")
    assert dspark.sql("SELECT count(*) FROM altc_db.n WHERE id IS NULL").collect()[0][0] == 1
    version = Snapshot.load(path).version
    # delta-spark refuses making a nullable column NOT NULL whatever the rows hold (here the NULL label is in a
    # row a DV deleted, so no live row is NULL): the class is DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP
    with pytest.raises(DeltaAnalysisException) as refused:
        dspark.sql("ALTER TABLE altc_db.n ALTER COLUMN label SET NOT NULL")
    assert refused.value.error_class == "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"
    assert "from STRING to STRING NOT NULL" in str(refused.value) and "CHECK" in str(refused.value)
    assert Snapshot.load(path).version == version


@pytest.mark.parametrize("by_name", [True, False])
def test_type_change_and_missing_columns_refused(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    target = "altc_db.ty" if by_name else f"delta.`{tmp_path / 'ty'}`"
    path = _create(dspark, target, dvs=not by_name)
    version = Snapshot.load(path).version
    with pytest.raises(DeltaAnalysisException) as refused:
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN amount TYPE BIGINT")
    assert refused.value.error_class == "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"
    assert "from INT to BIGINT" in str(refused.value)
    with pytest.raises(ColumnNotFoundError) as missing:
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN amount AFTER nope")
    assert missing.value.error_class == "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"
    with pytest.raises(ColumnNotFoundError):
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN nope COMMENT 'x'")
    assert Snapshot.load(path).version == version
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN amount TYPE INT")  # its own type: a change of nothing
    assert Snapshot.load(path).version == version + 1
    assert [tuple(r) for r in dspark.sql(f"SELECT id, amount FROM {target} ORDER BY id").collect()] == [(1, 10), (3, 30)]
