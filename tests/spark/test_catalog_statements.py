"""Every statement that takes a table name, run by catalog name after ``dvlake.configure_spark`` (the catalog issue).

Two managed tables made by SQL ``CREATE TABLE`` without LOCATION, with DVs on: ``events`` in the current database and
``catstmt_b.other`` in a second one, both databases under ``spark.sql.warehouse.dir``. Each case runs once with each
table as the target (the other one as the second name) and checks the rows or values it must produce. A case that
touches only its target runs on both tables of one fresh pair, one after the other; a case that also reads or changes
the other table gets a fresh pair per target.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from pyspark.sql import SparkSession

from dvlake import DeltaTable
from dvlake.config import RETENTION_CHECK
from tests.spark.catalog_helpers import local_path, rows, warehouse_databases, warehouse_dir

Row = tuple[int, str, float]
TABLES = {"events": ("catstmt_a", "events", range(10), 1.5), "catstmt_b.other": ("catstmt_b", "other", range(5, 15), -1.0)}


def _data(ids: range, factor: float) -> list[Row]:
    return [(i, "a" if i % 2 == 0 else "b", i * factor) for i in ids]


@dataclass
class Case:
    spark: SparkSession
    t: str  # the target's name as the statements spell it
    o: str  # the other table's name
    before: list[Row]  # the target's rows
    other: list[Row]  # the other table's rows
    directory: str  # where the target's files must be: <warehouse>/<database>.db/<table>

    def sql(self, statement: str) -> list[tuple[object, ...]]:
        return rows(self.spark.sql(statement.format(t=self.t, o=self.o)))

    def now(self) -> list[tuple[object, ...]]:
        return self.sql("SELECT id, grp, v FROM {t}")

    def detail(self) -> object:
        return self.spark.sql(f"DESCRIBE DETAIL {self.t}").first()

    def files(self) -> list[str]:
        return [os.path.join(d, f) for d, _, fs in os.walk(self.directory) if "_delta_log" not in d
                for f in fs if f.endswith(".parquet")]


@pytest.fixture
def tables(dspark: SparkSession) -> Iterator[SparkSession]:
    with warehouse_databases(dspark, "catstmt_a", "catstmt_b"):
        dspark.catalog.setCurrentDatabase("catstmt_a")
        for name, (_, _, ids, factor) in TABLES.items():
            dspark.sql(f"CREATE TABLE {name} (id BIGINT, grp STRING, v DOUBLE) USING delta PARTITIONED BY (grp) "
                       "TBLPROPERTIES ('delta.enableDeletionVectors' = true)")                       # version 0
            dspark.sql(f"INSERT INTO {name} SELECT id, IF(id % 2 = 0, 'a', 'b'), id * {factor} "  # version 1
                       f"FROM range({ids.start}, {ids.stop})")
        yield dspark


def insert_overwrite(c: Case) -> None:
    c.sql("INSERT OVERWRITE {t} VALUES (100, 'c', 1.0)")
    assert c.now() == [(100, "c", 1.0)]
    assert rows(c.spark.table(c.t)) == [(100, "c", 1.0)]


def insert_partition(c: Case) -> None:
    c.sql("INSERT INTO {t} PARTITION (grp = 'z') VALUES (50, 2.5)")
    assert c.now() == sorted([*c.before, (50, "z", 2.5)], key=repr)
    c.sql("INSERT OVERWRITE {t} PARTITION (grp = 'a') SELECT 60, 6.0")  # only partition a is replaced
    assert c.now() == sorted([r for r in c.before if r[1] != "a"] + [(50, "z", 2.5), (60, "a", 6.0)], key=repr)


def insert_replace_where(c: Case) -> None:
    c.sql("INSERT INTO {t} REPLACE WHERE id >= 12 OR id < 2 SELECT 80, 'k', 0.5")  # the rows it selects are replaced
    assert c.now() == sorted([r for r in c.before if 2 <= r[0] < 12] + [(80, "k", 0.5)], key=repr)


def insert_select_other(c: Case) -> None:
    top = sorted(r[0] for r in c.other)[-3]
    c.sql(f"INSERT INTO {{t}} SELECT id + 100, grp, v FROM {{o}} WHERE id >= {top}")
    added = [(i + 100, g, v) for i, g, v in c.other if i >= top]
    assert len(added) == 3 and c.now() == sorted(c.before + added, key=repr)


def delete(c: Case) -> None:
    assert c.sql("DELETE FROM {t} WHERE id % 3 = 0") == [(sum(1 for r in c.before if r[0] % 3 == 0),)]
    assert c.now() == [r for r in c.before if r[0] % 3]


def merge(c: Case) -> None:
    c.sql("MERGE INTO {t} AS x USING {o} AS y ON x.id = y.id WHEN MATCHED THEN UPDATE SET v = y.v "
          "WHEN NOT MATCHED THEN INSERT *")
    by_id = {r[0]: r for r in c.before}
    by_id.update({r[0]: r for r in c.other})  # matched rows take the source's v, the rest are inserted
    assert c.now() == sorted(by_id.values(), key=repr)


def describe_history(c: Case) -> None:
    c.sql("DELETE FROM {t} WHERE id = 7")
    history = [(r.version, r.operation) for r in c.spark.sql(f"DESCRIBE HISTORY {c.t}").collect()]
    assert history == [(2, "DELETE"), (1, "WRITE"), (0, "CREATE TABLE")]
    assert [r.version for r in c.spark.sql(f"DESCRIBE HISTORY {c.t} LIMIT 1").collect()] == [2]


def describe_detail(c: Case) -> None:
    d = c.detail()
    location = os.path.realpath(local_path(d.location))  # type: ignore[attr-defined]
    assert location == c.directory and location.startswith(warehouse_dir(c.spark) + os.sep)
    assert (d.format, d.partitionColumns, d.numFiles) == ("delta", ["grp"], len(c.files()))  # type: ignore[attr-defined]
    assert d.properties["delta.enableDeletionVectors"] == "true"  # type: ignore[attr-defined]


def show_tblproperties(c: Case) -> None:
    assert dict(c.sql("SHOW TBLPROPERTIES {t}"))["delta.enableDeletionVectors"] == "true"  # type: ignore[arg-type]
    assert c.sql("SHOW TBLPROPERTIES {t} ('delta.enableDeletionVectors')") == [("delta.enableDeletionVectors", "true")]


def alter_properties(c: Case) -> None:
    c.sql("ALTER TABLE {t} SET TBLPROPERTIES ('owner' = 'ann', 'delta.logRetentionDuration' = 'interval 9 days')")
    props = dict(c.sql("SHOW TBLPROPERTIES {t}"))  # type: ignore[arg-type]
    assert (props["owner"], props["delta.logRetentionDuration"]) == ("ann", "interval 9 days")
    c.sql("ALTER TABLE {t} UNSET TBLPROPERTIES ('owner')")
    props = DeltaTable.forName(c.spark, c.t).detail().first().properties  # type: ignore[union-attr]
    assert "owner" not in props and props["delta.logRetentionDuration"] == "interval 9 days"


def optimize(c: Case) -> None:
    for i in range(3):
        c.sql(f"INSERT INTO {{t}} VALUES ({200 + i}, 'a', 0.5), ({300 + i}, 'b', 0.5)")
    c.sql("DELETE FROM {t} WHERE id % 5 = 0")
    assert c.detail().numFiles >= 8  # type: ignore[attr-defined]
    expected = [r for r in c.before + [(200 + i, "a", 0.5) for i in range(3)] + [(300 + i, "b", 0.5) for i in range(3)]
                if r[0] % 5]
    metrics = c.spark.sql(f"OPTIMIZE {c.t}").first().metrics  # type: ignore[union-attr]
    assert metrics.numFilesAdded == 2 and metrics.numFilesRemoved >= 8
    assert c.detail().numFiles == 2 and c.now() == sorted(expected, key=repr)  # type: ignore[attr-defined]


def vacuum(c: Case) -> None:
    c.sql("INSERT OVERWRITE {t} SELECT * FROM {t} WHERE id < 8")
    assert len(c.files()) > c.detail().numFiles  # type: ignore[attr-defined]
    c.spark.conf.set(RETENTION_CHECK, "false")
    try:
        c.sql("VACUUM {t} RETAIN 0 HOURS")
    finally:
        c.spark.conf.unset(RETENTION_CHECK)
    assert len(c.files()) == c.detail().numFiles  # type: ignore[attr-defined]
    assert c.now() == [r for r in c.before if r[0] < 8]


def restore(c: Case) -> None:
    c.sql("DELETE FROM {t} WHERE id < 9")
    assert c.now() == [r for r in c.before if r[0] >= 9] != c.before
    c.sql("RESTORE TABLE {t} TO VERSION AS OF 1")
    assert c.now() == c.before
    assert c.spark.sql(f"DESCRIBE HISTORY {c.t} LIMIT 1").first().operation == "RESTORE"  # type: ignore[union-attr]


def reorg(c: Case) -> None:
    c.sql("DELETE FROM {t} WHERE id % 3 = 0")
    assert any(f.deletion_vector for f in DeltaTable.forName(c.spark, c.t).snapshot().add_files())
    c.sql("REORG TABLE {t} APPLY (PURGE)")
    assert not any(f.deletion_vector for f in DeltaTable.forName(c.spark, c.t).snapshot().add_files())
    assert c.now() == [r for r in c.before if r[0] % 3]


def table_changes(c: Case) -> None:
    c.sql("ALTER TABLE {t} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")  # version 2
    c.sql("INSERT INTO {t} VALUES (70, 'a', 7.0)")                                  # version 3
    first = c.before[0][0]
    c.sql(f"DELETE FROM {{t}} WHERE id = {first}")                                  # version 4
    got = c.sql("SELECT id, _change_type, _commit_version FROM table_changes('{t}', 3)")
    assert got == sorted([(70, "insert", 3), (first, "delete", 4)], key=repr)
    assert c.sql("SELECT id FROM table_changes('{t}', 3, 3)") == [(70,)]


def version_as_of(c: Case) -> None:
    c.sql("DELETE FROM {t} WHERE id < 8")
    assert c.sql("SELECT id, grp, v FROM {t} VERSION AS OF 1") == c.before
    assert c.sql("SELECT count(*) FROM {t} VERSION AS OF 1") == [(len(c.before),)]
    assert c.now() == [r for r in c.before if r[0] >= 8]


def join(c: Case) -> None:
    c.sql("DELETE FROM {t} WHERE id = 6")
    got = c.sql("SELECT x.id, x.v, y.v FROM {t} x JOIN {o} y ON x.id = y.id")
    other = {r[0]: r[2] for r in c.other}
    assert got == sorted([(i, v, other[i]) for i, _, v in c.before if i in other and i != 6], key=repr)
    assert len(got) == 4


def intersect(c: Case) -> None:
    c.sql("DELETE FROM {o} WHERE id = 9")
    got = c.sql("SELECT id, grp FROM {t} INTERSECT SELECT id, grp FROM {o}")
    assert got == sorted([(i, g) for i, g, _ in c.before if i in {r[0] for r in c.other} and i != 9], key=repr)
    assert len(got) == 4


CASES: list[Callable[[Case], None]] = [
    insert_overwrite, insert_partition, insert_replace_where, insert_select_other, delete, merge, describe_history,
    describe_detail, show_tblproperties, alter_properties, optimize, vacuum, restore, reorg, table_changes, version_as_of,
    join, intersect,
]
#: the cases that read or change the other table too: each target gets its own pair of fresh tables
WITH_OTHER = {insert_select_other, merge, join, intersect}
#: the rest touch only their target, so one pair of fresh tables serves both targets, one after the other
RUNS = [pytest.param(case, [target], id=f"{case.__name__}-{target}") for case in CASES if case in WITH_OTHER
        for target in TABLES]
RUNS += [pytest.param(case, list(TABLES), id=f"{case.__name__}-each-table") for case in CASES if case not in WITH_OTHER]


@pytest.mark.parametrize(("case", "targets"), RUNS)
def test_statement_by_name(tables: SparkSession, case: Callable[[Case], None], targets: list[str]) -> None:
    for target in targets:
        database, table, ids, factor = TABLES[target]
        other = next(n for n in TABLES if n != target)
        directory = os.path.join(warehouse_dir(tables), f"{database}.db", table)
        c = Case(tables, target, other, _data(ids, factor), _data(TABLES[other][2], TABLES[other][3]), directory)
        assert c.now() == sorted(c.before, key=repr), target  # the starting point the expectations are computed from
        c.before = sorted(c.before, key=repr)
        case(c)
