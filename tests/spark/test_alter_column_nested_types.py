"""ALTER COLUMN … TYPE / CHANGE COLUMN with a type whose text holds commas (``MAP<STRING, BIGINT>``,
``ARRAY<STRUCT<…>>``, ``DECIMAL(10, 2)``): the SQL front end reads the balanced type, not the text up to the first
comma, so the statement reaches type widening as delta-spark's parser hands it over (the change on a map's value is
recorded with ``fieldPath`` ``value``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvlake.log.snapshot import Snapshot
from tests.spark.catalog_helpers import configured_with_database, target_location


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    with configured_with_database(spark, "ntype_db", str(tmp_path / "ntype_db")) as session:
        yield session


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False)], ids=["path-dv", "name-cow"])
def test_types_with_commas_widen(dspark: SparkSession, tmp_path: Path, by_name: bool, dvs: bool) -> None:
    """The two axes pairwise (they were four cases): each way of naming the table and each write mode once."""
    target = "ntype_db.t" if by_name else f"delta.`{tmp_path / 't'}`"
    dspark.sql(f"CREATE TABLE {target} (id INT, m MAP<STRING, INT>, d DECIMAL(5, 2), n INT) USING delta "
               f"TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dvs).lower()}', 'delta.enableTypeWidening' = 'true')")
    dspark.sql(f"INSERT INTO {target} VALUES (1, map('k', 7), 1.25, 1), (2, map('j', 8), 2.50, 2)")
    dspark.sql(f"DELETE FROM {target} WHERE id = 2")
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN m TYPE MAP<STRING, BIGINT>")
    dspark.sql(f"ALTER TABLE {target} CHANGE COLUMN d d DECIMAL(10, 2) COMMENT 'wider'")
    fields = {f["name"]: f for f in Snapshot.load(target_location(dspark, target)).schema["fields"]}
    assert fields["m"]["type"] == {"type": "map", "keyType": "string", "valueType": "long", "valueContainsNull": True}
    assert fields["m"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long", "fieldPath": "value"}]
    assert fields["d"]["type"] == "decimal(10,2)"
    assert fields["d"]["metadata"]["comment"] == "wider"
    dspark.sql(f"INSERT INTO {target} VALUES (3, map('k', 9000000000), 12345678.90, 3)")
    got = [(r.id, r.m, str(r.d)) for r in dspark.sql(f"SELECT id, m, d FROM {target} ORDER BY id").collect()]
    assert got == [(1, {"k": 7}, "1.25"), (3, {"k": 9000000000}, "12345678.90")]
