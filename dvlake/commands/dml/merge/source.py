"""Whether a MERGE materializes its source before joining it (``spark.databricks.delta.merge.materializeSource``).

dvlake's MERGE reads the source more than once (the matches, then the unmatched source rows) and tells them
apart by a row id from ``monotonically_increasing_id``. Unless every read gives the same rows with the same ids,
a source row could be matched in one read and pass as unmatched in the next: it would be inserted although it
matched (the wrong-data shape of issue 26). So the source is materialized once (``localCheckpoint``) and read
from there.

delta-spark's ``none`` skips that step unconditionally (its MERGE reads the source differently). dvlake honours
``none`` only where skipping it cannot change the answer: a deterministic plan made only of operators that read
the same rows in the same order every time (file and range scans, projections, filters, unions). A Python UDF
(declared deterministic or not), ``rand()``, an aggregation, a join or a repartition (row order after a shuffle
varies, and with it the ids), an RDD, or a session where the plan cannot be inspected (Spark Connect) keep the
materialization: slower than asked, never a different answer.

Reading the plan needs the classic session's JVM Dataset (``_jdf``), which CONTRIBUTING otherwise keeps out of
dvlake: here it is only read on the driver, and where it is absent (Spark Connect) the answer is the safe one.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from dvlake.config import MERGE_MATERIALIZE_SOURCE

#: Logical operators whose output rows, and their order within each partition, are the same on every read.
REPEATABLE_OPERATORS = frozenset({
    "Project", "Filter", "SubqueryAlias", "Union", "Range", "LocalRelation", "LogicalRelation",
    "DataSourceV2Relation", "DataSourceV2ScanRelation",
})


def materializes(spark: SparkSession, source: DataFrame) -> bool:
    """Whether MERGE (other than the insert-only path) materializes ``source``: always, unless the session
    asked for ``none`` and the source provably reads the same rows in the same order every time."""
    mode = str(spark.conf.get(MERGE_MATERIALIZE_SOURCE, "auto")).strip().lower()
    return mode != "none" or not repeatable(source)


def repeatable(source: DataFrame) -> bool:
    """True only when Spark's plan of ``source`` shows it deterministic and built only of
    ``REPEATABLE_OPERATORS``; False when that cannot be shown (including no access to the plan)."""
    jdf = getattr(source, "_jdf", None)  # a classic session's Dataset; Spark Connect has none
    if jdf is None:
        return False
    try:
        execution = jdf.queryExecution()
        if not bool(execution.analyzed().deterministic()):
            return False
        return _only_repeatable(execution.optimizedPlan())
    except Exception:  # noqa: BLE001 - a plan that cannot be inspected is not shown to be repeatable
        return False


def _only_repeatable(plan: Any) -> bool:
    if str(plan.getClass().getSimpleName()) not in REPEATABLE_OPERATORS:
        return False
    children = plan.children()
    return all(_only_repeatable(children.apply(i)) for i in range(int(children.size())))
