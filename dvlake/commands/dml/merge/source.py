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

from dvlake.config import MERGE_FAIL_IF_SOURCE_CHANGED, MERGE_MATERIALIZE_SOURCE
from dvlake.errors import NondeterministicMergeSourceError

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
    if deterministic(source) is not True:  # not deterministic, or no plan to look at (Spark Connect)
        return False
    try:
        return _only_repeatable(getattr(source, "_jdf").queryExecution().optimizedPlan())  # noqa: B009 - see module doc
    except Exception:  # noqa: BLE001 - a plan that cannot be inspected is not shown to be repeatable
        return False


def _only_repeatable(plan: Any) -> bool:
    if str(plan.getClass().getSimpleName()) not in REPEATABLE_OPERATORS:
        return False
    children = plan.children()
    return all(_only_repeatable(children.apply(i)) for i in range(int(children.size())))


def refuse_nondeterministic(spark: SparkSession, source: DataFrame) -> None:
    """delta-spark's ``merge.failIfSourceChanged`` (off by default): with the source not materialized
    (``materializeSource=none``), a MERGE that reads its source twice fails when the source may change between the
    reads. delta-spark notices it by counting the rows of both reads; dvlake, which materializes such a source anyway,
    fails when Spark's plan of the source is not deterministic (``rand()``, a nondeterministic UDF), so the answer
    does not depend on luck. Without access to the plan (Spark Connect) nothing is refused: the source is
    materialized and read once.

    Raises:
        NondeterministicMergeSourceError: the flag is on, the mode is ``none`` and the source is not deterministic.
    """
    if str(spark.conf.get(MERGE_FAIL_IF_SOURCE_CHANGED, "false")).strip().lower() != "true":
        return
    if str(spark.conf.get(MERGE_MATERIALIZE_SOURCE, "auto")).strip().lower() != "none":
        return
    if deterministic(source) is False:
        raise NondeterministicMergeSourceError(
            "Cannot perform Merge because the source dataset is not deterministic: its plan holds a nondeterministic "
            f"expression and {MERGE_MATERIALIZE_SOURCE}=none asks not to materialize it. Set it to auto, or make the "
            "source deterministic")


def deterministic(source: DataFrame) -> bool | None:
    """Whether Spark's analyzed plan of ``source`` is deterministic; None when the plan cannot be read."""
    jdf = getattr(source, "_jdf", None)  # a classic session's Dataset; Spark Connect has none
    if jdf is None:
        return None
    try:
        return bool(jdf.queryExecution().analyzed().deterministic())
    except Exception:  # noqa: BLE001 - a plan that cannot be inspected says nothing
        return None
