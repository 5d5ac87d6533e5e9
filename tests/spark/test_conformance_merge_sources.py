"""MERGE sources in SQL, by Spark's and delta-spark's rules: the source is any relation of the statement.

Rules checked:

- A CTE of the statement (``WITH c AS (…) MERGE INTO t USING c …``) is a source, also through a subquery over it,
  and a CTE may itself read Delta tables (by path or by catalog name): Spark resolves a statement's CTEs for the
  whole statement, MERGE included.
- A Delta table named by path or by catalog name is a source, directly or inside a subquery, and is read with its
  deletion vectors applied (deleted rows never match or get inserted).
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from tests.helpers import DV_PROPS, table_rows


def _tables(spark: SparkSession, tmp_path) -> tuple[str, str]:
    target, source = str(tmp_path / "target"), str(tmp_path / "source")
    dvlake.write(spark.createDataFrame([(1, 10), (2, 20), (3, 30)], "id long, v long"), target, properties=DV_PROPS)
    dvlake.write(spark.createDataFrame([(2, 200), (4, 400), (5, 500)], "id long, v long"), source, properties=DV_PROPS)
    DeltaTable.forPath(spark, source).delete("id = 5")  # a deleted source row must not be inserted
    return target, source



MERGED = [(1, 10), (2, 200), (3, 30), (4, 400)]
CLAUSES = "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *"


def test_a_cte_is_a_merge_source(spark: SparkSession, tmp_path) -> None:
    target, _ = _tables(spark, tmp_path)
    dvlake.sql(spark, f"WITH c AS (SELECT * FROM VALUES (2, 200), (4, 400) AS x(id, v)) "
                      f"MERGE INTO delta.`{target}` t USING c s {CLAUSES}")
    assert table_rows(spark, target) == MERGED


@pytest.mark.parametrize("using", ["c s", "(SELECT id, v FROM c WHERE id > 1) s"])
def test_a_cte_reading_a_delta_table_is_a_merge_source(spark: SparkSession, tmp_path, using: str) -> None:
    target, source = _tables(spark, tmp_path)
    dvlake.sql(spark, f"WITH c AS (SELECT id, v FROM delta.`{source}`) MERGE INTO delta.`{target}` t USING {using} "
                      f"{CLAUSES}")
    assert table_rows(spark, target) == MERGED


@pytest.mark.parametrize("using", ["src_named s", "(SELECT * FROM src_named WHERE id > 1) s"])
def test_a_delta_table_by_name_is_a_merge_source(spark: SparkSession, tmp_path, using: str) -> None:
    target, source = _tables(spark, tmp_path)
    dvlake.sql(spark, f"CREATE TABLE src_named USING delta LOCATION '{source}'")
    try:
        dvlake.sql(spark, f"MERGE INTO delta.`{target}` t USING {using} {CLAUSES}")
        assert table_rows(spark, target) == MERGED
        dvlake.sql(spark, f"WITH c AS (SELECT * FROM src_named) MERGE INTO delta.`{target}` t USING c s "
                          "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v + 1")
        assert table_rows(spark, target) == [(1, 10), (2, 201), (3, 30), (4, 401)]
    finally:
        dvlake.sql(spark, "DROP TABLE IF EXISTS src_named")
