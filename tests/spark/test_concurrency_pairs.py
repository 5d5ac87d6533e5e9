"""Every pair of data-changing commands, the first paused just before its commit while the second runs whole
(the serializable-commits issue): the final table must equal one serial order of the commands that committed,
and a refused command must have changed nothing.

A pauses after reading and planning (the commit hook runs B first); A then commits — possibly after its own
retry on the new version — or raises one of delta-spark's concurrency exceptions. The serial order is the commit
order (B, then A), except that a blind append B may also be ordered after A (WriteSerializable). The expected states come
from a Python model of each command over the rows (id, p, v). Pairs: 6 × 6 on the same rows of the table,
and DELETE/UPDATE/MERGE × DELETE/UPDATE/MERGE on different partitions.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.errors import DeltaConcurrentModificationException
from dvlake.txn.transaction import OptimisticTransaction

Rows = frozenset[tuple[int, int, int]]
OPERATION = {"DELETE_V0": "DELETE", "DELETE": "DELETE", "UPDATE": "UPDATE", "MERGE": "MERGE", "OPTIMIZE": "OPTIMIZE",
             "RESTORE": "RESTORE", "APPEND": "WRITE"}
V0 = frozenset((i, i % 2, i * 7 % 20) for i in range(40))
V1 = V0 | frozenset((i, i % 2, i * 7 % 20) for i in range(40, 48))


def _in(p: int, part: int | None) -> bool:
    return part is None or p == part


def model(command: str, rows: Rows, part: int | None, tag: int) -> Rows:
    """What ``command`` does to ``rows`` (``tag`` keeps the ids two runs of one command add apart)."""
    if command == "DELETE":
        return frozenset(r for r in rows if not (r[2] % 3 == 0 and _in(r[1], part)))
    if command == "DELETE_V0":  # only the files of version 0, which RESTORE TO VERSION 0 keeps
        return frozenset(r for r in rows if not (r[2] % 3 == 0 and r[0] < 40))
    if command == "UPDATE":
        return frozenset((i, p, v + 100) if v % 2 == 0 and _in(p, part) else (i, p, v) for i, p, v in rows)
    if command == "MERGE":
        keys = _merge_keys(part)
        kept = frozenset(r for r in rows if r[0] not in keys and r[0] != 3000 + tag)
        return kept | frozenset((k, k % 2, -1) for k in keys) | {(3000 + tag, part or 0, 500 + tag)}
    if command == "APPEND":
        return rows | frozenset((2000 + tag * 10 + j, part or 0, j) for j in range(3))
    if command == "RESTORE":
        return V0
    return rows  # OPTIMIZE


def _merge_keys(part: int | None) -> list[int]:
    return [2, 4, 40] if part in (None, 0) else [1, 3, 41]


def run(spark: SparkSession, command: str, path: str, part: int | None, tag: int) -> None:
    table = DeltaTable.forPath(spark, path)
    where = "" if part is None else f" AND p = {part}"
    if command == "DELETE":
        table.delete(f"v % 3 = 0{where}")
    elif command == "DELETE_V0":
        table.delete("v % 3 = 0 AND id < 40")
    elif command == "UPDATE":
        table.update(f"v % 2 = 0{where}", {"v": "v + 100"})
    elif command == "MERGE":
        keys = _merge_keys(part)
        source = spark.createDataFrame([(k, k % 2, -1) for k in keys] + [(3000 + tag, part or 0, 500 + tag)],
                                       "id long, p long, v long")
        (table.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"v": "s.v"})
         .whenNotMatchedInsertAll().execute())
    elif command == "APPEND":
        dvlake.write(spark.createDataFrame([(2000 + tag * 10 + j, part or 0, j) for j in range(3)],
                                           "id long, p long, v long"), path, mode="append")
    elif command == "RESTORE":
        table.restoreToVersion(0)
    else:
        (table.optimize().where(f"p = {part}") if part is not None else table.optimize()).executeCompaction()


@pytest.fixture(scope="module")
def origin(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("pairs") / "t")
    frame = spark.createDataFrame(sorted(V0), "id long, p long, v long")
    dvlake.write(frame.repartition(4), path, partitionBy="p", properties={"delta.enableDeletionVectors": "true"})
    dvlake.write(spark.createDataFrame(sorted(V1 - V0), "id long, p long, v long"), path, mode="append")
    yield path


def _state(spark: SparkSession, path: str) -> Rows:
    return frozenset(tuple(r) for r in dvlake.read(spark, path).select("id", "p", "v").collect())  # type: ignore[misc]


def _race(spark: SparkSession, path: str, first: tuple[str, int | None], second: tuple[str, int | None],
          monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run ``first`` with ``second`` committing in between its planning and its commit; True if ``first`` committed."""
    original: Callable[..., int] = OptimisticTransaction.commit
    fired: list[bool] = []

    def paused(self: OptimisticTransaction, actions, operation, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not fired and operation == OPERATION[first[0]]:
            fired.append(True)
            run(spark, second[0], path, second[1], tag=2)
        return original(self, actions, operation, *args, **kwargs)

    monkeypatch.setattr(OptimisticTransaction, "commit", paused)
    try:
        run(spark, first[0], path, first[1], tag=1)
        committed = True
    except DeltaConcurrentModificationException:
        committed = False
    finally:
        monkeypatch.setattr(OptimisticTransaction, "commit", original)
    if not fired:  # ``first`` committed nothing (e.g. OPTIMIZE with nothing to do): plain serial order
        run(spark, second[0], path, second[1], tag=2)
    return committed


COMMANDS = ["DELETE", "UPDATE", "MERGE", "OPTIMIZE", "RESTORE", "APPEND"]
PAIRS = [((a, None), (b, None)) for a in COMMANDS for b in COMMANDS]
PAIRS += [((a, 0), (b, 1)) for a in ("DELETE", "UPDATE", "MERGE") for b in ("DELETE", "UPDATE", "MERGE")]
PAIRS += [(("RESTORE", None), ("DELETE_V0", None)), (("DELETE_V0", None), ("RESTORE", None))]


@pytest.mark.parametrize("first, second", PAIRS, ids=[f"{a[0]}{'' if a[1] is None else a[1]}-then-{b[0]}"
                                                      f"{'' if b[1] is None else b[1]}" for a, b in PAIRS])
def test_pair_equals_a_serial_order(spark: SparkSession, origin: str, tmp_path: Path, first: tuple[str, int | None],
                                    second: tuple[str, int | None], monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "t")
    shutil.copytree(origin, path)
    start = V1
    committed = _race(spark, path, first, second, monkeypatch)
    final = _state(spark, path)
    after_second = model(second[0], start, second[1], 2)
    if not committed:
        assert final == after_second, f"{first[0]} was refused but the table is not {second[0]} alone"
        return
    # commit order is the serial order; only a blind append may be ordered after a command it did not conflict
    # with (delta-spark's WriteSerializable)
    orders = {model(first[0], after_second, first[1], 1)}
    if second[0] == "APPEND":
        orders.add(model(second[0], model(first[0], start, first[1], 1), second[1], 2))
    assert final in orders, f"{first} racing {second}: the table equals no serial order"
