"""DELETE, one delta-spark rule per test (the docstring states it), with deletion vectors and with copy-on-write.

Covered elsewhere, not repeated here: a partition-only condition removes whole files and writes no DV, NULL
conditions delete nothing, deleting every row of a file removes it (test_delete.py); subqueries and
non-deterministic conditions are refused (test_dml_rules.py, test_merge_rules.py); views as targets
(test_conformance_view_targets.py). Rows are our own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.commands.common import SKIP_EMPTY_COMMITS_CONF
from dvlake.errors import (
    CheckConstraintViolationError,
    DeltaSqlParseError,
    DvlakeError,
    InvalidArgumentError,
)
from tests.helpers import table_rows

MODES = pytest.mark.parametrize("dvs", ["true", "false"], ids=["dv", "copy_on_write"])
ROWS = [(i, i % 4, i * 10) for i in range(16)]


def _table(spark: SparkSession, path: str, dvs: str, partitioned: bool = False) -> str:
    dvlake.write(spark.createDataFrame(ROWS, "id long, p long, v long").repartition(2), path,
                 partitionBy=["p"] if partitioned else None, properties={"delta.enableDeletionVectors": dvs})
    return path



def _refused(spark: SparkSession, path: str, error: type[DvlakeError], error_class: str, sql_state: str, run) -> None:
    before = table_rows(spark, path)
    version = DeltaTable.forPath(spark, path).history(1).collect()[0].version
    with pytest.raises(error) as info:
        run()
    assert (info.value.getCondition(), info.value.getSqlState()) == (error_class, sql_state), str(info.value)
    assert "__dvlake" not in str(info.value)
    assert table_rows(spark, path) == before
    assert DeltaTable.forPath(spark, path).history(1).collect()[0].version == version


@MODES
@pytest.mark.parametrize("partitioned", [False, True], ids=["rows", "partitions"])
def test_a_delete_that_matches_nothing_commits_only_when_empty_commits_are_recorded(spark, tmp_path, dvs, partitioned):
    """Rule: DELETE commits through ``commitIfNeeded``: a DELETE that removes nothing writes no version by default,
    and writes an empty DELETE commit with zero counts when ``skipRecordingEmptyCommits`` is false."""
    path = _table(spark, str(tmp_path / "t"), dvs, partitioned)
    dt = DeltaTable.forPath(spark, path)
    condition = "p = 9" if partitioned else "id > 100"
    assert dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE {condition}").collect()[0][0] == 0
    assert dt.history().count() == 1
    spark.conf.set(SKIP_EMPTY_COMMITS_CONF, "false")
    try:
        dt.delete(condition)
    finally:
        spark.conf.unset(SKIP_EMPTY_COMMITS_CONF)
    last = dt.history(1).collect()[0]
    assert (last.version, last.operation) == (1, "DELETE")
    assert last.operationParameters["predicate"] == f'["{condition}"]'
    metrics = last.operationMetrics
    assert {k: metrics[k] for k in ("numDeletedRows", "numRemovedFiles", "numAddedFiles", "numCopiedRows")} == \
        {"numDeletedRows": "0", "numRemovedFiles": "0", "numAddedFiles": "0", "numCopiedRows": "0"}
    assert table_rows(spark, path) == sorted(ROWS)


def test_a_subquery_reading_a_delta_table_runs_as_in_delta_spark(spark, tmp_path):
    """Rule: a DELETE condition may hold a subquery (delta-spark runs it; UPDATE and MERGE refuse one), also one
    reading a Delta table: exactly the rows it selects are deleted."""
    path = _table(spark, str(tmp_path / "t"), "true")
    other = str(tmp_path / "other")
    dvlake.write(spark.createDataFrame([(3,), (7,), (99,)], "id long"), other)
    dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE id IN (SELECT id FROM delta.`{other}`)")
    assert table_rows(spark, path) == sorted(r for r in ROWS if r[0] not in (3, 7))


@pytest.mark.parametrize("statement", ["DELETE FROM delta.`{p}` VERSION AS OF 0 WHERE id = 1",
                                       "DELETE FROM delta.`{p}` t USING delta.`{p}` s WHERE t.id = s.id"])
def test_statements_spark_cannot_parse_are_syntax_errors(spark, tmp_path, statement):
    """Rule: a DELETE of an old version, or DELETE … USING, is not Spark SQL: PARSE_SYNTAX_ERROR (42601)."""
    path = _table(spark, str(tmp_path / "t"), "true")
    _refused(spark, path, DeltaSqlParseError, "PARSE_SYNTAX_ERROR", "42601",
             lambda: dvlake.sql(spark, statement.format(p=path)))


def _add_rule(path: str, rule: str) -> None:
    """Commit version 1 as delta-spark records the rule: a CHECK constraint (``delta.constraints.<name>`` in the
    configuration, writer feature ``checkConstraints``) or a generated column (``delta.generationExpression`` in
    the column's metadata, writer feature ``generatedColumns``)."""
    log = Path(path) / "_delta_log"
    actions = [json.loads(line) for line in (log / f"{0:020d}.json").read_text().splitlines() if line.strip()]
    protocol = next(a for a in actions if "protocol" in a)["protocol"]
    metadata = next(a for a in actions if "metaData" in a)["metaData"]
    if rule == "check_constraint":
        feature = "checkConstraints"
        metadata["configuration"]["delta.constraints.positive"] = "v >= 0"
    else:
        feature = "generatedColumns"
        schema = json.loads(metadata["schemaString"])
        next(f for f in schema["fields"] if f["name"] == "v")["metadata"]["delta.generationExpression"] = "id * 10"
        metadata["schemaString"] = json.dumps(schema)
    protocol["writerFeatures"] = sorted({*protocol.get("writerFeatures", []), feature})
    (log / f"{1:020d}.json").write_text(json.dumps({"protocol": protocol}) + "\n" + json.dumps({"metaData": metadata})
                                       + "\n")


@pytest.mark.parametrize("rule", ["generated_column"])
def test_a_merge_breaking_a_rule_of_the_table_is_refused_unchanged(spark, tmp_path, rule):
    """Rule: delta-spark checks generated columns on every row MERGE writes: an inserted ``v`` other than
    ``id * 10`` fails the MERGE with DELTA_VIOLATE_CONSTRAINT_WITH_VALUES (23001) before any change. (CHECK
    constraints: tests/spark/test_constraints.py; generated columns in every command:
    tests/spark/test_generated_columns.py.)"""
    path = _table(spark, str(tmp_path / "t"), "true")
    _add_rule(path, rule)
    dt = DeltaTable.forPath(spark, path)
    source = spark.range(1).selectExpr("id + 1000 AS id", "0 AS p", "7 AS v").alias("s")
    _refused(spark, path, CheckConstraintViolationError, "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", "23001",
             lambda: dt.alias("t").merge(source, "t.id = s.id").whenNotMatchedInsertAll().execute())


def test_a_condition_on_a_column_the_table_lacks_is_sparks_unresolved_column(spark, tmp_path):
    """Rule: a DELETE condition is resolved by Spark's analyzer against the table's columns: an unknown name is
    UNRESOLVED_COLUMN.WITH_SUGGESTION (42703), suggesting only the table's columns."""
    path = _table(spark, str(tmp_path / "t"), "true")
    _refused(spark, path, InvalidArgumentError, "UNRESOLVED_COLUMN.WITH_SUGGESTION", "42703",
             lambda: DeltaTable.forPath(spark, path).delete("nope = 1"))
