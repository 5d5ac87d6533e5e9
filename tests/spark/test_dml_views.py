"""DELETE, UPDATE and MERGE through temporary views that rename, reorder, drop or compute columns.

Shaped as delta-spark's temp-view tests (``DeleteSuiteBase``/``UpdateSuiteBase``/``MergeIntoSuiteBase``: a two-row
table ``(0, 3), (1, 2)`` in two files, a SQL view and a Dataset view, DV and copy-on-write modes, each kind of view
in one mode); expected rows are what the view shows when every name is read through it. Where delta-spark's own
expectations differ (its file skipping reads the condition's names against the table), the statements below are
chosen so that both readings are told apart: a test passes only if dvlake reads names through the view.
"""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import UnresolvedAssignmentError, UnsupportedDmlTargetError
from tests.helpers import table_rows

ROWS = [(0, 3), (1, 2)]
SWAP = "value AS key, key AS value"
#: Names are read through the view before anything is written, and the write does not depend on how the view was
#: made: each kind of view runs once, one with DVs and the other with copy-on-write.
VIEW_MODES = pytest.mark.parametrize(("how", "dvs"), [("sql", True), ("dataset", False)],
                                     ids=["sql-dv", "dataset-copy_on_write"])


@pytest.fixture(autouse=True)
def _drop_views(spark: SparkSession):
    yield
    for name in ("v", "src"):
        spark.catalog.dropTempView(name)


def _table(spark: SparkSession, path: str, dvs: bool) -> str:
    props = {"delta.enableDeletionVectors": "true" if dvs else "false"}
    dvlake.write(spark.createDataFrame(ROWS, "key int, value int").repartition(2), path, properties=props)
    return path


def _view(spark: SparkSession, path: str, how: str, select: str) -> None:
    if how == "sql":
        dvlake.sql(spark, f"CREATE OR REPLACE TEMP VIEW v AS SELECT {select} FROM delta.`{path}`")
    else:
        dvlake.read(spark, path).selectExpr(*[c.strip() for c in select.split(",")]).createOrReplaceTempView("v")


def _view_rows(spark: SparkSession) -> list[tuple[int, ...]]:
    return sorted(tuple(r) for r in spark.table("v").collect())


@VIEW_MODES
def test_delete_through_a_view_that_swaps_columns_reads_the_view(spark: SparkSession, tmp_path, how: str,
                                                                  dvs: bool) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs)
    _view(spark, path, how, SWAP)
    assert _view_rows(spark) == [(2, 1), (3, 0)]
    out = dvlake.sql(spark, "DELETE FROM v WHERE key >= 3").collect()  # the view's key: the table's value
    assert out[0][0] == 1
    assert table_rows(spark, path) == [(1, 2)]
    assert _view_rows(spark) == [(2, 1)]
    dvlake.sql(spark, "DELETE FROM v AS w WHERE w.value = 1 AND key < 3")
    assert table_rows(spark, path) == []


@VIEW_MODES
def test_update_through_a_view_that_swaps_columns(spark: SparkSession, tmp_path, how: str, dvs: bool) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs)
    _view(spark, path, how, SWAP)
    dvlake.sql(spark, "UPDATE v SET value = key + value, key = key + 1 WHERE key >= 1 AND value < 3")
    assert _view_rows(spark) == [(3, 3), (4, 3)]
    assert table_rows(spark, path) == [(3, 3), (3, 4)]
    dvlake.sql(spark, "UPDATE v SET v.key = -1 WHERE v.value = 3 AND key = 4")
    assert table_rows(spark, path) == [(3, -1), (3, 3)]


def test_a_view_that_renames_and_drops_columns_hides_the_others(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=False)  # copy-on-write; the DV twins are the swapping views
    _view(spark, path, "sql", "value AS v2")
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN"):
        dvlake.sql(spark, "DELETE FROM v WHERE key = 1")  # the table's key, which the view hides
    with pytest.raises(UnresolvedAssignmentError):
        dvlake.sql(spark, "UPDATE v SET value = 1")
    assert table_rows(spark, path) == ROWS
    dvlake.sql(spark, "UPDATE v SET v2 = v2 * 10 WHERE v2 = 2")
    assert table_rows(spark, path) == [(0, 3), (1, 20)]
    assert _view_rows(spark) == [(3,), (20,)]


@VIEW_MODES
def test_merge_into_a_view_that_swaps_columns(spark: SparkSession, tmp_path, how: str, dvs: bool) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs)
    _view(spark, path, how, SWAP)
    spark.sql("CREATE TEMP VIEW src AS SELECT * FROM VALUES (3, 0), (5, 6) AS t(a, b)")
    dvlake.sql(spark, "MERGE INTO v USING src ON src.a = v.key AND src.b = v.value "
                      "WHEN MATCHED THEN UPDATE SET v.value = src.b + 1 "
                      "WHEN NOT MATCHED THEN INSERT (v.key, v.value) VALUES (src.a, src.b)")
    assert _view_rows(spark) == [(2, 1), (3, 1), (5, 6)]  # view (3, 0) matched; (5, 6) inserted as the view shows it
    assert table_rows(spark, path) == [(1, 2), (1, 3), (6, 5)]


def test_merge_star_clauses_through_a_view_use_the_views_columns(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _view(spark, path, "dataset", "value AS k")  # the table's key is not shown: inserted rows get null there
    spark.sql("CREATE TEMP VIEW src AS SELECT * FROM VALUES (3, 'x'), (7, 'y') AS t(k, other)")
    dvlake.sql(spark, "MERGE INTO v USING src AS s ON s.k = v.k "
                      "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    rows = [tuple(r) for r in dvlake.read(spark, path).collect()]
    assert sorted(rows, key=str) == [(0, 3), (1, 2), (None, 7)]
    assert _view_rows(spark) == [(2,), (3,), (7,)]


@pytest.mark.parametrize("how", ["sql", "dataset"])
def test_superset_columns_view_deletes_with_deletion_vectors(spark: SparkSession, tmp_path, how: str) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _view(spark, path, how, "key, value, 1, key + 1 AS k1")
    dvlake.sql(spark, "DELETE FROM v WHERE key >= 1 AND value < 3")
    assert _view_rows(spark) == [(0, 3, 1, 1)]
    dvlake.sql(spark, "DELETE FROM v WHERE k1 = 1")  # a computed column, read as the view computes it
    assert table_rows(spark, path) == []


@pytest.mark.parametrize(("statement", "error_class"), [
    ("DELETE FROM v WHERE key >= 1 AND value < 3", "DELTA_CANNOT_RESOLVE_COLUMN"),
    ("UPDATE v SET value = key + value WHERE key >= 1", "DELTA_CANNOT_RESOLVE_COLUMN"),
    ("MERGE INTO v USING src ON src.a = v.key WHEN MATCHED THEN DELETE", "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS")])
def test_superset_columns_view_is_refused_where_delta_spark_refuses_it(spark: SparkSession, tmp_path, statement: str,
                                                                       error_class: str) -> None:
    """Copy-on-write DELETE, any UPDATE and MERGE would write the computed column back (delta-spark: ``Can't resolve
    column 1 in root`` / ``DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS``)."""
    path = _table(spark, str(tmp_path / "t"), dvs=not statement.startswith("DELETE"))
    _view(spark, path, "sql", "key, value, 1")
    spark.sql("CREATE TEMP VIEW src AS SELECT * FROM VALUES (1, 2) AS t(a, b)")
    with pytest.raises(UnsupportedDmlTargetError) as err:
        dvlake.sql(spark, statement)
    assert err.value.error_class == error_class
    assert table_rows(spark, path) == ROWS


def test_views_with_joins_or_aggregates_are_refused(spark: SparkSession, tmp_path) -> None:
    """DELETE, UPDATE and MERGE through a view with a join or an aggregate: each refused, the table unchanged (one
    table for all six: a refusal writes nothing)."""
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    spark.sql("CREATE TEMP VIEW src AS SELECT * FROM VALUES (1, 2) AS t(a, b)")
    for select in ["t.key, t.value FROM delta.`{p}` t JOIN delta.`{p}` u ON t.key = u.key",
                   "key, max(value) AS value FROM delta.`{p}` GROUP BY key"]:
        dvlake.sql(spark, f"CREATE OR REPLACE TEMP VIEW v AS SELECT {select.format(p=path)}")
        for statement in ["DELETE FROM v WHERE key = 1", "UPDATE v SET value = 0",
                          "MERGE INTO v USING src ON src.a = v.key WHEN MATCHED THEN DELETE"]:
            with pytest.raises(UnsupportedDmlTargetError) as err:
                dvlake.sql(spark, statement)
            assert err.value.error_class == "DELTA_UNSUPPORTED_SOURCE", (select, statement)
            assert table_rows(spark, path) == ROWS


@pytest.mark.parametrize(("source", "statement", "error", "message"), [
    ("(3, 0) AS t(key, b)", "MERGE INTO v USING src ON key = 3 WHEN MATCHED THEN DELETE", AnalysisException,
     "AMBIGUOUS_REFERENCE"),  # the view's key and the source's
    ("(1, 2) AS t(a, b)", "DELETE FROM v WHERE key IN (SELECT a FROM src)", UnsupportedDmlTargetError, "subquery")])
def test_renaming_view_refusals_change_nothing(spark: SparkSession, tmp_path, source: str, statement: str,
                                               error: type[Exception], message: str) -> None:
    path = _table(spark, str(tmp_path / "t"), dvs=True)
    _view(spark, path, "sql", SWAP)
    spark.sql(f"CREATE TEMP VIEW src AS SELECT * FROM VALUES {source}")
    with pytest.raises(error, match=message):
        dvlake.sql(spark, statement)
    assert table_rows(spark, path) == ROWS
