"""Which condition texts DML takes as plainly deterministic without asking Spark's analyzer.

A whitelist: column references, literals, operators, CAST and CASE. Anything that calls a function,
however harmless its name (a session can register a UDF under a built-in's name), or holds a subquery,
an aggregate, a window, a star or a parameter goes to the analyzer. ``tests/spark/test_dml_rules.py``
checks every plain text here against Spark's own answer.
"""

from __future__ import annotations

import pytest

from dvlake.log.condition import Condition, plain_row_expression

PLAIN = [
    "id % 10000 = 1", "a LIKE 'x%'", "a ILIKE 'X%'", "CAST(a AS INT) BETWEEN 1 AND 3", "a IN (1, 2)",
    "a IS NOT NULL AND NOT (b <=> 2)", "CASE WHEN a > 1 THEN true ELSE false END", "s.x.y = 1", "arr[1] = 2",
    "a - -1 > 2", "t.id = s.id AND t.x > 3", "a = 1 -- a comment (with a parenthesis\n", "(a + 1) * (b - 2) > 0",
    "`weird col` = 'it''s'", "a & 1 = 0 OR b | 2 = 3", "a = NULL", "a / 2 >= 1.5e3",
]

NOT_PLAIN = [
    "mod(id, 3) = 1", "like(a, 'x')", "coalesce(a, 1) = 2", "if(a > 1, true, false)", "rand() > 0.5",
    "sum(a) > 1", "count(*) OVER () > 1", "EXISTS (SELECT 1)", "a = (SELECT max(b) FROM t)", "a IN (SELECT x FROM t)",
    "*", "hash(*) = 1", "a = ?", "x = :p", "a > current_date", "my_udf(a)", "upper(s) = 'A'", "a = 1 AND",
]


@pytest.mark.parametrize("text", PLAIN)
def test_operators_literals_cast_and_case_are_plain(text: str) -> None:
    assert plain_row_expression(text)
    assert Condition.parse(text).plainly_deterministic


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_calls_subqueries_and_the_unparsable_go_to_the_analyzer(text: str) -> None:
    assert not plain_row_expression(text)


def test_a_column_condition_is_never_taken_as_plain() -> None:
    assert not Condition(text=None, column=object()).plainly_deterministic
