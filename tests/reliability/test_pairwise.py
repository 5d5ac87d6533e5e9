"""Pairwise concurrency model: every pair of commands, one paused at read/plan/commit while the other commits.

For each ordered pair (X, Y) of {append, DELETE, UPDATE, OPTIMIZE, RESTORE} (self-pairs included), on
the same file and on different files, X runs and Y runs to completion at one of three points of X:
before X reads (a serial baseline), after X loaded its snapshot but before it planned, and after it
planned, just before its commit. Then:

* X committed: the table equals X applied after Y (the commit order), by a Python model of each command;
  or, under WriteSerializable and only when Y is a blind append, Y applied after X (delta-spark lets a
  winning blind append serialize after the command it raced);
* X refused: it raised one of delta-spark's concurrent-modification exceptions and changed nothing
  (the table is exactly Y applied to the start, at the version Y left);
* every version reads with no row live twice.

Each under both ``delta.isolationLevel`` values (Serializable also refuses a command that read what a
concurrent blind append added). Spark-free and in one process (the winner runs inside X's pause), so
5 x 5 pairs x 2 placements x 3 interleavings x 2 levels = 300 runs take seconds in CI. The commands
are ``engine.py``'s, which commit the actions and register the reads dvlake's DELETE (DVs), UPDATE
(copy-on-write), OPTIMIZE and blind appends do; RESTORE is the real command (it needs no Spark).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import dvlake.commands.maintenance.restore as restore_module
from dvlake.commands.maintenance.restore import restore
from dvlake.errors import DeltaConcurrentModificationException
from dvlake.log.snapshot import Snapshot
from tests.reliability.commands import State, eval_condition, read_state
from tests.reliability.engine import Pause, engine_append, engine_create, engine_delete, engine_optimize, engine_update

FILE_A = list(range(10))  # version 0
FILE_B = list(range(100, 110))  # version 1
FILE_C = list(range(200, 210))  # version 2, deleted whole (a remove) at version 3: RESTORE brings it back
RESTORE_TO = 2
#: the key range of a command "on file A" also holds C's rows: a DELETE on A and a RESTORE that re-adds C then
#: interact even though RESTORE leaves A's file alone (the shape of the campaign's lost-DELETE race)
RANGE = {"A": "(id < 50 OR id >= 200)", "B": "(id >= 100 AND id < 200)"}
NEW_IDS = {"A": 20, "B": 120}  # the first id an append adds to the file's key range
UPDATED_V = 7
POINTS = ("before-read", "read", "commit")
LEVELS = ("WriteSerializable", "Serializable")  # delta.isolationLevel


@dataclass(frozen=True)
class Cmd:
    """A command on one file's key range: how to run it (with a pause hook) and its serial model."""

    kind: str
    target: str
    second: bool = False  # Y's append adds other ids than X's (an id is a key of the model)

    @property
    def new_ids(self) -> list[int]:
        first = NEW_IDS[self.target] + (3 if self.second else 0)
        return [first, first + 1, first + 2]

    @property
    def delete_condition(self) -> str:
        return f"{RANGE[self.target]} AND id % 3 = 1"

    @property
    def update_condition(self) -> str:
        return f"{RANGE[self.target]} AND id % 3 = 2"

    def run(self, table: str, pause: Pause) -> None:
        if self.kind == "append":
            engine_append(table, self.new_ids, pause)
        elif self.kind == "delete":
            engine_delete(table, self.delete_condition, pause)
        elif self.kind == "update":
            engine_update(table, self.update_condition, UPDATED_V, pause)
        elif self.kind == "optimize":
            engine_optimize(table, pause)
        else:
            with paused_restore(pause):
                restore(None, table, version=RESTORE_TO)

    def model(self, state: State, version0: State) -> State:
        """The command applied alone to ``state`` (``version0``: the rows of the version RESTORE goes back to)."""
        if self.kind == "append":
            return {**state, **dict.fromkeys(self.new_ids, 0)}
        if self.kind == "delete":
            return {k: v for k, v in state.items() if not eval_condition(self.delete_condition, k)}
        if self.kind == "update":
            return {k: UPDATED_V if eval_condition(self.update_condition, k) else v for k, v in state.items()}
        if self.kind == "optimize":
            return dict(state)
        return dict(version0)


@contextmanager
def paused_restore(pause: Pause) -> Iterator[None]:
    """RESTORE's pause points: after its first snapshot load ("read") and before its commit ("commit")."""
    real_snapshot, real_txn = restore_module.Snapshot, restore_module.OptimisticTransaction
    loads: list[int] = []

    class PausedSnapshot:
        @staticmethod
        def load(*args: Any, **kwargs: Any) -> Snapshot:
            snap = real_snapshot.load(*args, **kwargs)
            if not loads:
                loads.append(1)
                pause("read")
            return snap

    class PausedTxn(real_txn):  # type: ignore[misc, valid-type]
        def commit(self, *args: Any, **kwargs: Any) -> int:
            pause("commit")
            return int(super().commit(*args, **kwargs))

    restore_module.Snapshot = PausedSnapshot  # type: ignore[assignment, misc]
    restore_module.OptimisticTransaction = PausedTxn  # type: ignore[misc]
    try:
        yield
    finally:
        restore_module.Snapshot = real_snapshot  # type: ignore[misc]
        restore_module.OptimisticTransaction = real_txn  # type: ignore[misc]


KINDS = ("append", "delete", "update", "optimize", "restore")
PAIRS = [(x, y) for x in KINDS for y in KINDS]


def _build_start(table: str, level: str) -> None:
    """Versions 0-3: file A, then B, then C, then C deleted whole."""
    # the level is set at creation: a later property change would make RESTORE a metadata change (always refused)
    engine_create(table, FILE_A, checkpoint_interval=100, properties={"delta.isolationLevel": level})
    engine_append(table, FILE_B)
    engine_append(table, FILE_C)
    engine_delete(table, "id >= 200")


@pytest.fixture(scope="module")
def starts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The starting table of each isolation level, built once; every run works on a byte copy of it (300 runs)."""
    root = tmp_path_factory.mktemp("pairwise-starts")
    out = {}
    for level in LEVELS:
        out[level] = str(root / level)
        _build_start(out[level], level)
    return out


def _one(tmp: Path, starts: dict[str, str], x: Cmd, y: Cmd, point: str, level: str) -> tuple[bool, str | None]:
    """Run X with Y at ``point`` on a copy of ``level``'s starting table; returns (X committed, None) or a
    description of a wrong outcome."""
    table = str(tmp / f"{x.kind}-{x.target}-{y.kind}-{y.target}-{point}-{level}")
    shutil.copytree(starts[level], table)
    start, version0 = read_state(table), read_state(table, RESTORE_TO)
    assert Snapshot.load(table).version == 3 and sorted(start) == FILE_A + FILE_B, sorted(start)
    ran: list[int] = []

    def winner() -> None:
        y.run(table, _no_pause)
        ran.append(Snapshot.load(table).version)  # the version Y left

    fired: list[str] = []

    def pause(at: str) -> None:
        if at == point and not fired:
            fired.append(at)  # before the winner runs: a RESTORE winner passes through these hooks too
            winner()

    if point == "before-read":
        winner()
    try:
        x.run(table, pause)
        committed = True
    except DeltaConcurrentModificationException:
        committed = False
    if not ran:
        return committed, f"{x.kind} never reached {point}"
    latest = Snapshot.load(table).version
    for v in range(latest + 1):
        read_state(table, v)  # raises on a row live twice
    final = read_state(table)
    only_y = y.model(start, version0)
    if not committed:
        if point == "before-read":
            return committed, f"{x.kind} was refused with no concurrent commit"
        if final != only_y or latest != ran[0]:
            return committed, f"the refused {x.kind} changed the table: v{latest} {sorted(final.items())}"
        return committed, None
    # Y committed first, so the serial order is Y then X; WriteSerializable (only) lets a winning blind append
    # serialize after the command it raced (delta-spark's definition), which allows X then Y as well
    orders = [x.model(only_y, version0)]
    if y.kind == "append" and level == "WriteSerializable":
        orders.append(y.model(x.model(start, version0), version0))
    if final not in orders:
        return committed, f"final rows {sorted(final.items())} equal no serial order of {x.kind} and {y.kind}"
    return committed, None


def _no_pause(point: str) -> None:
    del point


@pytest.mark.parametrize(("x_kind", "y_kind"), PAIRS, ids=[f"{x}|{y}" for x, y in PAIRS])
def test_pair(tmp_path: Path, starts: dict[str, str], x_kind: str, y_kind: str) -> None:
    wrong: list[str] = []
    refused = runs = 0
    for level in LEVELS:
        for placement in ("same", "other"):
            x, y = Cmd(x_kind, "A"), Cmd(y_kind, "A" if placement == "same" else "B", second=True)
            for point in POINTS:
                committed, problem = _one(tmp_path, starts, x, y, point, level)
                runs += 1
                refused += not committed
                if problem:
                    wrong.append(f"{level}, {placement} file, {y_kind} at {x_kind}'s {point}: {problem}")
    assert not wrong, "\n".join(wrong)
    print(f"{x_kind} paused, {y_kind} wins: {runs} runs, {refused} refused, 0 wrong")
