"""Catalog names: ``saveAsTable``, ``DeltaTable.forName``, ``spark.table``, ``insertInto`` and dvlake.spark.catalog."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable, faces
from dvlake.errors import NotADeltaTableNameError, TableAlreadyExistsError
from dvlake.spark.catalog import register_table, table_location
from dvlake.storage.paths import normalize_table_root


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database placed in tmp_path (managed tables never land in the checkout)."""
    dvlake.configure_spark(spark)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS faces_db LOCATION '{tmp_path / 'faces_db'}'")
    try:
        yield spark
    finally:
        faces.disable(spark)
        spark.sql("DROP DATABASE IF EXISTS faces_db CASCADE")


def _ids(df) -> list[int]:
    return sorted(r[0] for r in df.collect())


def test_save_as_table_for_name_and_table_reads(dspark: SparkSession, tmp_path: Path) -> None:
    dspark.range(3).write.format("delta").saveAsTable("faces_db.events")
    location = table_location(dspark, "faces_db.events")
    assert normalize_table_root(location) == normalize_table_root(str(tmp_path / "faces_db" / "events"))
    assert _ids(DeltaTable.forName(dspark, "faces_db.events").toDF()) == [0, 1, 2]
    dspark.range(3, 5).write.format("delta").mode("append").saveAsTable("faces_db.events")
    assert _ids(dspark.table("faces_db.events")) == [0, 1, 2, 3, 4]
    assert _ids(dspark.read.table("faces_db.events")) == [0, 1, 2, 3, 4]
    DeltaTable.forName(dspark, "faces_db.events").delete("id = 0")
    assert _ids(dspark.read.format("delta").load(location)) == [1, 2, 3, 4]
    with pytest.raises(TableAlreadyExistsError) as err:
        dspark.range(1).write.format("delta").saveAsTable("faces_db.events")
    assert err.value.error_class == "DELTA_TABLE_ALREADY_EXISTS"
    dspark.range(1).write.format("delta").mode("ignore").saveAsTable("faces_db.events")
    assert DeltaTable.forName(dspark, "faces_db.events").snapshot().version == 2
    dspark.range(7, 9).write.insertInto("faces_db.events", overwrite=True)
    assert _ids(dspark.table("faces_db.events")) == [7, 8]


def test_save_as_table_with_path_and_register(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "ext")
    dspark.range(2).write.format("delta").option("path", path).saveAsTable("faces_db.ext")
    assert normalize_table_root(table_location(dspark, "faces_db.ext")) == normalize_table_root(path)
    register_table(dspark, "faces_db.ext2", path)
    register_table(dspark, "faces_db.ext2", path, if_not_exists=True)  # no error, no change
    with pytest.raises(TableAlreadyExistsError):
        register_table(dspark, "faces_db.ext2", path)
    assert _ids(DeltaTable.forName(dspark, "faces_db.ext2").toDF()) == [0, 1]
    assert table_location(dspark, f"delta.`{path}`") == path


def test_names_that_are_not_delta_tables(dspark: SparkSession, tmp_path: Path) -> None:
    dspark.range(2).write.format("parquet").option("path", str(tmp_path / "pq")).saveAsTable("faces_db.plain")
    for name in ("faces_db.plain", "faces_db.missing"):
        with pytest.raises(NotADeltaTableNameError, match=r"DELTA_MISSING_DELTA_TABLE.*delta\.`<path>`"):
            DeltaTable.forName(dspark, name)
    assert dspark.table("faces_db.plain").count() == 2  # a parquet table is Spark's own, as before


def test_plain_spark_is_told_how_to_read_a_registered_table(dspark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dspark.range(2).write.format("delta").save(path)
    register_table(dspark, "faces_db.guarded", path)
    faces.disable(dspark)
    with pytest.raises(Exception, match="plain Spark cannot read it"):
        dspark.table("faces_db.guarded").collect()


def test_builder_table_name_and_writer_v2(dspark: SparkSession, tmp_path: Path) -> None:
    from pyspark.sql.functions import col

    DeltaTable.createIfNotExists(dspark).tableName("faces_db.built").addColumn("id", "long").addColumn(
        "day", "string").partitionedBy("day").execute()
    location = table_location(dspark, "faces_db.built")
    assert normalize_table_root(location) == normalize_table_root(str(tmp_path / "faces_db" / "built"))
    rows = dspark.createDataFrame([(1, "a"), (2, "b")], "id long, day string")
    rows.writeTo("faces_db.built").append()
    assert _ids(dspark.table("faces_db.built")) == [1, 2]
    dspark.createDataFrame([(3, "b")], "id long, day string").writeTo("faces_db.built").overwritePartitions()
    assert sorted(map(tuple, dspark.table("faces_db.built").collect())) == [(1, "a"), (3, "b")]
    dspark.createDataFrame([(4, "a")], "id long, day string").writeTo("faces_db.built").overwrite(col("day") == "a")
    assert sorted(map(tuple, dspark.table("faces_db.built").collect())) == [(3, "b"), (4, "a")]
    rows.writeTo("faces_db.v2").using("delta").partitionedBy(col("day")).tableProperty(
        "delta.appendOnly", "false").create()
    snap = DeltaTable.forName(dspark, "faces_db.v2").snapshot()
    assert list(snap.partition_columns) == ["day"] and snap.configuration["delta.appendOnly"] == "false"
    with pytest.raises(TableAlreadyExistsError):
        dspark.range(2).writeTo("faces_db.v2").using("delta").create()
    dspark.range(5, 6).writeTo("faces_db.v2").using("delta").createOrReplace()
    assert _ids(dspark.table("faces_db.v2")) == [5]
