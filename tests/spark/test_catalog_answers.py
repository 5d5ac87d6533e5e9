"""A catalog name dvlake registered never answers with the registration's own rows (the catalog issue).

Over many query shapes (count(*), GROUP BY, EXISTS, IN, joins of every kind, LIMIT, set operations,
scalar subqueries, a view over the name), on a session with ``configure_spark`` and on a plain one:
every query either returns exactly what the same query returns over the table's true rows, or raises
an error; a plain session's error says to call ``dvlake.configure_spark``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable, faces
from tests.spark.catalog_helpers import rows

SHAPES = [
    "SELECT count(*) FROM {t}",
    "SELECT count(1) FROM {t}",
    "SELECT grp, count(*) AS n FROM {t} GROUP BY grp",
    "SELECT * FROM {t}",
    "SELECT id FROM {t} WHERE id % 7 = 1",
    "SELECT max(id), min(grp) FROM {t}",
    "SELECT count(DISTINCT grp) FROM {t}",
    "SELECT * FROM {t} LIMIT 0",
    "SELECT 1 FROM {t} LIMIT 1",
    "SELECT EXISTS(SELECT 1 FROM {t})",
    "SELECT id FROM other WHERE EXISTS (SELECT 1 FROM {t} e WHERE e.id = other.id)",
    "SELECT id FROM other WHERE NOT EXISTS (SELECT 1 FROM {t} e WHERE e.id = other.id)",
    "SELECT id FROM other WHERE id IN (SELECT id FROM {t})",
    "SELECT o.id, e.grp FROM other o LEFT JOIN {t} e ON o.id = e.id",
    "SELECT o.id FROM other o LEFT ANTI JOIN {t} e ON o.id = e.id",
    "SELECT o.id FROM other o LEFT SEMI JOIN {t} e ON o.id = e.id",
    "SELECT count(*) FROM other o FULL OUTER JOIN {t} e ON o.id = e.id",
    "SELECT count(*) FROM {t} CROSS JOIN other",
    "SELECT (SELECT max(id) FROM {t}) AS m",
    "SELECT count(*) FROM (SELECT id FROM {t} UNION ALL SELECT id FROM other)",
    "SELECT id FROM other EXCEPT SELECT id FROM {t}",
    "SELECT DISTINCT o.id FROM other o LEFT JOIN {t} e ON o.id = e.id",
    "WITH x AS (SELECT * FROM {t}) SELECT count(*) FROM x",
    "SELECT count(*) FROM {t} WHERE 1 = 0",
    "SELECT {t}.grp, count(*) FROM {t} GROUP BY {t}.grp",
]


@pytest.fixture(scope="module")
def events(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``answers.events``: a managed Delta table with DVs (some rows deleted), and a plain table ``other``."""
    db = tmp_path_factory.mktemp("answers_db")
    spark.sql(f"CREATE DATABASE IF NOT EXISTS answers LOCATION '{db}'")
    dvlake.configure_spark(spark)
    try:
        (spark.range(1000).selectExpr("id", "id % 5 AS grp").write.format("delta")
         .option("delta.enableDeletionVectors", "true").saveAsTable("answers.events"))
        DeltaTable.forName(spark, "answers.events").delete("id % 3 = 0")
        path = DeltaTable.forName(spark, "answers.events").path
    finally:
        faces.disable(spark)
    spark.range(0, 1500, 7).createOrReplaceTempView("other")
    dvlake.read(spark, path).createOrReplaceTempView("truth_events")
    yield path
    spark.catalog.dropTempView("other")
    spark.catalog.dropTempView("truth_events")


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_is_right_with_configure_spark_and_right_or_an_error_without(spark: SparkSession, events: str,
                                                                                 shape: str) -> None:
    """The true rows are read once per shape; with ``configure_spark`` the name answers exactly them, on a plain
    session it answers them too or raises (the two were one test each, each reading the true rows)."""
    expected = rows(spark.sql(shape.format(t="truth_events")))
    dvlake.configure_spark(spark)
    try:
        got = rows(spark.sql(shape.format(t="answers.events")))
    finally:
        faces.disable(spark)
    assert got == expected, shape
    try:
        plain = rows(spark.sql(shape.format(t="answers.events")))
    except Exception as exc:  # noqa: BLE001 - any error is acceptable; a wrong answer is not
        assert "configure_spark" in str(exc) or "USER_RAISED_EXCEPTION" in str(exc) or "collectToPython" in str(exc)
        return
    assert plain == expected, f"plain Spark answered {shape!r} with the registration's rows"


def test_a_view_over_the_name_fails_without_dvlake(spark: SparkSession, events: str) -> None:
    spark.sql("CREATE OR REPLACE TEMP VIEW over_events AS SELECT id FROM answers.events")
    try:
        with pytest.raises(Exception, match="configure_spark"):
            spark.sql("SELECT count(*) FROM over_events").collect()
    finally:
        spark.catalog.dropTempView("over_events")


def test_the_catalogs_columns_follow_schema_changes_made_by_name(spark: SparkSession, events: str) -> None:
    dvlake.configure_spark(spark)
    try:
        spark.sql("CREATE TABLE answers.evolving (id BIGINT) USING delta")
        (spark.range(3).selectExpr("id", "'x' AS note").write.format("delta").mode("append")
         .option("mergeSchema", "true").saveAsTable("answers.evolving"))
        spark.sql("ALTER TABLE answers.evolving ADD COLUMNS (score DOUBLE)")
    finally:
        faces.disable(spark)
    assert [c.name for c in spark.catalog.listColumns("answers.evolving")] == ["id", "note", "score"]
    described = [r[0] for r in spark.sql("DESCRIBE TABLE answers.evolving").collect() if r[0] and not r[0].startswith("#")]
    assert described == ["id", "note", "score"]
    with pytest.raises(Exception, match="configure_spark"):
        spark.sql("SELECT count(*) FROM answers.evolving").collect()  # still guarded after the refresh
