"""The Spark-free subcommands (history, detail, files, dv) and the CLI's conventions (help, exit codes, errors).

The conventions run the real console script in a subprocess (help, usage errors, error text, what it imports); the
subcommands' output on the known table runs through the same entry point in this process (``invoke``), where a
subprocess would only add its start."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from tests.cli.conftest import KNOWN, invoke, run_cli

SUBCOMMANDS = ["history", "detail", "files", "dv", "health", "sql", "optimize", "purge", "vacuum", "restore"]


def test_top_level_help_lists_every_subcommand_and_exit_codes() -> None:
    out = run_cli("--help").out
    for name in SUBCOMMANDS:
        assert f"\n  {name} " in out, name
    assert "Exit codes: 0 ok, 1 error, 2 usage error" in out
    assert run_cli("-V").out.strip().startswith("dvlake ")


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name: str) -> None:
    out = run_cli(name, "--help").out
    assert out.startswith(f"Usage: dvlake {name} [OPTIONS]")
    assert "--help" in out
    body = out.split("\n\n", 2)[1].strip()
    assert len(body) > 40, f"the help of {name} says too little: {body!r}"


def test_history_table_and_json(known_table: str) -> None:
    text = invoke("history", known_table).out
    assert text.count("DELETE") == 3 and "WRITE" in text
    assert "numDeletionVectorsAdded=2" in text  # the first DELETE touched both files of part a
    rows = invoke("history", known_table, "--limit", "2", "--json").json()
    assert [r["version"] for r in rows] == [4, 3]
    assert rows[0]["operation"] == "DELETE" and rows[0]["operationMetrics"]["numDeletedRows"] == "1"


def test_detail_json_has_dv_statistics(known_table: str) -> None:
    row = invoke("detail", known_table, "--json").json()
    assert row["numFiles"] == KNOWN["files"] and row["partitionColumns"] == ["part"]
    assert row["statistics"] == {"numDeletionVectors": 4, "numRowsDeletedByDeletionVectors": 46}
    assert "deletionVectors" in row["tableFeatures"]
    old = invoke("detail", known_table, "--version", "1", "--json").json()
    assert old["statistics"]["numDeletionVectors"] == 0
    assert "numRowsDeletedByDeletionVectors=46" in invoke("detail", known_table).out


def test_files_lists_all_or_only_those_with_dvs(known_table: str) -> None:
    all_files = invoke("files", known_table, "--json").json()
    assert len(all_files) == KNOWN["files"]
    assert sum(f["deleted_rows"] for f in all_files) == KNOWN["deleted_rows"]
    assert sum(f["physical_rows"] for f in all_files) == KNOWN["physical_rows"]
    with_dvs = invoke("files", known_table, "--with-dvs", "--json").json()
    assert sorted(f["deleted_rows"] for f in with_dvs) == [1, 10, 10, 25]
    assert all(f["dv_storage"] == "in DV files (u)" and f["dv_file"].endswith(".bin") and f["dv_offset"] >= 1
               for f in with_dvs)
    text = invoke("files", known_table, "--with-dvs").out
    for f in with_dvs:
        assert f["path"] in text
    assert "50.00%" in text and "20.00%" in text
    assert len(invoke("files", known_table, "--limit", "3", "--json").json()) == 3


def test_dv_decodes_one_file_with_exact_rows(known_table: str) -> None:
    with_dvs = invoke("files", known_table, "--with-dvs", "--json").json()
    target = next(f for f in with_dvs if f["deleted_rows"] == 25)  # part b, ids 50-74
    ids = pq.read_table(f"{known_table}/{target['path']}", columns=["id"]).column("id").to_pylist()
    expected_rows = [i for i, v in enumerate(ids) if v < 75]
    info = invoke("dv", known_table, target["path"], "--json", "--max-ranges", "0").json()
    assert info["cardinality"] == 25 and info["physical_rows"] == 50 and info["storage_type"] == "u"
    assert info["checksum_verified"] is True and len(info["crc32"]) == 8
    assert info["dv_file"] == target["dv_file"] and info["offset"] == target["dv_offset"]
    decoded = [r for a, b in info["row_ranges"] for r in range(a, b + 1)]
    assert decoded == expected_rows
    by_abs = invoke("dv", known_table, f"{known_table}/{target['path']}").out  # the absolute path works too
    assert "25 of 50 (50.00%)" in by_abs and "verified" in by_abs and info["crc32"] in by_abs
    ambiguous = invoke("dv", known_table, target["path"].rsplit("/", 1)[-1], expect=1)  # one name in 4 partitions
    assert "matches 4 live files" in ambiguous.err


def test_dv_of_a_file_without_dv(known_table: str) -> None:
    files = invoke("files", known_table, "--json").json()
    clean = next(f for f in files if f["deleted_rows"] == 0)
    info = invoke("dv", known_table, clean["path"], "--json").json()
    assert info == {"table": info["table"], "version": 4, "file": clean["path"], "has_dv": False, "cardinality": 0}


def test_errors_print_the_message_without_traceback(tmp_path) -> None:
    missing = str(tmp_path / "nothing-here")
    res = run_cli("history", missing, expect=1)
    assert res.err.startswith("error: ") and "is not a Delta table" in res.err and "Traceback" not in res.err
    res = run_cli("--debug", "history", missing, expect=1)
    assert "Traceback" in res.err and "TableNotFoundError" in res.err


def test_unknown_file_and_version_are_errors(known_table: str) -> None:
    res = invoke("dv", known_table, "no-such-file.parquet", expect=1)
    assert "no live file 'no-such-file.parquet'" in res.err and "Traceback" not in res.err
    res = invoke("files", known_table, "--version", "99", expect=1)
    assert "available versions are 0 to 4" in res.err


@pytest.mark.parametrize("args", [
    ["files"],  # PATH missing
    ["no-such-command"],
    ["history", "/t", "--limit", "0"],
    ["restore", "/t"],  # neither --version nor --timestamp
    ["restore", "/t", "--version", "1", "--timestamp", "2024-01-01"],
    ["health", "/t", "--max-deleted-ratio", "2"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    res = run_cli(*args, expect=2)
    assert "Usage: dvlake" in res.err and "Traceback" not in res.err


def test_log_commands_never_import_pyspark(known_table: str) -> None:
    """history/detail/files/dv/health read the log and DV files only: PySpark is not even imported."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dvlake.cli import main\n"
        f"for args in (['history', {known_table!r}], ['detail', {known_table!r}], ['files', {known_table!r}],\n"
        f"             ['health', {known_table!r}, '--json']):\n"
        "    try:\n"
        "        main(args)\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, (args, exc.code)\n"
        "sys.stderr.write('PYSPARK=' + str('pyspark' in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.endswith("PYSPARK=False"), proc.stderr
