"""The table builder (``DeltaTable.create / createIfNotExists / replace / createOrReplace``) as delta-spark's
``test_deltatable.py`` exercises it: generated and identity columns, comments, names without a location (managed
tables), replacing by name and by location, and the errors and history delta-spark gives. Rows and values are our
own; every check is an exact value or an error class."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

import dvlake
from dvlake import DeltaTable, IdentityGenerator
from dvlake.errors import (
    CannotReplaceMissingTableError,
    DeltaAnalysisException,
    IdentityColumnError,
    InvalidArgumentError,
    TableAlreadyExistsError,
)
from dvlake.log.snapshot import Snapshot
from tests.spark.catalog_helpers import local_path, rows, warehouse_databases

DB = "builderdb"


@pytest.fixture
def db(dspark: SparkSession) -> Iterator[str]:
    """The database's directory under the warehouse; it is the current database during the test."""
    with warehouse_databases(dspark, DB, use_first=True) as dirs:
        yield dirs[0]


def _generated_table(builder: dvlake.DeltaTableBuilder) -> DeltaTable:
    """col1 INT NOT NULL COMMENT 'first', col2 INT GENERATED ALWAYS AS (col1 + 10), partitioned by col1."""
    return (builder.addColumn("col1", "int", nullable=False, comment="first")
            .addColumn("col2", IntegerType(), generatedAlwaysAs="col1 + 10")
            .property("owner", "team-a").comment("built").partitionedBy("col1").execute())


def _last_commit(dt: DeltaTable) -> tuple[str, dict[str, str]]:
    row = dt.history(1).first()
    assert row is not None
    return row.operation, dict(row.operationParameters)


def test_generated_column_by_name_is_a_managed_table(dspark: SparkSession, db: str) -> None:
    dt = _generated_table(DeltaTable.create(dspark).tableName("gen"))
    field = Snapshot.load(dt.path).schema["fields"][1]
    assert field["metadata"] == {"delta.generationExpression": "col1 + 10"}
    assert os.path.realpath(local_path(dt.path)) == os.path.join(db, "gen")  # in the database's folder
    detail = dspark.sql("DESCRIBE DETAIL gen").first()
    assert (detail.description, detail.partitionColumns, detail.properties) == ("built", ["col1"], {"owner": "team-a"})
    assert "generatedColumns" in detail.tableFeatures
    assert _last_commit(dt) == ("CREATE TABLE", {"isManaged": "true", "description": "built", "partitionBy": '["col1"]',
                                                 "properties": json.dumps({"owner": "team-a"})})
    dspark.sql("INSERT INTO gen (col1) VALUES (1)")  # col2 is computed
    dt.update(F.expr("col2 = 11"), {"col1": F.expr("2")})  # and recomputed
    assert rows(dt.toDF()) == [(2, 12)]
    assert [(f.name, f.nullable, f.metadata) for f in dt.toDF().schema.fields] == \
        [("col1", True, {"comment": "first"}), ("col2", True, {})]  # the generation expression stays in the log
    # col1 is NOT NULL in the log (above) but read as nullable, as every column of a read is since a partition column
    # comes from the one native relation (Spark's file sources make their schema nullable), not from a literal


def test_generated_column_by_location_rejects_a_wrong_value(dspark: SparkSession, tmp_path: Path) -> None:
    dt = _generated_table(DeltaTable.createIfNotExists(dspark).location(str(tmp_path / "t")))
    dspark.sql(f"INSERT INTO delta.`{tmp_path / 't'}` (col1, col2) VALUES (1, 11)")
    with pytest.raises(Exception, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES|Generated Column"):
        dspark.sql(f"INSERT INTO delta.`{tmp_path / 't'}` (col1, col2) VALUES (1, 99)")
    assert rows(dt.toDF()) == [(1, 11)]


@pytest.mark.parametrize(("expression", "error_class"), [
    ("missing + 1", "DELTA_INVALID_GENERATED_COLUMN_REFERENCES"),
    ("cast(col1 as string)", "DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH"),
    ("col1 + rand()", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN"),
])
def test_generation_expression_refused_as_create_table(spark: SparkSession, tmp_path: Path, expression: str,
                                                        error_class: str) -> None:
    builder = DeltaTable.create(spark).location(str(tmp_path / "t")).addColumn("col1", "int") \
        .addColumn("col2", "int", generatedAlwaysAs=expression)
    with pytest.raises(DeltaAnalysisException) as err:
        builder.execute()
    assert err.value.error_class == error_class
    assert not os.path.exists(tmp_path / "t")  # refused before anything is written


def test_identity_columns(dspark: SparkSession, db: str) -> None:
    dt = (DeltaTable.create().tableName("ids")  # no session passed: the active one
          .addColumn("id1", LongType(), generatedAlwaysAs=IdentityGenerator())
          .addColumn("id2", "BIGINT", generatedAlwaysAs=IdentityGenerator(start=2))
          .addColumn("id3", "bigint", generatedByDefaultAs=IdentityGenerator(start=2, step=2))
          .addColumn("val", "bigint", nullable=False).execute())
    assert [f["metadata"] for f in Snapshot.load(dt.path).schema["fields"][:3]] == [
        {"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": False},
        {"delta.identity.start": 2, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": False},
        {"delta.identity.start": 2, "delta.identity.step": 2, "delta.identity.allowExplicitInsert": True}]
    for i in range(2):
        dspark.sql(f"INSERT INTO ids (val) VALUES ({i})")
    dspark.sql("INSERT INTO ids (id3, val) VALUES (8, 2)")  # BY DEFAULT takes an explicit value
    assert rows(dt.toDF()) == [(1, 2, 2, 0), (2, 3, 4, 1), (3, 4, 8, 2)]
    assert [f.metadata for f in dt.toDF().schema.fields] == [{}, {}, {}, {}]  # identity marks stay in the log
    assert "identityColumns" in dt.detail().first().tableFeatures


def test_identity_and_generated_arguments_checked_as_delta_spark(spark: SparkSession, tmp_path: Path) -> None:
    builder = DeltaTable.create(spark).location(str(tmp_path / "t"))
    with pytest.raises(ValueError, match="^Column identity generation requires step to be non-zero.$"):
        builder.addColumn("a", "bigint", generatedAlwaysAs=IdentityGenerator(step=0))
    with pytest.raises(ValueError, match="^Column identity generation requires step to be non-zero.$"):
        builder.addColumn("a", "bigint", generatedByDefaultAs=IdentityGenerator(step=0))
    with pytest.raises(ValueError, match="^generatedByDefaultAs and generatedAlwaysAs cannot both be set.$"):
        builder.addColumn("a", "bigint", generatedAlwaysAs="", generatedByDefaultAs=IdentityGenerator())
    with pytest.raises(TypeError, match="^Generated by default expression must be IdentityGenerator."):
        builder.addColumn("a", "bigint", generatedByDefaultAs="")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^Generated always as expression must be str or IdentityGenerator."):
        builder.addColumn("a", "bigint", generatedAlwaysAs=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^Column in existing schema must be StructField."):
        builder.addColumns([StructField("x", IntegerType()), 1])  # type: ignore[list-item]
    with pytest.raises(IdentityColumnError) as err:  # an INT identity column: refused at execute, as delta-spark
        builder.addColumn("a", "int", generatedAlwaysAs=IdentityGenerator()).execute()
    assert err.value.error_class == "DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE"
    assert not os.path.exists(tmp_path / "t")


def test_add_columns_keeps_comments_and_order(spark: SparkSession, tmp_path: Path) -> None:
    schema = StructType([StructField("key", StringType(), True, {"comment": "the key"}), StructField("value", LongType())])
    dt = (DeltaTable.create(spark).location(str(tmp_path / "t")).addColumns(schema).addColumn("value2", "int")
          .addColumns(schema.fields[:0]).partitionedBy(["value2", "value"]).execute())
    assert [(f.name, f.dataType, f.metadata) for f in dt.toDF().schema.fields] == \
        [("key", StringType(), {"comment": "the key"}), ("value", LongType(), {}), ("value2", IntegerType(), {})]
    assert dt.detail().first().partitionColumns == ["value2", "value"]


def test_create_by_name_refuses_an_existing_table_and_create_if_not_exists_keeps_it(dspark: SparkSession,
                                                                                    db: str) -> None:
    dspark.sql("CREATE TABLE existing (c1 INT) USING delta")
    with pytest.raises(TableAlreadyExistsError, match="existing.*already exists") as err:
        _generated_table(DeltaTable.create(dspark).tableName("existing"))
    assert err.value.error_class == "DELTA_TABLE_ALREADY_EXISTS"
    dt = _generated_table(DeltaTable.createIfNotExists(dspark).tableName("existing"))
    assert dt.toDF().columns == ["c1"]
    assert dt.snapshot().version == 0


def test_replace_by_name_replaces_schema_properties_partitioning_and_rows(dspark: SparkSession, db: str) -> None:
    dspark.sql("CREATE TABLE rep (c1 INT) USING delta TBLPROPERTIES ('stale' = 'x') COMMENT 'old'")
    dspark.sql("INSERT INTO rep VALUES (7)")
    dt = _generated_table(DeltaTable.replace(dspark).tableName("rep"))
    assert dt.toDF().count() == 0
    assert dt.toDF().columns == ["col1", "col2"]
    detail = dspark.sql("DESCRIBE DETAIL rep").first()
    assert (detail.description, detail.partitionColumns, detail.properties) == ("built", ["col1"], {"owner": "team-a"})
    assert _last_commit(dt) == ("REPLACE TABLE", {"isManaged": "true", "description": "built", "partitionBy": '["col1"]',
                                                  "properties": json.dumps({"owner": "team-a"})})
    dt = DeltaTable.createOrReplace(dspark).tableName("rep").addColumn("other", "string").execute()
    assert _last_commit(dt)[0] == "CREATE OR REPLACE TABLE"
    assert dspark.table("rep").columns == ["other"]  # the catalog's columns follow
    assert [r.operation for r in dt.history().collect()] == ["CREATE OR REPLACE TABLE", "REPLACE TABLE", "WRITE",
                                                             "CREATE TABLE"]


def test_replace_by_location(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    DeltaTable.create(spark).location(path).addColumn("c1", "int").property("stale", "x").execute()
    dvlake.write(spark.createDataFrame([(1,)], "c1 int"), path, mode="append")
    dt = _generated_table(DeltaTable.replace(spark).location(path))
    assert (dt.toDF().columns, dt.toDF().count()) == (["col1", "col2"], 0)
    assert dt.snapshot().configuration == {"owner": "team-a"}
    assert _last_commit(dt) == ("REPLACE TABLE", {"isManaged": "false", "description": "built", "partitionBy": '["col1"]',
                                                  "properties": json.dumps({"owner": "team-a"})})
    fresh = str(tmp_path / "fresh")
    dt = DeltaTable.createOrReplace(spark).location(fresh).addColumn("id", "bigint").execute()
    assert (dt.snapshot().version, _last_commit(dt)[0]) == (0, "CREATE OR REPLACE TABLE")


def test_replace_of_a_missing_table_is_refused(dspark: SparkSession, db: str, tmp_path: Path) -> None:
    with pytest.raises(CannotReplaceMissingTableError, match="nothere cannot be replaced as it does not exist") as err:
        DeltaTable.replace(dspark).tableName("nothere").addColumn("id", "bigint").execute()
    assert err.value.error_class == "DELTA_CANNOT_REPLACE_MISSING_TABLE"
    assert not dspark.catalog.tableExists("nothere")
    with pytest.raises(CannotReplaceMissingTableError):
        DeltaTable.replace(dspark).location(str(tmp_path / "none")).addColumn("id", "bigint").execute()
    assert not os.path.exists(tmp_path / "none")


def test_create_by_location_refuses_an_existing_table(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    DeltaTable.create(spark).location(path).addColumn("id", "bigint").execute()
    with pytest.raises(TableAlreadyExistsError) as err:
        DeltaTable.create(spark).location(path).addColumn("id", "bigint").execute()
    assert err.value.error_class == "DELTA_PATH_EXISTS"
    with pytest.raises(InvalidArgumentError, match="tableName"):
        DeltaTable.create(spark).addColumn("id", "bigint").execute()


# -- the rest of test_deltatable.py's behaviours: OPTIMIZE's filter, Z-order, protocol upgrades --------------------


def _key_value_table(spark: SparkSession, path: str, partition_by: list[str]) -> DeltaTable:
    """Three appends of two rows each: ('a', 1), ('a', 2) | ('a', 3), ('a', 4) | ('b', 1), ('b', 2)."""
    for i, data in enumerate([[("a", 1), ("a", 2)], [("a", 3), ("a", 4)], [("b", 1), ("b", 2)]]):
        dvlake.write(spark.createDataFrame(data, "key string, value long").repartition(1), path,
                     mode="append" if i else "error", partitionBy=partition_by)
    return DeltaTable.forPath(spark, path)


def test_optimize_filter_on_a_data_column_is_refused_with_delta_sparks_message(spark: SparkSession,
                                                                                tmp_path: Path) -> None:
    from dvlake.errors import NonPartitionColumnReferenceError

    dt = _key_value_table(spark, str(tmp_path / "t"), [])
    with pytest.raises(NonPartitionColumnReferenceError, match=r"^\[DELTA_NON_PARTITION_COLUMN_REFERENCE\] Predicate "
                       r"references non-partition column 'key'. Only the partition columns may be referenced: \[\] "):
        dt.optimize().where("key = 'a'").executeCompaction()
    assert dt.snapshot().version == 2
    metrics = dt.optimize().executeCompaction().first().metrics
    assert (metrics.numFilesAdded, metrics.numFilesRemoved) == (1, 3)
    assert _last_commit(dt)[1]["predicate"] == "[]"


def test_optimize_partition_filter_recorded_as_delta_spark_records_it(spark: SparkSession, tmp_path: Path) -> None:
    from dvlake.errors import NonPartitionColumnReferenceError

    dt = _key_value_table(spark, str(tmp_path / "t"), ["key"])
    metrics = dt.optimize().where("key = 'a'").executeCompaction().first().metrics
    assert (metrics.numFilesAdded, metrics.numFilesRemoved) == (1, 2)
    assert _last_commit(dt)[1]["predicate"] == '["(\'key = a)"]'  # Catalyst's unresolved expression text
    with pytest.raises(NonPartitionColumnReferenceError, match=r"'value'. Only the partition columns may be referenced: "
                                                               r"\[key\]"):
        dt.optimize().where("value = 1").executeCompaction()
    assert rows(dt.toDF()) == [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 1), ("b", 2)]


def test_zorder_on_test_deltatables_table(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    df = (spark.range(0, 100).select(F.col("id").cast("int").alias("value"))
          .withColumn("col1", F.floor(F.col("value") % 7)).withColumn("col2", F.floor(F.col("value") % 27))
          .withColumn("p", F.floor(F.col("value") % 10)))
    dvlake.write(df.repartition(4), path, partitionBy="p")
    before = len(Snapshot.load(path).add_files())
    metrics = DeltaTable.forPath(spark, path).optimize().executeZOrderBy(["col1", "col2"]).select("metrics.*").head()
    assert (metrics.numFilesAdded, metrics.numFilesRemoved, metrics.totalFilesSkipped, metrics.totalConsideredFiles) \
        == (10, before, 0, before)
    assert (metrics.zOrderStats.strategyName, metrics.zOrderStats.numOutputCubes) == ("all", 10)
    assert len(Snapshot.load(path).add_files()) == 10
    assert dvlake.read(spark, path).count() == 100
    metrics = DeltaTable.forPath(spark, path).optimize().where("p = 2").executeZOrderBy("col1").select("metrics.*").head()
    assert (metrics.numFilesAdded, metrics.numFilesRemoved, metrics.zOrderStats.numOutputCubes) == (1, 1, 1)


def test_upgrade_table_protocol_never_downgrades(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame([("a", 1)], "key string, value long"), path)
    dt = DeltaTable.forPath(spark, path)
    dt.upgradeTableProtocol(1, 3)
    version = dt.snapshot().version
    dt.upgradeTableProtocol(1, 2)  # less than the table has: a no-op, as delta-spark
    detail = dt.detail().first()
    assert (detail.minReaderVersion, detail.minWriterVersion, dt.snapshot().version) == (1, 3, version)
    assert _last_commit(dt) == ("SET TBLPROPERTIES", {"properties": json.dumps(
        {"delta.minReaderVersion": "1", "delta.minWriterVersion": "3"})})
