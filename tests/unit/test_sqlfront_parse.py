"""The SQL front end's token layer without Spark: positions, table references, keyword pairs, parse errors."""

from __future__ import annotations

import pytest

from dvlake.errors import DeltaSqlParseError
from dvlake.sqlfront.parse import (
    Cursor,
    looks_like_delta,
    parse_statement,
    position,
    split_time_suffix,
    tokenize,
    written,
)


def test_positions_are_one_based_lines_and_columns():
    text = "SELECT 1\nFROM t\n  WHERE x"
    assert position(text, 0) == (1, 1)
    assert position(text, text.index("FROM")) == (2, 1)
    assert position(text, text.index("WHERE")) == (3, 3)


def test_path_suffixes_for_versions_and_timestamps():
    assert split_time_suffix("/data/t@v12") == ("/data/t", 12, None)
    assert split_time_suffix("/data/t@20240601123045123") == ("/data/t", None, "2024-06-01 12:30:45.123")
    assert split_time_suffix("/data/t@vx") == ("/data/t@vx", None, None)
    assert split_time_suffix("s3://b/a@b/t") == ("s3://b/a@b/t", None, None)


def test_cursor_reads_utility_statements_token_by_token():
    cur = Cursor("CONVERT TO DELTA parquet.`/x/y` NO STATISTICS PARTITIONED BY (d DATE, `r s` STRING)")
    cur.expect("CONVERT", "TO", "DELTA")
    ref = cur.table(providers=None)
    assert (ref.provider, ref.path, ref.offset) == ("parquet", "/x/y", len("CONVERT TO DELTA "))
    assert cur.accept("NO", "STATISTICS")
    assert cur.accept("PARTITIONED", "BY")  # one token in sqlglot, two words here
    assert [t for t, _ in cur.paren_list()] == ["d DATE", "`r s` STRING"]
    assert cur.done()
    cur = Cursor("OPTIMIZE db.events WHERE day > '2024-01-01' AND (a OR b) ZORDER BY (x)")
    cur.expect("OPTIMIZE")
    assert cur.table().name == "db.events"
    assert cur.accept("WHERE")
    text, _ = cur.condition(("ZORDER", "BY"))
    assert text == "day > '2024-01-01' AND (a OR b)" and cur.at("ZORDER", "BY")


def test_malformed_statements_raise_typed_errors_with_positions():
    with pytest.raises(DeltaSqlParseError) as err:
        parse_statement("SELECT * FROM delta.`/t`\nWHERE")
    assert (err.value.line, err.value.column) == (2, 1) and err.value.statement == "SELECT"
    cur = Cursor("VACUUM delta.`/t` RETAIN 2 DAYS")
    cur.expect("VACUUM")
    cur.table()
    cur.expect("RETAIN")
    cur.number("RETAIN")
    with pytest.raises(DeltaSqlParseError) as err:
        cur.expect("HOURS")
    assert err.value.column == len("VACUUM delta.`/t` RETAIN 2 ") + 1


def test_delta_references_are_found_in_tokens_not_in_strings():
    assert looks_like_delta(tokenize("SELECT 'delta.`/x`' AS s")) is None
    assert looks_like_delta(tokenize("SELECT * FROM cat.delta.`/x`")) is None
    assert looks_like_delta(tokenize("SELECT * FROM x JOIN delta.`/y` USING (id)")) == len("SELECT * FROM x JOIN ")
    assert looks_like_delta(tokenize("SELECT * FROM table_changes('t', 1)")) == len("SELECT * FROM ")


def test_expressions_reach_spark_as_written_not_regenerated():
    """Each condition, value and query of a statement is its own slice of the text; sqlglot's regeneration
    would turn the double-quoted literal into CONCAT('say ', 'hi', ''), ``x::int`` into a TRY_CAST, ``--`` into a block."""
    text = ("MERGE INTO delta.`/t` t USING (SELECT 1 AS id, 'it''s' AS note -- why\n) s\n"
            "ON t.id = s.id AND t.note = 'it''s' -- a */ comment\n"
            "WHEN MATCHED AND t.note <> \"say \"\"hi\"\"\" THEN UPDATE SET note = 'it''s', v = x.y::int, "
            "w = CASE WHEN s.a THEN NULL ELSE 1 END\n"
            "WHEN NOT MATCHED THEN INSERT (id, note, ts) VALUES (s.id, NULL, current_timestamp() + INTERVAL 1 DAY)")
    tree = parse_statement(text)
    whens = tree.args["whens"].expressions
    update, insert = whens[0].args["then"], whens[1].args["then"]
    assert written(text, tree.args["using"].this) == "SELECT 1 AS id, 'it''s' AS note"
    assert written(text, tree.args["on"]) == "t.id = s.id AND t.note = 'it''s'"
    assert written(text, whens[0].args["condition"]) == 't.note <> "say ""hi"""'
    assert [written(text, pair.expression) for pair in update.expressions] == [
        "'it''s'", "x.y::int", "CASE WHEN s.a THEN NULL ELSE 1 END"]
    assert [written(text, v) for v in insert.expression.expressions] == [
        "s.id", "NULL", "current_timestamp() + INTERVAL 1 DAY"]
    delete = "DELETE FROM delta.`/t` WHERE (note = 'it''s') OR p = 1 -- AND p = 2"
    assert written(delete, parse_statement(delete).args["where"].this) == "(note = 'it''s') OR p = 1"


@pytest.mark.parametrize("query", ["SELECT /*+ COALESCE(1) */ id FROM range(3)",
                                   "SELECT /*+ REPARTITION(2, id) */ id, 2 FROM range(3) WHERE id > 0"])
def test_a_query_with_a_hint_is_sliced_whole(query: str) -> None:
    """An INSERT's query with a Spark hint is handed on as written: the hint's positions count from its own text, so
    they once made the slice start inside ``INSERT`` (PARSE_SYNTAX_ERROR)."""
    statement = f"INSERT INTO t {query}"
    assert written(statement, parse_statement(statement).args["expression"]) == query
