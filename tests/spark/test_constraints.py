"""CHECK constraints and column invariants, as delta-spark keeps and enforces them.

Each test states the rule it checks. Tables here are small sensor readings (``sensor``, ``reading``,
``site``); the constraint most use is ``reading_range``: a reading lies between 0 and 100.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.config import MERGE_DVS_PERSISTENT, UPDATE_DVS_PERSISTENT
from dvlake.errors import CheckConstraintViolationError, DeltaAnalysisException, DeltaInvariantViolationException
from dvlake.log.actions import Protocol
from dvlake.log.snapshot import Snapshot
from dvlake.sql import sql

DV_PROPS = {"delta.enableDeletionVectors": "true"}
RANGE = "reading >= 0 AND reading <= 100"
ROWS = [(1, 20.5, "north"), (2, 75.0, "north"), (3, 99.0, "south"), (4, 0.0, "south")]
SCHEMA = "sensor int, reading double, site string"


def _table(spark: SparkSession, path: str, props: dict[str, str] | None = None, rows=ROWS) -> str:
    dvlake.write(spark.createDataFrame(rows, SCHEMA).coalesce(1), path, properties=props)
    return path


def _constrained(spark: SparkSession, path: str, props: dict[str, str] | None = DV_PROPS) -> str:
    _table(spark, path, props)
    sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT reading_range CHECK ({RANGE})")
    return path


def _readings(spark: SparkSession, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in dvlake.read(spark, path).collect())


def _violates(path: str, run, *values: str) -> CheckConstraintViolationError:
    """``run`` fails with delta-spark's violation error naming the constraint and values; the table is unchanged."""
    before = Snapshot.load(path).version
    with pytest.raises(CheckConstraintViolationError) as info:
        run()
    err = info.value
    assert err.getCondition() == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" and err.getSqlState() == "23001"
    text = str(err)
    assert "CHECK constraint reading_range ((reading >= 0) AND (reading <= 100)) violated by row with values:" in text
    for v in values:
        assert v in text
    assert Snapshot.load(path).version == before
    return err


# --- ALTER TABLE … ADD / DROP CONSTRAINT ---------------------------------------------------------------


def test_add_constraint_stores_it_lower_cased_and_upgrades_a_legacy_protocol(spark, tmp_path):
    """Rule: ADD CONSTRAINT keeps the expression as its tokens joined by spaces under
    ``delta.constraints.<lower-cased name>`` and raises a (1, 2) protocol to writer version 3 in the same commit."""
    path = _table(spark, str(tmp_path / "t"))
    assert Snapshot.load(path).protocol == Protocol(1, 2)
    sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT Reading_Range CHECK (reading>=0 AND length(site)>1)")
    snap = Snapshot.load(path)
    assert snap.configuration["delta.constraints.reading_range"] == "reading >= 0 AND length ( site ) > 1"
    assert snap.protocol == Protocol(1, 3)
    entry = snap.history()[0]
    assert entry["operation"] == "ADD CONSTRAINT"
    assert entry["operationParameters"] == {"name": "Reading_Range", "expr": "reading >= 0 AND length ( site ) > 1"}


def test_add_constraint_lists_the_feature_on_a_table_features_protocol(spark, tmp_path):
    """Rule: a table already on table features (deletion vectors) gets ``checkConstraints`` in writerFeatures."""
    path = _constrained(spark, str(tmp_path / "t"))
    protocol = Snapshot.load(path).protocol
    assert (protocol.min_reader_version, protocol.min_writer_version) == (3, 7)
    assert "checkConstraints" in protocol.writer_features and "deletionVectors" in protocol.reader_features


def test_existing_live_rows_must_satisfy_a_new_constraint(spark, tmp_path):
    """Rule: rows already in the table that violate the new constraint refuse it
    (DELTA_NEW_CHECK_CONSTRAINT_VIOLATION, 23512, with their count); rows a deletion vector removed do not count."""
    path = _table(spark, str(tmp_path / "t"), DV_PROPS, ROWS + [(5, -3.0, "east"), (6, 140.0, "east")])
    with pytest.raises(DeltaAnalysisException) as info:
        sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT reading_range CHECK ({RANGE})")
    assert info.value.getCondition() == "DELTA_NEW_CHECK_CONSTRAINT_VIOLATION" and info.value.getSqlState() == "23512"
    assert "2 rows in" in str(info.value) and "violate the new CHECK constraint" in str(info.value)
    assert "delta.constraints.reading_range" not in Snapshot.load(path).configuration
    DeltaTable.forPath(spark, path).delete("site = 'east'")
    assert Snapshot.load(path).dv_count() == 1  # the bad rows are still in the file, hidden by a DV
    sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT reading_range CHECK ({RANGE})")
    assert "delta.constraints.reading_range" in Snapshot.load(path).configuration


def test_a_null_result_violates_a_new_constraint(spark, tmp_path):
    """Rule: a row for which the expression is NULL does not satisfy it (delta-spark counts NOT expr OR expr IS NULL)."""
    path = _table(spark, str(tmp_path / "t"), None, ROWS + [(7, None, "west")])
    with pytest.raises(DeltaAnalysisException, match="1 rows in"):
        sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT reading_range CHECK ({RANGE})")


@pytest.mark.parametrize(("expression", "condition"), [
    ("reading + 1", "DELTA_NON_BOOLEAN_CHECK_CONSTRAINT"),
    ("rand() < 2", "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_CHECK_CONSTRAINT"),
])
def test_a_constraint_must_be_a_deterministic_boolean(spark, tmp_path, expression, condition):
    """Rule: delta-spark refuses a non-boolean or non-deterministic CHECK expression before looking at any row."""
    path = _table(spark, str(tmp_path / "t"))
    with pytest.raises(DeltaAnalysisException) as info:
        sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT c CHECK ({expression})")
    assert info.value.getCondition() == condition and info.value.getSqlState() == "42621"
    assert Snapshot.load(path).version == 0


def test_a_constraint_on_a_missing_column_is_an_analysis_error(spark, tmp_path):
    """Rule: the expression is resolved against the table's columns: an unknown name is Spark's UNRESOLVED_COLUMN."""
    path = _table(spark, str(tmp_path / "t"))
    with pytest.raises(Exception, match="UNRESOLVED_COLUMN"):
        sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT c CHECK (humidity > 0)")
    assert Snapshot.load(path).version == 0


def test_a_second_constraint_of_the_same_name_is_refused(spark, tmp_path):
    """Rule: names are case-insensitive; adding one that exists is DELTA_CONSTRAINT_ALREADY_EXISTS (42710),
    quoting the old expression."""
    path = _constrained(spark, str(tmp_path / "t"))
    with pytest.raises(DeltaAnalysisException) as info:
        sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT READING_RANGE CHECK (reading < 50)")
    assert info.value.getCondition() == "DELTA_CONSTRAINT_ALREADY_EXISTS" and info.value.getSqlState() == "42710"
    assert "reading >= 0 AND reading <= 100" in str(info.value)


def test_drop_constraint_removes_it_and_keeps_the_protocol(spark, tmp_path):
    """Rule: DROP CONSTRAINT removes the property (recording the old expression); the feature stays in the protocol;
    writes the constraint refused are accepted again."""
    path = _constrained(spark, str(tmp_path / "t"))
    protocol = Snapshot.load(path).protocol
    sql(spark, f"ALTER TABLE delta.`{path}` DROP CONSTRAINT Reading_Range")
    snap = Snapshot.load(path)
    assert "delta.constraints.reading_range" not in snap.configuration and snap.protocol == protocol
    assert snap.history()[0]["operationParameters"] == {"name": "Reading_Range", "expr": RANGE, "existed": "true"}
    dvlake.write(spark.createDataFrame([(9, 500.0, "x")], SCHEMA), path, mode="append")
    assert (9, 500.0, "x") in _readings(spark, path)


def test_dropping_a_missing_constraint(spark, tmp_path):
    """Rule: without IF EXISTS a missing constraint is DELTA_CONSTRAINT_DOES_NOT_EXIST (42704); with it, or with
    ``spark.databricks.delta.constraints.assumesDropIfExists.enabled``, delta-spark commits recording existed=false."""
    path = _table(spark, str(tmp_path / "t"))
    with pytest.raises(DeltaAnalysisException) as info:
        sql(spark, f"ALTER TABLE delta.`{path}` DROP CONSTRAINT nope")
    assert info.value.getCondition() == "DELTA_CONSTRAINT_DOES_NOT_EXIST" and info.value.getSqlState() == "42704"
    sql(spark, f"ALTER TABLE delta.`{path}` DROP CONSTRAINT IF EXISTS nope")
    assert Snapshot.load(path).history()[0]["operationParameters"] == {"name": "nope", "existed": "false"}
    spark.conf.set("spark.databricks.delta.constraints.assumesDropIfExists.enabled", "true")
    try:
        sql(spark, f"ALTER TABLE delta.`{path}` DROP CONSTRAINT nope")
    finally:
        spark.conf.unset("spark.databricks.delta.constraints.assumesDropIfExists.enabled")
    assert Snapshot.load(path).version == 2


def test_constraints_cannot_be_set_as_properties(spark, tmp_path):
    """Rule (AlterTableSetPropertiesDeltaCommand): any key starting ``delta.constraints.`` (in any case) refuses the
    whole SET TBLPROPERTIES with DELTA_ADD_CONSTRAINTS (0A000), even an existing constraint's key; nothing is
    committed, the other keys of the statement included."""
    path = _constrained(spark, str(tmp_path / "t"))
    before = Snapshot.load(path)
    for assignments in ("'delta.constraints.c' = 'reading > 0'",
                        "'delta.appendOnly' = 'true', 'Delta.Constraints.Low' = 'reading < 5'",
                        f"'delta.constraints.reading_range' = '{RANGE}'"):
        with pytest.raises(DeltaAnalysisException) as info:
            sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({assignments})")
        assert info.value.getCondition() == "DELTA_ADD_CONSTRAINTS" and info.value.getSqlState() == "0A000"
        assert "ALTER TABLE ADD CONSTRAINT" in str(info.value)
    after = Snapshot.load(path)
    assert (after.version, after.configuration, after.protocol) == (before.version, before.configuration, before.protocol)


def test_unsetting_a_constraint_property_drops_the_constraint(spark, tmp_path):
    """Rule (AlterTableUnsetPropertiesDeltaCommand): unlike SET, UNSET TBLPROPERTIES has no case for
    ``delta.constraints.*`` in delta-spark: the key is removed like any property (an UNSET TBLPROPERTIES commit,
    not DROP CONSTRAINT), the protocol keeps checkConstraints, and rows the constraint refused are accepted again."""
    path = _constrained(spark, str(tmp_path / "t"))
    protocol = Snapshot.load(path).protocol
    _violates(path, lambda: dvlake.write(spark.createDataFrame([(8, 250.0, "x")], SCHEMA), path, mode="append"),
              " - reading : 250.0")
    sql(spark, f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ('delta.constraints.reading_range')")
    snap = Snapshot.load(path)
    assert "delta.constraints.reading_range" not in snap.configuration and snap.protocol == protocol
    entry = snap.history()[0]
    assert entry["operation"] == "UNSET TBLPROPERTIES"
    assert json.loads(entry["operationParameters"]["properties"]) == ["delta.constraints.reading_range"]
    dvlake.write(spark.createDataFrame([(8, 250.0, "x")], SCHEMA), path, mode="append")
    assert (8, 250.0, "x") in _readings(spark, path)


# --- enforcement on every path that adds rows -------------------------------------------------------------


def test_appends_and_overwrites_are_checked(dspark, tmp_path):
    """Rule: every written row is checked (dvlake.write, format("delta") save and insertInto-like SQL INSERT,
    overwrite); a violation names the constraint, its expression as Spark prints it and the row's values, and
    nothing is committed."""
    path = _constrained(dspark, str(tmp_path / "t"))
    bad = dspark.createDataFrame([(10, 50.0, "a"), (11, 101.5, "b")], SCHEMA)
    _violates(path, lambda: dvlake.write(bad, path, mode="append"), " - reading : 101.5")
    _violates(path, lambda: bad.write.format("delta").mode("append").save(path), " - reading : 101.5")
    _violates(path, lambda: bad.write.format("delta").mode("overwrite").save(path), " - reading : 101.5")
    _violates(path, lambda: sql(dspark, f"INSERT INTO delta.`{path}` VALUES (12, -0.5, 'c')"), " - reading : -0.5")
    _violates(path, lambda: sql(dspark, f"INSERT INTO delta.`{path}` VALUES (12, NULL, 'c')"), " - reading : null")
    dvlake.write(dspark.createDataFrame([(13, 100.0, "d")], SCHEMA), path, mode="append")
    sql(dspark, f"INSERT INTO delta.`{path}` VALUES (14, 0.0, 'e')")
    assert len(_readings(dspark, path)) == 6


def test_the_message_lists_every_column_the_constraint_reads(spark, tmp_path):
    """Rule: the values of all columns the expression reads are listed, sorted by name, one `` - name : value`` line each."""
    path = _table(spark, str(tmp_path / "t"))
    sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT site_reading CHECK (site <> 'x' OR reading < 10)")
    with pytest.raises(CheckConstraintViolationError) as info:
        dvlake.write(spark.createDataFrame([(1, 12.0, "x")], SCHEMA), path, mode="append")
    assert "violated by row with values:\n - reading : 12.0\n - site : x" in str(info.value)


@pytest.mark.parametrize("dvs", [True, False], ids=["dv", "copy_on_write"])
def test_update_checks_the_updated_rows(spark, tmp_path, dvs):
    """Rule: UPDATE checks the rows it writes, with deletion vectors and copy-on-write alike."""
    path = _constrained(spark, str(tmp_path / "t"))
    spark.conf.set(UPDATE_DVS_PERSISTENT, str(dvs).lower())
    try:
        dt = DeltaTable.forPath(spark, path)
        _violates(path, lambda: dt.update("sensor = 2", {"reading": "reading * 2"}), " - reading : 150.0")
        _violates(path, lambda: sql(spark, f"UPDATE delta.`{path}` SET reading = -1 WHERE site = 'south'"),
                  " - reading : -1.0")
        dt.update("sensor = 2", {"reading": "reading + 25"})
    finally:
        spark.conf.unset(UPDATE_DVS_PERSISTENT)
    assert (2, 100.0, "north") in _readings(spark, path)


@pytest.mark.parametrize("dvs", [True, False], ids=["dv", "copy_on_write"])
def test_merge_checks_updated_and_inserted_rows(spark, tmp_path, dvs):
    """Rule: MERGE checks the rows its UPDATE and INSERT clauses write, in both modes; the table is unchanged
    when one breaks the constraint."""
    path = _constrained(spark, str(tmp_path / "t"))
    spark.conf.set(MERGE_DVS_PERSISTENT, str(dvs).lower())
    try:
        def merge(rows):
            src = spark.createDataFrame(rows, SCHEMA)
            (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.sensor = s.sensor")
             .whenMatchedUpdate(set={"reading": "s.reading"}).whenNotMatchedInsertAll().execute())

        _violates(path, lambda: merge([(1, 300.0, "north")]), " - reading : 300.0")
        _violates(path, lambda: merge([(8, -7.0, "west")]), " - reading : -7.0")
        merge([(1, 30.0, "north"), (8, 7.0, "west")])
    finally:
        spark.conf.unset(MERGE_DVS_PERSISTENT)
    assert {(1, 30.0, "north"), (8, 7.0, "west")} <= set(_readings(spark, path))


def test_the_streaming_sink_checks_each_micro_batch(dspark, tmp_path):
    """Rule: the Delta sink writes each micro-batch as an append, so a violating batch fails the query uncommitted."""
    path = _constrained(dspark, str(tmp_path / "t"))
    src = tmp_path / "in"
    dspark.createDataFrame([(20, 500.0, "s")], SCHEMA).write.parquet(str(src))
    before = Snapshot.load(path).version
    q = (dspark.readStream.schema(SCHEMA).parquet(str(src)).writeStream.format("delta")
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start(path))
    with pytest.raises(Exception, match="reading_range"):
        q.awaitTermination()
    assert Snapshot.load(path).version == before


def test_rewrites_and_deletes_work_on_a_constrained_table(spark, tmp_path):
    """Rule: DELETE, OPTIMIZE and REORG … APPLY (PURGE) do not change values, so they run on a constrained table
    (dvlake refused every write to such a table before)."""
    path = _constrained(spark, str(tmp_path / "t"))
    dvlake.write(spark.createDataFrame([(5, 5.0, "x")], SCHEMA), path, mode="append")
    DeltaTable.forPath(spark, path).delete("sensor = 1")
    sql(spark, f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    assert [r[0] for r in _readings(spark, path)] == [2, 3, 4, 5]


def _commit_raw(path: str, configuration: dict[str, str] | None = None, invariant: tuple[str, str] | None = None) -> None:
    """Commit the next version as another writer would: a CHECK constraint in the configuration, or an old-style
    column invariant in a field's metadata, with the protocol those need."""
    log = Path(path) / "_delta_log"
    version = Snapshot.load(path).version
    actions = [json.loads(line) for line in (log / f"{0:020d}.json").read_text().splitlines() if line.strip()]
    metadata = next(a for a in actions if "metaData" in a)["metaData"]
    metadata["configuration"].update(configuration or {})
    if invariant is not None:
        schema = json.loads(metadata["schemaString"])
        field = next(f for f in schema["fields"] if f["name"] == invariant[0])
        field["metadata"]["delta.invariants"] = json.dumps({"expression": {"expression": invariant[1]}})
        metadata["schemaString"] = json.dumps(schema)
    (log / f"{version + 1:020d}.json").write_text(
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 3}}) + "\n" + json.dumps({"metaData": metadata})
        + "\n")


def test_a_constraint_written_by_another_engine_is_enforced(spark, tmp_path):
    """Rule: a table whose log carries ``delta.constraints.*`` (writer version 3) is writable and checked."""
    path = _table(spark, str(tmp_path / "t"))
    _commit_raw(path, {"delta.constraints.reading_range": RANGE})
    dvlake.write(spark.createDataFrame([(5, 1.0, "x")], SCHEMA), path, mode="append")
    _violates(path, lambda: dvlake.write(spark.createDataFrame([(6, 1000.0, "x")], SCHEMA), path, mode="append"),
              " - reading : 1000.0")


def test_a_column_invariant_is_enforced(spark, tmp_path):
    """Rule: an old-style invariant (``delta.invariants`` in the field's metadata) is checked on every written row,
    reported as delta-spark names it (``EXPRESSION(<expr>)``, then the expression)."""
    path = _table(spark, str(tmp_path / "t"))
    _commit_raw(path, invariant=("reading", "reading < 1000"))
    dvlake.write(spark.createDataFrame([(5, 999.0, "x")], SCHEMA), path, mode="append")
    with pytest.raises(CheckConstraintViolationError) as info:
        DeltaTable.forPath(spark, path).update("sensor = 5", {"reading": "5000"})
    assert ("CHECK constraint EXPRESSION((reading < 1000)) (reading < 1000) violated by row with values:\n"
            " - reading : 5000.0") in str(info.value)


def test_not_null_columns_are_checked_on_append(spark, tmp_path):
    """Rule: a NULL appended into a NOT NULL column is DELTA_NOT_NULL_CONSTRAINT_VIOLATED, nothing committed."""
    path = str(tmp_path / "t")
    DeltaTable.create(spark).location(path).addColumn("sensor", "int", nullable=False).addColumn("reading", "double") \
        .execute()
    with pytest.raises(DeltaInvariantViolationException) as info:
        dvlake.write(spark.createDataFrame([(None, 1.0)], "sensor int, reading double"), path, mode="append")
    assert info.value.getCondition() == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" and "sensor" in str(info.value)
    assert Snapshot.load(path).version == 0


def test_column_mapping_and_nested_fields(dspark, tmp_path):
    """Rule: constraints name logical columns (nested fields too); a column-mapped table checks the logical values."""
    path = str(tmp_path / "t")
    rows = [(1, (45.0, 7.5)), (2, (-12.0, 100.0))]
    dvlake.write(dspark.createDataFrame(rows, "sensor int, loc struct<lat: double, lon: double>"), path,
                 properties={"delta.columnMapping.mode": "name"})
    sql(dspark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT lat_ok CHECK (loc.lat >= -90 AND loc.lat <= 90)")
    bad = dspark.createDataFrame([(3, (91.0, 0.0))], "sensor int, loc struct<lat: double, lon: double>")
    with pytest.raises(CheckConstraintViolationError) as info:
        bad.write.format("delta").mode("append").save(path)
    assert ("CHECK constraint lat_ok ((loc.lat >= -90) AND (loc.lat <= 90)) violated by row with values:\n"
            " - loc.lat : 91.0") in str(info.value)
    assert Snapshot.load(path).version == 1


def test_constraints_given_at_creation(spark, tmp_path):
    """Rule: a new table may carry ``delta.constraints.*`` properties (delta-spark accepts them at creation and
    enables the feature: writer version 3); its first rows are already checked, and a failure creates nothing."""
    path = str(tmp_path / "t")
    bad = spark.createDataFrame(ROWS + [(9, -1.0, "x")], SCHEMA)
    with pytest.raises(CheckConstraintViolationError):
        dvlake.write(bad, path, properties={"delta.constraints.reading_range": RANGE})
    assert not (tmp_path / "t" / "_delta_log").exists() or not list((tmp_path / "t" / "_delta_log").glob("*.json"))
    _table(spark, path, {"delta.constraints.reading_range": RANGE})
    assert Snapshot.load(path).protocol == Protocol(1, 3)
    _violates(path, lambda: dvlake.write(bad, path, mode="append"), " - reading : -1.0")


def test_on_a_delta_spark_table_with_deletion_vectors(spark, testdata, tmp_path):
    """Rule: on delta-spark's ``dv-with-columnmapping`` (15 DELETEs kept as DVs, column mapping, partitions), only live
    rows are checked when the constraint is added: a value that only DV-deleted rows hold does not refuse it; the
    protocol lists the feature; then a write of that value is refused."""
    from tests.conftest import copy_table

    path = str(copy_table(testdata / "dv-with-columnmapping", tmp_path / "t"))
    live = {r["col1"] for r in dvlake.read(spark, path).collect()}
    deleted = sorted({r["col1"] for r in dvlake.read(spark, path, version=0).collect()} - live)
    assert deleted and Snapshot.load(path).dv_count() > 0
    gone = deleted[0]
    with pytest.raises(DeltaAnalysisException, match="1 rows in"):  # one live row holds the largest value
        sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT below_max CHECK (col1 < {max(live)})")
    sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT not_gone CHECK (col1 <> {gone})")
    snap = Snapshot.load(path)
    assert snap.configuration["delta.constraints.not_gone"] == f"col1 <> {gone}"
    assert "checkConstraints" in snap.protocol.writer_features and "columnMapping" in snap.protocol.writer_features
    bad = spark.createDataFrame([(0, gone, "x")], "part int, col1 int, col2 string")
    with pytest.raises(CheckConstraintViolationError) as info:
        dvlake.write(bad, path, mode="append")
    assert f"CHECK constraint not_gone (NOT (col1 = {gone})) violated by row with values:\n - col1 : {gone}" in str(info.value)
    assert Snapshot.load(path).version == snap.version


def test_not_null_fields_inside_structs_and_odd_column_names(spark, tmp_path):
    """Rule: a NOT NULL field inside a nullable struct is checked only where the struct is present; a NOT NULL column
    whose name holds a dot and a space is checked like any other (the check is one SQL text)."""
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    path = str(tmp_path / "t")
    inner = StructType([StructField("x", IntegerType(), False), StructField("y", IntegerType(), True)])
    DeltaTable.create(spark).location(path).addColumn("id", "int", nullable=False) \
        .addColumn("s", inner, nullable=True).addColumn("odd.name x", StringType(), nullable=False).execute()
    schema = StructType([StructField("id", IntegerType()), StructField("s", inner.__class__(
        [StructField("x", IntegerType(), True), StructField("y", IntegerType(), True)])),
        StructField("odd.name x", StringType())])
    dvlake.write(spark.createDataFrame([(1, None, "a"), (2, (5, None), "b")], schema), path, mode="append")
    with pytest.raises(DeltaInvariantViolationException) as info:
        dvlake.write(spark.createDataFrame([(3, (None, 1), "c")], schema), path, mode="append")
    assert info.value.getCondition() == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED" and "s.x" in str(info.value)
    with pytest.raises(DeltaInvariantViolationException) as info:
        dvlake.write(spark.createDataFrame([(4, None, None)], schema), path, mode="append")
    assert "odd.name x" in str(info.value)
    assert Snapshot.load(path).version == 1
    assert sorted(r["id"] for r in dvlake.read(spark, path).collect()) == [1, 2]
