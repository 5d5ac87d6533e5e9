"""``dvlake.session(spark)``: delta-spark's faces as explicit calls, with no PySpark method patched."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import faces
from dvlake.compat import pyspark_hooks as hooks


@pytest.fixture
def unpatched(spark: SparkSession):
    """The shared session with every dvlake hook taken out for the test, put back afterwards."""
    was_enabled = faces.enabled(spark)
    faces.uninstall()
    try:
        yield spark
    finally:
        dvlake.configure_spark(spark)
        if not was_enabled:
            faces.disable(spark)


def test_reads_writes_and_sql_without_any_hook(unpatched: SparkSession, tmp_path: Path) -> None:
    spark = unpatched
    assert not hooks.installed()
    p = str(tmp_path / "events")
    ds = dvlake.session(spark)
    df = spark.range(10).selectExpr("id", "id % 2 AS part")
    ds.write(df).format("delta").mode("overwrite").partitionBy("part").option("delta.enableDeletionVectors", "true").save(p)
    ds.sql(f"DELETE FROM delta.`{p}` WHERE id IN (3, 4)")
    ds.write(spark.range(10, 12).selectExpr("id", "id % 2 AS part")).format("delta").mode("append").save(p)

    now = ds.read.format("delta").load(p)
    assert sorted(r.id for r in now.collect()) == [0, 1, 2, 5, 6, 7, 8, 9, 10, 11]
    assert sorted(r.id for r in now.collect()) == sorted(r.id for r in dvlake.read(spark, p).collect())
    first = ds.read.format("delta").option("versionAsOf", 0).load(p)
    assert sorted(r.id for r in first.collect()) == list(range(10))
    assert dvlake.DeltaTable.forPath(spark, p).detail().first().partitionColumns == ["part"]
    assert any(dv is not None for dv in _dvs(p))  # the DELETE marked rows, it did not rewrite
    assert not hooks.installed()  # nothing was patched along the way


def test_other_formats_and_names_go_to_spark(unpatched: SparkSession, tmp_path: Path) -> None:
    spark = unpatched
    ds = dvlake.session(spark)
    p = str(tmp_path / "plain")
    ds.write(spark.range(3)).format("parquet").mode("overwrite").save(p)
    assert sorted(r.id for r in ds.read.format("parquet").load(p).collect()) == [0, 1, 2]
    spark.range(2).createOrReplaceTempView("adapter_plain_view")
    assert ds.table("adapter_plain_view").count() == 2
    assert ds.sql("SELECT 41 + 1 AS x").first().x == 42


def test_catalog_tables_by_name(unpatched: SparkSession) -> None:
    spark = unpatched
    ds = dvlake.session(spark)
    spark.sql("DROP TABLE IF EXISTS adapter_named")
    try:
        ds.write(spark.range(3).selectExpr("id", "'a' AS tag")).format("delta").saveAsTable("adapter_named")
        ds.write(spark.createDataFrame([(9, "z")], "n long, t string")).insertInto("adapter_named")  # by position
        assert sorted((r.id, r.tag) for r in ds.table("adapter_named").collect()) == [
            (0, "a"), (1, "a"), (2, "a"), (9, "z")]
        assert ds.read.table("adapter_named").count() == 4
        ds.sql("UPDATE adapter_named SET tag = 'b' WHERE id = 1")
        assert ds.table("adapter_named").where("tag = 'b'").count() == 1
    finally:
        ds.sql("DROP TABLE IF EXISTS adapter_named")


def _dvs(path: str) -> list[object]:
    from dvlake.log.snapshot import Snapshot

    return Snapshot.load(path).files.column("deletionVector").to_pylist()
