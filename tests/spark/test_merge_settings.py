"""MERGE under delta-spark's internal settings, shaped as delta-spark's ``MergeIntoSuiteBase``/``MergeIntoSQLSuite``.

- ``merge.optimizeInsertOnlyMerge.enabled=false``: an insert-only MERGE runs the general path: the same rows; a
  target row matched by two source rows is ``DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE`` (the fast path
  lets it through); without deletion vectors every file with a matched row is rewritten (its rows copied).
- ``merge.failIfSourceChanged=true`` with ``merge.materializeSource=none``: a MERGE that reads its source twice over
  a nondeterministic source fails ("the source dataset is not deterministic"); insert-only MERGE reads it once and
  runs; the flag off (the default), it runs.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.config import MERGE_FAIL_IF_SOURCE_CHANGED, MERGE_INSERT_ONLY_FAST_PATH, MERGE_MATERIALIZE_SOURCE
from dvlake.errors import MultipleSourceRowMatchingTargetRowError, NondeterministicMergeSourceError
from dvlake.log.snapshot import Snapshot
from tests.helpers import table_rows

INSERT_ONLY = ("MERGE INTO delta.`{p}` t USING src s ON s.key = t.key "
               "WHEN NOT MATCHED THEN INSERT (key, value) VALUES (s.key, s.value)")


@pytest.fixture
def settings(spark: SparkSession):
    keys = (MERGE_INSERT_ONLY_FAST_PATH, MERGE_FAIL_IF_SOURCE_CHANGED, MERGE_MATERIALIZE_SOURCE)
    yield spark.conf
    for key in keys:
        spark.conf.unset(key)
    spark.catalog.dropTempView("src")


def _table(spark: SparkSession, path: str, rows: list[tuple[int, int]], dvs: bool) -> str:
    props = {"delta.enableDeletionVectors": "true" if dvs else "false"}
    dvlake.write(spark.createDataFrame(rows, "key int, value int").coalesce(1), path, properties=props)
    return path


def _metrics(path: str) -> dict[str, str]:
    return dict(Snapshot.load(path).history(1)[0]["operationMetrics"])


@pytest.mark.parametrize("dvs", [True, False])
def test_insert_only_merge_with_the_fast_path_off(spark: SparkSession, tmp_path, settings, dvs: bool) -> None:
    path = _table(spark, str(tmp_path / "t"), [(1, 1)], dvs)
    spark.createDataFrame([(1, 10), (3, 30)], "key int, value int").createOrReplaceTempView("src")
    settings.set(MERGE_INSERT_ONLY_FAST_PATH, "false")
    dvlake.sql(spark, INSERT_ONLY.format(p=path))
    assert table_rows(spark, path) == [(1, 1), (3, 30)]
    m = _metrics(path)
    assert (m["numTargetRowsInserted"], m["numTargetRowsUpdated"], m["numTargetRowsDeleted"]) == ("1", "0", "0")
    # delta-spark's general path rewrites the file whose row matched unless DVs are on
    assert (m["numTargetFilesRemoved"], m["numTargetRowsCopied"]) == (("0", "0") if dvs else ("1", "1"))


def test_insert_only_merge_with_the_fast_path_on_rewrites_nothing(spark: SparkSession, tmp_path, settings) -> None:
    path = _table(spark, str(tmp_path / "t"), [(1, 1)], dvs=False)
    spark.createDataFrame([(1, 10), (3, 30)], "key int, value int").createOrReplaceTempView("src")
    dvlake.sql(spark, INSERT_ONLY.format(p=path))
    assert table_rows(spark, path) == [(1, 1), (3, 30)]
    assert (_metrics(path)["numTargetFilesRemoved"], _metrics(path)["numTargetRowsCopied"]) == ("0", "0")


# The multiple-match check comes before any write: each condition runs once, one with DVs, one with copy-on-write.
@pytest.mark.parametrize(("condition", "dvs"), [("", True), ("AND s.value = 20", False)],
                         ids=["unconditional-dv", "conditional-copy_on_write"])
def test_insert_only_merge_with_multiple_matches_fails_with_the_fast_path_off(
        spark: SparkSession, tmp_path, settings, dvs: bool, condition: str) -> None:
    path = _table(spark, str(tmp_path / "t"), [(1, 1)], dvs)
    spark.createDataFrame([(1, 10), (1, 100), (2, 20), (2, 200)], "key int, value int").createOrReplaceTempView("src")
    statement = INSERT_ONLY.replace("WHEN NOT MATCHED", f"WHEN NOT MATCHED {condition}").format(p=path)
    settings.set(MERGE_INSERT_ONLY_FAST_PATH, "false")
    with pytest.raises(MultipleSourceRowMatchingTargetRowError):
        dvlake.sql(spark, statement)
    assert table_rows(spark, path) == [(1, 1)]
    settings.set(MERGE_INSERT_ONLY_FAST_PATH, "true")
    dvlake.sql(spark, statement)
    assert table_rows(spark, path) == ([(1, 1), (2, 20)] if condition else [(1, 1), (2, 20), (2, 200)])


NONDETERMINISTIC = "SELECT CAST(id AS INT) AS key, CAST(id AS INT) AS value FROM range(1, 5) WHERE rand() < 2"
UPSERT = ("MERGE INTO delta.`{p}` t USING ({src}) s ON s.key = t.key WHEN MATCHED THEN UPDATE SET value = s.value "
          "WHEN NOT MATCHED THEN INSERT (key, value) VALUES (s.key, s.value)")


def test_nondeterministic_source_fails_with_the_flag_on(spark: SparkSession, tmp_path, settings) -> None:
    path = _table(spark, str(tmp_path / "t"), [(1, 0), (3, 0)], dvs=True)
    settings.set(MERGE_MATERIALIZE_SOURCE, "none")
    settings.set(MERGE_FAIL_IF_SOURCE_CHANGED, "true")
    with pytest.raises(NondeterministicMergeSourceError, match="source dataset is not deterministic"):
        dvlake.sql(spark, UPSERT.format(p=path, src=NONDETERMINISTIC))
    assert table_rows(spark, path) == [(1, 0), (3, 0)]
    dvlake.sql(spark, INSERT_ONLY.replace("src s", f"({NONDETERMINISTIC}) s").format(p=path))  # read once: runs
    assert table_rows(spark, path) == [(1, 0), (2, 2), (3, 0), (4, 4)]


@pytest.mark.parametrize(("flag", "mode"), [("false", "none"), ("true", "auto")])
def test_nondeterministic_source_runs_with_the_flag_off_or_materialized(spark: SparkSession, tmp_path, settings,
                                                                         flag: str, mode: str) -> None:
    path = _table(spark, str(tmp_path / "t"), [(1, 0), (3, 0)], dvs=True)
    settings.set(MERGE_MATERIALIZE_SOURCE, mode)
    settings.set(MERGE_FAIL_IF_SOURCE_CHANGED, flag)
    dvlake.sql(spark, UPSERT.format(p=path, src=NONDETERMINISTIC))
    assert table_rows(spark, path) == [(1, 1), (2, 2), (3, 3), (4, 4)]
