"""Small DV tables for the reliability tests, and helpers to damage them on purpose.

A table is built once per test module (Spark is slow to write) and copied per case: the copy is
what a case corrupts, so every case starts from the same known rows.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dvlake
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS

N_ROWS = 200
DELETED = set(range(0, N_ROWS, 7))  # rows the base table's DELETE removed
LIVE = sorted(set(range(N_ROWS)) - DELETED)


def build_dv_table(spark: Any, path: str, files: int = 2) -> str:
    """``id`` 0..199 in ``files`` files, then ``DELETE WHERE id % 7 = 0`` with DVs (version 1)."""
    df = spark.range(N_ROWS).selectExpr("id", "cast(id % 3 as int) as k").repartition(files, "k")
    dvlake.write(df.coalesce(files), path, properties=DV_PROPS)
    dvlake.DeltaTable.forPath(spark, path).delete("id % 7 = 0")
    return path


def copy_table(src: str, dst: str | Path) -> str:
    shutil.copytree(src, dst, symlinks=True)
    return str(dst)


def log_dir(root: str) -> str:
    return os.path.join(root, "_delta_log")


def commit_path(root: str, version: int) -> str:
    return os.path.join(log_dir(root), f"{version:020d}.json")


def read_actions(root: str, version: int) -> list[dict[str, Any]]:
    with open(commit_path(root, version), "rb") as f:
        return [json.loads(line) for line in f.read().splitlines() if line.strip()]


def write_actions(root: str, version: int, actions: list[dict[str, Any]]) -> None:
    with open(commit_path(root, version), "w") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


def edit_commit(root: str, version: int, fn: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> None:
    """Rewrite one commit file through ``fn`` (a list of action dicts in, the new list out)."""
    write_actions(root, version, fn(read_actions(root, version)))


def edit_dv_adds(root: str, version: int, fn: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``fn`` in place to every ``add`` of ``version`` that carries a deletion vector."""

    def go(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for a in actions:
            if "add" in a and a["add"].get("deletionVector"):
                fn(a["add"])
        return actions

    edit_commit(root, version, go)


def dv_files(root: str) -> list[str]:
    return sorted(str(p) for p in Path(root).rglob("deletion_vector_*.bin"))


def data_files(root: str) -> list[str]:
    return sorted(str(p) for p in Path(root).rglob("*.parquet") if "_delta_log" not in str(p))


def ids(spark: Any, root: str, **kw: Any) -> list[int]:
    return sorted(r.id for r in dvlake.read(spark, root, **kw).select("id").collect())


def latest_version(root: str) -> int:
    return Snapshot.load(root).version


def bounded(spark: Any, fn: Callable[[], Any], seconds: float = 60.0) -> Any:
    """Run ``fn`` in a thread; fail (and cancel Spark's jobs) if it has not finished in ``seconds``.

    A hang is a failure, never a stuck CI run: the reader must refuse a FIFO, not block on it.
    """
    import threading

    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            out["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        spark.sparkContext.cancelAllJobs()
        raise AssertionError(f"did not finish within {seconds} s (a hang)")
    if "error" in out:
        raise out["error"]
    return out.get("value")
