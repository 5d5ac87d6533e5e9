"""Type widening through schema evolution, as delta-spark 4.x: by path and by catalog name, DV and copy-on-write.

Rules checked: on a ``delta.enableTypeWidening`` table, an append or overwrite with ``mergeSchema`` (or the session's
``spark.databricks.delta.schema.autoMerge.enabled``) whose data has a wider type widens the column, nested struct
fields, map keys/values and array elements included, recorded in ``delta.typeChanges`` as ALTER COLUMN records it; the
old files are read wide with their exact values, DVs applied; ``allowAutomaticWidening`` picks which widenings apply
by themselves (``always``, ``same_family_type``, ``never``); without the feature, without schema evolution, or for a
change that is no widening, the write fails as before (DELTA_FAILED_TO_MERGE_FIELDS) and commits nothing; a column a
CHECK constraint reads keeps its type (DELTA_CONSTRAINT_DATA_TYPE_MISMATCH).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from dvlake.config import AUTO_MERGE_CONF, AUTOMATIC_WIDENING_CONF, NATIVE_SCAN
from dvlake.errors import DvlakeError
from dvlake.log.snapshot import Snapshot
from dvlake.spark.catalog import table_location
from tests.spark.catalog_helpers import configured_with_database

NARROW = "id INT, v SMALLINT, d DECIMAL(5, 2), dt DATE, s STRUCT<x: INT, y: STRING>, m MAP<INT, FLOAT>, a ARRAY<SMALLINT>"
WIDE = ("id BIGINT, v INT, d DECIMAL(8, 3), dt TIMESTAMP_NTZ, s STRUCT<x: BIGINT, y: STRING>, m MAP<BIGINT, DOUBLE>, "
        "a ARRAY<INT>")


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    with configured_with_database(spark, "evo_db", str(tmp_path / "evo_db")) as session:
        yield session


def _create(spark: SparkSession, tmp_path: Path, name: str, *, by_name: bool, dvs: bool, widening: bool = True,
            columns: str = NARROW, values: tuple[str, str] = ("(1, 1), (2, 2)", "(3, 3)")) -> tuple[str, str]:
    """Ids 1..3 with narrow types in two files, id 2 deleted (a DV when ``dvs``); returns (SQL target, table root)."""
    target = f"evo_db.{name}" if by_name else f"delta.`{tmp_path / name}`"
    props = f"'delta.enableDeletionVectors' = '{str(dvs).lower()}'"
    if widening:
        props += ", 'delta.enableTypeWidening' = 'true'"
    spark.sql(f"CREATE TABLE {target} ({columns}) USING delta TBLPROPERTIES ({props})")
    if columns == NARROW:
        spark.sql(f"INSERT INTO {target} SELECT /*+ REPARTITION(1) */ * FROM VALUES "
                  "(1, 1, 1.25, DATE'2024-01-02', named_struct('x', 11, 'y', 'a'), map(1, 1.5), array(1, 2)), "
                  "(2, 2, 2.50, DATE'2024-02-03', named_struct('x', 22, 'y', 'b'), map(2, 2.5), array(3))")
        spark.sql(f"INSERT INTO {target} VALUES (3, -3, -3.75, DATE'1999-12-31', named_struct('x', -33, 'y', NULL), "
                  "map(-3, 0.25), array(-4))")
    else:
        spark.sql(f"INSERT INTO {target} SELECT /*+ REPARTITION(1) */ * FROM VALUES {values[0]}")
        spark.sql(f"INSERT INTO {target} VALUES {values[1]}")
    spark.sql(f"DELETE FROM {target} WHERE id = 2")
    path = target[len("delta.`"):-1] if not by_name else table_location(spark, target)
    assert (Snapshot.load(path).dv_count() == 1) == dvs
    return target, path


def _wide_data(spark: SparkSession) -> DataFrame:
    return spark.sql(
        "SELECT 5000000000L AS id, 100000 AS v, CAST(12345.678 AS DECIMAL(8, 3)) AS d, "
        "TIMESTAMP_NTZ'2024-05-06 07:08:09' AS dt, named_struct('x', 9000000000L, 'y', 'w') AS s, "
        "map(6000000000L, 1.0E300D) AS m, array(70000) AS a")


def _write(df: DataFrame, target: str, path: str, by_name: bool, mode: str = "append", merge: bool = True) -> None:
    writer = df.write.format("delta").mode(mode)
    if merge:
        writer = writer.option("mergeSchema", "true")
    if by_name:
        writer.saveAsTable(target)
    else:
        writer.save(path)


def _rows(spark: SparkSession, target: str) -> list[tuple]:
    return [(r.id, r.v, r.d, r.dt, None if r.s is None else tuple(r.s), r.m, r.a)
            for r in spark.sql(f"SELECT * FROM {target} ORDER BY id").collect()]


OLD = [(1, 1, Decimal("1.250"), datetime.datetime(2024, 1, 2), (11, "a"), {1: 1.5}, [1, 2]),
       (3, -3, Decimal("-3.750"), datetime.datetime(1999, 12, 31), (-33, None), {-3: 0.25}, [-4])]
NEW = (5000000000, 100000, Decimal("12345.678"), datetime.datetime(2024, 5, 6, 7, 8, 9), (9000000000, "w"),
       {6000000000: 1e300}, [70000])


def _changes(snapshot: Snapshot) -> dict[str, object]:
    """Each top-level field's delta.typeChanges, and those of the struct's nested fields (as ``s.x``)."""
    out: dict[str, object] = {}
    for f in snapshot.schema["fields"]:
        out[f["name"]] = (f.get("metadata") or {}).get("delta.typeChanges")
        if isinstance(f["type"], dict) and f["type"]["type"] == "struct":
            for n in f["type"]["fields"]:
                out[f"{f['name']}.{n['name']}"] = (n.get("metadata") or {}).get("delta.typeChanges")
    return out


EXPECTED_CHANGES = {
    "id": [{"fromType": "integer", "toType": "long"}],
    "v": [{"fromType": "short", "toType": "integer"}],
    "d": [{"fromType": "decimal(5,2)", "toType": "decimal(8,3)"}],
    "dt": [{"fromType": "date", "toType": "timestamp_ntz"}],
    "s": None,
    "s.x": [{"fromType": "integer", "toType": "long"}],
    "s.y": None,
    "m": [{"fromType": "integer", "toType": "long", "fieldPath": "key"},
          {"fromType": "float", "toType": "double", "fieldPath": "value"}],
    "a": [{"fromType": "short", "toType": "integer", "fieldPath": "element"}],
}


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False), (True, True)])
def test_merge_schema_append_widens_every_kind(dspark: SparkSession, tmp_path: Path, by_name: bool, dvs: bool) -> None:
    target, path = _create(dspark, tmp_path, "every", by_name=by_name, dvs=dvs)
    before = Snapshot.load(path)
    _write(_wide_data(dspark), target, path, by_name)
    snapshot = Snapshot.load(path)
    assert snapshot.version == before.version + 1 and snapshot.num_files == before.num_files + 1  # old files stay
    assert "typeWidening" in set(snapshot.protocol.reader_features or ()) & set(snapshot.protocol.writer_features or ())
    assert _changes(snapshot) == EXPECTED_CHANGES
    assert [(f.name, f.dataType.simpleString()) for f in dspark.table(target).schema.fields] == [
        ("id", "bigint"), ("v", "int"), ("d", "decimal(8,3)"), ("dt", "timestamp_ntz"), ("s", "struct<x:bigint,y:string>"),
        ("m", "map<bigint,double>"), ("a", "array<int>")]
    for native in ("true", "false"):
        dspark.conf.set(NATIVE_SCAN, native)
        try:
            assert _rows(dspark, target) == [*OLD, NEW], native
        finally:
            dspark.conf.unset(NATIVE_SCAN)
    assert dspark.sql(f"DESCRIBE HISTORY {target} LIMIT 1").first().operation == "WRITE"
    # a second append of the same wide data changes nothing more
    _write(_wide_data(dspark), target, path, by_name)
    assert _changes(Snapshot.load(path)) == EXPECTED_CHANGES
    assert len(_rows(dspark, target)) == 4


def test_auto_merge_session_setting_and_overwrite(dspark: SparkSession, tmp_path: Path) -> None:
    target, path = _create(dspark, tmp_path, "auto", by_name=False, dvs=True)
    dspark.conf.set(AUTO_MERGE_CONF, "true")
    try:
        _write(_wide_data(dspark).select("id", "v"), target, path, False, merge=False)
    finally:
        dspark.conf.unset(AUTO_MERGE_CONF)
    changes = _changes(Snapshot.load(path))
    assert (changes["id"], changes["v"], changes["d"]) == (EXPECTED_CHANGES["id"], EXPECTED_CHANGES["v"], None)
    assert [(r.id, r.v, r.d) for r in dspark.sql(f"SELECT id, v, d FROM {target} ORDER BY id").collect()] == [
        (1, 1, Decimal("1.25")), (3, -3, Decimal("-3.75")), (5000000000, 100000, None)]
    # overwrite with mergeSchema widens too, and keeps the recorded history of the earlier change
    _write(_wide_data(dspark).select("id", "d"), target, path, False, mode="overwrite")
    changes = _changes(Snapshot.load(path))
    assert (changes["id"], changes["d"]) == (EXPECTED_CHANGES["id"], EXPECTED_CHANGES["d"])
    assert [(r.id, r.v, r.d) for r in dspark.sql(f"SELECT id, v, d FROM {target}").collect()] == [
        (5000000000, None, Decimal("12345.678"))]


@pytest.mark.parametrize(("mode", "widened"), [("always", True), ("same_family_type", False), ("never", False)])
def test_automatic_widening_mode(dspark: SparkSession, tmp_path: Path, mode: str, widened: bool) -> None:
    """int → double is a widening of the feature but not of one type family: only ``always`` applies it."""
    target, path = _create(dspark, tmp_path, f"mode_{mode}", by_name=False, dvs=True, columns="id INT, v INT")
    version = Snapshot.load(path).version
    data = dspark.sql("SELECT 4 AS id, 0.5D AS v")
    dspark.conf.set(AUTOMATIC_WIDENING_CONF, mode)
    try:
        if widened:
            _write(data, target, path, False)
        else:
            with pytest.raises(DvlakeError) as err:
                _write(data, target, path, False)
            assert getattr(err.value, "error_class", None) == "DELTA_FAILED_TO_MERGE_FIELDS"
    finally:
        dspark.conf.unset(AUTOMATIC_WIDENING_CONF)
    snapshot = Snapshot.load(path)
    if widened:
        assert _changes(snapshot) == {"id": None, "v": [{"fromType": "integer", "toType": "double"}]}
        assert [(r.id, r.v) for r in dspark.sql(f"SELECT * FROM {target} ORDER BY id").collect()] == [
            (1, 1.0), (3, 3.0), (4, 0.5)]
    else:
        assert snapshot.version == version and _changes(snapshot) == {"id": None, "v": None}
    # a narrowing keeps the column's type and casts, as before; a long for the (now maybe double) column stays refused
    data = dspark.sql("SELECT CAST(5 AS TINYINT) AS id")
    _write(data, target, path, False)
    assert Snapshot.load(path).schema["fields"][0]["type"] == "integer"


@pytest.mark.parametrize(("widening", "merge"), [(False, True), (True, False)])
def test_without_the_feature_or_schema_evolution_the_write_fails_as_before(dspark: SparkSession, tmp_path: Path,
                                                                          widening: bool, merge: bool) -> None:
    target, path = _create(dspark, tmp_path, "off", by_name=False, dvs=True, widening=widening, columns="id INT, v INT")
    version = Snapshot.load(path).version
    with pytest.raises(DvlakeError) as err:
        _write(dspark.sql("SELECT 4 AS id, 5000000000L AS v"), target, path, False, merge=merge)
    assert getattr(err.value, "error_class", None) == "DELTA_FAILED_TO_MERGE_FIELDS"
    assert Snapshot.load(path).version == version


def test_no_widening_is_refused_and_commits_nothing(dspark: SparkSession, tmp_path: Path) -> None:
    """string for int, and int → decimal(5, 0) (too few integer digits for every int), are no widenings."""
    target, path = _create(dspark, tmp_path, "no", by_name=False, dvs=True, columns="id INT, v INT")
    version = Snapshot.load(path).version
    for data in ("SELECT 4 AS id, 'x' AS v", "SELECT 4 AS id, CAST(1 AS DECIMAL(5, 0)) AS v"):
        with pytest.raises(DvlakeError) as err:
            _write(dspark.sql(data), target, path, False)
        assert getattr(err.value, "error_class", None) == "DELTA_FAILED_TO_MERGE_FIELDS", data
    assert Snapshot.load(path).version == version


def test_a_column_a_check_constraint_reads_keeps_its_type(dspark: SparkSession, tmp_path: Path) -> None:
    target, path = _create(dspark, tmp_path, "checked", by_name=False, dvs=True, columns="id INT, v INT")
    dspark.sql(f"ALTER TABLE {target} ADD CONSTRAINT v_pos CHECK (v > 0)")
    version = Snapshot.load(path).version
    with pytest.raises(DvlakeError) as err:
        _write(dspark.sql("SELECT 4 AS id, 5000000000L AS v"), target, path, False)
    assert getattr(err.value, "error_class", None) == "DELTA_CONSTRAINT_DATA_TYPE_MISMATCH"
    assert "v_pos" in str(err.value)
    assert Snapshot.load(path).version == version
    _write(dspark.sql("SELECT 5000000000L AS id, 4 AS v"), target, path, False)  # id has no constraint: it widens
    assert _changes(Snapshot.load(path)) == {"id": [{"fromType": "integer", "toType": "long"}], "v": None}


def test_independent_readers_after_evolution(dspark: SparkSession, tmp_path: Path) -> None:
    """DuckDB reads the widened table (old files widened, DV applied); delta-rs refuses the typeWidening feature by
    name (its error), as for ALTER COLUMN."""
    from tests.peers import read_with_deltalake, read_with_duckdb, rows

    target, path = _create(dspark, tmp_path, "peers", by_name=False, dvs=True, columns="id INT, v INT")
    _write(dspark.sql("SELECT 5000000000L AS id, 7 AS v"), target, path, False)
    duck = read_with_duckdb(path)
    assert str(duck.schema.field("id").type) == "int64"
    assert sorted(rows(duck, ["id", "v"])) == [(1, 1), (3, 3), (5000000000, 7)]
    with pytest.raises(Exception, match="TypeWidening"):
        read_with_deltalake(path)


MERGE_SOURCE = ("SELECT * FROM VALUES (2L, 100000, named_struct('x', 9000000000L, 'y', 'B')), (4L, 4, named_struct('x', 4L, "
                "'y', 'D')) AS src(id, v, s)")


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False), (False, False)])
def test_merge_with_schema_evolution_widens_star_clauses(dspark: SparkSession, tmp_path: Path, by_name: bool,
                                                         dvs: bool) -> None:
    target, path = _create(dspark, tmp_path, "merge_star", by_name=by_name, dvs=dvs,
                           columns="id INT, v SMALLINT, s STRUCT<x: INT, y: STRING>",
                           values=("(1, 1, named_struct('x', 1, 'y', CAST(NULL AS STRING))), (2, 2, named_struct('x', 2, "
                                   "'y', 'b'))", "(3, 3, named_struct('x', 3, 'y', CAST(NULL AS STRING)))"))
    dspark.sql(f"INSERT INTO {target} VALUES (2, 2, named_struct('x', 2, 'y', 'b'))")  # a live id 2 to update
    dspark.sql(f"CREATE OR REPLACE TEMP VIEW evo_src AS {MERGE_SOURCE}")
    dspark.sql(f"MERGE WITH SCHEMA EVOLUTION INTO {target} t USING evo_src s ON t.id = s.id "
               "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    snapshot = Snapshot.load(path)
    assert _changes(snapshot) == {"id": [{"fromType": "integer", "toType": "long"}],
                                  "v": [{"fromType": "short", "toType": "integer"}], "s": None,
                                  "s.x": [{"fromType": "integer", "toType": "long"}], "s.y": None}
    assert (snapshot.dv_count() > 0) == dvs
    got = [(r.id, r.v, tuple(r.s)) for r in dspark.sql(f"SELECT * FROM {target} ORDER BY id").collect()]
    assert got == [(1, 1, (1, None)), (2, 100000, (9000000000, "B")), (3, 3, (3, None)), (4, 4, (4, "D"))]
    assert dspark.table(target).schema.simpleString() == "struct<id:bigint,v:int,s:struct<x:bigint,y:string>>"


def test_merge_widens_an_assigned_column_only_with_evolution(dspark: SparkSession, tmp_path: Path) -> None:
    """``SET t.v = s.v`` brings the source's type for v (delta-spark's assigned-path rule); the key column id, only
    read by the condition, keeps its type. Without schema evolution nothing changes and the value is cast."""
    target, path = _create(dspark, tmp_path, "merge_set", by_name=False, dvs=True, columns="id INT, v SMALLINT")
    dspark.sql("CREATE OR REPLACE TEMP VIEW evo_src AS SELECT * FROM VALUES (1L, 300), (3L, 70000) AS src(id, v)")
    version = Snapshot.load(path).version
    dspark.sql(f"MERGE INTO {target} t USING evo_src s ON t.id = s.id AND s.v < 1000 WHEN MATCHED THEN UPDATE SET t.v = s.v")
    snapshot = Snapshot.load(path)
    assert snapshot.version == version + 1 and _changes(snapshot) == {"id": None, "v": None}
    dspark.conf.set(AUTO_MERGE_CONF, "true")
    try:
        dspark.sql(f"MERGE INTO {target} t USING evo_src s ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.v = s.v")
    finally:
        dspark.conf.unset(AUTO_MERGE_CONF)
    assert _changes(Snapshot.load(path)) == {"id": None, "v": [{"fromType": "short", "toType": "integer"}]}
    assert [(r.id, r.v) for r in dspark.sql(f"SELECT * FROM {target} ORDER BY id").collect()] == [(1, 300), (3, 70000)]


def test_streaming_sink_with_merge_schema_widens(dspark: SparkSession, tmp_path: Path) -> None:
    """The Delta sink writes each micro-batch through the same write path: mergeSchema widens there too."""
    target, path = _create(dspark, tmp_path, "sink", by_name=False, dvs=True, columns="id INT, v INT")
    src = tmp_path / "in"
    dspark.sql("SELECT 5000000000L AS id, 7 AS v").write.parquet(str(src))
    q = (dspark.readStream.schema("id BIGINT, v INT").parquet(str(src)).writeStream.format("delta")
         .option("checkpointLocation", str(tmp_path / "chk")).option("mergeSchema", "true")
         .trigger(availableNow=True).start(path))
    q.awaitTermination()
    snapshot = Snapshot.load(path)
    assert _changes(snapshot) == {"id": [{"fromType": "integer", "toType": "long"}], "v": None}
    assert dspark.sql(f"DESCRIBE HISTORY {target} LIMIT 1").first().operation == "STREAMING UPDATE"
    assert [(r.id, r.v) for r in dspark.sql(f"SELECT * FROM {target} ORDER BY id").collect()] == [
        (1, 1), (3, 3), (5000000000, 7)]
