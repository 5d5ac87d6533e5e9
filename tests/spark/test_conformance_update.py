"""UPDATE, one delta-spark rule per test (the docstring states it), with deletion vectors and with copy-on-write.

Covered elsewhere, not repeated here: updating a partition column moves the rows and a partition-only condition
rewrites whole files (test_update.py); struct assignment, nested fields and store-assignment casts
(test_dml_struct_rules.py); SET of one column twice and subqueries in the condition (test_dml_rules.py);
CHECK constraints (test_conformance_delete.py). Rows are our own.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.commands.common import SKIP_EMPTY_COMMITS_CONF
from dvlake.errors import DeltaSqlParseError, DvlakeError, UnresolvedAssignmentError

MODES = pytest.mark.parametrize("dvs", ["true", "false"], ids=["dv", "copy_on_write"])
ROWS = [(i, i % 3, (i, f"n{i}")) for i in range(9)]
SCHEMA = "id long, g long, s struct<a: long, b: string>"


def _table(spark: SparkSession, path: str, dvs: str) -> str:
    dvlake.write(spark.createDataFrame(ROWS, SCHEMA).repartition(2), path,
                 properties={"delta.enableDeletionVectors": dvs})
    return path


def _rows(spark: SparkSession, path: str) -> list[tuple]:
    return sorted((r.id, r.g, tuple(r.s)) for r in dvlake.read(spark, path).collect())


def _refused(spark: SparkSession, path: str, error: type[DvlakeError], error_class: str, sql_state: str, run,
             *texts: str) -> None:
    before = _rows(spark, path)
    with pytest.raises(error) as info:
        run()
    message = str(info.value)
    assert (info.value.getCondition(), info.value.getSqlState()) == (error_class, sql_state), message
    assert all(t in message for t in texts), message
    assert _rows(spark, path) == before
    assert DeltaTable.forPath(spark, path).history().count() == 1


@MODES
def test_an_update_that_matches_nothing_commits_only_when_empty_commits_are_recorded(spark, tmp_path, dvs):
    """Rule: UPDATE commits through ``commitIfNeeded``: nothing matched means no new version by default, and an
    empty UPDATE commit with zero counts when ``skipRecordingEmptyCommits`` is false."""
    path = _table(spark, str(tmp_path / "t"), dvs)
    dt = DeltaTable.forPath(spark, path)
    assert dvlake.sql(spark, f"UPDATE delta.`{path}` SET g = 7 WHERE id > 100").collect()[0][0] == 0
    assert dt.history().count() == 1
    spark.conf.set(SKIP_EMPTY_COMMITS_CONF, "false")
    try:
        dt.update("id > 100", {"g": "7"})
        dt.update("g = 5", {"g": "7"})  # a condition on a column without data skipping stats in play
    finally:
        spark.conf.unset(SKIP_EMPTY_COMMITS_CONF)
    history = dt.history().orderBy("version").collect()
    assert [r.operation for r in history] == ["WRITE", "UPDATE", "UPDATE"]
    for r in history[1:]:
        m = r.operationMetrics
        assert (m["numUpdatedRows"], m["numAddedFiles"], m["numRemovedFiles"]) == ("0", "0", "0")
    assert _rows(spark, path) == sorted((i, g, tuple(s)) for i, g, s in ROWS)


@pytest.mark.parametrize("form", ["python", "sql"])
def test_setting_a_column_the_table_lacks_is_sparks_unresolved_column(spark, tmp_path, form):
    """Rule: a SET column that is not in the table is Spark's UNRESOLVED_COLUMN.WITH_SUGGESTION (42703), as
    delta-spark reports it; a missing field of a struct column is FIELD_NOT_FOUND (42704). Nothing changes."""
    path = _table(spark, str(tmp_path / "t"), "true")
    dt = DeltaTable.forPath(spark, path)
    run = {"python": (lambda: dt.update("id = 1", {"nope": "1"}), lambda: dt.update("id = 1", {"s.c": "1"})),
           "sql": (lambda: dvlake.sql(spark, f"UPDATE delta.`{path}` SET nope = 1 WHERE id = 1"),
                   lambda: dvlake.sql(spark, f"UPDATE delta.`{path}` SET s.c = 1 WHERE id = 1"))}[form]
    _refused(spark, path, UnresolvedAssignmentError, "UNRESOLVED_COLUMN.WITH_SUGGESTION", "42703", run[0], "`nope`",
             "`id`, `g`, `s`")
    _refused(spark, path, UnresolvedAssignmentError, "FIELD_NOT_FOUND", "42704", run[1], "`c`", "`a`, `b`")


def test_update_from_is_a_syntax_error(spark, tmp_path):
    """Rule: UPDATE … FROM is not Spark SQL (PARSE_SYNTAX_ERROR, 42601); MERGE is the way to update from another
    table."""
    path = _table(spark, str(tmp_path / "t"), "true")
    _refused(spark, path, DeltaSqlParseError, "PARSE_SYNTAX_ERROR", "42601",
             lambda: dvlake.sql(spark, f"UPDATE delta.`{path}` t SET g = 0 FROM delta.`{path}` s WHERE t.id = s.id"),
             "MERGE")
