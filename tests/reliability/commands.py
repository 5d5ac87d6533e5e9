"""The commands the crash and concurrency tests run, their serial model, and a Spark-free reader.

Adding a command is one ``register`` line: how to run command ``i`` with Spark, and how command ``i``
changes the model state (id → value). The crash and concurrency harnesses pick commands from ``SEQUENCE``
and check every committed version against the model, so a new command is exercised by both without
touching them.

Rows are ``(id bigint, v bigint)``; appends add a batch of fresh ids with ``v = 0``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow.parquet as pq

State = dict[int, int]  # id -> v
BATCH = 40


def batch_ids(i: int, owner: int = 0) -> list[int]:
    """The ids command ``i`` of process ``owner`` appends (disjoint across processes and commands)."""
    base = (owner * 10_000 + i) * 100
    return list(range(base, base + BATCH))


def delete_condition(i: int, owner: int = 0) -> str:
    """Always matches live rows (part of the batch appended just before), plus a stripe across older files
    (so DVs get updated, not only created)."""
    lo = batch_ids(i - 1, owner)[0]
    return f"(id >= {lo} AND id < {lo + BATCH} AND id % 5 = {i % 5}) OR id % 11 = {i % 11}"


def eval_condition(condition: str, row_id: int) -> bool:
    """The generated conditions, evaluated in Python (the serial model of a DELETE)."""
    expr = condition.replace(" AND ", " and ").replace(" OR ", " or ").replace(" = ", " == ")
    return bool(eval(expr, {"__builtins__": {}}, {"id": row_id}))  # noqa: S307 - our own generated text


#: (state before, the commit's actions, table, state of every earlier version) -> state after
Replay = Callable[[State, list[dict[str, Any]], str, dict[int, State]], State]


@dataclass(frozen=True)
class Command:
    """One kind of command: run it with Spark, its effect on the model, and how to re-apply a commit of it."""

    name: str
    run_spark: Callable[[Any, str, int, int], None]  # (spark, table, i, owner)
    model: Callable[[State, int, int], State]  # (state before, i, owner) -> state after
    operation: str  # commitInfo.operation of its commits
    replay: Replay  # serial application of one of its commits, from what the commit records


COMMANDS: dict[str, Command] = {}


def register(name: str, run_spark: Callable[[Any, str, int, int], None], model: Callable[[State, int, int], State],
             operation: str, replay: Replay) -> None:
    COMMANDS[name] = Command(name, run_spark, model, operation, replay)


def _append_spark(spark: Any, table: str, i: int, owner: int) -> None:
    import dvlake

    ids = batch_ids(i, owner)
    df = spark.createDataFrame([(x, 0) for x in ids], "id long, v long").coalesce(1)
    dvlake.write(df, table, mode="append")


def _append_model(state: State, i: int, owner: int) -> State:
    return {**state, **dict.fromkeys(batch_ids(i, owner), 0)}


def _delete_spark(spark: Any, table: str, i: int, owner: int) -> None:
    from dvlake import DeltaTable

    DeltaTable.forPath(spark, table).delete(delete_condition(i, owner))


def _delete_model(state: State, i: int, owner: int) -> State:
    cond = delete_condition(i, owner)
    return {k: v for k, v in state.items() if not eval_condition(cond, k)}


def _append_replay(state: State, actions: list[dict[str, Any]], table: str, history: dict[int, State]) -> State:
    out = dict(state)
    for a in actions:
        if "add" in a:
            t = pq.read_table(os.path.join(table, a["add"]["path"]), columns=["id", "v"])
            out.update(zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True))
    return out


def _delete_replay(state: State, actions: list[dict[str, Any]], table: str, history: dict[int, State]) -> State:
    """WriteSerializable (delta-spark's default): blind appends committed after the DELETE read the table
    do not conflict with it and serialize *after* it, so it removes the matching rows it could see."""
    import json

    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    cond = json.loads(info["operationParameters"]["predicate"])[0]
    seen = history[int(info["readVersion"])]
    return {k: v for k, v in state.items() if not (k in seen and eval_condition(cond, k))}


register("append", _append_spark, _append_model, "WRITE", _append_replay)
register("delete", _delete_spark, _delete_model, "DELETE", _delete_replay)
# The other commands are not in this rotation: their SIGKILLs are real_kills.py's (the real commands, each killed
# before and after its commit, checked against an uninterrupted run on a copy), their races test_pairwise.py's.


def command_at(i: int) -> str:
    """Command ``i`` of a run: appends and deletes alternate (command 0 creates the table)."""
    return SEQUENCE[i % len(SEQUENCE)] if i > 0 else "append"


SEQUENCE = ["delete", "append"]  # index 1, 2, 3, … → append, delete, append, … (i % 2)


def model_after(n: int, owner: int = 0) -> State:
    """The state after commands 0..n-1 of one process, applied serially."""
    state: State = {}
    for i in range(n):
        state = COMMANDS[command_at(i)].model(state, i, owner)
    return state


def create_table(table: str, checkpoint_interval: int = 3) -> None:
    """Command 0 without Spark: the table with DVs enabled and batch 0 (so children start at command 1)."""
    from tests.reliability.engine import engine_create

    engine_create(table, batch_ids(0), checkpoint_interval)


# --- a reader that shares no code with the Spark scan ------------------------------------------


def read_rows(table: str, version: int | None = None) -> list[tuple[int, int]]:
    """Every live ``(id, v)`` row of the table at ``version``, sorted (a multiset: a row live twice shows twice).
    Log replay, pyarrow Parquet reads, DVs applied with numpy: no code shared with the Spark scan."""
    from dvlake.dv.store import load_bitmap
    from dvlake.log.snapshot import Snapshot

    snap = Snapshot.load(table, version=version)
    out: list[tuple[int, int]] = []
    for add in snap.add_files():
        t = pq.read_table(os.path.join(table, add.path), columns=["id", "v"])
        ids = t.column("id").to_numpy()
        vs = t.column("v").to_numpy()
        keep = np.ones(len(ids), dtype=bool)
        if add.deletion_vector is not None:
            deleted = np.asarray(load_bitmap(add.deletion_vector, table).to_array(), dtype=np.int64)
            keep[deleted] = False
        out += zip(ids[keep].tolist(), vs[keep].tolist(), strict=True)
    return sorted(out)


def read_state(table: str, version: int | None = None) -> State:
    """id → v of the table at ``version`` (``read_rows``); a row live twice is an error."""
    out: State = {}
    for k, v in read_rows(table, version):
        if k in out:
            raise AssertionError(f"row {k} is live twice at version {version if version is not None else 'latest'}")
        out[k] = v
    return out


def check_log_readable(table: str) -> None:
    """Every commit parses and every complete checkpoint loads (a torn write would fail here)."""
    from dvlake.log.checkpoint import read_checkpoint
    from dvlake.log.replay import read_commit
    from dvlake.log.segment import list_log
    from dvlake.storage.base import storage_for

    storage = storage_for(table)
    listing = list_log(storage, table)
    for _, (path, _mtime) in sorted(listing.commits.items()):
        assert read_commit(storage, path), f"{path} is empty"
    for cp in listing.checkpoints:
        read_checkpoint(storage, table, cp)
        for f in cp.files:
            pq.read_metadata(f)
