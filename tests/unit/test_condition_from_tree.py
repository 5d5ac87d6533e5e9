"""A condition taken from the SQL front end's statement tree (``Condition.from_tree`` via
``sqlfront.parse.written_condition``) is the condition ``Condition.parse`` makes of the same text, without a second
parse: same tree, same columns, literal positions that point into its own text. Spark-free."""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot

from dvlake.log.condition import Condition
from dvlake.sqlfront.parse import parse_statement, written_condition


def _where(statement: str) -> Any:
    return parse_statement(statement).args["where"].this


@pytest.mark.parametrize(("statement", "text"), [
    ("DELETE FROM delta.`/t` AS t WHERE t.id = 3 AND name = 'it''s'", "t.id = 3 AND name = 'it''s'"),
    ("UPDATE delta.`/t` AS t SET v = 1 WHERE p IN (1, 2) -- trailing\n", "p IN (1, 2)"),
    ("DELETE FROM tab WHERE (a = \"x\" OR b IS NULL) AND c > 1.5", "(a = \"x\" OR b IS NULL) AND c > 1.5"),
])
def test_the_statement_tree_is_the_condition_parse_would_make(statement: str, text: str) -> None:
    from_tree = written_condition(statement, _where(statement), "t")
    parsed = Condition.parse(text, "t")
    assert from_tree.text == text
    assert from_tree.tree == parsed.tree
    assert from_tree.columns == parsed.columns
    assert from_tree.alias == "t"
    literals = [n for n in from_tree.tree.walk() if isinstance(n, sqlglot.exp.Literal) and n.is_string]
    assert [from_tree.single_quoted(n) for n in literals] == \
        [parsed.single_quoted(n) for n in parsed.tree.walk() if isinstance(n, sqlglot.exp.Literal) and n.is_string]
    assert from_tree.plainly_deterministic == parsed.plainly_deterministic


def test_single_quoted_reads_the_slice_not_the_statement() -> None:
    statement = "DELETE FROM tab WHERE name = 'a' OR name = \"b\""
    cond = written_condition(statement, _where(statement))
    literals = [n for n in cond.tree.walk() if isinstance(n, sqlglot.exp.Literal)]
    assert [(n.this, cond.single_quoted(n)) for n in literals] == [("a", True), ("b", False)]


def test_the_statement_tree_is_copied_and_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    statement = "UPDATE tab SET v = 2 WHERE id = 7"
    where = _where(statement)
    start = [n.meta.get("start") for n in where.walk()]
    calls: list[str] = []
    original = sqlglot.parse_one
    monkeypatch.setattr(sqlglot, "parse_one", lambda text, *a, **k: calls.append(text) or original(text, *a, **k))
    cond = written_condition(statement, where)
    assert calls == ["id = 7"]  # ``written``'s check of its slice; ``from_tree`` parses nothing
    assert cond.plainly_deterministic and calls == ["id = 7"]
    assert [n.meta.get("start") for n in where.walk()] == start  # the statement's own tree is left as it was
    assert cond.references_only({"id"}) and not cond.references_only({"v"})
