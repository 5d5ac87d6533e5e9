"""Table names Spark's catalog refuses write nothing, anywhere (issue 39, item 1).

A managed table's folder is derived from its name, so before this was checked a create by the name ``../victim``
wrote a Delta table (or overwrote / appended to / replaced one) at ``<database>/../victim`` and only then failed on
Spark's refusal of the name; ``.`` made the database folder itself a Delta table. Every create-by-name path
(``saveAsTable`` in each mode, ``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] … [AS SELECT]``, ``writeStream.toTable``,
the table builder, ``writeTo``) must refuse such a name with ``InvalidTableNameError`` before anything is written.

The database lives in a temporary folder (``<tmp>/wh/db``), so whatever a refused name could reach (``<tmp>/wh``,
``<tmp>``) is inside the tree whose ``_delta_log`` folders are counted before and after.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable, faces
from dvlake.errors import InvalidTableNameError

DB = "refused_names"

#: The 13 names of the campaign, each refused by Spark's catalog (as the raw identifier, back-quoted when used).
REFUSED = ["a b", "a`b", "tëst", "a.b", "a-b", "a'b", "a/b", "../x", "../../x", "/x", "%2e%2e", ".", ".."]


def quoted(raw: str) -> str:
    """The identifier as a user writes it: back-quoted, inner back-quotes doubled."""
    return "`" + raw.replace("`", "``") + "`"


@pytest.fixture
def wh(spark: SparkSession, tmp_path: Path) -> Iterator[Path]:
    """A database at ``<tmp>/wh/db`` (current during the test), the faces on; yields ``<tmp>/wh``."""
    root = tmp_path / "wh"
    (root / "db").mkdir(parents=True)
    dvlake.configure_spark(spark)
    spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
    spark.sql(f"CREATE DATABASE {DB} LOCATION '{root / 'db'}'")
    spark.catalog.setCurrentDatabase(DB)
    try:
        yield root
    finally:
        spark.catalog.setCurrentDatabase("default")
        spark.sql(f"DROP DATABASE IF EXISTS {DB} CASCADE")
        faces.disable(spark)


def delta_logs(top: Path) -> set[str]:
    """Every ``_delta_log`` folder under ``top``."""
    return {d for d, subdirs, _ in os.walk(top) if os.path.basename(d) == "_delta_log"}


def _save_as_table(mode: str) -> Callable[[SparkSession, str], None]:
    def run(spark: SparkSession, name: str) -> None:
        spark.range(3).write.format("delta").mode(mode).saveAsTable(name)
    return run


def _stream_to_table(spark: SparkSession, name: str, checkpoint: str) -> None:
    query = (spark.readStream.format("rate").option("rowsPerSecond", 1).load().selectExpr("value AS id")
             .writeStream.format("delta").option("checkpointLocation", checkpoint).toTable(name))
    query.stop()  # not reached when the name is refused


def _builder(spark: SparkSession, name: str) -> None:
    DeltaTable.create(spark).tableName(name).addColumn("id", "BIGINT").execute()


#: Every create-by-name path: (label, action(spark, name, scratch folder)).
PATHS: dict[str, Callable[[SparkSession, str, str], None]] = {
    "saveAsTable overwrite": lambda s, n, _: _save_as_table("overwrite")(s, n),
    "saveAsTable append": lambda s, n, _: _save_as_table("append")(s, n),
    "saveAsTable error": lambda s, n, _: _save_as_table("error")(s, n),
    "saveAsTable ignore": lambda s, n, _: _save_as_table("ignore")(s, n),
    "saveAsTable path option": lambda s, n, d: s.range(3).write.format("delta").option("path", d).saveAsTable(n),
    "CREATE TABLE": lambda s, n, _: s.sql(f"CREATE TABLE {n} (id BIGINT) USING delta"),
    "CREATE TABLE IF NOT EXISTS": lambda s, n, _: s.sql(f"CREATE TABLE IF NOT EXISTS {n} (id BIGINT) USING delta"),
    "CREATE TABLE LOCATION": lambda s, n, d: s.sql(f"CREATE TABLE {n} (id BIGINT) USING delta LOCATION '{d}'"),
    "CREATE TABLE AS SELECT": lambda s, n, _: s.sql(f"CREATE TABLE {n} USING delta AS SELECT 1 AS id"),
    "CREATE OR REPLACE TABLE AS SELECT": lambda s, n, _: s.sql(f"CREATE OR REPLACE TABLE {n} USING delta AS SELECT 1 AS id"),
    "CREATE TABLE IF NOT EXISTS AS SELECT":
        lambda s, n, _: s.sql(f"CREATE TABLE IF NOT EXISTS {n} USING delta AS SELECT 1 AS id"),
    "writeStream.toTable": lambda s, n, d: _stream_to_table(s, n, d + "_checkpoint"),
    "DeltaTable.create().tableName()": lambda s, n, _: _builder(s, n),
    "writeTo().create()": lambda s, n, _: s.range(3).writeTo(n).using("delta").create(),
    "writeTo().createOrReplace()": lambda s, n, _: s.range(3).writeTo(n).using("delta").createOrReplace(),
}


@pytest.mark.parametrize("path", list(PATHS))
def test_every_refused_name_on_every_create_path_writes_nothing(spark: SparkSession, wh: Path, path: str) -> None:
    before = delta_logs(wh.parent)
    refused = []
    for raw in REFUSED:
        with pytest.raises(InvalidTableNameError) as info:
            PATHS[path](spark, quoted(raw), str(wh / "external"))
        assert info.value.getCondition() == "INVALID_SCHEMA_OR_RELATION_NAME"
        refused.append(raw)
    assert refused == REFUSED
    assert delta_logs(wh.parent) == before == set()
    assert sorted(os.listdir(wh)) == ["db"] and os.listdir(wh / "db") == []


def test_spark_refuses_the_same_names(spark: SparkSession, wh: Path) -> None:
    """The rule is Spark's own: its catalog refuses each of these names for a plain Parquet table too (so a name
    dvlake refuses is never one a user could have used), and accepts a plain one."""
    faces.disable(spark)
    for raw in ["a b", "tëst", "a-b", "../x", "%2e%2e", ".", ".."]:
        with pytest.raises(AnalysisException):  # INVALID_SCHEMA_OR_RELATION_NAME, or a path Spark cannot parse
            spark.sql(f"CREATE TABLE {quoted(raw)} (id BIGINT) USING parquet")
    spark.sql("CREATE TABLE Plain_1 (id BIGINT) USING parquet")
    assert spark.catalog.tableExists("plain_1")


VICTIM_ROWS = [(100,), (101,), (102,)]


@pytest.fixture
def victim(spark: SparkSession, wh: Path) -> str:
    """A Delta table at ``<tmp>/wh/victim``: where ``../victim`` leads from the database folder."""
    path = str(wh / "victim")
    spark.createDataFrame(VICTIM_ROWS, "id BIGINT").write.format("delta").save(path)
    return path


#: Writes through the name ``../victim`` that, unchecked, overwrote, appended to or replaced the table beside.
OUTSIDE: dict[str, Callable[[SparkSession, str], None]] = {
    "saveAsTable overwrite": _save_as_table("overwrite"),
    "saveAsTable append": _save_as_table("append"),
    "CREATE OR REPLACE TABLE AS SELECT": lambda s, n: s.sql(f"CREATE OR REPLACE TABLE {n} USING delta AS SELECT 7 AS id"),
    "CREATE TABLE IF NOT EXISTS": lambda s, n: s.sql(f"CREATE TABLE IF NOT EXISTS {n} (id BIGINT) USING delta"),
    "writeTo().createOrReplace()": lambda s, n: s.range(3).writeTo(n).using("delta").createOrReplace(),
    "DeltaTable.createOrReplace()":
        lambda s, n: DeltaTable.createOrReplace(s).tableName(n).addColumn("other", "STRING").execute(),
}


@pytest.mark.parametrize("write", list(OUTSIDE))
def test_a_table_outside_the_database_is_left_unchanged(spark: SparkSession, wh: Path, victim: str, write: str) -> None:
    logs = delta_logs(wh.parent)
    with pytest.raises(InvalidTableNameError):
        OUTSIDE[write](spark, quoted("../victim"))
    table = DeltaTable.forPath(spark, victim)
    assert table.history().count() == 1
    assert sorted(tuple(r) for r in table.toDF().collect()) == VICTIM_ROWS
    assert delta_logs(wh.parent) == logs == {os.path.join(victim, "_delta_log")}


def test_a_valid_name_is_still_placed_in_its_database(spark: SparkSession, wh: Path) -> None:
    """The control: a valid (back-quoted, mixed-case) name makes a managed table at ``<database>/<lower-cased name>``."""
    spark.range(3).write.format("delta").saveAsTable("`Good_1`")
    assert delta_logs(wh.parent) == {str(wh / "db" / "good_1" / "_delta_log")}
    assert sorted(r.id for r in spark.read.table("good_1").collect()) == [0, 1, 2]
