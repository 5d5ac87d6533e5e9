"""The subcommands that start Spark (sql, optimize, purge, vacuum, restore), through the console script.

Each of these subprocesses starts its own local Spark, so there are few of them. The maintenance
commands are thin over API names that land on other branches: their tests run as soon as the API
exists (``skipif`` on the attribute), and until then the CLI must refuse them cleanly without
starting Spark.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dvlake.api import DeltaTable
from dvlake.cli import _sql_supports
from dvlake.log.snapshot import Snapshot
from tests.cli.conftest import KNOWN, run_cli

HAS_OPTIMIZE = hasattr(DeltaTable, "optimize")
HAS_VACUUM = hasattr(DeltaTable, "vacuum")
HAS_RESTORE = hasattr(DeltaTable, "restoreToVersion") and hasattr(DeltaTable, "restoreToTimestamp")
HAS_PURGE = _sql_supports("REORG TABLE delta.`/t` APPLY (PURGE)")
HAS_VACUUM_DRY_RUN = _sql_supports("VACUUM delta.`/t` DRY RUN")


def test_sql_runs_dvlake_delete(fresh_table: str) -> None:
    """One Spark start: a DELETE through dvlake.sql; its result row and the new DV are checked."""
    res = run_cli("sql", f"DELETE FROM delta.`{fresh_table}` WHERE part = 'd' AND id >= 390", "--json")
    assert res.json() == [{"num_affected_rows": 10}]
    snap = Snapshot.load(fresh_table)
    assert snap.version == KNOWN["version"] + 1 and snap.dv_count() == 5
    assert int(snap.dv_cardinalities().sum()) == KNOWN["deleted_rows"] + 10
    assert len(list(Path(fresh_table).rglob("*.parquet"))) == KNOWN["files"]  # the DELETE wrote no data file


def test_sql_error_is_a_message(tmp_path: Path) -> None:
    res = run_cli("sql", f"DESCRIBE HISTORY delta.`{tmp_path}/none`", expect=1)
    assert res.err.startswith("error: ") and "is not a Delta table" in res.err and "Traceback" not in res.err


@pytest.mark.skipif(HAS_OPTIMIZE and HAS_PURGE and HAS_VACUUM and HAS_VACUUM_DRY_RUN and HAS_RESTORE,
                    reason="every maintenance command is available in this build")
class TestMaintenanceNotAvailable:
    """Until the maintenance commands land, the CLI says so (exit 1) before starting Spark."""

    @pytest.mark.parametrize("args,available", [
        (["optimize", "/t"], HAS_OPTIMIZE),
        (["purge", "/t", "--where", "part = 'a'"], HAS_PURGE),
        (["vacuum", "/t"], HAS_VACUUM),
        (["vacuum", "/t", "--dry-run"], HAS_VACUUM_DRY_RUN),
        (["restore", "/t", "--version", "1"], HAS_RESTORE),
    ])
    def test_refused_cleanly(self, args: list[str], available: bool) -> None:
        if available:
            pytest.skip(f"`dvlake {args[0]}` is available")
        res = run_cli(*args, expect=1, timeout=60)
        assert f"`dvlake {args[0]}" in res.err and "is not available in this build of dvlake" in res.err
        assert "Traceback" not in res.err and res.out == ""


@pytest.mark.skipif(not HAS_OPTIMIZE, reason="DeltaTable.optimize is not in this build yet")
class TestOptimize:
    def test_optimize_where_purges_the_partition(self, spark, fresh_table: str) -> None:
        run_cli("optimize", fresh_table, "--where", "part = 'a'", "--json")
        snap = Snapshot.load(fresh_table)
        files = snap.files.to_pylist()
        part_a = [f for f in files if dict(f["partitionValues"])["part"] == "a"]
        assert part_a and all(f["deletionVector"] is None or f["deletionVector"]["storageType"] is None for f in part_a)
        assert snap.dv_count() == 2  # parts b and c keep theirs
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"] - KNOWN["deleted_rows"]


@pytest.mark.skipif(not HAS_PURGE, reason="REORG TABLE … APPLY (PURGE) is not in this build yet")
class TestPurge:
    def test_purge_rewrites_every_file_with_a_dv(self, spark, fresh_table: str) -> None:
        run_cli("purge", fresh_table, "--json")
        assert Snapshot.load(fresh_table).dv_count() == 0
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"] - KNOWN["deleted_rows"]
        doc = run_cli("health", fresh_table, "--json").json()
        assert doc["summary"]["deleted_rows"] == 0 and all(r["action"] == "VACUUM" for r in doc["recommendations"])


@pytest.mark.skipif(not (HAS_VACUUM and HAS_VACUUM_DRY_RUN), reason="VACUUM is not in this build yet")
class TestVacuum:
    def test_dry_run_then_vacuum_keep_the_table_readable(self, spark, fresh_table: str) -> None:
        res = run_cli("vacuum", fresh_table, "--dry-run", "--json")
        assert res.json() == []  # every file is younger than the 7-day retention
        run_cli("vacuum", fresh_table)
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"] - KNOWN["deleted_rows"]


@pytest.mark.skipif(not HAS_RESTORE, reason="DeltaTable.restoreToVersion is not in this build yet")
class TestRestore:
    def test_restore_to_version_brings_deleted_rows_back(self, spark, fresh_table: str) -> None:
        run_cli("restore", fresh_table, "--version", "1", "--json")
        snap = Snapshot.load(fresh_table)
        assert snap.version == KNOWN["version"] + 1 and snap.dv_count() == 0
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"]
