"""Fixtures of the CLI tests: the real console script in a subprocess (``run_cli``) or its entry point in this
process (``invoke``), and a table with known deletions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

#: The known table (``build_known_table``): 400 rows in 4 partitions x 2 files of 50 rows, then three DELETEs.
KNOWN_DELETES = ("part = 'a' AND id % 5 = 0", "part = 'b' AND id < 75", "id = 120")
KNOWN = {
    "files": 8, "files_with_dv": 4, "physical_rows": 400, "deleted_rows": 46, "version": 4,
    "per_partition": {"part=a": 20, "part=b": 25, "part=c": 1, "part=d": 0},
    "dv_history": [(0, 0, 0), (1, 0, 0), (2, 2, 20), (3, 3, 45), (4, 4, 46)],
}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


def cli_command() -> list[str]:
    """The installed ``dvlake`` console script beside this interpreter, else ``python -m dvlake.cli``."""
    script = Path(sys.executable).parent / "dvlake"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dvlake.cli"]


def run_cli(*args: str, expect: int | None = 0, timeout: float = 900) -> Result:
    """Run ``dvlake ARGS`` in a subprocess (not a terminal); check the exit code when ``expect`` is given."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("DVLAKE_DEBUG", None)
    for name in ("COLUMNS", "LINES"):  # pytest-xdist workers carry COLUMNS=80: a pipe's output is one row per line
        env.pop(name, None)
    proc = subprocess.run([*cli_command(), *args], capture_output=True, text=True, timeout=timeout, env=env,
                          stdin=subprocess.DEVNULL)
    result = Result(proc.returncode, proc.stdout, proc.stderr)
    if expect is not None:
        assert proc.returncode == expect, f"exit {proc.returncode} != {expect}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return result


def invoke(*args: str, expect: int | None = 0) -> Result:
    """Run ``dvlake ARGS`` in this process through ``main`` (the console script's entry point and exit-code handling),
    on a pipe-wide console (one table row per line, as ``run_cli``'s pipe); check the exit code when ``expect`` is
    given. For what a subprocess proves nothing more about: a Spark command reuses the test session's Spark."""
    from tests.unit.test_cli_output import _run

    code, out, err = _run(*args, columns=1000)
    if expect is not None:
        assert code == expect, f"exit {code} != {expect}\nstdout:\n{out}\nstderr:\n{err}"
    return Result(code, out, err)


def build_known_table(spark, path: str) -> str:
    """Two appends of 200 rows (ids 0-199, 200-399), 50 per part a-d, one file per partition each; three DELETEs.

    part a: ids % 5 = 0 -> 10 of 50 in each of its 2 files (20 %); part b: ids 50-74 -> 25 of 50 in its first
    file (50 %); part c: id 120 -> 1 of 50 (2 %); part d: nothing. 46 of 400 rows deleted, 4 DVs.
    """
    from pyspark.sql import functions as F

    from dvlake import DeltaTable, write

    def frame(lo: int):
        part = F.expr(f"element_at(array('a', 'b', 'c', 'd'), cast(floor((id - {lo}) / 50) as int) + 1)")
        return spark.range(lo, lo + 200).select("id", part.alias("part"), (F.col("id") * 1.5).alias("value")).coalesce(1)

    write(frame(0), path, partitionBy=["part"], properties={"delta.enableDeletionVectors": "true"})
    write(frame(200), path, mode="append")
    table = DeltaTable.forPath(spark, path)
    for condition in KNOWN_DELETES:
        table.delete(condition)
    return path


@pytest.fixture(scope="session")
def known_table(spark, tmp_path_factory) -> str:
    """The known table, built once (tests that only read share it; writers use ``fresh_table``)."""
    return build_known_table(spark, str(tmp_path_factory.mktemp("cli") / "events"))


@pytest.fixture
def fresh_table(known_table: str, tmp_path: Path) -> str:
    """A writable copy of the known table (its log uses relative paths, so a copy is the same table)."""
    return str(shutil.copytree(known_table, tmp_path / "events"))
