"""Error text a user sees around dvlake: no dvlake plans in Spark's messages, no PySpark JSON error records for
errors dvlake raised itself, schema messages naming the writer option, the partition-column refusal.

PySpark 4 writes one JSON line to stderr (its ``DataFrameQueryContextLogger`` / ``SQLQueryContextLogger``) for
every analysis error it converts; an extra handler on those loggers sees what their filters let through.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.config import DEBUG_CONF
from dvlake.errors import DvlakeError, SchemaMismatchError
from dvlake.faces import configure_spark, disable

INTERNALS = ("__dvlake_", "LeftAnti", "getbit(")


@pytest.fixture
def dv_table(spark: SparkSession, tmp_path) -> str:
    path = str(tmp_path / "t")
    dvlake.write(spark.range(0, 100).selectExpr("id", "cast(id % 4 as string) AS day"), path, partitionBy="day",
                 properties={"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(spark, path).delete("id % 10 = 0")
    return path


def test_a_typo_on_a_dvlake_frame_shows_no_dvlake_plan(spark: SparkSession, dv_table: str, scan_path: str) -> None:
    """The pure-Python path's plan is dvlake's anti join; Spark's message must not carry it (native: nothing to hide)."""
    with pytest.raises(AnalysisException) as info:
        dvlake.read(spark, dv_table).filter("dya = '1'").count()
    text = str(info.value)
    assert "`dya`" in text and len(text) < 1500, text
    for internal in INTERNALS:
        assert internal not in text, (internal, text)


def test_the_plan_stays_with_the_debug_setting(spark: SparkSession, dv_table: str) -> None:
    from dvlake.spark import native

    spark.conf.set(native.SETTING, "false")  # the pure-Python path: its plan names dvlake's columns
    spark.conf.set(DEBUG_CONF, "true")
    try:
        with pytest.raises(AnalysisException) as info:
            dvlake.read(spark, dv_table).filter("dya = '1'").count()
    finally:
        spark.conf.unset(DEBUG_CONF)
        spark.conf.unset(native.SETTING)
    assert "__dvlake_" in str(info.value)


@pytest.fixture
def pyspark_error_records() -> Iterator[list[logging.LogRecord]]:
    """The records PySpark's error loggers emit (after their filters), collected by an extra handler."""
    from pyspark.logger import PySparkLogger

    from dvlake.spark.error_logs import PYSPARK_ERROR_LOGGERS

    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect()
    loggers = [PySparkLogger.getLogger(name) for name in PYSPARK_ERROR_LOGGERS]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        yield records
    finally:
        for lg in loggers:
            lg.removeHandler(handler)


def test_no_pyspark_json_record_for_an_error_dvlake_raised(spark: SparkSession, dv_table: str,
                                                          pyspark_error_records: list[logging.LogRecord]) -> None:
    """dvlake resolves a DELETE condition through Spark's analyzer and raises its own short error: PySpark's JSON
    record of the analyzer's error is not written. The user's own typo still gets PySpark's record (only errors
    raised inside dvlake are silenced), and so does dvlake's with spark.dvlake.debug=true."""
    with pytest.raises(DvlakeError) as info:
        DeltaTable.forPath(spark, dv_table).delete("dya = '1'")
    assert "dya" in str(info.value)
    assert pyspark_error_records == []

    with pytest.raises(AnalysisException):
        spark.range(3).filter("dya = 1").count()  # the user's own frame: PySpark's behaviour is unchanged
    assert len(pyspark_error_records) == 1 and "`dya`" in pyspark_error_records[0].getMessage()

    spark.conf.set(DEBUG_CONF, "true")
    try:
        with pytest.raises(DvlakeError):
            DeltaTable.forPath(spark, dv_table).delete("dya = '1'")
    finally:
        spark.conf.unset(DEBUG_CONF)
    assert len(pyspark_error_records) >= 2


def test_the_users_typo_on_a_dvlake_frame_logs_no_dvlake_plan(spark: SparkSession, dv_table: str,
                                                              pyspark_error_records: list[logging.LogRecord]) -> None:
    """A typo in the user's own filter on a frame dvlake read through the pure-Python path: PySpark still logs its
    record (the error is the user's), but its message and exception text do not carry dvlake's anti join plan or
    internal column names, nor the Java stack; with spark.dvlake.debug=true the record is PySpark's, whole."""
    import json

    from dvlake.spark import native

    spark.conf.set(native.SETTING, "false")  # the pure-Python path: its plan names dvlake's columns
    try:
        with pytest.raises(AnalysisException):
            dvlake.read(spark, dv_table).filter("dya = '1'").count()
        assert len(pyspark_error_records) == 1
        record = pyspark_error_records[0]
        shown = json.dumps({"msg": record.getMessage(), "exception": logging.Formatter().formatException(record.exc_info)
                            if record.exc_info else ""})  # what PySpark's JSON formatter writes from the record
        assert "`dya`" in record.getMessage() and len(shown) < 2000, shown
        for internal in (*INTERNALS, "JVM stacktrace", "at org.apache"):
            assert internal not in shown, (internal, shown)

        spark.conf.set(DEBUG_CONF, "true")
        try:
            with pytest.raises(AnalysisException):
                dvlake.read(spark, dv_table).filter("dya = '1'").count()
        finally:
            spark.conf.unset(DEBUG_CONF)
        assert len(pyspark_error_records) == 2
        debug = pyspark_error_records[1]
        assert debug.exc_info and "__dvlake_" in logging.Formatter().formatException(debug.exc_info)
    finally:
        spark.conf.unset(native.SETTING)


def test_schema_errors_name_the_writer_options(spark: SparkSession, dv_table: str) -> None:
    wider = spark.range(1).selectExpr("id", "'0' AS day", "'x' AS note")
    with pytest.raises(SchemaMismatchError) as info:
        dvlake.write(wider, dv_table, mode="append")
    text = str(info.value)
    assert info.value.error_class == "DELTA_METADATA_MISMATCH"
    assert '.option("mergeSchema", "true")' in text and '.option("overwriteSchema", "true")' in text
    assert "overwrite_schema" not in text and "merge_schema" not in text
    other_type = spark.range(1).selectExpr("cast(id AS string) AS id", "'0' AS day")
    with pytest.raises(SchemaMismatchError) as info:
        dvlake.write(other_type, dv_table, mode="append")
    assert info.value.error_class == "DELTA_FAILED_TO_MERGE_FIELDS"
    assert '.option("overwriteSchema", "true")' in str(info.value) and "overwrite_schema" not in str(info.value)
    with pytest.raises(DvlakeError) as info:
        dvlake.write(spark.range(1).selectExpr("id", "'0' AS day"), dv_table, mode="append", partitionBy=["id"])
    assert '.option("overwriteSchema", "true")' in str(info.value) and "overwrite_schema" not in str(info.value)


def test_appending_through_format_delta_without_the_partition_column_is_refused(spark: SparkSession,
                                                                                dv_table: str) -> None:
    """delta-spark refuses it (DELTA_PARTITION_COLUMN_NOT_FOUND); writing NULL partitions would change the table."""
    before = dvlake.read(spark, dv_table).count()
    configure_spark(spark)
    try:
        with pytest.raises(SchemaMismatchError) as info:
            spark.range(5).write.format("delta").mode("append").save(dv_table)
    finally:
        disable(spark)
    assert info.value.error_class == "DELTA_PARTITION_COLUMN_NOT_FOUND" and "'day'" in str(info.value)
    assert dvlake.read(spark, dv_table).count() == before
