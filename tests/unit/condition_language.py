"""A tiny condition language for the Spark-free pruning property tests: generated, rendered to SQL text, evaluated.

Conditions are trees over ``=, <, <=, >, >=, <=>, IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT``, rendered with the
fewest parentheses SQL's precedence allows (NOT > AND > OR, so the parser's precedence is what is tested), with
comments between operands and doubled quotes inside string literals. ``truth`` is the reference: Spark's value
of the condition on one row, in three-valued logic and with Spark's comparisons (a decimal literal against a
double column is cast to double; against an integer column both are compared exactly; NaN equals NaN and is
above every number; -0.0 equals 0.0). ``stats_json`` writes a file's Delta stats as writers do.
"""

from __future__ import annotations

import decimal
import json
import math
import os
from typing import Any, Union

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("DVLAKE_PROPERTY_EXAMPLES", "300"))
PROPERTY = settings(max_examples=EXAMPLES, derandomize=os.environ.get("DVLAKE_PROPERTY_RANDOM") != "1", deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

Leaf = tuple[str, str, tuple[Any, ...]]  # (column, op, literals); a None literal is SQL NULL
Pred = Union[Leaf, tuple[str, Any, Any]]  # noqa: UP007 - a recursive alias reads better spelled out

INTS = st.integers(-4, 4)  # a small range, so that values and literals collide and edges get tested
STRS = st.text(alphabet="abAB_z'", min_size=0, max_size=3)
NAN, INF = float("nan"), float("inf")


def _lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"  # Spark 4 reads a doubled quote as one
    if isinstance(v, decimal.Decimal):
        return format(v, "f")  # never an exponent: 1E+1 would be a double literal
    return str(v)


def leaves(column: str, values: st.SearchStrategy[Any], nulls_in_literals: bool = False) -> st.SearchStrategy[Leaf]:
    """Comparisons of ``column`` with literals drawn from ``values`` (and NULL, when asked)."""
    lits = st.one_of(values, values, values, st.none()) if nulls_in_literals else values  # NULL one time in four
    ops = ["=", "<", "<=", ">", ">=", "<=>"] if nulls_in_literals else ["=", "<", "<=", ">", ">="]
    compare = st.tuples(st.just(column), st.sampled_from(ops), st.tuples(lits))
    in_list = st.tuples(st.just(column), st.just("IN"), st.lists(lits, min_size=1, max_size=4).map(tuple))
    between = st.tuples(st.just(column), st.just("BETWEEN"), st.tuples(lits, lits))
    null_tests = st.tuples(st.just(column), st.sampled_from(["IS NULL", "IS NOT NULL"]), st.just(()))
    if nulls_in_literals:  # the typed language: comparisons, where the edges are, most of the time
        return st.one_of(compare, compare, compare, in_list, between, null_tests)
    return st.one_of(compare, in_list, between, null_tests)


def predicates(leaf: st.SearchStrategy[Leaf]) -> st.SearchStrategy[Any]:
    comments = st.sampled_from(["", "", " /* a AND b OR */ ", " -- x OR y AND\n "])
    return st.recursive(leaf, lambda inner: st.one_of(
        st.tuples(st.just("AND"), inner, inner, comments), st.tuples(st.just("OR"), inner, inner, comments),
        st.tuples(st.just("NOT"), inner, st.none(), st.just(""))), max_leaves=6)


_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3}


def render(p: Any, outer: int = 0) -> str:
    """SQL text with parentheses only where precedence needs them (so the parser's precedence is tested)."""
    kind = p[0]
    if kind in ("AND", "OR"):
        prec = _PRECEDENCE[kind]
        text = f"{render(p[1], prec)} {kind}{p[3]} {render(p[2], prec + 1)}"
        return f"({text})" if prec < outer else text
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


def _and(a: bool | None, b: bool | None) -> bool | None:
    return False if a is False or b is False else (None if a is None or b is None else True)


def _or(a: bool | None, b: bool | None) -> bool | None:
    return True if a is True or b is True else (None if a is None or b is None else False)


def spark_compare(column_type: str, value: Any, literal: Any) -> int:
    """-1/0/1 for a non-null column value and literal, as Spark compares them after its coercion."""
    if column_type in ("double", "float"):
        a, b = float(value), float(literal)  # the literal cast to double (correctly rounded, as Java's)
        if math.isnan(a) or math.isnan(b):
            return int(math.isnan(a)) - int(math.isnan(b))
        return (a > b) - (a < b)
    return (value > literal) - (value < literal)  # integers vs decimals exactly; strings by code point (= UTF-8 order)


def truth(p: Any, row: dict[str, Any], types: dict[str, str] | None = None) -> bool | None:
    """Spark's three-valued truth of ``p`` on one row; ``types`` maps columns to Delta types (default long)."""
    kind = p[0]
    if kind == "AND":
        return _and(truth(p[1], row, types), truth(p[2], row, types))
    if kind == "OR":
        return _or(truth(p[1], row, types), truth(p[2], row, types))
    if kind == "NOT":
        a = truth(p[1], row, types)
        return None if a is None else not a
    col, op, vals = p
    t = (types or {}).get(col, "long")
    v = row[col]
    if op == "IS NULL":
        return v is None
    if op == "IS NOT NULL":
        return v is not None
    if op == "<=>":
        if v is None or vals[0] is None:
            return v is None and vals[0] is None
        return spark_compare(t, v, vals[0]) == 0

    def cmp(lit: Any, test: Any) -> bool | None:
        return None if v is None or lit is None else bool(test(spark_compare(t, v, lit)))

    if op == "IN":
        found = [cmp(x, lambda c: c == 0) for x in vals]
        return True if True in found else (None if None in found else False)
    if op == "BETWEEN":
        return _and(cmp(vals[0], lambda c: c >= 0), cmp(vals[1], lambda c: c <= 0))
    test = {"=": lambda c: c == 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0, ">": lambda c: c > 0,
            ">=": lambda c: c >= 0}[op]
    return cmp(vals[0], test)


# --- a file's Delta stats, as writers produce them -----------------------------------------------


def _float_json(v: float, column_type: str) -> float:
    """A float column's value as writers print it: the float32's shortest decimal (0.7f as 0.7)."""
    return float(str(np.float32(v))) if column_type == "float" and math.isfinite(v) else v


def stats_json(rows: list[dict[str, Any]], types: dict[str, str], *, nan_in_bounds: bool = False,
               string_prefix: int | None = None, tie_breaker: bool = False) -> str:
    """numRecords, minValues, maxValues and nullCount of ``rows``.

    Floats: NaN sorts above every number; ``nan_in_bounds`` writes it into a bound as Spark's min/max
    would (else it is left out, as Parquet footers do). Strings longer than ``string_prefix`` are cut:
    the min to its prefix, the max to its prefix (plus U+FFFD as delta-spark's tie breaker, when asked).
    """
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for col, t in types.items():
        present = [r[col] for r in rows if r[col] is not None]
        nulls[col] = len(rows) - len(present)
        if t in ("double", "float"):
            numbers = [v for v in present if not math.isnan(v)]
            if nan_in_bounds and len(numbers) < len(present):
                mins[col] = _float_json(min(numbers), t) if numbers else NAN
                maxs[col] = NAN
            elif numbers:
                mins[col], maxs[col] = _float_json(min(numbers), t), _float_json(max(numbers), t)
            continue
        if not present:
            continue  # Delta writes no bound for an all-null column
        lo, hi = min(present), max(present)
        if t == "string" and string_prefix is not None:
            lo = lo[:string_prefix]
            if len(hi) > string_prefix:
                hi = hi[:string_prefix] + ("\ufffd" if tie_breaker else "")
        mins[col], maxs[col] = lo, hi
    return json.dumps({"numRecords": len(rows), "minValues": mins, "maxValues": maxs, "nullCount": nulls})
