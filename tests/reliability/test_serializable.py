"""Serializable commits: a command paused just before its commit while another one commits first.

Each case checks the outcome against the serial orders of the two commands: the paused one either
commits and the table equals one serial order, or it fails with delta-spark's exception class and
the table is exactly what the winner left. Spark-free (``engine.py`` writers and the real RESTORE,
which needs no Spark), so this runs in the default suite in seconds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import dvlake.commands.maintenance.restore as restore_module
import tests.reliability.engine as engine_module
from dvlake.commands.maintenance.restore import restore
from dvlake.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    InvalidArgumentError,
)
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction
from tests.reliability.commands import State, eval_condition, read_state
from tests.reliability.engine import engine_append, engine_create, engine_delete
from tests.reliability.tables import edit_commit, read_actions


@contextmanager
def paused_commit(module: ModuleType, winner: Callable[[], Any]) -> Iterator[None]:
    """The next transaction ``module`` commits first lets ``winner`` run to completion (the paused commit)."""
    original = module.OptimisticTransaction  # type: ignore[attr-defined]
    fired: list[bool] = []

    class Paused(original):  # type: ignore[misc, valid-type]
        def commit(self, *args: Any, **kwargs: Any) -> int:
            if not fired:
                fired.append(True)
                winner()
            return int(super().commit(*args, **kwargs))

    module.OptimisticTransaction = Paused  # type: ignore[attr-defined]
    try:
        yield
    finally:
        module.OptimisticTransaction = original  # type: ignore[attr-defined]
    assert fired, "the paused command never reached its commit"


def _two_versions(table: str, isolation: str | None = None) -> None:
    """Version 0: file A (ids 0..9); version 1: file B (ids 1000..1009); optionally delta.isolationLevel."""
    engine_create(table, list(range(10)), checkpoint_interval=100)
    engine_append(table, list(range(1000, 1010)))
    if isolation is not None:  # in commit 0 as written, as another engine may have (dvlake refuses to set a bad one)
        edit_commit(table, 0, lambda lines: [_with_level(line, isolation) for line in lines])


def _with_level(line: dict[str, Any], level: str) -> dict[str, Any]:
    if "metaData" in line:
        line["metaData"]["configuration"]["delta.isolationLevel"] = level
    return line


def _deleted(state: State, condition: str) -> State:
    return {k: v for k, v in state.items() if not eval_condition(condition, k)}


@pytest.mark.parametrize(("condition", "error"), [("id = 5", ConcurrentDeleteReadException),
                                                  ("id = 1000 OR id = 5", ConcurrentDeleteDeleteException)])
def test_restore_paused_loses_to_delete_of_a_file_it_leaves_alone(tmp_path: Path, condition: str,
                                                                   error: type[Exception]) -> None:
    """The campaign's race: RESTORE TO VERSION 0 committed over a DELETE's DV on file A (which RESTORE keeps)."""
    table = str(tmp_path / "t")
    _two_versions(table)
    before = read_state(table)
    with paused_commit(restore_module, lambda: engine_delete(table, condition)), pytest.raises(error, match="DELETE"):
        restore(None, table, version=0)
    assert Snapshot.load(table).version == 2, "the refused RESTORE must commit nothing"
    assert read_state(table) == _deleted(before, condition)


def test_delete_paused_loses_to_restore(tmp_path: Path) -> None:
    """The other order: the DELETE replaces the DV of file B, which the RESTORE removed; it must not commit."""
    table = str(tmp_path / "t")
    _two_versions(table)
    v0 = read_state(table, 0)
    with paused_commit(engine_module, lambda: restore(None, table, version=0)), \
            pytest.raises(ConcurrentDeleteDeleteException, match="RESTORE"):
        engine_delete(table, "id = 1000 OR id = 5")
    assert read_state(table) == v0


def test_restore_paused_over_a_blind_append_serializes_before_it(tmp_path: Path) -> None:
    """WriteSerializable: a blind append does not invalidate RESTORE; the result is RESTORE, then the append."""
    table = str(tmp_path / "t")
    _two_versions(table)
    v0 = read_state(table, 0)
    with paused_commit(restore_module, lambda: engine_append(table, [2000, 2001])):
        restore(None, table, version=0)
    assert read_state(table) == {**v0, 2000: 0, 2001: 0}


@pytest.mark.parametrize(("isolation", "refused"), [(None, False), ("WriteSerializable", False), ("Serializable", True)])
def test_isolation_level_decides_delete_over_blind_append(tmp_path: Path, isolation: str | None, refused: bool) -> None:
    """delta.isolationLevel: a blind append of rows a paused DELETE's condition matches conflicts only under
    Serializable; under WriteSerializable the append serializes after the DELETE and its rows survive."""
    table = str(tmp_path / "t")
    _two_versions(table, isolation)
    before = read_state(table)
    condition = "id = 5 OR id = 3000"
    with paused_commit(engine_module, lambda: engine_append(table, [3000])):
        if refused:
            with pytest.raises(ConcurrentAppendException):
                engine_delete(table, condition)
        else:
            engine_delete(table, condition)
    expected = {**before, 3000: 0} if refused else {**_deleted(before, condition), 3000: 0}
    assert read_state(table) == expected
    infos = [a["commitInfo"] for a in read_actions(table, Snapshot.load(table).version) if "commitInfo" in a]
    assert infos[0]["isolationLevel"] == (isolation or "WriteSerializable")


def test_unknown_isolation_level_is_a_typed_error(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    _two_versions(table, "SnapshotIsolation")
    with pytest.raises(InvalidArgumentError, match="delta.isolationLevel"):
        engine_delete(table, "id = 5")


def test_unknown_isolation_level_can_be_fixed_but_not_set(tmp_path: Path) -> None:
    """A commit that replaces the bad value runs under the new one; a commit that sets a bad value is refused."""
    table = str(tmp_path / "t")
    _two_versions(table, "SnapshotIsolation")  # written before the check existed (or by another engine)
    _set_property(table, "Serializable")
    assert Snapshot.load(table).configuration["delta.isolationLevel"] == "Serializable"
    with pytest.raises(InvalidArgumentError, match="'Nonsense'"):
        _set_property(table, "Nonsense")
    assert Snapshot.load(table).configuration["delta.isolationLevel"] == "Serializable"


def _set_property(table: str, level: str) -> None:
    snap = Snapshot.load(table)
    txn = OptimisticTransaction(table, snap)
    txn.update_metadata(dataclasses.replace(
        snap.metadata, configuration={**snap.metadata.configuration, "delta.isolationLevel": level}))
    txn.commit([], "SET TBLPROPERTIES", {})
