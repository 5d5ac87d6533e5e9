"""Concurrency: processes mixing DELETEs and appends on one table; every committed version must equal
the serial application of the commands committed so far (no lost delete, no resurrected or
duplicated row, no lost append). The order is delta-spark's WriteSerializable one: commit order,
except that a blind append committed while a DELETE ran serializes after that DELETE (it does not
conflict with it, in delta-spark as here), so a DELETE removes the matching rows of its read version.

A command that loses a race with a delta-spark-named ``DeltaConcurrentModificationException`` is
simply not committed; the check replays each commit from what it records (``commands.COMMANDS``:
appended files, the DELETE predicate), so a command registered there is covered with no change here.
Spark-free processes (``engine.py``, forked from the test process): ``DVLAKE_CONCURRENCY_PROCS`` ×
``DVLAKE_CONCURRENCY_COMMANDS`` (default 4 × 12); plus the real Spark commands in two processes (slow): a child
with its own JVM and this test process's session, which starts its commands once the child's session is up (one
JVM start, not two).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dvlake.errors import DeltaConcurrentModificationException
from dvlake.log.snapshot import Snapshot
from tests.conftest import REPO_ROOT
from tests.reliability.child import ForkedChild
from tests.reliability.commands import COMMANDS, command_at, create_table, read_state
from tests.reliability.tables import read_actions

PROCS = int(os.environ.get("DVLAKE_CONCURRENCY_PROCS", "4"))
COMMANDS_PER_PROC = int(os.environ.get("DVLAKE_CONCURRENCY_COMMANDS", "12"))
BY_OPERATION = {c.operation: c for c in COMMANDS.values()}


FIRST = 3  # every owner's first command: an append (``commands.command_at``)


def _start(table: str, mode: str, owner: int, count: int,
           stderr: Any = subprocess.PIPE) -> subprocess.Popen[str] | ForkedChild:
    if mode == "engine":  # forked from this process: no interpreter start and imports per child
        return ForkedChild([table, mode, "none", "1", str(owner), str(count), str(FIRST)])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.child", table, mode, "none", "1", str(owner),
                             str(count), str(FIRST)], stdout=subprocess.PIPE, stderr=stderr, text=True,
                            cwd=str(REPO_ROOT), env=env)


def _run(table: str, mode: str, procs: int, count: int) -> tuple[int, int]:
    children = [_start(table, mode, owner, count) for owner in range(1, procs + 1)]
    done = conflicts = 0
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-3000:]
        done += sum(1 for line in out.splitlines() if line.startswith("DONE"))
        conflicts += sum(1 for line in out.splitlines() if line.startswith("CONFLICT"))
    return done, conflicts


def check_serial(table: str, done: int) -> None:
    """Replay every commit onto the previous version's rows and compare with what the table reads."""
    latest = Snapshot.load(table).version
    state = read_state(table, 0)
    history = {0: state}
    commands = 0
    for v in range(1, latest + 1):
        actions = read_actions(table, v)
        op = next(a["commitInfo"]["operation"] for a in actions if "commitInfo" in a)
        state = BY_OPERATION[op].replay(state, actions, table, history)
        commands += 1
        assert read_state(table, v) == state, f"version {v} ({op}) differs from the serial application"
        history[v] = state
    assert commands == done, f"{done} commands reported committed, {commands} commits in the log"


def test_concurrent_deletes_and_appends(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    create_table(table, checkpoint_interval=5)
    done, conflicts = _run(table, "engine", PROCS, COMMANDS_PER_PROC)
    check_serial(table, done)
    assert done >= PROCS * COMMANDS_PER_PROC // 2, f"only {done} of {PROCS * COMMANDS_PER_PROC} commands committed"
    print(f"concurrency: {PROCS} processes x {COMMANDS_PER_PROC} commands, {done} committed, {conflicts} lost a race")


def _run_here(spark: Any, table: str, owner: int, count: int) -> tuple[int, int]:
    """What a ``child.py`` concurrency child does, in this process's session: (committed, lost a race)."""
    done = conflicts = 0
    for i in range(FIRST, FIRST + count):
        try:
            COMMANDS[command_at(i)].run_spark(spark, table, i, owner)
        except DeltaConcurrentModificationException:
            conflicts += 1  # lost the race: not committed, by design
            continue
        done += 1
    return done, conflicts


@pytest.mark.slow
def test_concurrent_spark_deletes_and_appends(spark: Any, tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    create_table(table, checkpoint_interval=5)
    log = tmp_path / "child.log"  # a file, not a pipe: Spark's log must not block the child mid-command
    with open(log, "w") as err_file:
        child = _start(table, "spark", 1, 4, stderr=err_file)
    try:
        assert child.stdout is not None
        for line in child.stdout:  # start together: this session's commands once the child's session is up
            if line.startswith("READY"):
                break
        else:
            pytest.fail(f"the Spark child exited before it was ready:\n{log.read_text()[-3000:]}")
        done, conflicts = _run_here(spark, table, 2, 4)
        out, _ = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, log.read_text()[-3000:]
    done += sum(1 for line in out.splitlines() if line.startswith("DONE"))
    conflicts += sum(1 for line in out.splitlines() if line.startswith("CONFLICT"))
    check_serial(table, done)
    assert done >= 4
    print(f"concurrency (Spark): 2 processes x 4 commands, {done} committed, {conflicts} lost a race")
