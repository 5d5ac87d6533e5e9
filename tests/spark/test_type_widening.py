"""Type widening (the ``typeWidening`` feature) through ``spark.sql``, as delta-spark 4.x: by path and by catalog name.

Rules checked: ``delta.enableTypeWidening`` (CREATE and SET TBLPROPERTIES) adds ``typeWidening`` to both feature
lists (protocol 3/7); without it a change of type keeps DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP. ALTER COLUMN …
TYPE and CHANGE COLUMN c c <type> apply the widenings of PROTOCOL.md as one metadata commit and record them in the
field's ``delta.typeChanges`` (``fieldPath`` for map/array elements); other changes, and columns a CHECK constraint
reads, are refused with delta-spark's classes, nothing committed. Files written before the change are read as the
wide type with their exact values, DVs applied, on the native scan and the pure-Python path; rows written after it
are written wide; time travel before the change gives the old schema; the change feed reads across it.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvlake.config import NATIVE_SCAN
from dvlake.errors import DeltaAnalysisException
from dvlake.log.snapshot import Snapshot
from dvlake.spark.catalog import table_location
from tests.spark.catalog_helpers import configured_with_database

CHANGE_OP = "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "widen_db", str(tmp_path / "widen_db")) as session:
        yield session


def _target(tmp_path: Path, name: str, by_name: bool) -> str:
    return f"widen_db.{name}" if by_name else f"delta.`{tmp_path / name}`"


def _path(spark: SparkSession, target: str) -> str:
    return target[len("delta.`"):-1] if target.startswith("delta.`") else table_location(spark, target)


def _create(spark: SparkSession, target: str, *, dvs: bool, widening: bool = True, extra: str = "") -> str:
    """Ids 1..4 with narrow types (three files), then id 2 deleted (a DV when ``dvs``). Returns the table root."""
    props = [f"'delta.enableDeletionVectors' = '{str(dvs).lower()}'"]
    if widening:
        props.append("'delta.enableTypeWidening' = 'true'")
    spark.sql(f"CREATE TABLE {target} (id INT, b TINYINT, f FLOAT, d DECIMAL(5, 2), dt DATE, s STRUCT<x: SMALLINT>{extra}) "
              f"USING delta TBLPROPERTIES ({', '.join(props)})")
    spark.sql(f"INSERT INTO {target} SELECT /*+ REPARTITION(1) */ * FROM VALUES "
              "(1, 1, 1.5, 1.25, DATE'2024-01-02', named_struct('x', 11)), "
              "(2, 2, 2.5, 2.50, DATE'2024-02-03', named_struct('x', 22))")
    spark.sql(f"INSERT INTO {target} VALUES (3, -3, 0.1, -3.75, DATE'1999-12-31', named_struct('x', -33))")
    spark.sql(f"INSERT INTO {target} VALUES (4, 127, NULL, 999.99, NULL, NULL)")
    spark.sql(f"DELETE FROM {target} WHERE id = 2")
    path = _path(spark, target)
    assert (Snapshot.load(path).dv_count() == 1) == dvs
    return path


def _widen_all(spark: SparkSession, target: str) -> None:
    spark.sql(f"ALTER TABLE {target} ALTER COLUMN id TYPE BIGINT")
    spark.sql(f"ALTER TABLE {target} ALTER COLUMN b TYPE INT")
    spark.sql(f"ALTER TABLE {target} CHANGE COLUMN f f DOUBLE")
    spark.sql(f"ALTER TABLE {target} ALTER COLUMN d TYPE DECIMAL(10, 4)")
    spark.sql(f"ALTER TABLE {target} ALTER COLUMN dt TYPE TIMESTAMP_NTZ")
    spark.sql(f"ALTER TABLE {target} ALTER COLUMN s.x TYPE BIGINT")


OLD_ROWS = [
    (1, 1, 1.5, Decimal("1.2500"), datetime.datetime(2024, 1, 2), (11,)),
    (3, -3, 0.10000000149011612, Decimal("-3.7500"), datetime.datetime(1999, 12, 31), (-33,)),
    (4, 127, None, Decimal("999.9900"), None, None),
]
WIDE_TYPES = [("id", "bigint"), ("b", "int"), ("f", "double"), ("d", "decimal(10,4)"), ("dt", "timestamp_ntz"),
              ("s", "struct<x:bigint>")]


def _rows(spark: SparkSession, target: str) -> list[tuple]:
    df = spark.sql(f"SELECT * FROM {target} ORDER BY id")
    return [(r.id, r.b, r.f, r.d, r.dt, None if r.s is None else tuple(r.s)) for r in df.collect()]


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False)])
def test_widen_every_kind_reads_old_files_wide_on_both_paths(dspark: SparkSession, tmp_path: Path, by_name: bool,
                                                             dvs: bool) -> None:
    target = _target(tmp_path, "every", by_name)
    path = _create(dspark, target, dvs=dvs)
    before = Snapshot.load(path)
    assert {"typeWidening"} <= set(before.protocol.reader_features or ()) & set(before.protocol.writer_features or ())
    assert (before.protocol.min_reader_version, before.protocol.min_writer_version) == (3, 7)
    _widen_all(dspark, target)
    snapshot = Snapshot.load(path)
    assert snapshot.version == before.version + 6 and snapshot.num_files == before.num_files  # metadata only
    fields = {f["name"]: f for f in snapshot.schema["fields"]}
    assert fields["id"]["type"] == "long"
    assert fields["id"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long"}]
    assert fields["b"]["metadata"]["delta.typeChanges"] == [{"fromType": "byte", "toType": "integer"}]
    assert fields["f"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double"}]
    assert fields["d"]["metadata"]["delta.typeChanges"] == [{"fromType": "decimal(5,2)", "toType": "decimal(10,4)"}]
    assert fields["dt"]["metadata"]["delta.typeChanges"] == [{"fromType": "date", "toType": "timestamp_ntz"}]
    nested = fields["s"]["type"]["fields"][0]
    assert nested["type"] == "long" and nested["metadata"]["delta.typeChanges"] == [{"fromType": "short", "toType": "long"}]
    for native in ("true", "false"):
        dspark.conf.set(NATIVE_SCAN, native)
        try:
            df = dspark.sql(f"SELECT * FROM {target}")
            assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == WIDE_TYPES
            assert _rows(dspark, target) == OLD_ROWS, native
            # filters over the widened columns (data skipping reads the old files' narrow stats)
            assert [r.id for r in dspark.sql(f"SELECT id FROM {target} WHERE id >= 3 AND f < 1 ORDER BY id").collect()] == [3]
            assert [r.id for r in dspark.sql(
                f"SELECT id FROM {target} WHERE dt = TIMESTAMP_NTZ'2024-01-02 00:00:00'").collect()] == [1]
            assert [r.id for r in dspark.sql(f"SELECT id FROM {target} WHERE d > 999.989").collect()] == [4]
        finally:
            dspark.conf.unset(NATIVE_SCAN)
    # rows written after the change are written wide, beside the old narrow files
    dspark.sql(f"INSERT INTO {target} VALUES (5000000000, 100000, 1.0E300, 123456.0001, "
               "TIMESTAMP_NTZ'2024-05-06 07:08:09', named_struct('x', 9000000000))")
    dspark.sql(f"DELETE FROM {target} WHERE id = 4")
    assert _rows(dspark, target) == [*OLD_ROWS[:2], (5000000000, 100000, 1.0e300, Decimal("123456.0001"),
                                                     datetime.datetime(2024, 5, 6, 7, 8, 9), (9000000000,))]
    assert Snapshot.load(path).protocol == snapshot.protocol


def test_time_travel_before_the_change_reads_the_old_schema(dspark: SparkSession, tmp_path: Path) -> None:
    target = _target(tmp_path, "travel", False)
    path = _create(dspark, target, dvs=True)
    version = Snapshot.load(path).version
    _widen_all(dspark, target)
    old = dspark.sql(f"SELECT * FROM delta.`{path}` VERSION AS OF {version} ORDER BY id")
    assert [(f.name, f.dataType.simpleString()) for f in old.schema.fields] == [
        ("id", "int"), ("b", "tinyint"), ("f", "float"), ("d", "decimal(5,2)"), ("dt", "date"), ("s", "struct<x:smallint>")]
    assert [(r.id, r.b, r.d, r.dt) for r in old.collect()] == [
        (1, 1, Decimal("1.25"), datetime.date(2024, 1, 2)), (3, -3, Decimal("-3.75"), datetime.date(1999, 12, 31)),
        (4, 127, Decimal("999.99"), None)]


@pytest.mark.parametrize("by_name", [True, False])
def test_without_the_property_a_type_change_is_refused(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    target = _target(tmp_path, "off", by_name)
    path = _create(dspark, target, dvs=True, widening=False)
    assert "typeWidening" not in (Snapshot.load(path).protocol.reader_features or ())
    version = Snapshot.load(path).version
    with pytest.raises(DeltaAnalysisException) as refused:
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN id TYPE BIGINT")
    assert refused.value.error_class == CHANGE_OP
    assert "delta.enableTypeWidening" in str(refused.value)
    assert Snapshot.load(path).version == version
    dspark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
    protocol = Snapshot.load(path).protocol
    assert "typeWidening" in (protocol.reader_features or ()) and "typeWidening" in (protocol.writer_features or ())
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN id TYPE BIGINT")
    assert [r.id for r in dspark.sql(f"SELECT id FROM {target} ORDER BY id").collect()] == [1, 3, 4]
    assert dspark.sql(f"SELECT id FROM {target}").schema.fields[0].dataType.simpleString() == "bigint"


@pytest.mark.parametrize(("column", "to"), [
    ("id", "SMALLINT"),          # narrowing
    ("id", "DOUBLE"), ("f", "DECIMAL(20, 2)"),   # not in the list: int → double is, float → decimal is not
    ("id", "DECIMAL(9, 0)"),     # fewer than 10 integer digits
    ("d", "DECIMAL(6, 4)"),      # scale up by more than precision
    ("d", "DECIMAL(5, 1)"),      # scale down
    ("dt", "TIMESTAMP"),         # date → timestamp with zone
    ("b", "STRING"), ("f", "INT"),
])
def test_unsupported_changes_refused_nothing_committed(dspark: SparkSession, tmp_path: Path, column: str, to: str) -> None:
    target = _target(tmp_path, "bad", False)
    path = _create(dspark, target, dvs=True)
    version = Snapshot.load(path).version
    if (column, to) == ("id", "DOUBLE"):  # int → double is a supported widening: it commits
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN {column} TYPE {to}")
        assert [r.id for r in dspark.sql(f"SELECT id FROM {target} ORDER BY id").collect()] == [1.0, 3.0, 4.0]
        return
    with pytest.raises(DeltaAnalysisException) as refused:
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN {column} TYPE {to}")
    assert refused.value.error_class == CHANGE_OP
    assert Snapshot.load(path).version == version


def _footer_types(path: str) -> set[tuple[str, str]]:
    """(column, arrow type) of every live file's footer, for id and d."""
    import pyarrow.parquet as pq

    snapshot = Snapshot.load(path)
    out = set()
    for add in snapshot.add_files():
        schema = pq.read_schema(str(Path(path) / add.path))
        out |= {(name, str(schema.field(name).type)) for name in ("id", "d")}
    return out


@pytest.mark.parametrize("by_name", [True, False])
def test_drop_feature_rewrites_old_files_then_drops_it(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    target = _target(tmp_path, "drop_tw", by_name)
    path = _create(dspark, target, dvs=True)
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN id TYPE BIGINT")
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN d TYPE DECIMAL(10, 4)")
    dspark.sql(f"INSERT INTO {target} (id, b, d) VALUES (5000000000, 5, 12345.6789)")
    assert _footer_types(path) == {("id", "int32"), ("id", "int64"), ("d", "decimal128(5, 2)"), ("d", "decimal128(10, 4)")}
    dspark.sql(f"ALTER TABLE {target} DROP FEATURE typeWidening")
    snapshot = Snapshot.load(path)
    assert "typeWidening" not in set(snapshot.protocol.reader_features or ()) | set(snapshot.protocol.writer_features or ())
    assert "checkpointProtection" in (snapshot.protocol.writer_features or ())
    assert "delta.enableTypeWidening" not in snapshot.configuration
    assert "delta.typeChanges" not in json.dumps(snapshot.schema)
    assert _footer_types(path) == {("id", "int64"), ("d", "decimal128(10, 4)")}  # every file holds the wide types
    assert snapshot.dv_count() == 0  # the rewritten file's DV was applied
    got = [(r.id, r.b, r.d) for r in dspark.sql(f"SELECT id, b, d FROM {target} ORDER BY id").collect()]
    assert got == [(1, 1, Decimal("1.2500")), (3, -3, Decimal("-3.7500")), (4, 127, Decimal("999.9900")),
                   (5000000000, 5, Decimal("12345.6789"))]
    operations = [r.operation for r in dspark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()]
    assert operations[:6] == ["DROP FEATURE", "Empty Commit", "Empty Commit", "Empty Commit", "DROP FEATURE", "REORG"]
    assert operations[6] == "UNSET TBLPROPERTIES"


def test_drop_feature_truncate_history_waits_for_the_widened_versions(dspark: SparkSession, tmp_path: Path) -> None:
    from dvlake.errors import DeltaTableFeatureException

    target = _target(tmp_path, "trunc", False)
    path = _create(dspark, target, dvs=False)
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN id TYPE BIGINT")
    with pytest.raises(DeltaTableFeatureException) as waiting:
        dspark.sql(f"ALTER TABLE {target} DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert waiting.value.error_class == "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD"
    snapshot = Snapshot.load(path)
    assert "typeWidening" in (snapshot.protocol.reader_features or ())  # still there: history holds the changes
    assert "delta.typeChanges" not in json.dumps(snapshot.schema)
    with pytest.raises(DeltaTableFeatureException) as historical:
        dspark.sql(f"ALTER TABLE {target} DROP FEATURE typeWidening TRUNCATE HISTORY")
    assert historical.value.error_class == "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST"
    assert [r.id for r in dspark.sql(f"SELECT id FROM {target} ORDER BY id").collect()] == [1, 3, 4]


def test_independent_readers_of_a_widened_table(dspark: SparkSession, tmp_path: Path) -> None:
    """DuckDB's delta extension reads the widened table (old narrow files widened, DVs applied); delta-rs refuses the
    feature by name, and reads the table once DROP FEATURE typeWidening has rewritten it."""
    from tests.peers import read_with_deltalake, read_with_duckdb, rows

    target = _target(tmp_path, "peers", False)
    path = _create(dspark, target, dvs=True)
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN id TYPE BIGINT")
    dspark.sql(f"INSERT INTO {target} (id, b) VALUES (5000000000, 5)")
    dspark.sql(f"DELETE FROM {target} WHERE id = 3")
    assert Snapshot.load(path).dv_count() == 1  # id 2 in the first file; id 3 was a file of its own
    expected = [(1, 1), (4, 127), (5000000000, 5)]
    duck = read_with_duckdb(path)
    assert str(duck.schema.field("id").type) == "int64" and sorted(rows(duck, ["id", "b"])) == expected
    with pytest.raises(Exception, match="TypeWidening"):  # delta-rs: "Unsupported table features required: [TypeWidening]"
        read_with_deltalake(path)
    dspark.sql(f"ALTER TABLE {target} DROP FEATURE typeWidening")
    rs = read_with_deltalake(path)
    assert str(rs.schema.field("id").type) == "int64" and sorted(rows(rs, ["id", "b"])) == expected


def test_change_feed_reads_across_the_widening(dspark: SparkSession, tmp_path: Path) -> None:
    target = _target(tmp_path, "cdf", False)
    path = _create(dspark, target, dvs=True, extra="")
    dspark.sql(f"ALTER TABLE {target} SET TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')")
    start = Snapshot.load(path).version
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN id TYPE BIGINT")
    dspark.sql(f"DELETE FROM {target} WHERE id = 1")  # a DV on the old narrow file: its deleted row read by pyarrow
    dspark.sql(f"INSERT INTO {target} (id, b) VALUES (5000000000, 5)")
    df = dspark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", start).load(path)
    assert df.schema["id"].dataType.simpleString() == "bigint"
    got = sorted((r.id, r.b, r._change_type) for r in df.collect())
    assert got == [(1, 1, "delete"), (5000000000, 5, "insert")]


@pytest.mark.parametrize("dvs", [True, False])
def test_map_array_and_partition_columns_widen_and_constraint_columns_do_not(dspark: SparkSession, tmp_path: Path,
                                                                             dvs: bool) -> None:
    target = _target(tmp_path, f"nested_{dvs}", True)
    dspark.sql(f"CREATE TABLE {target} (id INT, m MAP<STRING, INT>, a ARRAY<FLOAT>, c INT, p SMALLINT) USING delta "
               f"PARTITIONED BY (p) TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dvs).lower()}', "
               "'delta.enableTypeWidening' = 'true')")
    dspark.sql(f"INSERT INTO {target} SELECT /*+ REPARTITION(1) */ * FROM VALUES "
               "(1, map('k', 7), array(CAST(0.5 AS FLOAT), CAST(NULL AS FLOAT)), 1, CAST(1 AS SMALLINT)), "
               "(2, map('k', -8), array(CAST(1.25 AS FLOAT)), 2, CAST(1 AS SMALLINT))")
    dspark.sql(f"ALTER TABLE {target} ADD CONSTRAINT c_pos CHECK (c > 0)")
    dspark.sql(f"DELETE FROM {target} WHERE id = 2")
    path = _path(dspark, target)
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN m.value TYPE BIGINT")
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN a.element TYPE DOUBLE")
    dspark.sql(f"ALTER TABLE {target} ALTER COLUMN p TYPE BIGINT")
    fields = {f["name"]: f for f in Snapshot.load(path).schema["fields"]}
    assert fields["m"]["metadata"]["delta.typeChanges"] == [{"fromType": "integer", "toType": "long", "fieldPath": "value"}]
    assert fields["a"]["metadata"]["delta.typeChanges"] == [{"fromType": "float", "toType": "double", "fieldPath": "element"}]
    assert fields["p"]["type"] == "long"
    version = Snapshot.load(path).version
    with pytest.raises(DeltaAnalysisException) as refused:
        dspark.sql(f"ALTER TABLE {target} ALTER COLUMN c TYPE BIGINT")
    assert refused.value.error_class == "DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE"
    assert Snapshot.load(path).version == version
    dspark.sql(f"INSERT INTO {target} VALUES (3, map('k', 9000000000), array(1.0E200), 3, 5000000000)")
    df = dspark.sql(f"SELECT * FROM {target} ORDER BY id")
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("id", "int"), ("m", "map<string,bigint>"), ("a", "array<double>"), ("c", "int"), ("p", "bigint")]
    assert [(r.id, r.m, r.a, r.c, r.p) for r in df.collect()] == [
        (1, {"k": 7}, [0.5, None], 1, 1), (3, {"k": 9000000000}, [1e200], 3, 5000000000)]
    assert [r.id for r in dspark.sql(f"SELECT id FROM {target} WHERE p = 1").collect()] == [1]
