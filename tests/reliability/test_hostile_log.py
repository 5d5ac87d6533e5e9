"""The log is read only from regular files inside ``_delta_log`` (Spark-free, seconds).

Each case builds a small table (v0 create, v1 append, v2 DELETE with DVs) and a second, different
table beside it, damages the first one way, and loads it: the outcome must be the typed error the
case names, with the offending file in the message — never the other table's files, never an older
version read silently. Controls show that the legitimate form of each shape still reads exactly.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import dvlake.errors as E
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import checkpoint
from tests.reliability.commands import State, read_state
from tests.reliability.engine import engine_append, engine_create, engine_delete
from tests.reliability.tables import commit_path, log_dir

LATEST = 2
V2_NAME = f"{LATEST:020d}.checkpoint.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json"


def _build(root: str, first: list[int], second: list[int], condition: str) -> None:
    engine_create(root, first, checkpoint_interval=100)
    engine_append(root, second)
    assert engine_delete(root, condition) == LATEST


@pytest.fixture()
def tables(tmp_path: Path) -> tuple[str, str]:
    """(the table under test, another table with other rows)."""
    ours, other = str(tmp_path / "ours"), str(tmp_path / "other")
    _build(ours, list(range(10)), list(range(100, 110)), "id = 3 OR id = 104")
    _build(other, list(range(5000, 5003)), list(range(6000, 6002)), "id = 5001")
    return ours, other


def _v2_checkpoint(root: str, sidecar_path: Callable[[str, str], str]) -> None:
    """Turn version 2 into a V2 checkpoint: a JSON manifest naming one sidecar (our classic checkpoint's Parquet,
    moved into ``_sidecars/``); ``sidecar_path(root, file in _sidecars)`` decides what the manifest names."""
    classic = checkpoint(root, LATEST)
    folder = os.path.join(log_dir(root), "_sidecars")
    os.makedirs(folder, exist_ok=True)
    sidecar = os.path.join(folder, "0a1b2c3d-sidecar.parquet")
    shutil.move(classic, sidecar)
    last = os.path.join(log_dir(root), "_last_checkpoint")
    if os.path.exists(last):
        os.remove(last)
    snap = Snapshot.load(root)
    lines = [{"checkpointMetadata": {"version": LATEST}}, {"protocol": snap.protocol.to_json()},
             {"metaData": snap.metadata.to_json()},
             {"sidecar": {"path": sidecar_path(root, sidecar), "sizeInBytes": os.path.getsize(sidecar),
                          "modificationTime": 0}}]
    Path(log_dir(root), V2_NAME).write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    # without the commits, only the checkpoint can give the table: a fallback to replay could hide the refusal
    for v in range(LATEST + 1):
        os.remove(commit_path(root, v))


def _other_checkpoint(other: str) -> str:
    return checkpoint(other, LATEST)


@dataclass(frozen=True)
class Case:
    name: str
    damage: Callable[[str, str], None]  # (ours, other)
    error: type[Exception] | None  # None: a control that must read exactly
    names: Callable[[str, str], str] = lambda ours, other: ""  # text the message must hold


def _fifo(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)
    os.mkfifo(path)


def _symlink(target: str, link: str) -> None:
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(target, link)


def _relative_escape(ours: str, other: str) -> None:
    target = _other_checkpoint(other)
    _v2_checkpoint(ours, lambda root, _: os.path.relpath(target, os.path.join(log_dir(root), "_sidecars")))


def _absolute_other(ours: str, other: str) -> None:
    target = _other_checkpoint(other)
    _v2_checkpoint(ours, lambda root, _: target)


def _sidecar_symlink_out(ours: str, other: str) -> None:
    target = _other_checkpoint(other)
    _v2_checkpoint(ours, lambda root, sidecar: (_symlink(target, sidecar), os.path.basename(sidecar))[1])


def _sidecar_fifo(ours: str, other: str) -> None:
    _v2_checkpoint(ours, lambda root, sidecar: (_fifo(sidecar), os.path.basename(sidecar))[1])


def _sidecar_into_data(ours: str, other: str) -> None:
    """An absolute path inside the table but outside _delta_log/_sidecars (the protocol's only sidecar folder)."""
    _v2_checkpoint(ours, lambda root, sidecar: os.path.join(root, "stolen.parquet"))


CASES = [
    Case("control: V2 checkpoint, sidecar by name", lambda o, x: _v2_checkpoint(o, lambda r, s: os.path.basename(s)),
         None),
    Case("control: V2 checkpoint, sidecar by absolute path in _sidecars", lambda o, x: _v2_checkpoint(o, lambda r, s: s),
         None),
    Case("control: a symlinked commit that stays inside the log",
         lambda o, x: (os.rename(commit_path(o, 1), commit_path(o, 1) + ".bak"),
                       _symlink(commit_path(o, 1) + ".bak", commit_path(o, 1))), None),
    Case("sidecar path with .. to another table's checkpoint", _relative_escape, E.PathOutsideTableRootError,
         lambda o, x: "../"),
    Case("sidecar as an absolute path to another table's checkpoint", _absolute_other, E.PathOutsideTableRootError,
         lambda o, x: x),
    Case("sidecar outside _sidecars but inside the table", _sidecar_into_data, E.PathOutsideTableRootError,
         lambda o, x: "stolen.parquet"),
    Case("sidecar in _sidecars is a symlink to another table's checkpoint", _sidecar_symlink_out,
         E.PathOutsideTableRootError, lambda o, x: "sidecar.parquet"),
    Case("sidecar is a FIFO", _sidecar_fifo, E.NotARegularFileError, lambda o, x: "sidecar.parquet"),
    Case("commit is a symlink to another table's commit",
         lambda o, x: _symlink(commit_path(x, 2), commit_path(o, 2)), E.PathOutsideTableRootError,
         lambda o, x: commit_path(o, 2)),
    Case("last commit is a FIFO", lambda o, x: _fifo(commit_path(o, 2)), E.NotARegularFileError,
         lambda o, x: commit_path(o, 2)),
    Case("middle commit is a FIFO", lambda o, x: _fifo(commit_path(o, 1)), E.NotARegularFileError,
         lambda o, x: commit_path(o, 1)),
    Case("commit is a directory", lambda o, x: (os.remove(commit_path(o, 2)), os.mkdir(commit_path(o, 2))),
         E.NotARegularFileError, lambda o, x: commit_path(o, 2)),
    Case("commit is a dangling symlink", lambda o, x: _symlink("/nonexistent/x.json", commit_path(o, 2)),
         E.PathOutsideTableRootError, lambda o, x: commit_path(o, 2)),
    Case("middle commit missing", lambda o, x: os.remove(commit_path(o, 1)), E.CorruptLogError,
         lambda o, x: f"{1:020d}.json"),
    Case("classic checkpoint is a symlink to another table's checkpoint",
         lambda o, x: _symlink(_other_checkpoint(x), os.path.join(log_dir(o), f"{LATEST:020d}.checkpoint.parquet")),
         E.PathOutsideTableRootError, lambda o, x: "checkpoint.parquet"),
    Case("_last_checkpoint is a FIFO", lambda o, x: _fifo(os.path.join(log_dir(o), "_last_checkpoint")),
         E.NotARegularFileError, lambda o, x: "_last_checkpoint"),
    Case("a CRC file is a FIFO", lambda o, x: _fifo(os.path.join(log_dir(o), f"{1:020d}.crc")),
         E.NotARegularFileError, lambda o, x: f"{1:020d}.crc"),
    Case("_last_checkpoint is a symlink out of the table",
         lambda o, x: (checkpoint(x, LATEST), _symlink(os.path.join(log_dir(x), "_last_checkpoint"),
                                                        os.path.join(log_dir(o), "_last_checkpoint"))),
         E.PathOutsideTableRootError, lambda o, x: "_last_checkpoint"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_log(tables: tuple[str, str], case: Case) -> None:
    ours, other = tables
    expected: State = read_state(ours)
    case.damage(ours, other)
    if case.error is None:
        assert Snapshot.load(ours).version == LATEST
        assert read_state(ours) == expected
        return
    with pytest.raises(case.error) as info:
        Snapshot.load(ours)
    assert case.names(ours, other) in str(info.value)


def test_fifo_commit_stops_a_writer_naming_the_file(tables: tuple[str, str]) -> None:
    """Before: the table read as version 1 and the next DELETE retried version 2 a thousand times, unnamed."""
    ours, _ = tables
    _fifo(commit_path(ours, 2))
    with pytest.raises(E.NotARegularFileError, match=f"{2:020d}.json"):
        engine_delete(ours, "id = 5")
    assert os.path.exists(commit_path(ours, 2)) and not os.path.exists(commit_path(ours, 3))


def test_corpus_size() -> None:
    hostile = [c for c in CASES if c.error is not None]
    assert len(hostile) >= 14, len(hostile)
