"""The SQL front end hands DELETE and UPDATE the condition tree it parsed with the statement: the condition's text is
parsed once per statement, never again by the command (``sqlfront/dml.py`` → ``log.condition.Condition.from_tree``).

Counted by wrapping sqlglot's two parse entry points (every parse in dvlake goes through them) and recording each
text they are given: a parse of the condition's text is one whose text, stripped, is exactly the WHERE's text.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlglot

from dvlake.sql import sql

DV = "'delta.enableDeletionVectors' = 'true'"


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The texts sqlglot parses while the test runs, in order."""
    seen: list[str] = []

    def counting(original: Callable[..., Any]) -> Callable[..., Any]:
        def parse(text: str, *args: Any, **kwargs: Any) -> Any:
            seen.append(text)
            return original(text, *args, **kwargs)
        return parse

    monkeypatch.setattr(sqlglot, "parse", counting(sqlglot.parse))
    monkeypatch.setattr(sqlglot, "parse_one", counting(sqlglot.parse_one))
    yield seen


def _table(spark: Any, path: str) -> None:
    sql(spark, f"CREATE TABLE delta.`{path}` (id BIGINT, name STRING, p INT) USING DELTA PARTITIONED BY (p) "
               f"TBLPROPERTIES ({DV})")
    sql(spark, f"INSERT INTO delta.`{path}` VALUES (1, 'a', 0), (2, 'b', 0), (3, 'c', 1), (4, 'd', 1)")


def _rows(spark: Any, path: str) -> list[tuple[int, str, int]]:
    return sorted(tuple(r) for r in sql(spark, f"SELECT id, name, p FROM delta.`{path}`").collect())


def _count(seen: list[str], condition: str) -> int:
    return sum(1 for text in seen if text.strip() == condition)


def test_delete_parses_its_condition_once(spark: Any, tmp_path: Any, parsed: list[str]) -> None:
    path = str(tmp_path / "t")
    _table(spark, path)
    for condition, left in [("id % 2 = 0 AND name <> 'zz'", [1, 3]), ("t.p = 1", [1])]:
        parsed.clear()
        sql(spark, f"DELETE FROM delta.`{path}` AS t WHERE {condition}")
        assert _count(parsed, condition) == 1, parsed
        assert [r[0] for r in _rows(spark, path)] == left


def test_update_parses_its_condition_once(spark: Any, tmp_path: Any, parsed: list[str]) -> None:
    path = str(tmp_path / "t")
    _table(spark, path)
    condition = "t.id > 1 AND t.name IN ('b', 'd')"
    parsed.clear()
    sql(spark, f"UPDATE delta.`{path}` AS t SET name = upper(name) WHERE {condition}")
    assert _count(parsed, condition) == 1, parsed
    assert _rows(spark, path) == [(1, "a", 0), (2, "B", 0), (3, "c", 1), (4, "D", 1)]
