"""Pure predicate logic: splitting, parsing, stats skipping and partition evaluation, without Spark.

The property tests build random files (rows → Delta stats) and random predicates over
=, <, <=, >, >=, IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT, evaluate the predicate on the rows with
SQL's three-valued logic, and check that pruning never drops a file holding a matching row.
"""

from __future__ import annotations

import json
import os
from typing import Any, Union

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dvlake.log.predicates import Conjunct, parse_conjunct, partition_values_mask, skipping_mask, split_conjuncts

EXAMPLES = int(os.environ.get("DVLAKE_PROPERTY_EXAMPLES", "300"))
PROPERTY = settings(max_examples=EXAMPLES, derandomize=os.environ.get("DVLAKE_PROPERTY_RANDOM") != "1", deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

# --- a tiny predicate language, rendered to SQL and evaluated in Python ------------------------------

Leaf = tuple[str, str, tuple[Any, ...]]  # (column, op, literals)
Pred = Union[Leaf, tuple[str, Any, Any]]  # noqa: UP007 - a recursive alias reads better spelled out

INTS = st.integers(-4, 4)  # a small range, so that values and literals collide and edges get tested
STRS = st.text(alphabet="abAB_z", min_size=0, max_size=3)


def _lit(v: Any) -> str:
    return f"'{v}'" if isinstance(v, str) else str(v)


def leaves(column: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[Leaf]:
    compare = st.tuples(st.just(column), st.sampled_from(["=", "<", "<=", ">", ">="]), st.tuples(values))
    in_list = st.tuples(st.just(column), st.just("IN"), st.lists(values, min_size=1, max_size=4).map(tuple))
    between = st.tuples(st.just(column), st.just("BETWEEN"), st.tuples(values, values))
    nulls = st.tuples(st.just(column), st.sampled_from(["IS NULL", "IS NOT NULL"]), st.just(()))
    return st.one_of(compare, in_list, between, nulls)


def predicates(leaf: st.SearchStrategy[Leaf]) -> st.SearchStrategy[Any]:
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(st.just("AND"), inner, inner), st.tuples(st.just("OR"), inner, inner),
        st.tuples(st.just("NOT"), inner, st.none())), max_leaves=5)


def render(p: Any) -> str:
    kind = p[0]
    if kind in ("AND", "OR"):
        return f"({render(p[1])}) {kind} ({render(p[2])})"
    if kind == "NOT":
        return f"NOT ({render(p[1])})"
    col, op, vals = p
    if op == "IN":
        return f"{col} IN ({', '.join(_lit(v) for v in vals)})"
    if op == "BETWEEN":
        return f"{col} BETWEEN {_lit(vals[0])} AND {_lit(vals[1])}"
    if op.startswith("IS"):
        return f"{col} {op}"
    return f"{col} {op} {_lit(vals[0])}"


def truth(p: Any, row: dict[str, Any]) -> bool | None:
    """SQL three-valued truth of ``p`` on one row."""
    kind = p[0]
    if kind == "AND":
        a, b = truth(p[1], row), truth(p[2], row)
        return False if a is False or b is False else (None if a is None or b is None else True)
    if kind == "OR":
        a, b = truth(p[1], row), truth(p[2], row)
        return True if a is True or b is True else (None if a is None or b is None else False)
    if kind == "NOT":
        a = truth(p[1], row)
        return None if a is None else not a
    col, op, vals = p
    v = row[col]
    if op == "IS NULL":
        return v is None
    if op == "IS NOT NULL":
        return v is not None
    if v is None:
        return None
    if op == "IN":
        return v in vals
    if op == "BETWEEN":
        return bool(vals[0] <= v <= vals[1])
    return {"=": v == vals[0], "<": v < vals[0], "<=": v <= vals[0], ">": v > vals[0], ">=": v >= vals[0]}[op]


# --- random files and their Delta stats -----------------------------------------------------------

ROWS = st.fixed_dictionaries({"a": st.one_of(st.none(), INTS), "s": st.one_of(st.none(), STRS)})
FILES = st.lists(st.lists(ROWS, min_size=1, max_size=6), min_size=1, max_size=6)


def stats_json(rows: list[dict[str, Any]]) -> str:
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for col in ("a", "s"):
        present = [r[col] for r in rows if r[col] is not None]
        nulls[col] = len(rows) - len(present)
        if present:  # Delta writes no bound for an all-null column
            mins[col], maxs[col] = min(present), max(present)
    return json.dumps({"numRecords": len(rows), "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def prune(text: str, files: list[list[dict[str, Any]]]) -> list[bool]:
    conjuncts = [c for c in (parse_conjunct(t) for t in split_conjuncts(text)) if c is not None]
    stats = pa.array([stats_json(rows) for rows in files], pa.string())
    return list(skipping_mask(stats, conjuncts, {"a": "a", "s": "s"}))


@PROPERTY
@given(FILES, predicates(st.one_of(leaves("a", INTS), leaves("s", STRS))))
def test_stats_skipping_never_drops_a_file_with_a_matching_row(files: list[list[dict[str, Any]]], pred: Any) -> None:
    text = render(pred)
    keep = prune(text, files)
    for i, rows in enumerate(files):
        if any(truth(pred, r) is True for r in rows):
            assert keep[i], f"file {i} holds a row matching {text!r} but was pruned; rows {rows}"


@PROPERTY
@given(st.lists(st.one_of(st.none(), INTS), min_size=1, max_size=8),
       st.lists(predicates(leaves("p", INTS)), min_size=1, max_size=3))
def test_partition_evaluation_is_sound_and_exact_when_decided(values: list[int | None], preds: list[Any]) -> None:
    texts = [render(p) for p in preds]
    rows = [(v,) for v in values]
    keep, undecided = partition_values_mask([c for t in texts for c in split_conjuncts(t)], ["p"], rows)
    for i, v in enumerate(values):
        matches = all(truth(p, {"p": v}) is True for p in preds)
        if matches:
            assert keep[i], f"partition p={v} satisfies {texts} but was pruned"
        if not undecided:
            assert bool(keep[i]) == matches, f"p={v}: decided mask {keep[i]} but {texts} is {matches}"


def test_simple_conjuncts_are_decided_without_spark() -> None:
    rows = [(1, "x"), (2, "y"), (None, "x")]
    keep, undecided = partition_values_mask(["n >= 2", "s IN ('x', 'y')"], ["n", "s"], rows)
    assert list(keep) == [False, True, False] and undecided == []
    keep, undecided = partition_values_mask(["upper(s) = 'X'", "n = '1'"], ["n", "s"], rows)
    assert list(keep) == [True, True, True] and undecided == ["upper(s) = 'X'", "n = '1'"]


def test_splitting_and_parsing() -> None:
    assert split_conjuncts("a = 1 AND (b BETWEEN 1 AND 3) AND c IN ('AND', 'x')") == ["a = 1", "b BETWEEN 1 AND 3",
                                                                                     "c IN ('AND', 'x')"]
    assert split_conjuncts("a = 'x AND y'") == ["a = 'x AND y'"]
    assert parse_conjunct("5 > a") == Conjunct("a", "lt", (5,))
    assert parse_conjunct("`odd name` IS NOT NULL") == Conjunct("odd name", "notnull")
    assert parse_conjunct("d = DATE '2024-01-02'") is not None
    assert parse_conjunct("a = 1 OR b = 2") is None  # not a simple comparison: kept by pruning
    assert parse_conjunct(r"s = 'a\\b'") is None  # escapes are Spark's business


def test_unparseable_stats_skip_nothing() -> None:
    stats = pa.array(['{"numRecords": 1, "minValues": {"a": "not a number"}}', None], pa.string())
    assert list(skipping_mask(stats, [Conjunct("a", "eq", (3,))], {"a": "a"})) == [True, True]
