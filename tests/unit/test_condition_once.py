"""A condition parsed once and then only visited (``log/condition.py``): its qualifiers (how MERGE finds the source's
alias), its conjuncts, the one rendering of a Column and the one subquery refusal. Spark-free."""

from __future__ import annotations

import pytest

from dvlake.errors import UnsupportedSubqueryError
from dvlake.log.condition import SUBQUERIES_REFUSED, Condition, refuse_subquery, render, value_qualifiers


class _FakeColumn:
    """Stands for a PySpark Column: only its rendering matters here."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return f"Column<'{self._text}'>"


def _parsed(text: str) -> Condition:
    cond = Condition.of(text)
    assert cond is not None
    return cond


def test_qualifiers_come_from_the_tree_in_order_and_never_from_string_literals() -> None:
    cond = _parsed("t.id = s.id AND `src x`.v > 1 AND name = 'q.z' AND t.addr.city = s.city")
    assert cond.qualifiers() == ["t", "s", "src x"]


def test_a_column_condition_and_assignment_values_give_their_qualifiers_from_the_rendering() -> None:
    cond = Condition.of(_FakeColumn("(t.id = s.id)"))
    assert cond is not None and cond.tree is None  # never pruned with
    assert cond.qualifiers() == ["t", "s"]
    assert value_qualifiers("s.v + 1") == ["s"]
    assert value_qualifiers(_FakeColumn("(src.v + 1)")) == ["src"]
    assert value_qualifiers("'a.b'") == []
    # a Column's rendering sqlglot cannot parse (Spark 4 shows a subquery as ``exists(unresolved…)``): its tokens
    unparsed = Condition.of(_FakeColumn("((t.c = s.c) AND exists(unresolvedsubquery(), [plan#1]))"))
    assert unparsed is not None and unparsed.qualifiers() == ["t", "s"]


def test_conjuncts_look_through_parentheses_and_stop_at_or() -> None:
    parts = _parsed("(a = 1 AND (b = 2)) AND (c = 3 OR d = 4)").conjuncts()
    assert [p.sql() for p in parts] == ["a = 1", "b = 2", "c = 3 OR d = 4"]
    assert Condition.of(_FakeColumn("(a = 1)")).conjuncts() == []  # type: ignore[union-attr]


def test_render_is_the_one_column_to_text() -> None:
    assert render("id = 1") == "id = 1"
    assert render(_FakeColumn("(id = 1)")) == "(id = 1)"
    assert render(_parsed("x > 2")) == "x > 2"
    assert render(Condition.of(_FakeColumn("(x > 2)"))) == "(x > 2)"


def test_the_subquery_refusal_is_one_rule_over_the_commands_it_names() -> None:
    assert frozenset({"UPDATE", "MERGE"}) == SUBQUERIES_REFUSED  # DELETE runs them, as delta-spark
    refuse_subquery("UPDATE", False, "id = 1")  # nothing found: nothing refused
    refuse_subquery("DELETE", True, "id IN (SELECT 1)")
    refuse_subquery("OPTIMIZE", True, "id IN (SELECT 1)")  # a command the rule does not name
    with pytest.raises(UnsupportedSubqueryError) as err:
        refuse_subquery("MERGE", True, "t.id IN (SELECT 1)", "search condition of MERGE operation")
    assert err.value.error_class == "DELTA_UNSUPPORTED_SUBQUERY"
    assert str(err.value).startswith("[DELTA_UNSUPPORTED_SUBQUERY] Subqueries are not supported in the search condition "
                                     "of MERGE operation (condition = 't.id IN (SELECT 1)').")
    with pytest.raises(UnsupportedSubqueryError, match=r"in the UPDATE \(condition = 'id IN \(SELECT 1\)'\)"):
        _parsed("id IN (SELECT 1)").refuse_subqueries("UPDATE")
    _parsed("id IN (1, 2)").refuse_subqueries("UPDATE")
    _parsed("id IN (SELECT 1)").refuse_subqueries("DELETE")


def test_only_plain_conjuncts_prune() -> None:
    """A subquery conjunct says nothing about a file: the pruning part keeps the plain conjuncts of an AND only, and
    is never evaluated as text (its columns are unknown, so it is never taken as partition-only)."""
    plain = _parsed("p = 1 AND v < 3")
    assert plain.pruning_part() is plain
    part = _parsed("p = 1 AND k IN (SELECT k FROM s) AND v < 3").pruning_part()
    assert part is not None and part.tree is not None
    assert part.tree.sql() == "p = 1 AND v < 3" and part.columns is None and not part.references_only({"p", "v"})
    assert _parsed("p = 1 OR EXISTS (SELECT 1 FROM s)").pruning_part() is None
    assert _parsed("v > (SELECT max(v) FROM s)").pruning_part() is None
