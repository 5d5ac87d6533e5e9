"""Running SQL on Spark itself, past any ``spark.sql`` hook that routes statements to dvlake.

``dvlake.configure_spark`` replaces ``SparkSession.sql`` (classic and Spark Connect) with a function
that sends Delta statements to :func:`dvlake.sql` (through ``dvlake.compat.pyspark_hooks``, which records
every original). dvlake's own statements — the catalog lookups of
``dvlake.spark.catalog``, the non-Delta statements and rewritten queries of ``dvlake.sql`` — must reach
Spark's parser directly, never the hook again (which would re-interpret, e.g., ``SHOW TBLPROPERTIES``
of a registered name as a Delta statement). A hook of the user's own hands the function it
replaces to :func:`register_original_sql` first, per session class; :func:`native_sql` calls the original.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dvlake.compat import pyspark_hooks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def register_original_sql(session_class: type, original: Callable[..., Any]) -> None:
    """Remember the un-hooked ``session_class.sql`` (call it before installing a hook of your own on the class)."""
    pyspark_hooks.remember(session_class, "sql", original)


def original_sql(spark: Any) -> Callable[..., Any]:
    """The session's un-hooked ``sql`` as an unbound function: the recorded original, else the class's own."""
    return pyspark_hooks.original(type(spark), "sql")


def native_sql(spark: Any, statement: str, args: Any = None, **kwargs: Any) -> DataFrame:
    """Run ``statement`` on Spark unchanged (``args``/``kwargs`` as ``SparkSession.sql`` takes them)."""
    fn = original_sql(spark)
    if args is None:
        return fn(spark, statement, **kwargs)
    return fn(spark, statement, args, **kwargs)
