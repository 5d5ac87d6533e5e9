"""MERGE's name cases from delta-spark's suites (issue 40), one rule per test. Rows are our own.

- Catalog tables merged without aliases are qualified by their table names (``source.key = target.key``), as
  delta-spark's ``merge correctly handle field metadata`` writes it (it once failed with
  DELTA_MERGE_UNRESOLVED_EXPRESSION listing the unqualified columns).
- A subquery in a clause condition that reads an unknown table is Spark's TABLE_OR_VIEW_NOT_FOUND first, as
  delta-spark's analyzer reports it; one that reads an existing table is still DELTA_UNSUPPORTED_SUBQUERY.
"""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import UnsupportedSubqueryError
from tests.helpers import table_rows


@pytest.mark.parametrize("dvs", ["true", "false"], ids=["dv", "copy_on_write"])
def test_unaliased_catalog_tables_are_qualified_by_their_names(spark: SparkSession, tmp_path, dvs) -> None:
    """Rule: ``MERGE INTO target USING source ON source.key = target.key`` resolves both qualifiers, with comments
    (field metadata) and column mapping on the target."""
    target, source = str(tmp_path / "target"), str(tmp_path / "source")
    try:
        dvlake.sql(spark, f"""CREATE TABLE names_target (key int NOT NULL COMMENT 'data column', value int NOT NULL,
                              cstruct struct<foo: int COMMENT 'foo field'>) USING delta LOCATION '{target}'
                              TBLPROPERTIES ('delta.columnMapping.mode' = 'name', 'delta.enableDeletionVectors' = '{dvs}')""")
        dvlake.sql(spark, "INSERT INTO names_target VALUES (0, 0, null), (2, 2, null)")
        dvlake.sql(spark, f"CREATE TABLE names_source (key int NOT NULL, value int NOT NULL) USING delta LOCATION '{source}'")
        dvlake.sql(spark, "INSERT INTO names_source VALUES (1, 1), (2, 20)")
        dvlake.sql(spark, """MERGE INTO names_target USING names_source ON names_source.key = names_target.key
                             WHEN MATCHED AND names_target.key = 1 THEN UPDATE SET names_target.value = 42
                             WHEN MATCHED AND names_target.key = 2 THEN UPDATE SET names_target.value = names_source.value
                             WHEN NOT MATCHED THEN INSERT (key, value) VALUES (names_source.key, names_source.value)
                             WHEN NOT MATCHED BY SOURCE AND names_target.key = 100 THEN UPDATE SET names_target.value = 22""")
        assert table_rows(spark, target) == [(0, 0, None), (1, 1, None), (2, 20, None)]
    finally:
        spark.sql("DROP TABLE IF EXISTS names_target")
        spark.sql("DROP TABLE IF EXISTS names_source")


def test_an_unknown_table_in_a_merge_condition_subquery_is_reported_first(spark: SparkSession, tmp_path) -> None:
    """Rule: ``s.v IN (SELECT v FROM t)`` with ``t`` the target's alias (no such table) is TABLE_OR_VIEW_NOT_FOUND;
    with a table that exists it is DELTA_UNSUPPORTED_SUBQUERY. Nothing changes."""
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame([(1, 10), (2, 20)], "key int, v int"), path,
                 properties={"delta.enableDeletionVectors": "true"})
    spark.createDataFrame([(1, 5)], "key int, v int").createOrReplaceTempView("names_src")
    merge = f"MERGE INTO delta.`{path}` t USING names_src s ON s.key = t.key WHEN MATCHED AND s.v IN (SELECT v FROM {{}}) " \
            "THEN DELETE"
    with pytest.raises(AnalysisException) as info:
        dvlake.sql(spark, merge.format("t"))
    assert info.value.getCondition() == "TABLE_OR_VIEW_NOT_FOUND"
    with pytest.raises(UnsupportedSubqueryError):
        dvlake.sql(spark, merge.format("names_src"))
    assert table_rows(spark, path) == [(1, 10), (2, 20)]
