"""Running SQL on Spark itself, past any ``spark.sql`` hook that routes statements to dvlake.

``dvlake.configure_spark`` replaces ``SparkSession.sql`` (classic and Spark Connect) with a function
that sends Delta statements to :func:`dvlake.sql`. dvlake's own statements — the catalog lookups of
``dvlake.spark.catalog``, the non-Delta statements and rewritten queries of ``dvlake.sql`` — must reach
Spark's parser directly, never the hook again (which would re-interpret, e.g., ``SHOW TBLPROPERTIES``
of a registered name as a Delta statement). A hook hands the function it replaces to
:func:`register_original_sql` first, per session class; :func:`native_sql` calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_ORIGINAL_SQL: dict[type, Callable[..., Any]] = {}


def register_original_sql(session_class: type, original: Callable[..., Any]) -> None:
    """Remember the un-hooked ``session_class.sql`` (call it before installing a hook on the class)."""
    _ORIGINAL_SQL.setdefault(session_class, original)


def original_sql(spark: Any) -> Callable[..., Any]:
    """The session's un-hooked ``sql`` as an unbound function: the registered original, else the class's own."""
    for cls in type(spark).__mro__:
        if cls in _ORIGINAL_SQL:
            return _ORIGINAL_SQL[cls]
    return type(spark).sql


def native_sql(spark: Any, statement: str, args: Any = None, **kwargs: Any) -> DataFrame:
    """Run ``statement`` on Spark unchanged (``args``/``kwargs`` as ``SparkSession.sql`` takes them)."""
    fn = original_sql(spark)
    if args is None:
        return fn(spark, statement, **kwargs)
    return fn(spark, statement, args, **kwargs)
