"""delta-spark's DML rules that once gave wrong data in dvlake (the DML-semantics issue), one rule per test.

- UPDATE/MERGE conditions may not hold subqueries (DELTA_UNSUPPORTED_SUBQUERY); DELETE runs them (a correlated
  EXISTS once deleted every row; ``test_delete_subqueries.py`` checks each shape). A Column condition counts too:
  its rendering is not SQL, so Spark's analyzer decides (a Column subquery once reached Spark unrefused).
- A source row that matched a target row never takes a NOT MATCHED clause, even when another source row
  matching the same target row is the one an unconditional WHEN MATCHED THEN DELETE acts on.
- One UPDATE may not assign a column twice (DELTA_CONFLICT_SET_COLUMN); it once kept the last value.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.config import MERGE_DVS_PERSISTENT
from dvlake.errors import UnresolvedAssignmentError, UnsupportedSubqueryError
from tests.helpers import DV_PROPS, table_rows


def _table(spark: SparkSession, path: str) -> str:
    dvlake.write(spark.createDataFrame([(i, i % 3, i * 10) for i in range(12)], "c long, g long, z long").repartition(3),
                 path, properties=DV_PROPS)
    return path



def test_delete_with_a_correlated_exists_deletes_the_matching_rows_only(spark: SparkSession, tmp_path) -> None:
    """A correlated EXISTS once deleted every row (then refused); it now runs as in delta-spark: only the rows it
    selects go. UPDATE keeps refusing a subquery in its condition."""
    path = _table(spark, str(tmp_path / "t"))
    spark.createDataFrame([(1,), (5,)], "c long").createOrReplaceTempView("source_rule")
    before = table_rows(spark, path)
    with pytest.raises(UnsupportedSubqueryError):
        DeltaTable.forPath(spark, path).update("c IN (SELECT c FROM source_rule)", {"z": "0"})
    dvlake.sql(spark, f"DELETE FROM delta.`{path}` t WHERE EXISTS (SELECT 1 FROM source_rule WHERE t.c = source_rule.c)")
    assert table_rows(spark, path) == [r for r in before if r[0] not in (1, 5)]
    DeltaTable.forPath(spark, path).delete("c IN (SELECT c + 1 FROM source_rule)")
    assert table_rows(spark, path) == [r for r in before if r[0] not in (1, 2, 5, 6)]


def test_merge_conditions_with_subqueries_are_refused(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"))
    src = spark.createDataFrame([(1, 100)], "c long, z long")
    with pytest.raises(UnsupportedSubqueryError):
        (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.c = s.c")
         .whenMatchedUpdate("s.z > (SELECT 1)", {"z": "s.z"}).execute())


def test_update_and_merge_refuse_column_conditions_with_subqueries(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"))
    other = spark.createDataFrame([(1,), (5,)], "c long")
    before = table_rows(spark, path)
    dt = DeltaTable.forPath(spark, path)
    conditions = {"IN": F.col("c").isin(other.select("c")), "scalar": F.col("c") == other.select(F.max("c")).scalar(),
                  "EXISTS": other.where(F.col("c") > 3).exists()}
    for name, condition in conditions.items():
        with pytest.raises(UnsupportedSubqueryError, match="UPDATE") as err:
            dt.update(condition, {"z": "0"})
        assert err.value.error_class == "DELTA_UNSUPPORTED_SUBQUERY", name
    src = spark.createDataFrame([(1, 100)], "c long, z long").alias("s")
    with pytest.raises(UnsupportedSubqueryError, match="search condition of MERGE"):
        dt.alias("t").merge(src, (F.col("t.c") == F.col("s.c")) & conditions["EXISTS"]).whenMatchedDelete().execute()
    with pytest.raises(UnsupportedSubqueryError, match="DELETE condition of MERGE"):
        dt.alias("t").merge(src, "t.c = s.c").whenMatchedDelete(F.col("t.z") > other.select(F.max("c")).scalar()).execute()
    assert table_rows(spark, path) == before


@pytest.mark.parametrize("dvs", ["true", "false"])
def test_a_matched_source_row_is_never_inserted(spark: SparkSession, tmp_path, dvs: str) -> None:
    path = _table(spark, str(tmp_path / "t"))
    source = spark.createDataFrame([(4, 1), (4, 2), (100, 3)], "c long, z long")  # two rows match target c = 4
    spark.conf.set(MERGE_DVS_PERSISTENT, dvs)
    try:
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.c = s.c")
         .whenMatchedDelete().whenNotMatchedInsert(values={"c": "s.c", "g": "-1", "z": "s.z"}).execute())
    finally:
        spark.conf.unset(MERGE_DVS_PERSISTENT)
    expected = sorted([(i, i % 3, i * 10) for i in range(12) if i != 4] + [(100, -1, 3)])
    assert table_rows(spark, path) == expected


def test_assigning_a_column_twice_is_refused(spark: SparkSession, tmp_path) -> None:
    path = _table(spark, str(tmp_path / "t"))
    before = table_rows(spark, path)
    with pytest.raises(UnresolvedAssignmentError) as err:
        dvlake.sql(spark, f"UPDATE delta.`{path}` SET z = 30, z = 40 WHERE c = 1")
    assert err.value.error_class == "DELTA_CONFLICT_SET_COLUMN"
    with pytest.raises(UnresolvedAssignmentError, match="DELTA_CONFLICT_SET_COLUMN"):
        DeltaTable.forPath(spark, path).update("c = 1", {"z": "30", "Z": "40"})
    assert table_rows(spark, path) == before


def test_every_text_dml_takes_as_plain_is_what_sparks_analyzer_says(spark: SparkSession) -> None:
    """DML skips the analyzer's determinism, subquery, aggregate and window probes for plain condition texts
    (``log.condition.plain_row_expression``); the analyzer, asked about each of those texts, must agree."""
    from dvlake.commands.dml.checks import PLAIN, expression_kind
    from tests.unit.test_plain_expressions import PLAIN as TEXTS

    probe = spark.createDataFrame([], "id long, a long, b long, x long, `weird col` string, arr array<int>, "
                                      "s struct<x: struct<y: int>>").alias("t")
    checked = 0
    for text in TEXTS:
        if "s.id" in text:
            continue  # two aliases: MERGE's join condition (its own tests cover it)
        assert expression_kind(probe, F.expr(text)) == PLAIN, text
        checked += 1
    assert checked >= len(TEXTS) - 1
