"""How DML statements resolve the names they assign (issue 40, items 4 and 5 of its list), one rule per test. Names
resolve before anything is written, so each rule runs in one mode, deletion vectors or copy-on-write (both are used):

- ``spark.sql.caseSensitive=true``: UPDATE SET, MERGE SET and INSERT column names match the table's with case
  (delta-spark: ``UNRESOLVED_COLUMN.WITH_SUGGESTION``; MERGE: ``DELTA_MERGE_UNRESOLVED_EXPRESSION``); false, the
  default, keeps matching them without case.
- A window, aggregate or generator function in an UPDATE SET value is refused (Spark's
  ``UNSUPPORTED_EXPR_FOR_OPERATOR``, as delta-spark's ``Negative case`` tests): a generator once turned one
  updated row into two, a window numbered rows by how the scan was cut.
- A SET column qualified by the target's name (``db.tab.col``, ``tab.col``, ``delta.`/path`.col``) or its alias
  updates that column.
Rows are our own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import (
    AggregationNotSupportedError,
    DeltaSqlError,
    DvlakeError,
    MergeUnresolvedExpressionError,
    UnresolvedAssignmentError,
)
from tests.helpers import table_rows

ROWS = [("a", 1, 2), ("b", 2, 3), ("c", 3, 4)]


def _table(spark: SparkSession, path: str, dvs: str) -> str:
    dvlake.write(spark.createDataFrame(ROWS, "t string, s int, c int").repartition(2), path,
                 properties={"delta.enableDeletionVectors": dvs})
    return path


@pytest.fixture
def case_sensitive(spark: SparkSession) -> Iterator[None]:
    spark.conf.set("spark.sql.caseSensitive", "true")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.caseSensitive")


def _refused(spark: SparkSession, path: str, error: type[DvlakeError], error_class: str, statement: str) -> str:
    before = table_rows(spark, path)
    with pytest.raises(error) as info:
        dvlake.sql(spark, statement)
    assert info.value.getCondition() == error_class, str(info.value)
    assert table_rows(spark, path) == before
    return str(info.value)


def test_case_sensitive_names_must_match_the_tables_case(spark, tmp_path, case_sensitive):
    """Rule: with spark.sql.caseSensitive=true a SET column, a MERGE SET column, an INSERT column and a condition
    column that differ from the table's only in case do not resolve; nothing changes. (DVs.)"""
    path = _table(spark, str(tmp_path / "t"), "true")
    t = f"delta.`{path}`"
    message = _refused(spark, path, UnresolvedAssignmentError, "UNRESOLVED_COLUMN.WITH_SUGGESTION",
                       f"UPDATE {t} SET S = 1 WHERE t = 'a'")
    assert "`S`" in message and "`t`, `s`, `c`" in message
    _refused(spark, path, UnresolvedAssignmentError, "UNRESOLVED_COLUMN.WITH_SUGGESTION",
             f"UPDATE {t} SET S = 1, s = 2 WHERE s = 1")
    _refused(spark, path, MergeUnresolvedExpressionError, "DELTA_MERGE_UNRESOLVED_EXPRESSION",
             f"MERGE INTO {t} x USING (SELECT 'a' AS t) y ON x.t = y.t WHEN MATCHED THEN UPDATE SET x.S = 9")
    _refused(spark, path, DeltaSqlError, "UNRESOLVED_COLUMN.WITH_SUGGESTION",
             f"INSERT INTO {t} (T, s, c) VALUES ('z', 1, 1)")
    with pytest.raises(Exception, match="UNRESOLVED_COLUMN"):
        dvlake.sql(spark, f"UPDATE {t} SET s = 1 WHERE T = 'a'")
    # the table's own spelling works, and updates exactly the matched row
    assert dvlake.sql(spark, f"UPDATE {t} SET s = 10 WHERE t = 'a'").collect()[0][0] == 1
    dvlake.sql(spark, f"INSERT INTO {t} (t, s, c) VALUES ('z', 5, 6)")
    assert table_rows(spark, path) == [("a", 10, 2), ("b", 2, 3), ("c", 3, 4), ("z", 5, 6)]


def test_case_insensitive_names_match_without_case_by_default(spark, tmp_path):
    """Rule: by default (caseSensitive false) ``S`` names ``s``, and ``S`` with ``s`` in one SET is one column
    assigned twice (DELTA_CONFLICT_SET_COLUMN). (Copy-on-write.)"""
    path = _table(spark, str(tmp_path / "t"), "false")
    t = f"delta.`{path}`"
    assert dvlake.sql(spark, f"UPDATE {t} SET S = 7, T = 'x' WHERE T = 'b'").collect()[0][0] == 1
    _refused(spark, path, UnresolvedAssignmentError, "DELTA_CONFLICT_SET_COLUMN", f"UPDATE {t} SET S = 1, s = 2 WHERE s = 1")
    dvlake.sql(spark, f"MERGE INTO {t} x USING (SELECT 'c' AS t) y ON x.t = y.t WHEN MATCHED THEN UPDATE SET X.S = 9")
    dvlake.sql(spark, f"INSERT INTO {t} (T, S, C) VALUES ('z', 5, 6)")
    assert table_rows(spark, path) == [("a", 1, 2), ("c", 9, 4), ("x", 7, 3), ("z", 5, 6)]


def test_window_aggregate_and_generator_functions_in_update_set_are_refused(spark, tmp_path):
    """Rule: UPDATE SET takes a row expression only; a window, aggregate or generator function is Spark's
    UNSUPPORTED_EXPR_FOR_OPERATOR (delta-spark's message: "unsupported … Invalid expressions"), nothing changes.
    Each refusal comes before any write, on one table."""
    path = _table(spark, str(tmp_path / "t"), "false")
    for value in ["row_number() OVER (ORDER BY c)", "max(c)", "explode(array(1, 2))", "s + sum(c) OVER ()"]:
        message = _refused(spark, path, AggregationNotSupportedError, "UNSUPPORTED_EXPR_FOR_OPERATOR",
                           f"UPDATE delta.`{path}` SET s = {value} WHERE t = 'a'")
        assert "Invalid expressions" in message and value[:value.index("(")] in message, value


def test_a_generator_in_a_merge_assignment_is_refused(spark, tmp_path):
    """Rule: a generator in a MERGE clause value is refused like a window or aggregate function there."""
    path = _table(spark, str(tmp_path / "t"), "true")
    _refused(spark, path, AggregationNotSupportedError, "UNSUPPORTED_EXPR_FOR_OPERATOR",
             f"MERGE INTO delta.`{path}` x USING (SELECT 'a' AS t) y ON x.t = y.t "
             "WHEN MATCHED THEN UPDATE SET x.s = explode(array(1, 2))")


def test_set_columns_qualified_by_the_targets_name_or_alias(spark, tmp_path):
    """Rule: ``delta.`/path`.col`` and ``alias.col`` name the target's column ``col`` (they once failed with
    UNRESOLVED_COLUMN on ``delta``). (Copy-on-write.)"""
    path = _table(spark, str(tmp_path / "t"), "false")
    t = f"delta.`{path}`"
    assert dvlake.sql(spark, f"UPDATE {t} SET {t}.s = 5 WHERE t = 'a'").collect()[0][0] == 1
    assert dvlake.sql(spark, f"UPDATE {t} AS x SET x.s = 6, x.c = x.c + 1 WHERE x.t = 'b'").collect()[0][0] == 1
    dvlake.sql(spark, f"MERGE INTO {t} USING (SELECT 'c' AS k) y ON t = y.k WHEN MATCHED THEN UPDATE SET {t}.c = 0")
    assert table_rows(spark, path) == [("a", 5, 2), ("b", 6, 4), ("c", 3, 0)]


def test_set_columns_qualified_by_a_catalog_tables_name(spark, tmp_path):
    """Rule: ``UPDATE db.tab SET db.tab.col``, ``tab.col`` and ``spark_catalog.db.tab.col`` name ``col``."""
    spark.sql("CREATE DATABASE IF NOT EXISTS names_db")
    location = str(tmp_path / "tab")
    try:
        dvlake.sql(spark, f"CREATE TABLE names_db.tab (c1 int, c2 string) USING delta LOCATION '{location}'")
        dvlake.sql(spark, "INSERT INTO names_db.tab VALUES (1, 'x'), (2, 'y')")
        dvlake.sql(spark, "UPDATE names_db.tab SET names_db.tab.c1 = 7 WHERE c2 = 'x'")
        dvlake.sql(spark, "UPDATE names_db.tab SET tab.c1 = 8 WHERE c2 = 'y'")
        dvlake.sql(spark, "UPDATE names_db.tab SET spark_catalog.names_db.tab.c2 = 'z' WHERE c1 = 8")
        assert table_rows(spark, location) == [(7, "x"), (8, "z")]
    finally:
        spark.sql("DROP TABLE IF EXISTS names_db.tab")


def test_an_insert_whose_query_has_a_hint_runs(spark, tmp_path):
    """Rule: ``INSERT INTO t SELECT /*+ COALESCE(1) */ …`` runs as Spark runs it (it once failed to parse), the
    hint applied: one file added. (An append: deletion vectors do not enter.)"""
    path = _table(spark, str(tmp_path / "t"), "true")
    spark.createDataFrame([("x", 7, 8), ("y", 9, 10)], "t string, s int, c int").repartition(2) \
        .createOrReplaceTempView("names_hint_src")
    dvlake.sql(spark, f"INSERT INTO delta.`{path}` SELECT /*+ COALESCE(1) */ * FROM names_hint_src")
    assert table_rows(spark, path) == [*ROWS, ("x", 7, 8), ("y", 9, 10)]
    assert dvlake.DeltaTable.forPath(spark, path).history(1).collect()[0].operationMetrics["numFiles"] == "1"
