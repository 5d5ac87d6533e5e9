"""REORG TABLE … APPLY (PURGE): rewrite every file that carries a deletion vector.

OPTIMIZE keeps files that are big enough and have few deleted rows; PURGE guarantees that no
live file references a DV afterwards (DROP FEATURE deletionVectors relies on that). It is
OPTIMIZE with delta-spark's REORG settings: every file with a DV is chosen (alone in its bin
too), small outputs are still coalesced up to ``optimize.maxFileSize``, and the commit is
operation ``REORG`` with ``applyPurge: true``. A second run finds nothing and commits nothing.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession

from dvlake.commands.maintenance.optimize import OptimizeOutcome, OptimizeRequest, optimize, result_frame


def purge(spark: SparkSession, path: str, condition: str | Column | None = None) -> OptimizeOutcome:
    """Rewrite the files with DVs (in the partitions ``condition`` keeps); ``version`` is None when none had one."""
    return optimize(spark, path, OptimizeRequest(condition=condition, purge=True))


def run(spark: SparkSession, path: str, condition: str | Column | None = None) -> DataFrame:
    """REORG TABLE ``path`` [WHERE condition] APPLY (PURGE); returns the ``path, metrics`` result as OPTIMIZE does."""
    return result_frame(spark, purge(spark, path, condition))
