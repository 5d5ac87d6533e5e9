"""`python -m dvlake.demo` (what `make demo` runs) at a small size, end to end in its own process, so a change that
breaks the demo fails CI rather than a new user's first hour."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dvlake.log.snapshot import Snapshot


@pytest.mark.slow  # its own Spark start: tens of seconds on a busy machine
def test_demo_runs_at_ten_thousand_rows(tmp_path: Path) -> None:
    out = tmp_path / "demo-output"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-m", "dvlake.demo", "--rows", "10000", "--output", str(out)],
                          capture_output=True, text=True, timeout=900, env=env, stdin=subprocess.DEVNULL, cwd=tmp_path)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    text = proc.stdout
    assert "1. Building demo-output/daily_user_actions with 10,000 rows in 10 day partitions" in text, text
    assert "new DV files: 1 (" in text and "new Parquet files: 0" in text, text
    assert "rows of user 3 left: 0" in text and "DV DELETE was" in text, text
    assert "dvlake files demo-output/daily_user_actions --with-dvs" in text.replace(str(Path(sys.executable).parent), "")
    assert "Traceback" not in proc.stderr and "WARN" not in proc.stderr, proc.stderr  # Spark's output: its log file
    table = Snapshot.load(str(out / "daily_user_actions"))
    cow = Snapshot.load(str(out / "daily_user_actions_cow"))
    deleted = int(table.dv_cardinalities().sum())
    assert table.dv_count() == 10 and deleted == 10  # user 3 (ids 30-39) on every day, one file per day
    assert int(table.num_records().sum()) - deleted == int(cow.num_records().sum()) == 10_000 - 10
    assert cow.dv_count() == 0
