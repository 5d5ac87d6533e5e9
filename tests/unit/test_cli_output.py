"""What the command line prints, without Spark: percentages, one-line summaries, vacuum (which needs no Spark),
--conf, the checks that run before a Spark start, error text, and what the log-only commands import.

Tables are hand-written logs (``tests/unit/test_vacuum_rules.py``'s helpers), so every number is known.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dvlake import errors
from dvlake.cli import cli, main
from dvlake.config import RETENTION_CHECK
from dvlake.display import percent
from dvlake.terminal.summaries import optimize_line, restore_line, sql_line, statement_kind, vacuum_line
from tests.unit.test_vacuum_rules import OLD, PROTOCOL, _add, _age_dirs, _commit, _dv, _metadata, _remove, _touch

DAY_MS = 86_400_000


def _table(root: Path, *, physical: int = 300_000, deleted: int = 3) -> str:
    """One data file of ``physical`` rows whose DV deletes ``deleted`` of them, and an old unreferenced file."""
    dv, dv_rel = _dv()
    dv["cardinality"] = deleted
    _touch(root / dv_rel)
    _touch(root / "part-live.parquet")
    _touch(root / "part-gone.parquet")  # removed long ago: VACUUM may delete it
    live = _add("part-live.parquet", dv)
    live["add"]["stats"] = json.dumps({"numRecords": physical, "tightBounds": False})
    _commit(root, 0, [PROTOCOL, _metadata(), _add("part-gone.parquet"), live])
    _commit(root, 1, [_remove("part-gone.parquet", ts=int(OLD * 1000))])
    _age_dirs(root)
    return str(root)


def _run(*args: str, columns: int = 200) -> tuple[int, str, str]:
    """``dvlake ARGS`` in this process through ``main`` on a ``columns``-wide terminal: (exit code, stdout, stderr)."""
    with CliRunner().isolation(env={"DVLAKE_DEBUG": None, "COLUMNS": str(columns)}) as (out, err, _mixed):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        else:
            code = 0
        sys.stdout.flush()
        sys.stderr.flush()
        return code, out.getvalue().decode(), err.getvalue().decode()


# --- numbers people read ---------------------------------------------------------------------------


@pytest.mark.parametrize(("ratio", "decimals", "shown"), [
    (3 / 300_000, 2, "0.001%"),          # not 0.00%: three rows are deleted
    (299_999 / 300_000, 2, "99.9997%"),  # not 100.00%: one row is left
    (0.0, 2, "0.00%"), (1.0, 2, "100.00%"), (0.5, 2, "50.00%"), (1 / 3, 1, "33.3%"), (0.004, 1, "0.4%"),
    (0.0004, 1, "0.04%"), (float("nan"), 2, ""),
])
def test_percent_never_rounds_a_deletion_away(ratio: float, decimals: int, shown: str) -> None:
    assert percent(ratio, decimals) == shown


def test_files_shows_three_of_300000_rows_deleted(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    code, out, _ = _run("files", table)
    assert code == 0
    row = next(line for line in out.splitlines() if "part-live.parquet" in line)
    assert "300,000" in row and "0.001%" in row and "0.00%" not in row


def test_optimize_summary_says_what_changed() -> None:
    metrics = {"numFilesAdded": 1, "numFilesRemoved": 3, "partitionsOptimized": 1, "totalConsideredFiles": 5,
               "filesAdded": {"totalSize": 900_000}, "filesRemoved": {"totalSize": 1_200_000},
               "deletionVectorStats": {"numDeletionVectorsRemoved": 2, "numDeletionVectorRowsRemoved": 510}}
    assert optimize_line(metrics) == "3 files → 1, 510 deleted rows dropped in 1 partition (1.2 MB → 900.0 kB)"
    nothing = {"numFilesAdded": 0, "numFilesRemoved": 0, "totalConsideredFiles": 4}
    assert optimize_line(nothing).startswith("nothing to compact: none of the 4 files")
    assert optimize_line(nothing, purge=True, where="day = '2024-06-01'") == (
        "nothing to purge: none of the 4 files matching day = '2024-06-01' has a deletion vector")


def test_restore_summary() -> None:
    row = {"table_size_after_restore": 1_234_567, "num_of_files_after_restore": 8, "num_removed_files": 5,
           "num_restored_files": 2, "removed_files_size": 10, "restored_files_size": 20}
    assert restore_line(row, "version 3") == "restored to version 3: 2 files restored, 5 removed; now 8 files (1.2 MB)"


@pytest.mark.parametrize(("statement", "kind"), [
    ("DELETE FROM delta.`/t` WHERE id = 1", "DELETE"), ("  /* note */ update delta.`/t` SET a = 1", "UPDATE"),
    ("MERGE WITH SCHEMA EVOLUTION INTO delta.`/t` t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "MERGE"),
    ("optimize delta.`/t`;", "OPTIMIZE"), ("SELECT * FROM delta.`/t`", None), ("DESCRIBE HISTORY delta.`/t`", None),
    ("'unterminated", None), ("", None),
])
def test_statement_kind(statement: str, kind: str | None) -> None:
    assert statement_kind(statement) == kind


def test_sql_sentences_from_result_rows() -> None:
    """The sentences `dvlake sql` prints for each statement that changes a table, from the rows it returns; a result
    of another shape gives None (the rows are printed as they are)."""
    assert sql_line("DELETE …", "DELETE", ["num_affected_rows"], [{"num_affected_rows": 1}]) == "1 row deleted"
    assert sql_line("INSERT …", "INSERT", ["num_affected_rows", "num_inserted_rows"],
                    [{"num_affected_rows": 1200, "num_inserted_rows": 1200}]) == "1,200 rows inserted"
    merge = {"num_affected_rows": 5, "num_updated_rows": 2, "num_deleted_rows": 1, "num_inserted_rows": 2}
    assert sql_line("MERGE …", "MERGE", list(merge), [merge]) == (
        "5 rows changed by the MERGE: 2 updated, 1 deleted, 2 inserted")
    assert sql_line("INSERT …", "INSERT", [], []) is None  # Spark's own INSERT returns no row
    metrics = {"numFilesAdded": 0, "numFilesRemoved": 0, "totalConsideredFiles": 4}
    assert sql_line("OPTIMIZE delta.`/t` WHERE day = '2024-06-01' ZORDER BY (id)", "OPTIMIZE", ["path", "metrics"],
                    [{"path": "/t", "metrics": metrics}]) == optimize_line(metrics, where="day = '2024-06-01'")
    assert sql_line("REORG TABLE delta.`/t` APPLY (PURGE)", "REORG", ["path", "metrics"],
                    [{"path": "/t", "metrics": metrics}]) == optimize_line(metrics, purge=True)
    restored = {"table_size_after_restore": 10, "num_of_files_after_restore": 1, "num_removed_files": 1,
                "num_restored_files": 1, "removed_files_size": 1, "restored_files_size": 1}
    assert sql_line("RESTORE TABLE delta.`/t` TO TIMESTAMP AS OF '2024-06-01T12:00:00Z';", "RESTORE", list(restored),
                    [restored]).startswith("restored to timestamp '2024-06-01T12:00:00Z': 1 file restored, 1 removed")
    assert sql_line("VACUUM delta.`/t` DRY RUN", "VACUUM", ["path"], []).startswith("nothing to delete")
    assert sql_line("vacuum delta.`/t` retain 0 hours dry  run", "VACUUM", ["path"], [{"path": "/t/a"}, {"path": "/t/b"}]
                    ) == "2 files and folders would be deleted (listed above)"
    assert sql_line("VACUUM delta.`/t`", "VACUUM", ["path"], [{"path": "/t"}]).startswith("VACUUM of /t done")


def test_history_on_a_narrow_terminal_breaks_lines_between_words(tmp_path: Path) -> None:
    """Below 100 columns the history is one block per commit, wrapped between words: no word of a timestamp,
    operation, parameter or metric is cut (a table squeezed to 60 columns cut them into 4-letter pieces)."""
    root = tmp_path / "t"
    table = _table(root)
    info = {"timestamp": 1_700_000_000_000, "operation": "DELETE",
            "operationParameters": {"predicate": '["((user_id = 3) AND (day = \'2024-06-01\'))"]'},
            "operationMetrics": {"numDeletionVectorsAdded": "1", "numDeletionVectorsRemoved": "0",
                                 "numDeletedRows": "3", "numRemovedFiles": "0", "numAddedFiles": "0"}}
    (root / "_delta_log" / f"{2:020d}.json").write_text(json.dumps({"commitInfo": info}) + "\n")
    code, out, _ = _run("history", table, columns=60)
    assert code == 0
    lines = out.splitlines()
    assert all(len(line) <= 60 for line in lines), out
    assert [line.split("  ")[0] for line in lines if line.startswith("version")] == ["version 2", "version 1", "version 0"]
    assert lines[0].endswith(" UTC  DELETE")
    words = set(out.replace(",", " ").split())
    for metric, value in info["operationMetrics"].items():
        assert f"{metric}={value}" in words, out
    assert 'predicate=["((user_id' in words and "'2024-06-01'))\"]" in words, out
    code, wide, _ = _run("history", table, columns=200)
    assert code == 0 and "┃ version ┃" in wide and "numDeletedRows=3" in wide


# --- vacuum: no Spark, --conf, an empty dry run in a sentence --------------------------------------


def test_empty_vacuum_dry_run_says_so(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _touch(root / "part-0.parquet")
    _commit(root, 0, [PROTOCOL, _metadata(), _add("part-0.parquet")])
    code, out, _ = _run("vacuum", str(root), "--dry-run")
    assert code == 0
    assert out.strip() == ("nothing to delete: no file the table no longer references is older than the retention "
                           "(168 hours); the table keeps such files for time travel until then")
    code, out, _ = _run("vacuum", str(root), "--dry-run", "--json")
    assert code == 0 and json.loads(out) == []


def test_vacuum_dry_run_lists_then_deletes_with_conf(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    code, out, _ = _run("vacuum", table, "--dry-run", "--json")
    assert code == 0 and [Path(r["path"]).name for r in json.loads(out)] == ["part-gone.parquet"]
    code, out, err = _run("vacuum", table, "--retain-hours", "0")  # below 168 h: refused while the check is on
    assert code == 1 and RETENTION_CHECK in err and "Traceback" not in err
    assert (tmp_path / "t" / "part-gone.parquet").exists()
    code, out, _ = _run("--conf", f"{RETENTION_CHECK}=false", "vacuum", table, "--retain-hours", "0")
    assert code == 0 and out.startswith("deleted 1 file or folder (1 B) no longer referenced"), out
    assert not (tmp_path / "t" / "part-gone.parquet").exists() and (tmp_path / "t" / "part-live.parquet").exists()


def test_vacuum_line_names_the_retention_vacuum_applied() -> None:
    class Result:
        dry_run, num_files_to_delete, size_to_delete, num_deleted = True, 0, 0, 0
        delete_before_ms = 10 * DAY_MS - 7 * DAY_MS

    assert "(168 hours)" in vacuum_line(Result(), 10 * DAY_MS)


@pytest.mark.parametrize("item", ["no-equals-sign", "=value"])
def test_malformed_conf_is_a_usage_error(item: str, tmp_path: Path) -> None:
    code, _, err = _run("--conf", item, "history", str(tmp_path))
    assert code == 2 and "KEY=VALUE" in err


# --- checks before Spark starts, in a fresh interpreter -----------------------------------------------


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DVLAKE_DEBUG": ""}, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.parametrize("args", [
    ["optimize", "{missing}"], ["purge", "{missing}"], ["restore", "{missing}", "--version", "0"],
    ["sql", "DELETE FROM delta.`{missing}` WHERE id = 1"], ["sql", "SELECT * FROM delta.`{missing}@v1`"],
])
def test_a_missing_table_is_reported_before_spark_starts(args: list[str], tmp_path: Path) -> None:
    """The Spark commands check PATH (and the tables a statement names) first: PySpark is never imported."""
    argv = [a.format(missing=tmp_path / "none") for a in args]
    proc = _fresh(
        "import sys\nfrom dvlake.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit as exc:\n    code = exc.code\n"
        "sys.stderr.write(f'\\nCODE={code} PYSPARK={\"pyspark\" in sys.modules}')\n")
    assert proc.stderr.endswith("CODE=1 PYSPARK=False"), proc.stderr
    assert "is not a Delta table" in proc.stderr and "Traceback" not in proc.stderr


def _console_script(argv: list[str], checks: str) -> subprocess.CompletedProcess[str]:
    """``dvlake ARGV`` as the console script runs it (``main()`` reading ``sys.argv``) in a fresh interpreter, then
    ``checks`` (Python code writing to stderr)."""
    return _fresh(
        "import sys\n"
        f"sys.argv = ['dvlake', *{argv!r}]\n"
        "from dvlake.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n" + checks)


def test_log_only_commands_stay_light(tmp_path: Path) -> None:
    """history, detail, files, dv and vacuum never import pandas, PySpark, sqlglot or matplotlib (the lazy-import
    budget that keeps them well under a second; pandas alone took about a second, imported by pyarrow's first
    conversion of a Python value); a heavy import added to their path fails this test."""
    table = _table(tmp_path / "t")
    heavy = ("pandas", "pyspark", "sqlglot", "matplotlib", "py4j")
    for argv in (["history", table], ["detail", table], ["vacuum", table, "--dry-run"], ["files", table],
                 ["files", table, "--with-dvs", "--json"]):  # dv: in the test below (this DV file is a stub)
        proc = _console_script(argv, f"loaded = sorted(m for m in {heavy!r} if m in sys.modules)\n"
                                     "sys.stderr.write(f'\\nLOADED={loaded}')\n")
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr.endswith("LOADED=[]"), (argv, proc.stderr[-300:])
        assert "ignoring unusable checkpoint" not in proc.stderr


LIGHT_TABLES = ("dv-partitioned-with-checkpoint", "dv-with-columnmapping", "basic-dv-with-checkpoint", "table-with-dv-small")


def test_log_only_commands_answer_the_same_without_pandas(testdata: Path) -> None:
    """On delta-spark's tables (checkpoints, column mapping, partitions), every log-only command's JSON is the same
    in a console-script process (pandas kept out) as through main(args) in this process (pandas loaded)."""
    runs: list[list[str]] = []
    for name in LIGHT_TABLES:
        root = str(testdata / name)
        code, out, _ = _run("files", root, "--with-dvs", "--json")
        assert code == 0
        runs += [["history", root, "--json"], ["detail", root, "--json"], ["files", root, "--json"],
                 ["files", root, "--with-dvs", "--json"], ["dv", root, json.loads(out)[0]["path"], "--json"],
                 ["vacuum", root, "--dry-run", "--json"]]
    proc = _fresh(
        "import contextlib, io, json, sys\nfrom dvlake.cli import main\nresults = []\n"
        f"for argv in {runs!r}:\n"
        "    sys.argv = ['dvlake', *argv]\n    buf = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buf):\n"
        "        try:\n            main()\n        except SystemExit as exc:\n            code = exc.code\n"
        "    results.append([code, buf.getvalue()])\n"
        "sys.stderr.write('\\nRESULTS=' + json.dumps({'pandas': 'pandas' in sys.modules, 'results': results}))\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ignoring unusable checkpoint" not in proc.stderr
    found = json.loads(proc.stderr.rsplit("RESULTS=", 1)[1])
    assert found["pandas"] is False
    for argv, (code, out) in zip(runs, found["results"], strict=True):
        expected_code, expected, _ = _run(*argv)
        assert (code, out) == (expected_code, expected), argv


def test_main_called_by_a_program_leaves_pandas_alone(tmp_path: Path) -> None:
    """Only a process of its own keeps pandas out: a program calling main(args) gets pyarrow's pandas detection
    untouched (afterwards pa.array of a pandas Series still converts it as pandas data)."""
    table = _table(tmp_path / "t")
    proc = _fresh(
        "import sys\nfrom dvlake.cli import main\n"
        f"try:\n    main(['history', {table!r}])\nexcept SystemExit as exc:\n    assert exc.code == 0\n"
        "import pandas as pd, pyarrow as pa\n"
        "arr = pa.array(pd.Series(pd.to_datetime(['2024-06-01']).tz_localize('UTC')))\n"
        "sys.stderr.write(f'\\nTYPE={arr.type}')\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.endswith("TYPE=timestamp[ns, tz=UTC]"), proc.stderr[-300:]


# --- error text ----------------------------------------------------------------------------------------

_SPARK_MESSAGE = (
    "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `dya` cannot be "
    "resolved. Did you mean one of the following? [`__dvlake_block_key`, `day`, `id`]. SQLSTATE: 42703;\n"
    "'Filter ('dya = 1)\n+- Join LeftAnti, ((__dvlake_key#7L = __dvlake_block_key#20L) AND "
    "getbit(get(__dvlake_words#21, 0), 3))\n   :- Project [id#1L, day#2]\n   :  +- Relation [id#1L,day#2] parquet\n"
    "   +- ResolvedHint (strategy=broadcast)\n" + "      +- LocalRelation [__dvlake_block_key#20L]\n" * 40
    + "\n\nJVM stacktrace:\norg.apache.spark.sql.AnalysisException: ...\n" + "\tat org.apache.spark.X.y(X.scala:1)\n" * 100)


def test_user_text_drops_plans_java_stacks_and_internal_names() -> None:
    errors.set_debug(False)
    try:
        text = errors.user_text(_SPARK_MESSAGE)
    finally:
        errors.reset_debug()
    assert text == ("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `dya` "
                    "cannot be resolved. Did you mean one of the following? [`day`, `id`]. SQLSTATE: 42703")
    assert errors.user_text("a plain message; with a semicolon;\nThen a sentence.") == (
        "a plain message; with a semicolon;\nThen a sentence.")  # not a plan: kept


def test_debug_keeps_the_full_text() -> None:
    errors.set_debug(True)
    try:
        assert errors.user_text(_SPARK_MESSAGE) == _SPARK_MESSAGE
    finally:
        errors.reset_debug()


def test_cli_error_line_is_short_without_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Spark error reaching the CLI prints one short line; --debug prints everything."""
    from dvlake import cli as cli_module

    class SparkError(Exception):
        def getCondition(self) -> str:
            return "UNRESOLVED_COLUMN.WITH_SUGGESTION"

    def fail(*_args: object, **_kwargs: object) -> None:
        raise SparkError(_SPARK_MESSAGE)

    monkeypatch.setattr(cli_module, "_load", fail)
    code, _, err = _run("history", "/anything")
    assert code == 1 and len(err) < 400, err
    for internal in ("__dvlake_", "LeftAnti", "getbit(", "JVM stacktrace", "at org.apache"):
        assert internal not in err
    assert "`dya` cannot be resolved" in err and "[`day`, `id`]" in err
    code, _, err = _run("--debug", "history", "/anything")
    assert code == 1 and "LeftAnti" in err and "Traceback" in err


def test_help_mentions_conf() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0 and "--conf KEY=VALUE" in result.output
