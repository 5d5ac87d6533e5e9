"""Column defaults (``c STRING DEFAULT 'new'``), as delta-spark 4.x keeps and applies them.

Rules checked: a default is the field metadata ``CURRENT_DEFAULT`` (the expression's text) and needs the writer
feature ``allowColumnDefaults`` (``delta.feature.allowColumnDefaults`` at CREATE or by ALTER … SET TBLPROPERTIES),
else ``WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED``; the property becomes the protocol feature, not a
configuration entry; an INSERT column list that omits a column, ``VALUES (…, DEFAULT)``, ``UPDATE … SET c =
DEFAULT`` and MERGE's ``INSERT (…) VALUES (…, DEFAULT)`` (and its omitted columns) write the default; a column
without one gets NULL; ``ALTER COLUMN … SET DEFAULT`` / ``DROP DEFAULT`` change only the metadata.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvlake.errors import DvlakeError
from dvlake.log.snapshot import Snapshot
from tests.peers import read_with_deltalake
from tests.spark.catalog_helpers import configured_with_database, location_and_writer_features, target_location

FEATURE = "'delta.feature.allowColumnDefaults' = 'supported'"


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "dflt_db", str(tmp_path / "dflt_db")) as session:
        yield session


def _rows(spark: SparkSession, target: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {target} ORDER BY a").collect()]


def _metadata(path: str) -> dict[str, dict]:
    return {f["name"]: f["metadata"] for f in Snapshot.load(path).schema["fields"]}


@pytest.mark.parametrize(("dvs", "by_name"), [(True, False), (False, True)], ids=["dv-path", "cow-name"])
def test_defaults_fill_insert_update_and_merge(dspark: SparkSession, tmp_path: Path, by_name: bool, dvs: bool) -> None:
    """Every way SQL leaves a value to the default, on a DV and a copy-on-write table; delta-rs reads the result.

    The two axes pairwise (they were four cases): the DV table by path, the copy-on-write one by name, so each write
    mode and each way of naming the table runs every statement once."""
    target = "dflt_db.orders" if by_name else f"delta.`{tmp_path / 'orders'}`"
    dspark.sql(f"CREATE TABLE {target} (a INT, status STRING DEFAULT 'new', qty INT DEFAULT 40 + 2, note STRING) "
               f"USING delta TBLPROPERTIES ({FEATURE}, 'delta.enableDeletionVectors' = '{str(dvs).lower()}')")
    path, writer_features = location_and_writer_features(dspark, target)
    assert "allowColumnDefaults" in writer_features
    assert "delta.feature.allowColumnDefaults" not in Snapshot.load(path).configuration
    assert _metadata(path) == {"a": {}, "status": {"CURRENT_DEFAULT": "'new'"}, "qty": {"CURRENT_DEFAULT": "40 + 2"},
                               "note": {}}
    dspark.sql(f"INSERT INTO {target} (a) VALUES (1)")
    dspark.sql(f"INSERT INTO {target} VALUES (2, DEFAULT, 7, 'x'), (3, 'paid', DEFAULT, DEFAULT)")
    dspark.sql(f"INSERT INTO {target} (a, status, qty) VALUES (4, 'paid', 1), (5, 'paid', 2)")
    dspark.sql(f"UPDATE {target} SET status = DEFAULT, note = DEFAULT WHERE a = 4")
    dspark.sql(f"MERGE INTO {target} t USING (SELECT 5 AS a UNION ALL SELECT 6 AS a) s ON t.a = s.a "
               "WHEN MATCHED THEN UPDATE SET qty = DEFAULT "
               "WHEN NOT MATCHED THEN INSERT (a, note) VALUES (s.a, DEFAULT)")
    expected = [(1, "new", 42, None), (2, "new", 7, "x"), (3, "paid", 42, None), (4, "new", 1, None),
                (5, "paid", 42, None), (6, "new", 42, None)]
    assert _rows(dspark, target) == expected
    got = read_with_deltalake(path).to_pylist()
    assert sorted((r["a"], r["status"], r["qty"], r["note"]) for r in got) == expected


@pytest.mark.parametrize("by_name", [False, True], ids=["path", "name"])
def test_alter_column_set_and_drop_default(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    """Without the feature SET DEFAULT is refused; after ALTER … SET TBLPROPERTIES it is a CHANGE COLUMN commit of
    the metadata only; DROP DEFAULT removes the key, so an omitted column is NULL again."""
    target = "dflt_db.items" if by_name else f"delta.`{tmp_path / 'items'}`"
    dspark.sql(f"CREATE TABLE {target} (a INT, c STRING) USING delta")
    path = target_location(dspark, target)
    with pytest.raises(DvlakeError) as info:
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN c SET DEFAULT 'new'")
    assert info.value.getCondition() == "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"
    dspark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ({FEATURE})")
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN c SET DEFAULT 'new'")
    assert _metadata(path)["c"] == {"CURRENT_DEFAULT": "'new'"}
    history = dspark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert history[-1].operation == "CHANGE COLUMN"
    dspark.sql(f"INSERT INTO {target} (a) VALUES (1)")
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN c DROP DEFAULT")
    assert _metadata(path)["c"] == {}
    dspark.sql(f"INSERT INTO {target} (a) VALUES (2)")
    assert _rows(dspark, target) == [(1, "new"), (2, None)]


@pytest.mark.parametrize("statement, error_class", [
    ("CREATE TABLE {t} (a INT, c STRING DEFAULT 'new') USING delta", "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"),
    ("CREATE TABLE {t} (a INT) USING delta TBLPROPERTIES (" + FEATURE + ");"
     "ALTER TABLE {t} ADD COLUMNS (c STRING DEFAULT 'new')",
     "WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED"),
    ("CREATE TABLE {t} (a INT, c STRING) USING delta TBLPROPERTIES (" + FEATURE + ");"
     "ALTER TABLE {t} ALTER COLUMN a SET DEFAULT 'abc'", "INVALID_DEFAULT_VALUE"),
], ids=["no-feature", "add-column", "bad-value"])
def test_refusals(dspark: SparkSession, tmp_path: Path, statement: str, error_class: str) -> None:
    """delta-spark's classes; the refused statement commits nothing."""
    target = f"delta.`{tmp_path / 't'}`"
    *setup, last = statement.format(t=target).split(";")
    for s in setup:
        dspark.sql(s)
    before = Snapshot.load(str(tmp_path / "t")).version if setup else None
    with pytest.raises(DvlakeError) as info:
        dspark.sql(last)
    assert info.value.getCondition() == error_class, str(info.value)
    if setup:
        assert Snapshot.load(str(tmp_path / "t")).version == before
    else:
        assert not (tmp_path / "t" / "_delta_log").exists()
