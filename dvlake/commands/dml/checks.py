"""What a DML expression may hold, asked of Spark's analyzer before any data is read.

delta-spark refuses, in DELETE/UPDATE/MERGE conditions, functions whose answer is not a function of the
row (``rand()``, ``uuid()``: a row could be matched or deleted differently on each evaluation), and
aggregate or window functions anywhere in a MERGE clause (there is no group or window to evaluate them
over), and subqueries in any DML condition. The expression is analysed over an empty frame of the same
columns the command evaluates it on, so nothing runs; Spark operators that refuse each kind say which
kind it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from dvlake.commands.dml.shared import unique_name
from dvlake.errors import (
    AggregationNotSupportedError,
    InvalidNonDeterministicExpressionsError,
    NonDeterministicConditionError,
)
from dvlake.log.condition import Condition, plain_row_expression, refuse_subquery, render

PROBE_COLUMN = "expression"


@dataclass(frozen=True)
class ExpressionKind:
    """What Spark's analyzer found in one expression."""

    aggregate: bool
    window: bool
    deterministic: bool
    subquery: bool = False
    generator: bool = False


def _condition_of(frame: Callable[[], DataFrame]) -> str | None:
    """The error class Spark's analyzer raises for the frame ``frame()`` builds, None when it analyses
    (a classic session analyses as the frame is built, Spark Connect when its schema is asked for)."""
    try:
        _ = frame().schema
    except AnalysisException as exc:
        return str(exc.getCondition() or "")
    return None


#: The kind of a plain row expression (``log.condition.plain_row_expression``): nothing to refuse.
PLAIN = ExpressionKind(aggregate=False, window=False, deterministic=True, subquery=False)


def expression_kind(probe: DataFrame, value: Column, text: str | Condition | None = None) -> ExpressionKind:
    """The kind of ``value`` evaluated over ``probe``'s columns (its resolution errors reach the caller).

    Asked through operators that refuse each kind, so it works on classic and Spark Connect sessions alike:
    a filter refuses aggregates and window functions, a join condition non-deterministic expressions, a
    lambda function every kind of subquery (scalar, IN, EXISTS, correlated or not). The last one is what decides
    for a Column, whose own rendering is not SQL that can be parsed. When ``text`` (the SQL ``value`` was made
    from) is a plain row expression, the one resolving analysis is all that runs: each probe costs a fifth of
    a small UPDATE's driver time in round trips to the JVM. A parsed ``Condition`` answers from its own cached
    check (its text is not tokenized again)."""
    _ = probe.select(value.alias(PROBE_COLUMN)).schema  # resolution errors first
    plain = text.plainly_deterministic if isinstance(text, Condition) else text is not None and plain_row_expression(text)
    if plain:
        return PLAIN
    anything = F.isnull(value) | F.lit(True)
    in_filter = _condition_of(lambda: probe.filter(anything))
    other = probe.sparkSession.createDataFrame([], StructType([StructField(unique_name("probe"), LongType())]))
    in_join = _condition_of(lambda: probe.join(other, anything)) if in_filter is None else None
    in_lambda = _condition_of(lambda: probe.select(F.transform(F.array(F.lit(0)), lambda _: value)))
    return ExpressionKind(in_filter == "INVALID_WHERE_CONDITION", in_filter == "WINDOW_FUNCTION_NOT_ALLOWED_IN_CLAUSE",
                          in_join != "INVALID_NON_DETERMINISTIC_EXPRESSIONS",
                          (in_lambda or "").startswith("UNSUPPORTED_SUBQUERY_EXPRESSION_CATEGORY"),
                          _is_generator(in_filter))


def _is_generator(refusal: str | None) -> bool:
    """Whether a filter's refusal says the expression holds a generator (``explode``): Spark's generator rule
    names it (``UNSUPPORTED_GENERATOR.*``)."""
    return (refusal or "").startswith("UNSUPPORTED_GENERATOR")


display = render


#: Spark's class for an aggregate or window function where an operator cannot evaluate one; delta-spark lets it
#: through for window functions in MERGE and for aggregates in its SET and INSERT values.
UNSUPPORTED_EXPR_FOR_OPERATOR = "UNSUPPORTED_EXPR_FOR_OPERATOR"


def refuse_aggregates(kind: ExpressionKind, operation: str, value: Any, condition: bool = True) -> None:
    """An aggregate or window function in ``operation`` refused with delta-spark's class: DELTA_AGGREGATION_NOT_SUPPORTED
    for an aggregate in a ``condition``, Spark's UNSUPPORTED_EXPR_FOR_OPERATOR for a window function or a value."""
    if not (kind.aggregate or kind.window or kind.generator):
        return
    if kind.aggregate and condition:
        raise AggregationNotSupportedError(
            f"Aggregate functions are not supported in the {operation} (condition = {display(value)}). There is no "
            "group of rows to evaluate them over: compute the value in the source query first.")
    raise AggregationNotSupportedError(
        f"The query operator `MERGE` contains one or more unsupported expressions in the {operation}. Consider to "
        "rewrite it to avoid window functions, aggregate functions, and generator functions: there is no group or "
        f"window of rows in a MERGE clause; compute the value in the source query first. Invalid expressions: "
        f"[{display(value)}]", UNSUPPORTED_EXPR_FOR_OPERATOR)


def refuse_non_deterministic(kind: ExpressionKind, operation: str, value: Any, error_class: str | None = None) -> None:
    """A non-deterministic condition refused with delta-spark's class (or ``error_class`` where Spark's applies)."""
    if not kind.deterministic:
        raise NonDeterministicConditionError(
            f"Non-deterministic functions are not supported in the {operation} (condition = {display(value)}): "
            "a row could be chosen differently each time the condition is evaluated.", error_class)


def refuse_subquery_kind(kind: ExpressionKind, command: str, value: Any, operation: str | None = None) -> None:
    """``log.condition.refuse_subquery`` for a subquery Spark's analyzer found (a Column's, which its text cannot
    show; text conditions are checked earlier from their parsed form)."""
    refuse_subquery(command, kind.subquery, render(value), operation)


def require_deterministic(probe: DataFrame, value: Column, command: str, shown: str,
                          condition: Condition | None = None) -> None:
    """A DELETE/UPDATE condition over ``probe`` (the table's columns) refused when it holds a subquery
    (delta-spark's rule) or is non-deterministic: which rows it picks would differ between the scan that finds
    them and the one that rewrites them. A ``condition`` whose text is plainly deterministic is not analysed
    again: the callers have resolved it over the table's columns already."""
    if condition is not None and condition.plainly_deterministic:
        return
    kind = expression_kind(probe, value)
    refuse_subquery_kind(kind, command, shown)
    if not kind.deterministic:
        raise InvalidNonDeterministicExpressionsError(
            f"The operator expects a deterministic expression: the {command} condition {shown!r} holds a "
            "non-deterministic function, so the rows it picks could differ each time it is evaluated.")


def refuse_set_value_kinds(probe: DataFrame, value: Column, text: str | None, operator: str) -> None:
    """An UPDATE SET value holding a window, aggregate or generator function refused with Spark's
    UNSUPPORTED_EXPR_FOR_OPERATOR, as delta-spark's analysis of its update command refuses it: there is no window
    or group of rows to evaluate it over (a window over a DV-filtered scan would depend on how the scan is cut),
    and a generator would turn one row into several. A plain row expression (``text``) is not analysed again."""
    if text is not None and plain_row_expression(text):
        return
    refusal = _condition_of(lambda: probe.filter(F.isnull(value) | F.lit(True)))
    if refusal in ("INVALID_WHERE_CONDITION", "WINDOW_FUNCTION_NOT_ALLOWED_IN_CLAUSE") or _is_generator(refusal):
        raise AggregationNotSupportedError(
            f"The query operator `{operator}` contains one or more unsupported expressions. Consider to rewrite it to "
            "avoid window functions, aggregate functions, and generator functions in the SET clause: there is no group "
            "or window of rows to evaluate them over; compute the value in a MERGE source query instead. Invalid "
            f"expressions: [{display(text if text is not None else value)}]", UNSUPPORTED_EXPR_FOR_OPERATOR)
