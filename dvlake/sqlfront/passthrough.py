"""Running SQL on Spark itself, past any ``spark.sql`` hook that routes statements to dvlake.

A hook that replaces ``SparkSession.sql`` with a function calling :func:`dvlake.sql` must first
hand the function it replaces to :func:`register_original_sql` (per session class: classic and
Spark Connect sessions are different classes). dvlake then runs every non-Delta statement, and
the rewritten queries, through that original, never through the hook again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_ORIGINAL_SQL: dict[type, Callable[..., Any]] = {}


def register_original_sql(session_class: type, original: Callable[..., Any]) -> None:
    """Remember the un-hooked ``session_class.sql`` (call it before installing a hook on the class)."""
    _ORIGINAL_SQL[session_class] = original


def original_sql(spark: Any) -> Callable[..., Any]:
    """The session's un-hooked ``sql`` as an unbound function: the registered original, else the class's own."""
    for cls in type(spark).__mro__:
        if cls in _ORIGINAL_SQL:
            return _ORIGINAL_SQL[cls]
    return type(spark).sql


def passthrough(spark: SparkSession, statement: str, args: Any = None, **kwargs: Any) -> DataFrame:
    """Run ``statement`` on Spark unchanged (``args``/``kwargs`` as ``SparkSession.sql`` takes them)."""
    fn = original_sql(spark)
    if args is None:
        return fn(spark, statement, **kwargs)
    return fn(spark, statement, args, **kwargs)
