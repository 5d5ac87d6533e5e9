"""Generated columns (``GENERATED ALWAYS AS (expr)``), as delta-spark computes and checks them on write.

Each test states the delta-spark rule it checks (read in delta-io/delta: ``GeneratedColumn.scala``,
``ColumnWithDefaultExprUtils.addDefaultExprsOrReturnConstraints``, ``GeneratedColumnSuite.scala``). The tables
are parcels: ``parcel`` (an id), ``grams`` and the generated ``kilos`` = ``grams / 1000``; the partitioned one
adds ``sent`` (a timestamp) and the generated partition column ``day`` = ``CAST(sent AS DATE)``.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.config import MERGE_DVS_PERSISTENT, UPDATE_DVS_PERSISTENT
from dvlake.errors import CheckConstraintViolationError
from dvlake.log.snapshot import Snapshot
from dvlake.sql import sql

KILOS = "grams / 1000"
PLAIN = [{"name": "parcel", "type": "long", "nullable": True, "metadata": {}},
         {"name": "grams", "type": "long", "nullable": True, "metadata": {}},
         {"name": "kilos", "type": "double", "nullable": True, "metadata": {"delta.generationExpression": KILOS}}]
DATED = [{"name": "parcel", "type": "long", "nullable": True, "metadata": {}},
         {"name": "sent", "type": "timestamp", "nullable": True, "metadata": {}},
         {"name": "day", "type": "date", "nullable": True,
          "metadata": {"delta.generationExpression": "CAST(sent AS DATE)"}}]


def _create(path: str, fields: list[dict], partitions: list[str] | None = None, *, protocol: dict | None = None,
            configuration: dict[str, str] | None = None) -> str:
    """Version 0 as delta-spark's CREATE TABLE writes a table with a generated column: the expression in the
    field's metadata and the ``generatedColumns`` writer feature (legacy writer version 4 implies it)."""
    log = Path(path) / "_delta_log"
    log.mkdir(parents=True)
    metadata = {"id": "6f1d1c55-0a51-4b1e-9a43-5b4b3a2c1d00", "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": partitions or [], "configuration": configuration or {}, "createdTime": 1}
    commit = {"timestamp": 1, "operation": "CREATE TABLE", "operationParameters": {}, "isBlindAppend": True}
    lines = [{"commitInfo": commit}, {"protocol": protocol or {"minReaderVersion": 1, "minWriterVersion": 4}},
             {"metaData": metadata}]
    (log / f"{0:020d}.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _rows(spark: SparkSession, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in dvlake.read(spark, path).collect())


def _violates(spark: SparkSession, path: str, run, rule: str, *values: str) -> None:
    """``run`` fails with DELTA_VIOLATE_CONSTRAINT_WITH_VALUES naming ``Generated Column (rule)`` and the row's
    values, and the table stays at its last version with its rows."""
    before_version, before_rows = Snapshot.load(path).version, _rows(spark, path)
    with pytest.raises(CheckConstraintViolationError) as info:
        run()
    err = info.value
    assert (err.getCondition(), err.getSqlState()) == ("DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", "23001")
    text = str(err)
    assert f"CHECK constraint Generated Column ({rule}) violated by row with values:" in text, text
    for v in values:
        assert v in text, text
    assert Snapshot.load(path).version == before_version
    assert _rows(spark, path) == before_rows


# --- appends and overwrites: fill in what is missing, check what is given ------------------------------


def test_an_append_without_the_generated_column_computes_it(dspark, tmp_path):
    """Rule: a write whose data lacks a generated column gets it computed from the expression over the row's
    values (cast to the column's type); NULL inputs give what the expression gives (NULL)."""
    path = _create(str(tmp_path / "t"), PLAIN)
    dvlake.write(dspark.createDataFrame([(1, 2500), (2, None)], "parcel long, grams long"), path, mode="append")
    dspark.createDataFrame([(3, 40)], "parcel long, grams long").write.format("delta").mode("append").save(path)
    assert _rows(dspark, path) == [(1, 2500, 2.5), (2, None, None), (3, 40, 0.04)]


def test_an_append_with_the_right_value_is_kept(spark, tmp_path):
    """Rule: a provided generated value is checked with ``kilos <=> (expr)``: equal values, and NULL where the
    expression is NULL, pass; the column order of the data does not matter (by name)."""
    path = _create(str(tmp_path / "t"), PLAIN)
    df = spark.createDataFrame([(1.5, 7, 1500), (None, 8, None)], "kilos double, parcel long, grams long")
    dvlake.write(df, path, mode="append")
    assert _rows(spark, path) == [(7, 1500, 1.5), (8, None, None)]


@pytest.mark.parametrize("kilos", [9.0, None], ids=["wrong", "null-for-a-value"])
def test_an_append_with_a_wrong_value_is_refused(dspark, tmp_path, kilos):
    """Rule: a provided generated value that differs from the expression (null-safe: a NULL where the expression
    has a value differs) fails the write with DELTA_VIOLATE_CONSTRAINT_WITH_VALUES, ``Generated Column
    (kilos <=> (grams / 1000))`` and the row's values; nothing is committed."""
    path = _create(str(tmp_path / "t"), PLAIN)
    dvlake.write(dspark.createDataFrame([(1, 100)], "parcel long, grams long"), path, mode="append")
    bad = dspark.createDataFrame([(2, 3000, kilos)], "parcel long, grams long, kilos double")
    shown = "9.0" if kilos is not None else "null"
    _violates(dspark, path, lambda: dvlake.write(bad, path, mode="append"), "kilos <=> (grams / 1000)",
              "grams : 3000", f"kilos : {shown}")
    _violates(dspark, path, lambda: bad.write.format("delta").mode("overwrite").save(path), "kilos <=> (grams / 1000)")


def test_an_overwrite_computes_the_generated_column(spark, tmp_path):
    """Rule: an overwrite is a write like an append: the generated column is computed for the new rows."""
    path = _create(str(tmp_path / "t"), PLAIN)
    dvlake.write(spark.createDataFrame([(1, 100)], "parcel long, grams long"), path, mode="append")
    dvlake.write(spark.createDataFrame([(5, 5000)], "parcel long, grams long"), path, mode="overwrite")
    assert _rows(spark, path) == [(5, 5000, 5.0)]


def test_a_generated_partition_column_is_computed_when_the_data_lacks_it(spark, tmp_path):
    """Rule: a generated partition column missing from the data is computed like any generated column (delta-spark
    refuses data without a partition column only when that column is not generated)."""
    path = _create(str(tmp_path / "t"), DATED, ["day"])
    t1, t2 = dt.datetime(2026, 3, 1, 8, 30), dt.datetime(2026, 3, 2, 23, 0)
    dvlake.write(spark.createDataFrame([(1, t1), (2, t2)], "parcel long, sent timestamp"), path, mode="append")
    assert _rows(spark, path) == [(1, t1, dt.date(2026, 3, 1)), (2, t2, dt.date(2026, 3, 2))]
    parts = sorted(a.partition_values["day"] for a in Snapshot.load(path).add_files())
    assert parts == ["2026-03-01", "2026-03-02"]


def test_a_table_whose_protocol_lacks_the_feature_does_not_bind_the_expression(spark, tmp_path):
    """Rule: the expression binds only under the ``generatedColumns`` writer feature (writer version 4+ or listed):
    with writer version 2 the key is an inert annotation and any value is written as given."""
    path = _create(str(tmp_path / "t"), PLAIN, protocol={"minReaderVersion": 1, "minWriterVersion": 2})
    dvlake.write(spark.createDataFrame([(1, 100, 42.0)], "parcel long, grams long, kilos double"), path, mode="append")
    assert _rows(spark, path) == [(1, 100, 42.0)]


def test_a_table_feature_protocol_binds_the_expression(spark, tmp_path):
    """Rule: under table features (writer 7) the feature must be listed: ``generatedColumns`` in writerFeatures."""
    path = _create(str(tmp_path / "t"), PLAIN, protocol={"minReaderVersion": 3, "minWriterVersion": 7,
                                                         "readerFeatures": ["deletionVectors"],
                                                         "writerFeatures": ["deletionVectors", "generatedColumns"]},
                   configuration={"delta.enableDeletionVectors": "true"})
    dvlake.write(spark.createDataFrame([(1, 100)], "parcel long, grams long"), path, mode="append")
    assert _rows(spark, path) == [(1, 100, 0.1)]
    bad = spark.createDataFrame([(2, 100, 1.0)], "parcel long, grams long, kilos double")
    _violates(spark, path, lambda: dvlake.write(bad, path, mode="append"), "kilos <=> (grams / 1000)")


# --- SQL INSERT -------------------------------------------------------------------------------------------


def test_insert_with_a_column_list_leaving_out_the_generated_column_computes_it(spark, tmp_path):
    """Rule: INSERT INTO t (cols) that leaves a generated column out computes it (not NULL); VALUES that give it
    must match (``INSERT INTO t VALUES (1, 12)`` on ``id2 = id + 10`` fails in GeneratedColumnSuite)."""
    path = _create(str(tmp_path / "t"), PLAIN)
    sql(spark, f"INSERT INTO delta.`{path}` (parcel, grams) VALUES (1, 1200), (2, NULL)")
    sql(spark, f"INSERT INTO delta.`{path}` VALUES (3, 300, 0.3)")
    assert _rows(spark, path) == [(1, 1200, 1.2), (2, None, None), (3, 300, 0.3)]
    _violates(spark, path, lambda: sql(spark, f"INSERT INTO delta.`{path}` VALUES (4, 400, 4.0)"),
              "kilos <=> (grams / 1000)", "grams : 400", "kilos : 4.0")


def test_the_streaming_sink_computes_and_checks_each_micro_batch(dspark, tmp_path):
    """Rule: the Delta sink writes each micro-batch as an append: a batch without the generated column gets it
    computed; a batch with a wrong value fails the query (GeneratedColumnSuite's streaming case) uncommitted."""
    path = _create(str(tmp_path / "t"), PLAIN)
    good, bad = tmp_path / "good", tmp_path / "bad"
    dspark.createDataFrame([(1, 1500)], "parcel long, grams long").write.parquet(str(good))
    q = (dspark.readStream.schema("parcel long, grams long").parquet(str(good)).writeStream.format("delta")
         .option("checkpointLocation", str(tmp_path / "chk1")).trigger(availableNow=True).start(path))
    q.awaitTermination()
    assert _rows(dspark, path) == [(1, 1500, 1.5)]
    dspark.createDataFrame([(2, 10, 3.0)], "parcel long, grams long, kilos double").write.parquet(str(bad))
    before = Snapshot.load(path).version
    q = (dspark.readStream.schema("parcel long, grams long, kilos double").parquet(str(bad)).writeStream
         .format("delta").option("checkpointLocation", str(tmp_path / "chk2")).trigger(availableNow=True).start(path))
    with pytest.raises(Exception, match="Generated Column"):
        q.awaitTermination()
    assert Snapshot.load(path).version == before


# --- peers -------------------------------------------------------------------------------------------------


@pytest.mark.interop
def test_delta_rs_reads_the_computed_values(spark, tmp_path):
    """Rule: the computed values are ordinary data in the files: another reader (delta-rs) sees them."""
    from tests.peers import read_with_deltalake, rows

    path = _create(str(tmp_path / "t"), PLAIN)
    dvlake.write(spark.createDataFrame([(1, 2500), (2, 10)], "parcel long, grams long"), path, mode="append")
    assert sorted(rows(read_with_deltalake(path), ["parcel", "grams", "kilos"])) == [(1, 2500, 2.5), (2, 10, 0.01)]


def _dv_table(path: str) -> str:
    return _create(path, PLAIN, protocol={"minReaderVersion": 3, "minWriterVersion": 7,
                                          "readerFeatures": ["deletionVectors"],
                                          "writerFeatures": ["deletionVectors", "generatedColumns"]},
                   configuration={"delta.enableDeletionVectors": "true"})


@pytest.fixture(params=[True, False], ids=["dvs", "copy-on-write"])
def update_mode(request, spark):
    spark.conf.set(UPDATE_DVS_PERSISTENT, str(request.param).lower())
    yield request.param
    spark.conf.unset(UPDATE_DVS_PERSISTENT)


# --- UPDATE -----------------------------------------------------------------------------------------------


def test_update_of_a_base_column_recomputes_the_generated_column(spark, tmp_path, update_mode):
    """Rule: an UPDATE that does not set a generated column gives it its expression over the updated values
    (``generateUpdateExprsForGeneratedColumns``: ``SET grams = grams * 2`` makes kilos the new grams / 1000);
    rows the condition does not match keep theirs. Same with deletion vectors and copy-on-write."""
    path = _dv_table(str(tmp_path / "t"))
    dvlake.write(spark.createDataFrame([(1, 100), (2, 200), (3, 300)], "parcel long, grams long").coalesce(1), path,
                 mode="append")
    dt_ = DeltaTable.forPath(spark, path)
    dt_.update("parcel >= 2", {"grams": "grams * 2"})
    assert _rows(spark, path) == [(1, 100, 0.1), (2, 400, 0.4), (3, 600, 0.6)]
    dt_.update(set={"grams": "NULL"}, condition="parcel = 1")
    assert _rows(spark, path) == [(1, None, None), (2, 400, 0.4), (3, 600, 0.6)]
    dt_.update(set={"grams": "grams + 1"})  # no condition: every row
    assert _rows(spark, path) == [(1, None, None), (2, 401, 0.401), (3, 601, 0.601)]


def test_update_setting_the_generated_column_is_checked(spark, tmp_path, update_mode):
    """Rule: an UPDATE that sets a generated column writes its value, checked like a written one: the right value
    (alone or with its base column) passes; a wrong one fails with ``Generated Column (kilos <=> (grams /
    1000.0))`` and the row's values, and the table stays at its last version."""
    path = _dv_table(str(tmp_path / "t"))
    dvlake.write(spark.createDataFrame([(1, 100), (2, 200)], "parcel long, grams long").coalesce(1), path, mode="append")
    dt_ = DeltaTable.forPath(spark, path)
    dt_.update("parcel = 1", {"kilos": "0.1"})
    dt_.update("parcel = 2", {"grams": "2500", "kilos": "2.5"})
    assert _rows(spark, path) == [(1, 100, 0.1), (2, 2500, 2.5)]
    _violates(spark, path, lambda: dt_.update("parcel = 1", {"kilos": "7.0"}), "kilos <=> (grams / 1000)",
              "grams : 100", "kilos : 7.0")
    _violates(spark, path, lambda: sql(spark, f"UPDATE delta.`{path}` SET grams = 3000, kilos = 2.5 WHERE parcel = 2"),
              "kilos <=> (grams / 1000)", "grams : 3000")


@pytest.fixture(params=[True, False], ids=["dvs", "copy-on-write"])
def merge_mode(request, spark):
    spark.conf.set(MERGE_DVS_PERSISTENT, str(request.param).lower())
    yield request.param
    spark.conf.unset(MERGE_DVS_PERSISTENT)


# --- MERGE ------------------------------------------------------------------------------------------------


def _merge_table(spark: SparkSession, path: str) -> str:
    _dv_table(path)
    dvlake.write(spark.createDataFrame([(1, 100), (2, 200), (3, 300)], "parcel long, grams long").coalesce(1), path,
                 mode="append")
    return path


def test_merge_clauses_compute_the_generated_columns_they_do_not_assign(spark, tmp_path, merge_mode):
    """Rule: in MERGE, an UPDATE clause (matched or NOT MATCHED BY SOURCE) that leaves a generated column out gives
    it its expression over the clause's new values, and an INSERT clause that leaves it out computes it from the
    inserted values (never NULL). DV and copy-on-write alike; rows no clause takes keep theirs."""
    path = _merge_table(spark, str(tmp_path / "t"))
    source = spark.createDataFrame([(1, 1500), (4, 4000)], "parcel long, grams long").alias("s")
    (DeltaTable.forPath(spark, path).alias("t").merge(source, "t.parcel = s.parcel")
     .whenMatchedUpdate(set={"grams": "s.grams"})
     .whenNotMatchedInsert(values={"parcel": "s.parcel", "grams": "s.grams"})
     .whenNotMatchedBySourceUpdate(condition="t.parcel = 3", set={"grams": "t.grams + 5"})
     .execute())
    assert _rows(spark, path) == [(1, 1500, 1.5), (2, 200, 0.2), (3, 305, 0.305), (4, 4000, 4.0)]


def test_an_insert_only_merge_computes_the_generated_column(spark, tmp_path):
    """Rule: an insert-only MERGE (delta-spark's optimized anti-join path) computes a generated column the
    INSERT clause leaves out, like any other write."""
    path = _merge_table(spark, str(tmp_path / "t"))
    source = spark.createDataFrame([(2, 9), (7, 700)], "parcel long, grams long").alias("s")
    (DeltaTable.forPath(spark, path).alias("t").merge(source, "t.parcel = s.parcel")
     .whenNotMatchedInsert(values={"parcel": "s.parcel", "grams": "s.grams"}).execute())
    assert _rows(spark, path) == [(1, 100, 0.1), (2, 200, 0.2), (3, 300, 0.3), (7, 700, 0.7)]


def test_merge_values_given_for_the_generated_column_are_checked(spark, tmp_path, merge_mode):
    """Rule: a MERGE clause that assigns a generated column (UPDATE SET, INSERT *, INSERT with it listed) writes that
    value, checked with ``Generated Column (kilos <=> (grams / 1000))``: right values pass, a wrong one fails the
    MERGE with DELTA_VIOLATE_CONSTRAINT_WITH_VALUES and the table stays at its last version."""
    path = _merge_table(spark, str(tmp_path / "t"))
    dt_ = DeltaTable.forPath(spark, path)
    good = spark.createDataFrame([(1, 1000, 1.0), (5, 50, 0.05)], "parcel long, grams long, kilos double").alias("s")
    dt_.alias("t").merge(good, "t.parcel = s.parcel").whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    assert _rows(spark, path) == [(1, 1000, 1.0), (2, 200, 0.2), (3, 300, 0.3), (5, 50, 0.05)]
    bad_insert = spark.createDataFrame([(6, 60, 6.0)], "parcel long, grams long, kilos double").alias("s")
    _violates(spark, path, lambda: dt_.alias("t").merge(bad_insert, "t.parcel = s.parcel").whenNotMatchedInsertAll()
              .execute(), "kilos <=> (grams / 1000)", "grams : 60", "kilos : 6.0")
    bad_update = spark.createDataFrame([(2, 9.0)], "parcel long, kilos double").alias("s")
    _violates(spark, path, lambda: dt_.alias("t").merge(bad_update, "t.parcel = s.parcel")
              .whenMatchedUpdate(set={"kilos": "s.kilos"}).execute(), "kilos <=> (grams / 1000)", "grams : 200")


def test_delete_runs_on_a_table_with_generated_columns(spark, tmp_path):
    """Rule: DELETE writes no new values; it runs on a table with generated columns and leaves the rest as is."""
    path = _merge_table(spark, str(tmp_path / "t"))
    DeltaTable.forPath(spark, path).delete("parcel = 2")
    assert _rows(spark, path) == [(1, 100, 0.1), (3, 300, 0.3)]


# --- CREATE TABLE … GENERATED ALWAYS AS ---------------------------------------------------------------------


def test_create_table_keeps_the_expression_and_the_feature(spark, tmp_path):
    """Rule: CREATE TABLE with ``c GENERATED ALWAYS AS (expr)`` stores the expression text as the field metadata
    ``delta.generationExpression`` and gives the table the ``generatedColumns`` writer feature (protocol (1, 4)
    when nothing newer is needed; listed under table features otherwise); the table then computes and checks it."""
    path = str(tmp_path / "t")
    sql(spark, f"CREATE TABLE delta.`{path}` (parcel BIGINT, grams BIGINT, "
               f"kilos DOUBLE GENERATED ALWAYS AS (grams / 1000) COMMENT 'weight') USING delta")
    snap = Snapshot.load(path)
    field = next(f for f in snap.metadata.schema["fields"] if f["name"] == "kilos")
    assert field["metadata"]["delta.generationExpression"] == "grams / 1000"
    assert field["metadata"]["comment"] == "weight"
    assert (snap.protocol.min_reader_version, snap.protocol.min_writer_version) == (1, 4)
    sql(spark, f"INSERT INTO delta.`{path}` (parcel, grams) VALUES (1, 2000)")
    assert _rows(spark, path) == [(1, 2000, 2.0)]
    _violates(spark, path, lambda: sql(spark, f"INSERT INTO delta.`{path}` VALUES (2, 10, 5.0)"),
              "kilos <=> (grams / 1000)")

    dv_path = str(tmp_path / "dv")
    sql(spark, f"CREATE TABLE delta.`{dv_path}` (parcel BIGINT, sent TIMESTAMP, day DATE GENERATED ALWAYS AS "
               f"(CAST(sent AS DATE))) USING delta PARTITIONED BY (day) TBLPROPERTIES (delta.enableDeletionVectors = true)")
    proto = Snapshot.load(dv_path).protocol
    assert "generatedColumns" in proto.writer_features and "deletionVectors" in proto.reader_features
    when = dt.datetime(2026, 5, 4, 3, 2, 1)
    dvlake.write(spark.createDataFrame([(1, when)], "parcel long, sent timestamp"), dv_path, mode="append")
    assert _rows(spark, dv_path) == [(1, when, dt.date(2026, 5, 4))]


@pytest.mark.parametrize(("column", "error_class"), [
    ("g BIGINT GENERATED ALWAYS AS (nope + 1)", "DELTA_INVALID_GENERATED_COLUMN_REFERENCES"),
    ("g BIGINT GENERATED ALWAYS AS (h + 1), h BIGINT GENERATED ALWAYS AS (a + 1)",
     "DELTA_INVALID_GENERATED_COLUMN_REFERENCES"),
    ("g DOUBLE GENERATED ALWAYS AS (a + rand())", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_GENERATED_COLUMN"),
    ("g INT GENERATED ALWAYS AS (a + 1)", "DELTA_GENERATED_COLUMNS_EXPR_TYPE_MISMATCH"),
], ids=["unknown-column", "generated-from-generated", "non-deterministic", "type-mismatch"])
def test_create_table_refuses_a_bad_generation_expression(spark, tmp_path, column, error_class):
    """Rule: delta-spark's ``validateGeneratedColumns`` refuses an expression that reads a column the table lacks or
    another generated column, is non-deterministic, or whose type differs from the column's; nothing is created."""
    from dvlake.errors import DvlakeError

    path = tmp_path / "t"
    with pytest.raises(DvlakeError) as info:
        sql(spark, f"CREATE TABLE delta.`{path}` (a BIGINT, {column}) USING delta")
    assert info.value.getCondition() == error_class, str(info.value)
    assert not (path / "_delta_log").exists()


def test_a_dataframe_carrying_the_metadata_does_not_create_a_generated_column(spark, tmp_path):
    """Rule: only a column definition makes a generated column; a new table written from a DataFrame whose field
    happens to carry ``delta.generationExpression`` gets no ``generatedColumns`` feature, so the key is inert
    (``enforcesGeneratedColumns`` needs the feature) and any value is written as given."""
    source = _create(str(tmp_path / "src"), PLAIN)
    dvlake.write(spark.createDataFrame([(1, 100)], "parcel long, grams long"), source, mode="append")
    copy = str(tmp_path / "copy")
    dvlake.write(dvlake.read(spark, source), copy)
    assert "generatedColumns" not in (Snapshot.load(copy).protocol.writer_features or ())
    dvlake.write(spark.createDataFrame([(2, 100, 42.0)], "parcel long, grams long, kilos double"), copy, mode="append")
    assert _rows(spark, copy) == [(1, 100, 0.1), (2, 100, 42.0)]
