"""OPTIMIZE's recorded partition filter: each text rendered as delta-spark records it, the ``simpleString`` of the
unresolved Catalyst expression Spark's parser makes of it. The expected strings were read from Spark 4's own parser
(``sqlParser.parseExpression(text).simpleString``); texts dvlake cannot render exactly give None."""

from __future__ import annotations

import pytest

from dvlake.log.catalyst_text import catalyst_text
from dvlake.log.condition import Condition


@pytest.mark.parametrize(("text", "expected"), [
    ("key = 'a'", "('key = a)"),
    ("p = 1 OR p = 2", "(('p = 1) OR ('p = 2))"),
    ("p = 1 and q = 2 and r = 3", "((('p = 1) AND ('q = 2)) AND ('r = 3))"),
    ("p != 3", "NOT ('p = 3)"),
    ("p <> 3", "NOT ('p = 3)"),
    ("not (p = 1)", "NOT ('p = 1)"),
    ("p is null", "isnull('p)"),
    ("p is not null", "isnotnull('p)"),
    ("p in (1,2)", "'p IN (1,2)"),
    ("p in ('a', 'b')", "'p IN (a,b)"),
    ("p <=> 1", "('p <=> 1)"),
    ("p = -1", "('p = -1)"),
    ("a.b = 1", "('a.b = 1)"),
    ("p + 1 > 2", "(('p + 1) > 2)"),
    ("`my col` = 1", "('my col = 1)"),
    ("p = null", "('p = null)"),
    ("p = 12345678901", "('p = 12345678901)"),
    ("true", "true"),
    ("(p = 2)", "('p = 2)"),
])
def test_rendered_as_spark_prints_the_unresolved_expression(text: str, expected: str) -> None:
    assert catalyst_text(Condition.parse(text).tree) == expected


@pytest.mark.parametrize("text", ["p = 1.5", "d = DATE '2024-01-01'", "upper(s) = 'A'", "p BETWEEN 1 AND 2"])
def test_unsure_forms_are_left_to_the_caller(text: str) -> None:
    assert catalyst_text(Condition.parse(text).tree) is None
