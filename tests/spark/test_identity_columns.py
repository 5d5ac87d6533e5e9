"""Identity columns (``GENERATED ALWAYS | BY DEFAULT AS IDENTITY``), as delta-spark 4.x defines and writes them.

Rules checked (PROTOCOL.md "Identity Columns"; delta-spark's ``IdentityColumn.scala`` and ``DeltaErrors``): the
definition is field metadata (start, step, allowExplicitInsert) with the ``identityColumns`` feature (legacy writer
version 6); a write generates values one step beyond the high-water mark and moves the mark in the same commit;
GENERATED ALWAYS refuses explicit values, BY DEFAULT takes them and moves the mark past them (rounded onto the
start/step grid); UPDATE of an identity column is refused; two concurrent identity writes conflict on the metadata.
One-row writes make the generated values exact (a write's values are unique, not contiguous across partitions).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import DeltaConcurrentModificationException, DvlakeError, MetadataChangedException
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction
from tests.peers import read_with_deltalake
from tests.spark.catalog_helpers import configured_with_database, location_and_writer_features, target_location


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "ident_db", str(tmp_path / "ident_db")) as session:
        yield session


def _id_field(path: str) -> dict:
    return next(f for f in Snapshot.load(path).schema["fields"] if f["name"] == "id")


def _rows(spark: SparkSession, target: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT id, v FROM {target} ORDER BY v").collect()]


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False)], ids=["path-dv", "name-cow"])
def test_always_identity_generates_beyond_the_mark(dspark: SparkSession, tmp_path: Path, by_name: bool,
                                                   dvs: bool) -> None:
    """START WITH 5 INCREMENT BY 3: one-row INSERTs and a DataFrame append get 5, 8, 11, 14; each commit moves the
    mark to its value; DELETE and UPDATE of another column keep the ids (DVs or copy-on-write)."""
    target = "ident_db.items" if by_name else f"delta.`{tmp_path / 'items'}`"
    dspark.sql(f"CREATE TABLE {target} (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 5 INCREMENT BY 3), "
               f"v STRING) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dvs).lower()}')")
    path, writer_features = location_and_writer_features(dspark, target)
    assert "identityColumns" in writer_features
    assert _id_field(path)["metadata"] == {"delta.identity.start": 5, "delta.identity.step": 3,
                                           "delta.identity.allowExplicitInsert": False}
    marks = []
    for v in ("a", "b", "c"):
        dspark.sql(f"INSERT INTO {target} (v) VALUES ('{v}')")
        marks.append(_id_field(path)["metadata"]["delta.identity.highWaterMark"])
    dvlake.write(dspark.createDataFrame([("d",)], "v string").coalesce(1), path, "append")
    assert marks == [5, 8, 11]
    assert _id_field(path)["metadata"]["delta.identity.highWaterMark"] == 14
    assert _rows(dspark, target) == [(5, "a"), (8, "b"), (11, "c"), (14, "d")]
    dspark.sql(f"DELETE FROM {target} WHERE v = 'b'")
    dspark.sql(f"UPDATE {target} SET v = 'C' WHERE id = 11")
    assert _rows(dspark, target) == [(11, "C"), (5, "a"), (14, "d")]
    assert _id_field(path)["metadata"]["delta.identity.highWaterMark"] == 14  # DELETE/UPDATE do not move it
    got = read_with_deltalake(path).to_pylist()
    assert sorted((r["id"], r["v"]) for r in got) == [(5, "a"), (11, "C"), (14, "d")]


def test_many_rows_get_unique_values_on_the_grid(dspark: SparkSession, tmp_path: Path) -> None:
    """A multi-partition write: every value distinct, of the form start + k * step beyond the old mark, and the new
    mark is the largest written; the protocol is delta-spark's (1, 6) for identity alone."""
    path = str(tmp_path / "many")
    dspark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 10 INCREMENT BY 7), "
               "v STRING) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    assert (Snapshot.load(path).protocol.min_reader_version, Snapshot.load(path).protocol.min_writer_version) == (1, 6)
    dspark.sql(f"INSERT INTO delta.`{path}` (v) VALUES ('first')")
    dvlake.write(dspark.range(200).selectExpr("CAST(id AS STRING) AS v").repartition(3), path, "append")
    ids = [r.id for r in dspark.sql(f"SELECT id FROM delta.`{path}`").collect()]
    assert len(ids) == 201 and len(set(ids)) == 201
    assert all((i - 10) % 7 == 0 and i >= 10 for i in ids)
    assert sorted(ids)[0] == 10 and sorted(ids)[1] == 17  # the second write starts one step beyond mark 10
    assert _id_field(path)["metadata"]["delta.identity.highWaterMark"] == max(ids)


def test_negative_step_counts_down(dspark: SparkSession, tmp_path: Path) -> None:
    """INCREMENT BY -2 from START WITH 0: values 0, -2, -4; the mark is the lowest value written."""
    target = f"delta.`{tmp_path / 'down'}`"
    dspark.sql(f"CREATE TABLE {target} (id BIGINT GENERATED ALWAYS AS IDENTITY (START WITH 0 INCREMENT BY -2), "
               "v STRING) USING delta")
    for v in ("a", "b", "c"):
        dspark.sql(f"INSERT INTO {target} (v) VALUES ('{v}')")
    assert _rows(dspark, target) == [(0, "a"), (-2, "b"), (-4, "c")]
    assert _id_field(target_location(dspark, target))["metadata"]["delta.identity.highWaterMark"] == -4


@pytest.mark.parametrize("by_name", [False, True], ids=["path", "name"])
def test_always_refuses_explicit_values_and_updates(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    """An explicit id (SQL column list, full VALUES, DataFrame) is DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED;
    UPDATE SET id is DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED; MERGE … INSERT naming id is the explicit-insert
    class too; nothing is committed by any of them."""
    target = "ident_db.always" if by_name else f"delta.`{tmp_path / 'always'}`"
    dspark.sql(f"CREATE TABLE {target} (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING) USING delta")
    dspark.sql(f"INSERT INTO {target} (v) VALUES ('a')")
    path = target_location(dspark, target)
    version = Snapshot.load(path).version
    attempts = [
        (lambda: dspark.sql(f"INSERT INTO {target} (id, v) VALUES (7, 'x')"),
         "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"),
        (lambda: dspark.sql(f"INSERT INTO {target} VALUES (7, 'x')"), "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"),
        (lambda: dvlake.write(dspark.createDataFrame([(7, "x")], "id long, v string"), path, "append"),
         "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"),
        (lambda: dspark.sql(f"UPDATE {target} SET id = 9"), "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED"),
        (lambda: dspark.sql(f"MERGE INTO {target} t USING (SELECT 'a' AS v) s ON t.v = s.v "
                            "WHEN MATCHED THEN UPDATE SET t.id = 3"), "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED"),
        (lambda: dspark.sql(f"MERGE INTO {target} t USING (SELECT 'z' AS v) s ON t.v = s.v "
                            "WHEN NOT MATCHED THEN INSERT (id, v) VALUES (3, s.v)"),
         "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"),
    ]
    for attempt, error_class in attempts:
        with pytest.raises(DvlakeError) as info:
            attempt()
        assert info.value.getCondition() == error_class, str(info.value)
    assert Snapshot.load(path).version == version
    assert _rows(dspark, target) == [(1, "a")]


def test_by_default_takes_explicit_values_and_moves_the_mark_past_them(dspark: SparkSession, tmp_path: Path) -> None:
    """BY DEFAULT (START WITH 5 INCREMENT BY 3): generated 5; explicit 100 is kept and the mark rounds up onto the
    grid (101), so the next generated value is 104; an explicit value below the mark leaves it."""
    target = f"delta.`{tmp_path / 'bydefault'}`"
    dspark.sql(f"CREATE TABLE {target} (id BIGINT GENERATED BY DEFAULT AS IDENTITY (START WITH 5 INCREMENT BY 3), "
               "v STRING) USING delta")
    path = target_location(dspark, target)
    assert _id_field(path)["metadata"]["delta.identity.allowExplicitInsert"] is True
    dspark.sql(f"INSERT INTO {target} (v) VALUES ('a')")
    dspark.sql(f"INSERT INTO {target} (id, v) VALUES (100, 'b')")
    assert _id_field(path)["metadata"]["delta.identity.highWaterMark"] == 101
    dspark.sql(f"INSERT INTO {target} (v) VALUES ('c')")
    dspark.sql(f"INSERT INTO {target} VALUES (2, 'd')")
    assert _id_field(path)["metadata"]["delta.identity.highWaterMark"] == 104
    assert _rows(dspark, target) == [(5, "a"), (100, "b"), (104, "c"), (2, "d")]


@pytest.mark.parametrize("column, extra, error_class", [
    ("id INT GENERATED ALWAYS AS IDENTITY", "", "DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE"),
    ("id BIGINT GENERATED ALWAYS AS IDENTITY (INCREMENT BY 0)", "", "DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP"),
    ("id BIGINT GENERATED ALWAYS AS IDENTITY", " PARTITIONED BY (id)", "DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED"),
], ids=["int", "step-0", "partition"])
def test_bad_definitions_are_refused(dspark: SparkSession, tmp_path: Path, column: str, extra: str,
                                    error_class: str) -> None:
    """delta-spark refuses a non-BIGINT identity column, a step of 0 and an identity partition column; no table."""
    path = tmp_path / "bad"
    with pytest.raises(DvlakeError) as info:
        dspark.sql(f"CREATE TABLE delta.`{path}` ({column}, v STRING) USING delta{extra}")
    assert info.value.getCondition() == error_class, str(info.value)
    assert not (path / "_delta_log").exists()


def test_concurrent_identity_appends_conflict_on_the_metadata(dspark: SparkSession, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Both appends move the mark, i.e. change the metadata: the one that commits second fails with
    DELTA_METADATA_CHANGED (delta-spark's default), rather than writing ids the winner also handed out."""
    path = str(tmp_path / "race")
    dspark.sql(f"CREATE TABLE delta.`{path}` (id BIGINT GENERATED ALWAYS AS IDENTITY, v STRING) USING delta")
    original = OptimisticTransaction.commit
    fired: list[bool] = []

    def paused(self, actions, operation, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not fired and operation == "WRITE":
            fired.append(True)
            dvlake.write(dspark.createDataFrame([("winner",)], "v string").coalesce(1), path, "append")
        return original(self, actions, operation, *args, **kwargs)

    monkeypatch.setattr(OptimisticTransaction, "commit", paused)
    with pytest.raises(DeltaConcurrentModificationException) as info:
        dvlake.write(dspark.createDataFrame([("loser",)], "v string").coalesce(1), path, "append")
    monkeypatch.setattr(OptimisticTransaction, "commit", original)
    assert isinstance(info.value, MetadataChangedException)
    assert info.value.getCondition() == "DELTA_METADATA_CHANGED"
    assert [tuple(r) for r in dspark.sql(f"SELECT id, v FROM delta.`{path}`").collect()] == [(1, "winner")]
    assert Snapshot.load(path).version == 1
    assert _id_field(path)["metadata"]["delta.identity.highWaterMark"] == 1
