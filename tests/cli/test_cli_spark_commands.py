"""The subcommands that start Spark (sql, optimize, purge, vacuum, restore).

Each console-script run starts its own local Spark (tens of seconds), so only the process-level behaviours run the
real console script: a Spark command that exits 0 with its one-line summary while the JVM it started writes only to
its log, removed on success (optimize); exit code 1 for a missing table, reported before any Spark start (sql); vacuum
(no Spark). The others run in this process through ``main`` (``invoke``) on the test session's Spark (the CLI reuses a
running session), where a subprocess would prove nothing more: exit code, output, error text, the log named on a
failure and the table left behind are checked the same way.
"""

from __future__ import annotations

from pathlib import Path

from dvlake.log.snapshot import Snapshot
from tests.cli.conftest import KNOWN, invoke, run_cli


def test_sql_runs_dvlake_delete(spark, fresh_table: str) -> None:
    """A DELETE through dvlake.sql; its result row and the new DV are checked."""
    res = invoke("sql", f"DELETE FROM delta.`{fresh_table}` WHERE part = 'd' AND id >= 390", "--json")
    assert res.json() == [{"num_affected_rows": 10}]
    snap = Snapshot.load(fresh_table)
    assert snap.version == KNOWN["version"] + 1 and snap.dv_count() == 5
    assert int(snap.dv_cardinalities().sum()) == KNOWN["deleted_rows"] + 10
    assert len(list(Path(fresh_table).rglob("*.parquet"))) == KNOWN["files"]  # the DELETE wrote no data file


def test_sql_error_is_a_message(tmp_path: Path) -> None:
    res = run_cli("sql", f"DESCRIBE HISTORY delta.`{tmp_path}/none`", expect=1)
    assert res.err.startswith("error: ") and "is not a Delta table" in res.err and "Traceback" not in res.err


def test_sql_analysis_error_is_one_short_line(spark, known_table: str) -> None:
    """A typo in a query on a Delta table: exit code 1 and Spark's message without its plan, Java stack or PySpark's
    JSON record; the path of Spark's own log is named (kept, unlike on success). The message is dvlake's text of the
    exception, the same in this process; that a fresh JVM's output stays in that log is the optimize run's check."""
    res = invoke("sql", f"SELECT dya FROM delta.`{known_table}`", expect=1)
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
        invoke("purge", fresh_table, "--json")
        assert Snapshot.load(fresh_table).dv_count() == 0
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"] - KNOWN["deleted_rows"]
        doc = invoke("health", fresh_table, "--json").json()
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
        invoke("restore", fresh_table, "--version", "1", "--json")
        snap = Snapshot.load(fresh_table)
        assert snap.version == KNOWN["version"] + 1 and snap.dv_count() == 0
        from dvlake import read

        assert read(spark, fresh_table).count() == KNOWN["physical_rows"]
