"""The subcommands that start Spark (sql, optimize, purge, vacuum, restore), through the console script.

Each of these subprocesses starts its own local Spark, so there are few of them.
"""

from __future__ import annotations

from pathlib import Path

from dvlake.log.snapshot import Snapshot
from tests.cli.conftest import KNOWN, run_cli


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


def test_sql_analysis_error_is_one_short_line(known_table: str) -> None:
    """A typo in a query on a Delta table: Spark's message without its plan, Java stack or PySpark's JSON record;
    the path of Spark's own log is named."""
    res = run_cli("sql", f"SELECT dya FROM delta.`{known_table}`", expect=1)
    first = res.err.splitlines()[0]
    assert first.startswith("error: AnalysisException: [UNRESOLVED_COLUMN") and "`dya`" in first, res.err
    assert len(res.err) < 1000, res.err
    for noise in ("__dvlake_", "LeftAnti", "JVM stacktrace", "QueryContextLogger", "Traceback"):
        assert noise not in res.err, noise
    log = res.err.split("Spark's own log of this run: ")[1].split(")")[0]
    assert Path(log).is_file()


class TestOptimize:
    def test_optimize_where_purges_the_partition(self, spark, fresh_table: str) -> None:
        """The human summary says what changed; Spark's own output stays off the terminal (and its log is removed)."""
        res = run_cli("optimize", fresh_table, "--where", "part = 'a'")
        assert res.out.startswith("2 files → 1, 20 deleted rows dropped in 1 partition ("), res.out
        assert len(res.out.strip().splitlines()) == 1
        assert "WARN" not in res.err and "Spark's own log" not in res.err, res.err
        snap = Snapshot.load(fresh_table)
        files = snap.files.to_pylist()
        part_a = [f for f in files if dict(f["partitionValues"])["part"] == "a"]
        assert part_a and all(f["deletionVector"] is None or f["deletionVector"]["storageType"] is None for f in part_a)
        assert snap.dv_count() == 2  # parts b and c keep theirs
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"] - KNOWN["deleted_rows"]


class TestPurge:
    def test_purge_rewrites_every_file_with_a_dv(self, spark, fresh_table: str) -> None:
        run_cli("purge", fresh_table, "--json")
        assert Snapshot.load(fresh_table).dv_count() == 0
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"] - KNOWN["deleted_rows"]
        doc = run_cli("health", fresh_table, "--json").json()
        assert doc["summary"]["deleted_rows"] == 0 and all(r["action"] == "VACUUM" for r in doc["recommendations"])


class TestVacuum:
    def test_dry_run_then_vacuum_keep_the_table_readable(self, spark, fresh_table: str) -> None:
        res = run_cli("vacuum", fresh_table, "--dry-run", "--json")
        assert res.json() == []  # every file is younger than the 7-day retention
        run_cli("vacuum", fresh_table)
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"] - KNOWN["deleted_rows"]


class TestRestore:
    def test_restore_to_version_brings_deleted_rows_back(self, spark, fresh_table: str) -> None:
        run_cli("restore", fresh_table, "--version", "1", "--json")
        snap = Snapshot.load(fresh_table)
        assert snap.version == KNOWN["version"] + 1 and snap.dv_count() == 0
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"]
