"""MERGE, one delta-spark rule per test (the docstring states it), with deletion vectors and with copy-on-write.

Name resolution, clause order and refusals of aggregates and non-deterministic conditions are in
test_merge_rules.py, struct and cast rules in test_dml_struct_rules.py, sources in test_conformance_merge_sources.py;
this file holds the rest. Rows are our own; expected rows are worked out by hand in each test.
"""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.commands.dml.merge.source import materializes
from dvlake.config import MERGE_MATERIALIZE_SOURCE
from dvlake.errors import (
    DeltaAnalysisException,
    DeltaSqlParseError,
    MultipleSourceRowMatchingTargetRowError,
    UnsupportedSubqueryError,
)
from tests.helpers import table_rows

MODES = pytest.mark.parametrize("dvs", ["true", "false"], ids=["dv", "copy_on_write"])


def _table(spark: SparkSession, tmp_path, dvs: str, rows: list[tuple[int, int]], files: int = 2) -> str:
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame(rows, "k long, v long").repartition(files), path,
                 properties={"delta.enableDeletionVectors": dvs})
    return path



# --- the source is read as one consistent set of rows --------------------------------------------------------


@pytest.fixture
def materialize_none(spark: SparkSession):
    spark.conf.set(MERGE_MATERIALIZE_SOURCE, "none")
    yield
    spark.conf.unset(MERGE_MATERIALIZE_SOURCE)


@MODES
def test_a_source_that_changes_between_reads_never_inserts_a_matched_key(spark, tmp_path, dvs, materialize_none):
    """Rule: every source row is matched or not matched once, against one reading of the source (delta-spark
    materializes a source it cannot prove deterministic). A Python UDF that draws a new key on every call is such
    a source; with ``materializeSource=none`` dvlake still materializes it, so no key is inserted next to the
    existing row it matched."""
    import random

    path = _table(spark, tmp_path, dvs, [(i, 0) for i in range(40)])
    draw = F.udf(lambda i: i if random.random() < 0.5 else i + 1000, "long")
    source = spark.range(40).select(draw("id").alias("k"), F.lit(1).cast("long").alias("v"))
    (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.k = s.k")
     .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute())
    rows = table_rows(spark, path)
    keys = [k for k, _ in rows]
    assert len(keys) == len(set(keys)), [k for k in keys if keys.count(k) > 1]
    assert {k for k in keys if k < 1000} == set(range(40))
    # each source row either updated its key or inserted key + 1000, never both: 40 decisions in all
    assert sum(1 for k, v in rows if k < 1000 and v == 1) + sum(1 for k in keys if k >= 1000) == 40


def test_none_is_honoured_only_for_sources_that_read_the_same_rows_every_time(spark, tmp_path, materialize_none):
    """Rule (dvlake's reading of delta-spark's ``merge.materializeSource``): ``none`` skips materializing only a
    deterministic plan of scans, projections and filters; anything else is materialized anyway."""
    path = _table(spark, tmp_path, "true", [(1, 1)])
    plain: list[DataFrame] = [spark.range(5), dvlake.read(spark, path).where("k > 0").select("k"),
                              spark.range(3).union(spark.range(2))]
    unsafe: list[DataFrame] = [spark.range(5).withColumn("r", F.rand()),
                               spark.range(5).withColumn("u", F.udf(lambda x: x, "long")("id")),
                               spark.range(5).groupBy((F.col("id") % 2).alias("g")).count(),
                               spark.range(5).repartition(3),
                               spark.range(5).join(spark.range(3), "id")]
    assert [materializes(spark, df) for df in plain] == [False] * len(plain)
    assert [materializes(spark, df) for df in unsafe] == [True] * len(unsafe)
    spark.conf.unset(MERGE_MATERIALIZE_SOURCE)
    assert all(materializes(spark, df) for df in plain)  # the default always materializes


# --- which source rows match, and how often -----------------------------------------------------------------


@MODES
def test_two_source_rows_matching_one_target_row_under_a_conditional_update_are_refused(spark, tmp_path, dvs):
    """Rule: when a target row matches several source rows, MERGE fails with
    DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE (SQLSTATE 21506) before writing, even if the clause
    condition holds for only one of them (the matching is decided by ON alone)."""
    path = _table(spark, tmp_path, dvs, [(1, 10), (2, 20), (3, 30)])
    source = spark.createDataFrame([(2, 1), (2, 2), (3, 3)], "k long, v long")
    with pytest.raises(MultipleSourceRowMatchingTargetRowError) as info:
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.k = s.k")
         .whenMatchedUpdate("s.v > 1", {"v": "s.v"}).execute())
    assert (info.value.getCondition(), info.value.getSqlState()) == \
        ("DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE", "21506")
    assert table_rows(spark, path) == [(1, 10), (2, 20), (3, 30)]
    assert DeltaTable.forPath(spark, path).history().count() == 1


@MODES
def test_an_insert_only_merge_inserts_every_unmatched_source_row_duplicates_included(spark, tmp_path, dvs):
    """Rule: with only WHEN NOT MATCHED clauses there is no target row to be ambiguous about, so duplicate source
    rows are all inserted (no DELTA_MULTIPLE_SOURCE_ROW… error), and matched ones are left alone."""
    path = _table(spark, tmp_path, dvs, [(1, 10), (2, 20)])
    source = spark.createDataFrame([(2, 0), (2, 0), (5, 50), (5, 50), (6, 60)], "k long, v long")
    out = (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.k = s.k")
           .whenNotMatchedInsertAll().execute().collect())
    assert tuple(out[0]) == (3, 0, 0, 3)
    assert table_rows(spark, path) == [(1, 10), (2, 20), (5, 50), (5, 50), (6, 60)]


@MODES
def test_null_safe_equality_in_on_matches_null_keys(spark, tmp_path, dvs):
    """Rule: ON is an ordinary Spark condition: with ``<=>`` a NULL key matches a NULL key (so it is updated, not
    inserted again), while ``=`` never matches NULL."""
    rows = [(None, 1), (1, 10)]
    path = _table(spark, tmp_path, dvs, rows)
    source = spark.createDataFrame([(None, 2), (1, 20)], "k long, v long")
    dt = DeltaTable.forPath(spark, path)
    dt.alias("t").merge(source.alias("s"), "t.k <=> s.k").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert sorted(dvlake.read(spark, path).collect(), key=lambda r: (r.k is not None, r.k)) == \
        [(None, 2), (1, 20)]
    dt.alias("t").merge(source.alias("s"), "t.k = s.k").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert sorted(dvlake.read(spark, path).collect(), key=lambda r: (r.k is not None, r.k, r.v)) == \
        [(None, 2), (None, 2), (1, 20)]


@MODES
@pytest.mark.parametrize("form", ["python", "sql"])
def test_a_table_merged_into_itself_matches_every_row_once(spark, tmp_path, dvs, form):
    """Rule: the source may be the target itself (read as of the version the MERGE starts from): every row matches
    exactly its own copy, so nothing is inserted and each row is updated once."""
    path = _table(spark, tmp_path, dvs, [(i, i) for i in range(6)])
    DeltaTable.forPath(spark, path).delete("k = 5")  # a deleted row must not come back through the source
    if form == "python":
        (DeltaTable.forPath(spark, path).alias("t").merge(dvlake.read(spark, path).alias("s"), "t.k = s.k")
         .whenMatchedUpdate(set={"v": "s.v * 10"}).whenNotMatchedInsertAll().execute())
    else:
        dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING delta.`{path}` s ON t.k = s.k "
                          "WHEN MATCHED THEN UPDATE SET v = s.v * 10 WHEN NOT MATCHED THEN INSERT *")
    assert table_rows(spark, path) == [(i, i * 10) for i in range(5)]


# --- refusals and their classes ---------------------------------------------------------------------------


def test_a_merge_without_when_clauses_is_refused(spark, tmp_path):
    """Rule: a MERGE needs at least one WHEN clause: the builder raises delta-spark's DELTA_MERGE_MISSING_WHEN, SQL
    Spark's parser error MERGE_WITHOUT_WHEN (both SQLSTATE 42601)."""
    path = _table(spark, tmp_path, "true", [(1, 10)])
    source = spark.createDataFrame([(1, 1)], "k long, v long")
    with pytest.raises(DeltaAnalysisException) as info:
        DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.k = s.k").execute()
    assert (info.value.getCondition(), info.value.getSqlState()) == ("DELTA_MERGE_MISSING_WHEN", "42601")
    source.createOrReplaceTempView("conformance_merge_src")
    with pytest.raises(DeltaSqlParseError) as parse:
        dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING conformance_merge_src s ON t.k = s.k")
    assert (parse.value.getCondition(), parse.value.getSqlState()) == ("MERGE_WITHOUT_WHEN", "42601")
    assert table_rows(spark, path) == [(1, 10)]


@pytest.mark.parametrize("where", ["ON t.k = s.k AND s.k IN (SELECT k FROM delta.`{p}`)",
                                   "ON t.k = s.k WHEN MATCHED AND EXISTS (SELECT 1 FROM delta.`{p}`)"])
def test_subqueries_in_merge_conditions_are_delta_sparks_class(spark, tmp_path, where):
    """Rule: no subquery in the ON condition or a clause condition (DELTA_UNSUPPORTED_SUBQUERY, 0AKDC), also when
    it reads a Delta table."""
    path = _table(spark, tmp_path, "true", [(1, 10)])
    spark.createDataFrame([(1, 1)], "k long, v long").createOrReplaceTempView("conformance_merge_src")
    tail = "" if "WHEN" in where else " WHEN MATCHED"
    with pytest.raises(UnsupportedSubqueryError) as info:
        dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING conformance_merge_src s {where.format(p=path)}{tail} "
                          "THEN DELETE")
    assert (info.value.getCondition(), info.value.getSqlState()) == ("DELTA_UNSUPPORTED_SUBQUERY", "0AKDC")
    assert table_rows(spark, path) == [(1, 10)]
