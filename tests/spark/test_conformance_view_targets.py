"""DELETE, UPDATE and MERGE whose target is a temporary view over a Delta table, by delta-spark's rules.

Rules checked (delta-spark: ``DeltaViewHelper``, ``DeltaFullTable`` and ``DeltaAnalysis``):

- A temporary view that is a plain scan of a Delta table, made in SQL (``CREATE TEMP VIEW``) or from a DataFrame
  (``createOrReplaceTempView``), and possibly wrapped in subquery aliases, is a valid DML target: the command changes
  the table, and only the rows the statement selects. Columns may be qualified by the view's name.
- A view that shows only some of the table's columns hides the others from the statement (``UNRESOLVED_COLUMN``).
- A view that filters the table's rows is refused (``DELTA_UNEXPECTED_PARTIAL_SCAN``) and nothing changes: the
  command would otherwise reach rows the view does not show.
- A view with a column the table does not have is refused (``DELTA_CANNOT_RESOLVE_COLUMN`` for UPDATE and
  copy-on-write DELETE, ``DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS`` for MERGE); DELETE with deletion vectors runs.
- Views that rename, reorder or compute columns (``SELECT value AS key, key AS value``) are targets too; every name
  is read through the view (``tests/spark/test_dml_views.py``), where delta-spark's file skipping reads the
  condition's names against the table (a layout-dependent answer dvlake does not copy).
- A view over an old version of the table is refused (``DELTA_FAILED_SCAN_WITH_HISTORICAL_VERSION``). A dvlake
  view keeps the version it was read at, so a view read before the table changed is such a view (delta-spark's views
  follow the table); after a command through the view, the view shows the command's effect.
"""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import UnsupportedDmlTargetError
from tests.helpers import table_rows

ROWS = [(2, 2), (1, 4), (1, 1), (0, 3)]


def _table(spark: SparkSession, path: str, dvs: bool) -> str:
    props = {"delta.enableDeletionVectors": "true" if dvs else "false"}
    dvlake.write(spark.createDataFrame(ROWS, "key int, value int").repartition(2), path, properties=props)
    return path



def _view_rows(spark: SparkSession, name: str) -> list[tuple[int, ...]]:
    return sorted(tuple(r) for r in spark.table(name).collect())


def _make_view(spark: SparkSession, path: str, how: str, select: str = "*", where: str = "") -> None:
    if how == "sql":
        dvlake.sql(spark, f"CREATE OR REPLACE TEMP VIEW v AS SELECT {select} FROM delta.`{path}` {where}")
    else:
        frame = dvlake.read(spark, path).selectExpr(*[c.strip() for c in select.split(",")])
        (frame.filter(where.replace("WHERE", "", 1)) if where else frame).createOrReplaceTempView("v")


@pytest.fixture(autouse=True)
def _drop_views(spark: SparkSession):
    yield
    for name in ("v", "src"):
        spark.catalog.dropTempView(name)


@pytest.mark.parametrize("dvs", [True, False])
@pytest.mark.parametrize("how", ["sql", "dataframe"])
def test_delete_through_a_plain_view_deletes_only_the_matching_rows(spark: SparkSession, tmp_path, how: str,
                                                                      dvs: bool) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs)
    _make_view(spark, path, how)
    out = dvlake.sql(spark, "DELETE FROM v WHERE key <= 1").collect()
    assert out[0][0] == 3
    assert table_rows(spark, path) == [(2, 2)]
    assert _view_rows(spark, "v") == [(2, 2)]  # the view reads the new version, as a delta-spark view does


@pytest.mark.parametrize("how", ["sql", "dataframe"])
def test_update_through_a_plain_view_with_view_qualified_names(spark: SparkSession, tmp_path, how: str) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _make_view(spark, path, how)
    dvlake.sql(spark, "UPDATE v SET value = key + value, key = key + 1 WHERE key >= 1")
    assert table_rows(spark, path) == [(0, 3), (2, 2), (2, 5), (3, 4)]
    dvlake.sql(spark, "UPDATE v SET v.value = -1 WHERE v.key = 3")
    assert table_rows(spark, path) == [(0, 3), (2, 2), (2, 5), (3, -1)]


@pytest.mark.parametrize("dvs", [True, False])
def test_merge_into_a_plain_view_changes_the_table(spark: SparkSession, tmp_path, dvs: bool) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs)
    _make_view(spark, path, "sql")
    spark.createDataFrame([(1, 4), (7, 8)], "a int, b int").createOrReplaceTempView("src")
    dvlake.sql(spark, "MERGE INTO v USING src ON src.a = v.key AND src.b = v.value "
                      "WHEN MATCHED THEN UPDATE SET v.value = src.b + 1 "
                      "WHEN NOT MATCHED THEN INSERT (key, value) VALUES (src.a, src.b)")
    assert table_rows(spark, path) == [(0, 3), (1, 1), (1, 5), (2, 2), (7, 8)]


def test_a_view_with_nested_subquery_aliases_is_a_plain_scan(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    dvlake.sql(spark, f"CREATE TEMP VIEW v AS SELECT * FROM (SELECT * FROM delta.`{path}` AS t1) AS t2")
    dvlake.sql(spark, "DELETE FROM v WHERE key >= 1 AND value < 3")
    assert table_rows(spark, path) == [(0, 3), (1, 4)]


def test_a_view_of_an_old_version_is_refused(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _make_view(spark, path, "dataframe")
    dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE key = 0")  # the view still shows (0, 3)
    dvlake.sql(spark, f"CREATE TEMP VIEW old AS SELECT * FROM delta.`{path}` VERSION AS OF 0")
    try:
        for name in ("v", "old"):
            with pytest.raises(UnsupportedDmlTargetError) as err:
                dvlake.sql(spark, f"DELETE FROM {name} WHERE value = 4")
            assert err.value.error_class == "DELTA_FAILED_SCAN_WITH_HISTORICAL_VERSION"
    finally:
        spark.catalog.dropTempView("old")
    assert table_rows(spark, path) == [(1, 1), (1, 4), (2, 2)]
    _make_view(spark, path, "dataframe")  # read again: a target again
    dvlake.sql(spark, "DELETE FROM v WHERE value = 4")
    assert table_rows(spark, path) == [(1, 1), (2, 2)]


@pytest.mark.parametrize("how", ["sql", "dataframe"])
@pytest.mark.parametrize("statement", ["DELETE FROM v WHERE key >= 0",
                                       "UPDATE v SET value = 0",
                                       "MERGE INTO v USING src ON src.a = v.key WHEN MATCHED THEN DELETE"])
def test_a_view_that_filters_rows_is_refused_and_nothing_changes(spark: SparkSession, tmp_path, how: str,
                                                                 statement: str) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _make_view(spark, path, how, where="WHERE value <> 4")
    spark.createDataFrame([(1, 0)], "a int, b int").createOrReplaceTempView("src")
    with pytest.raises(UnsupportedDmlTargetError) as err:
        dvlake.sql(spark, statement)
    assert err.value.error_class == "DELTA_UNEXPECTED_PARTIAL_SCAN"
    assert table_rows(spark, path) == sorted(ROWS)  # (1, 4), which the view hides, is untouched


def test_a_view_that_renames_columns_reads_names_through_the_view(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _make_view(spark, path, "sql", select="value AS key, key AS value")
    dvlake.sql(spark, "DELETE FROM v WHERE key >= 3 AND value < 3")  # the table's value >= 3 and key < 3
    assert table_rows(spark, path) == [(1, 1), (2, 2)]


@pytest.mark.parametrize(("statement", "error_class"), [
    ("UPDATE v SET value = 0", "DELTA_CANNOT_RESOLVE_COLUMN"),  # DELETE with DVs runs: test_dml_views
    ("MERGE INTO v USING src ON src.a = v.key WHEN MATCHED THEN DELETE", "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS")])
def test_a_view_with_a_column_the_table_lacks_is_refused(spark: SparkSession, tmp_path, statement: str,
                                                          error_class: str) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _make_view(spark, path, "sql", select="key, value, 1 AS one")
    spark.createDataFrame([(1, 0)], "a int, b int").createOrReplaceTempView("src")
    with pytest.raises(UnsupportedDmlTargetError) as err:
        dvlake.sql(spark, statement)
    assert err.value.error_class == error_class
    assert table_rows(spark, path) == sorted(ROWS)


def test_a_view_of_some_columns_hides_the_others(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _make_view(spark, path, "sql", select="key")
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN"):
        dvlake.sql(spark, "DELETE FROM v WHERE key >= 1 AND value < 3")
    assert table_rows(spark, path) == sorted(ROWS)
    dvlake.sql(spark, "DELETE FROM v WHERE key = 1")  # whole rows go, as through the table
    assert table_rows(spark, path) == [(0, 3), (2, 2)]
    assert _view_rows(spark, "v") == [(0,), (2,)]


def test_format_delta_reads_as_views(dspark: SparkSession, tmp_path) -> None:
    path = _table(dspark, str(tmp_path / "t"), dvs=True)
    dspark.read.format("delta").load(path).createOrReplaceTempView("v")
    dspark.sql("DELETE FROM v WHERE value = 1")
    assert table_rows(dspark, path) == [(0, 3), (1, 4), (2, 2)]
