"""SHOW CREATE TABLE of a clustered table with identity, default and generated columns, as delta-spark 4.x prints it.

delta-spark answers SHOW CREATE TABLE with Spark's v2 ``ShowCreateTableExec`` over ``DeltaTableV2``: columns are
``StructField.toDDL`` (name, type, NOT NULL, DEFAULT, COMMENT) over a schema from which delta-spark removed the
generation expressions and identity definitions (``removeDefaultExpressions``), and the partitioning it reports is
the partition columns only, so an identity or generated column prints as a plain column and a clustered table prints
no CLUSTER BY (its ``clustering`` feature shows in TBLPROPERTIES). The DDL is pinned exactly, by path and by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.catalog_helpers import configured_with_database


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    with configured_with_database(spark, "scc_db", str(tmp_path / "scc_db")) as session:
        yield session


@pytest.mark.parametrize("by_name", [False, True], ids=["path", "name"])
def test_clustered_identity_default_generated_columns(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    path = str(tmp_path / "t")
    target = "scc_db.t" if by_name else f"delta.`{path}`"
    dspark.sql(f"CREATE TABLE {target} (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 5 INCREMENT BY 3), "
               "k INT NOT NULL COMMENT 'key', status STRING DEFAULT 'new', k2 INT GENERATED ALWAYS AS (k * 2)) "
               "USING delta CLUSTER BY (k) TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')")
    shown = dspark.sql(f"SHOW CREATE TABLE {target}").collect()[0][0]
    name = "spark_catalog.scc_db.t" if by_name else f"delta.`{path}`"
    location = "" if by_name else f"LOCATION 'file:{path}'\n"
    features = ["allowColumnDefaults", "appendOnly", "changeDataFeed", "checkConstraints", "clustering", "columnMapping",
                "domainMetadata", "generatedColumns", "identityColumns", "invariants"]
    assert shown == (
        f"CREATE TABLE {name} (\n"
        "  id BIGINT,\n"
        "  k INT NOT NULL COMMENT 'key',\n"
        "  status STRING DEFAULT 'new',\n"
        "  k2 INT)\n"
        "USING delta\n"
        f"{location}"
        "TBLPROPERTIES (\n"
        + "".join(f"  'delta.feature.{f}' = 'supported',\n" for f in features)
        + "  'delta.minReaderVersion' = '1',\n"
        "  'delta.minWriterVersion' = '7')\n")
