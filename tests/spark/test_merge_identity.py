"""MERGE … WHEN NOT MATCHED THEN INSERT into a table with identity columns, as delta-spark 4.x does it.

Rules checked: an INSERT clause that leaves the identity column out (a column list without it, ``INSERT *`` from a
source without it) gets values as INSERT does (unique, on the start/step grid, beyond the old high-water mark), and
the mark moves to the furthest value in the MERGE's own commit; matched/copied rows keep their ids; GENERATED ALWAYS
refuses a value given in the clause (DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED) and nothing is committed;
BY DEFAULT keeps the given value and moves the mark past it (rounded onto the grid). Insert-only path and the general
path, with deletion vectors (by path) and copy-on-write (by catalog name). A MERGE spreads its new rows over
partitions, so generated values are checked by their rules (grid, uniqueness, mark = furthest), not by position.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from dvlake.errors import DvlakeError
from dvlake.log.snapshot import Snapshot
from tests.spark.catalog_helpers import configured_with_database, target_location


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    with configured_with_database(spark, "mident_db", str(tmp_path / "mident_db")) as session:
        yield session


def _mark(path: str) -> int | None:
    field = next(f for f in Snapshot.load(path).schema["fields"] if f["name"] == "id")
    return field["metadata"].get("delta.identity.highWaterMark")


def _rows(spark: SparkSession, target: str) -> dict[str, tuple[int, int]]:
    return {r.k: (r.id, r.n) for r in spark.sql(f"SELECT id, k, n FROM {target}").collect()}


def _table(spark: SparkSession, target: str, kind: str, dvs: bool) -> str:
    """(id identity START WITH 5 INCREMENT BY 3, k, n) holding a → 5, b → 8 (mark 8)."""
    spark.sql(f"CREATE TABLE {target} (id BIGINT GENERATED {kind} AS IDENTITY (START WITH 5 INCREMENT BY 3), k STRING, "
              f"n INT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dvs).lower()}')")
    spark.sql(f"INSERT INTO {target} (k, n) VALUES ('a', 1)")
    spark.sql(f"INSERT INTO {target} (k, n) VALUES ('b', 2)")
    path = target_location(spark, target)
    assert _mark(path) == 8
    return path


def _fresh(ids: list[int], beyond: int) -> None:
    """Generated ids: distinct, on the 5 + 3k grid, all past the old mark."""
    assert len(set(ids)) == len(ids)
    assert all((i - 5) % 3 == 0 and i > beyond for i in ids), ids


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False)], ids=["path-dv", "name-cow"])
@pytest.mark.parametrize("insert_only", [True, False], ids=["insert_only", "upsert"])
def test_merge_insert_generates_identity_values(dspark: SparkSession, tmp_path: Path, by_name: bool, dvs: bool,
                                                insert_only: bool) -> None:
    """INSERT (k, n) then INSERT * (source without id): new ids fresh, the mark moves to the furthest one in the
    MERGE's commit; the matched row b keeps id 8 (updated or not) and a keeps 5."""
    target = "mident_db.t" if by_name else f"delta.`{tmp_path / 't'}`"
    path = _table(dspark, target, "ALWAYS", dvs)
    matched = "" if insert_only else "WHEN MATCHED THEN UPDATE SET n = s.n "
    before = Snapshot.load(path).version
    dspark.sql(f"MERGE INTO {target} t USING (SELECT * FROM VALUES ('b', 20), ('c', 30), ('d', 40) AS s(k, n)) s "
               f"ON t.k = s.k {matched}WHEN NOT MATCHED THEN INSERT (k, n) VALUES (s.k, s.n)")
    assert Snapshot.load(path).version == before + 1  # data and mark in one commit
    got = _rows(dspark, target)
    assert sorted(got) == ["a", "b", "c", "d"]
    assert got["a"] == (5, 1) and got["b"] == (8, 2 if insert_only else 20)
    assert (got["c"][1], got["d"][1]) == (30, 40)
    _fresh([got["c"][0], got["d"][0]], 8)
    assert _mark(path) == max(got["c"][0], got["d"][0])
    mark = _mark(path)
    assert mark is not None
    dspark.sql(f"MERGE INTO {target} t USING (SELECT 'e' AS k, 50 AS n) s ON t.k = s.k "
               f"{matched}WHEN NOT MATCHED THEN INSERT *")
    after = _rows(dspark, target)
    assert {k: v for k, v in after.items() if k != "e"} == got
    assert after["e"][1] == 50
    _fresh([after["e"][0]], mark)
    assert _mark(path) == after["e"][0]
    ids = [v[0] for v in after.values()]
    assert len(set(ids)) == 5


@pytest.mark.parametrize("by_name", [False, True], ids=["path", "name"])
def test_always_refuses_an_explicit_value_in_merge_insert(dspark: SparkSession, tmp_path: Path, by_name: bool) -> None:
    """A column list naming id, and INSERT * from a source with an id column, are
    DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED (insert-only and general path); nothing is committed."""
    target = "mident_db.always" if by_name else f"delta.`{tmp_path / 'always'}`"
    path = _table(dspark, target, "ALWAYS", True)
    version = Snapshot.load(path).version
    statements = [
        f"MERGE INTO {target} t USING (SELECT 'z' AS k, 9 AS n) s ON t.k = s.k "
        "WHEN NOT MATCHED THEN INSERT (id, k, n) VALUES (1, s.k, s.n)",
        f"MERGE INTO {target} t USING (SELECT 1L AS id, 'z' AS k, 9 AS n) s ON t.k = s.k "
        "WHEN NOT MATCHED THEN INSERT *",
        f"MERGE INTO {target} t USING (SELECT 1L AS id, 'a' AS k, 9 AS n) s ON t.k = s.k "
        "WHEN MATCHED THEN UPDATE SET n = s.n WHEN NOT MATCHED THEN INSERT *",
    ]
    for sql in statements:
        with pytest.raises(DvlakeError) as info:
            dspark.sql(sql)
        assert info.value.getCondition() == "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED", str(info.value)
    assert Snapshot.load(path).version == version
    assert _rows(dspark, target) == {"a": (5, 1), "b": (8, 2)}


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False)], ids=["path-dv", "name-cow"])
def test_by_default_keeps_a_given_value_and_moves_the_mark(dspark: SparkSession, tmp_path: Path, dvs: bool,
                                                           by_name: bool) -> None:
    """BY DEFAULT: INSERT * with id 100 keeps 100 and the mark rounds onto the grid (101); a later MERGE INSERT
    without id generates past it; a given value below the mark is kept and leaves the mark."""
    target = "mident_db.bydefault" if by_name else f"delta.`{tmp_path / 'bydefault'}`"
    path = _table(dspark, target, "BY DEFAULT", dvs)
    dspark.sql(f"MERGE INTO {target} t USING (SELECT * FROM VALUES (100L, 'b', 20), (100L, 'c', 30) AS s(id, k, n)) s "
               "ON t.k = s.k WHEN MATCHED THEN UPDATE SET n = s.n WHEN NOT MATCHED THEN INSERT *")
    assert _rows(dspark, target) == {"a": (5, 1), "b": (8, 20), "c": (100, 30)}
    assert _mark(path) == 101
    dspark.sql(f"MERGE INTO {target} t USING (SELECT 'd' AS k, 40 AS n) s ON t.k = s.k "
               "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (k, n) VALUES (s.k, s.n)")
    got = _rows(dspark, target)
    assert got["d"][1] == 40
    _fresh([got["d"][0]], 101)
    assert _mark(path) == got["d"][0]
    dspark.sql(f"MERGE INTO {target} t USING (SELECT 2L AS id, 'e' AS k, 50 AS n) s ON t.k = s.k "
               "WHEN NOT MATCHED THEN INSERT *")
    assert _rows(dspark, target)["e"] == (2, 50)
    assert _mark(path) == got["d"][0]
