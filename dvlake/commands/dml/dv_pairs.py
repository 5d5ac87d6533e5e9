"""The (file, row) pairs a DML marks, gathered as observed metrics of a job the command runs anyway.

At a small change each Spark job costs mostly its fixed overhead, so UPDATE and MERGE do not run a job of
their own to bring the pairs to the driver: the job that already reads the matched rows (UPDATE's write of
the updated rows, MERGE's materialization of its matches) also collects them, as an ``Observation`` of a
``collect_list`` of one long per pair (file position, row index and kind packed together).

The driver must never hold more pairs than ``spark.dvlake.dml.driverMarkRows`` allows, yet an observed
aggregate cannot stop at a total. So each task keeps at most ``room / tasks`` pairs (its own count of matched
rows from ``monotonically_increasing_id``, whose low 33 bits number a partition's rows), where ``tasks``
is an upper bound of the scan's partitions worked out from the file sizes the way Spark splits files. The
observed total says whether every pair made it: when one task had more (a skewed or large change), or the
session returns no observed metrics, the caller falls back to ``mark_rows`` reading the pairs itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from dvlake.commands.dml.shared import unique_name
from dvlake.spark.scan import ScanPlan

ROW_BITS = 40    # physical row index: < 2^40 rows per file
KIND_BITS = 3    # MERGE's change kinds 0..5
FILE_BITS = 63 - ROW_BITS - KIND_BITS  # position in the plan: < 2^20 files
_IN_PARTITION = (1 << 33) - 1  # monotonically_increasing_id: partition index << 33 | row number in the partition


@dataclass(frozen=True)
class Pairs:
    """Every pair the observed job saw: file positions in the plan, physical row indexes and (MERGE) kinds."""

    files: np.ndarray
    rows: np.ndarray
    kinds: np.ndarray | None

    @property
    def count(self) -> int:
        return int(self.files.size)


@dataclass(frozen=True)
class PairWatch:
    """The observation on a frame; ``pairs()`` after the frame's first action has run."""

    observation: Observation | None
    with_kinds: bool = False

    def pairs(self) -> Pairs | None:
        """Every pair, or None when some are missing (a task held more than its share, no metrics came back)."""
        if self.observation is None:
            return None
        try:
            metrics = self.observation.get
        except Exception:  # noqa: BLE001 - a server that returns no observed metrics: the caller reads the pairs
            return None
        packed = _as_longs(metrics.get("p"))
        if packed is None or packed.size != int(metrics.get("n", -1)):
            return None
        kinds = (packed & ((1 << KIND_BITS) - 1)) if self.with_kinds else None
        return Pairs(packed >> (ROW_BITS + KIND_BITS), (packed >> KIND_BITS) & ((1 << ROW_BITS) - 1), kinds)


def _as_longs(codes: Any) -> np.ndarray | None:
    """An observed array of longs as numpy. PySpark 4.1+ (and Connect) return a Python list; classic PySpark 4.0
    returns the JVM's array itself (a Py4J handle), read here in one call as text rather than one call per element."""
    if codes is None:
        return None
    if isinstance(codes, list | tuple):
        return np.asarray(codes, dtype=np.int64)
    text = str(codes.mkString(","))  # a Scala ArraySeq behind Py4J
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)


def _conf_bytes(spark: SparkSession, key: str, default: int) -> int:
    """A byte-size conf (``134217728b``, ``128m``, ``4MB``) in bytes."""
    text = str(spark.conf.get(key, None) or "").strip().lower()
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}
    digits = text.rstrip("bkmg")
    try:
        return int(digits) * units[text[len(digits):]]
    except (ValueError, KeyError):
        return default


def tasks_bound(spark: SparkSession, plan: ScanPlan) -> int:
    """At most this many partitions in a scan of ``plan.files``: Spark cuts a file into pieces of
    ``min(maxPartitionBytes, max(openCostInBytes, bytes per core))`` bytes and packs pieces into partitions,
    so no partition count exceeds the pieces at the smallest piece size it could choose."""
    piece = max(1, min(_conf_bytes(spark, "spark.sql.files.maxPartitionBytes", 128 << 20),
                       _conf_bytes(spark, "spark.sql.files.openCostInBytes", 4 << 20)))
    return sum(max(1, math.ceil(f.size / piece)) for f in plan.files)


def watch_pairs(spark: SparkSession, df: DataFrame, plan: ScanPlan, room: int, file_col: str, row_col: str,
                kind: Column | None = None) -> tuple[DataFrame, PairWatch]:
    """``df`` observed: its row count and (up to ``room`` in all) its (``file_col``, ``row_col``, ``kind``) pairs.

    ``df`` must keep the partitioning of a scan of ``plan.files`` (no shuffle between the scan and here), and
    ``file_col`` hold positions in ``plan.files``. Nothing is observed when the pairs could not fit."""
    cap = room // max(1, tasks_bound(spark, plan))
    if cap <= 0 or len(plan.files) >= 1 << FILE_BITS:
        return df, PairWatch(None)
    # SQL text, not chains of Column calls: each call is a round trip to the JVM, and this runs on every small DML
    seen = unique_name("seen")
    row = f"CAST(`{row_col}` AS BIGINT)"
    code = f"shiftleft(CAST(`{file_col}` AS BIGINT), {ROW_BITS + KIND_BITS}) | shiftleft({row}, {KIND_BITS})"
    keep = f"`{seen}` < {cap} AND {row} < {1 << ROW_BITS}"
    if kind is None:
        kept = F.expr(f"CASE WHEN {keep} THEN {code} END")  # NULLs are not collected
    else:
        kept = F.when(F.expr(keep), F.expr(code).bitwiseOR(kind.cast("long")))
    observation = Observation(unique_name("pairs"))
    numbered = df.withColumn(seen, F.expr(f"monotonically_increasing_id() & {_IN_PARTITION}"))
    watched = numbered.observe(observation, F.expr("count(1) AS n"), F.collect_list(kept).alias("p")).drop(seen)
    return watched, PairWatch(observation, kind is not None)
