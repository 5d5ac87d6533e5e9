"""`dvlake sql` says what a statement that changes a table did, in the sentences of the maintenance commands
(`--json` keeps the result rows), run in this process on the test session's Spark (the CLI reuses a running
session), so a whole statement set costs no Spark start."""

from __future__ import annotations

import json
import re

from tests.cli.conftest import KNOWN
from tests.unit.test_cli_output import _run


def _sql(statement: str, *options: str) -> str:
    code, out, err = _run("sql", statement, *options)
    assert code == 0, err
    return out


def test_sql_statements_print_one_sentence(spark, fresh_table: str) -> None:
    t = f"delta.`{fresh_table}`"
    out = _sql(f"OPTIMIZE {t} WHERE part = 'a'")
    assert re.fullmatch(r"2 files → 1, 20 deleted rows dropped in 1 partition \(.+ → .+\)\n", out), out
    out = _sql(f"REORG TABLE {t} WHERE part = 'b' APPLY (PURGE)")
    assert re.fullmatch(r"1 file → 1, 25 deleted rows dropped in 1 partition \(.+\)\n", out), out
    assert json.loads(_sql(f"DELETE FROM {t} WHERE part = 'd' AND id >= 395", "--json")) == [{"num_affected_rows": 5}]
    assert _sql(f"DELETE FROM {t} WHERE part = 'd' AND id >= 390") == "5 rows deleted\n"
    assert _sql(f"/* a comment first */ UPDATE {t} SET value = 0 WHERE id = 1") == "1 row updated\n"
    spark.range(0, 3).selectExpr("id", "'e' AS part", "1.0 AS value").createOrReplaceTempView("cli_src")
    # ids 1 and 2 are in the table (deleted), id 0 is not (the first DELETE of the known table took it): inserted
    assert _sql(f"MERGE INTO {t} AS t USING cli_src AS s ON t.id = s.id WHEN MATCHED THEN DELETE "
                "WHEN NOT MATCHED THEN INSERT *") == "3 rows changed by the MERGE: 0 updated, 2 deleted, 1 inserted\n"
    assert _sql(f"VACUUM {t} DRY RUN").startswith("nothing to delete: no file the table no longer references")
    assert _sql(f"RESTORE TABLE {t} TO VERSION AS OF {KNOWN['version']}").startswith(
        f"restored to version {KNOWN['version']}: ")
    table = _sql(f"SELECT part, count(*) AS n FROM {t} GROUP BY part ORDER BY part")  # a query still prints its rows
    assert "┃ part ┃" in table and "│ a    │" in table


def test_long_nested_values_are_shortened_in_tables_only(spark) -> None:
    """A nested value (a map here) longer than a table cell should be is cut with an ellipsis and a note; --json
    prints it whole."""
    statement = "SELECT 1 AS id, map('k', repeat('x', 300)) AS m"
    code, out, err = _run("sql", statement)
    assert code == 0 and "…" in out and "x" * 300 not in out and "--json prints them whole" in err
    assert json.loads(_sql(statement, "--json")) == [{"id": 1, "m": {"k": "x" * 300}}]
