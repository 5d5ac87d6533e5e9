"""Liquid clustering (``CLUSTER BY``) is not implemented: the SQL front end refuses it typed, never with a bare
Python ``KeyError`` from the clause it cannot read, and writes nothing (by path and by name, CREATE and CTAS)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvlake.errors import DeltaSqlError
from tests.spark.catalog_helpers import configured_with_database


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    with configured_with_database(spark, "lc_db", str(tmp_path / "lc_db")) as session:
        yield session


@pytest.mark.parametrize("statement", [
    "CREATE TABLE {t} (id BIGINT, k INT) USING delta CLUSTER BY (k)",
    "CREATE TABLE {t} USING delta CLUSTER BY (k) AS SELECT 1L AS id, 2 AS k",
], ids=["create", "ctas"])
@pytest.mark.parametrize("by_name", [False, True], ids=["path", "name"])
def test_cluster_by_is_a_typed_refusal(dspark: SparkSession, tmp_path: Path, statement: str, by_name: bool) -> None:
    target = "lc_db.lc" if by_name else f"delta.`{tmp_path / 'lc'}`"
    with pytest.raises(DeltaSqlError) as info:
        dspark.sql(statement.format(t=target))
    assert info.value.getCondition() == "DVLAKE_UNSUPPORTED_DELTA_STATEMENT"
    assert "CLUSTER BY" in str(info.value)
    assert not (tmp_path / "lc").exists()
    assert not dspark.catalog.tableExists("lc_db.lc")
