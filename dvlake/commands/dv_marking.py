"""Marking matched rows of existing files in deletion vectors: the part DELETE, UPDATE and MERGE share.

Given a DataFrame of matched (file, row index) pairs, the rows are shuffled by file (as many tasks as
adaptive execution makes of the shuffled rows: one for a small change) and each task ORs them into
the file's existing DV and packs its new DVs into one DV file
(``spark/dv_build.py``); only descriptors come back to the driver. Each touched file then becomes
``remove`` (old add, old DV) + ``add`` (same path, new DV, ``tightBounds: false``), or a plain
``remove`` when every one of its rows is now deleted. A pair naming an already deleted row is a
no-op, and a file whose DV would not change is left alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, SparkSession

from dvlake.config import DEFAULT_DV_PACKING_TARGET, DV_PACKING_TARGET_SIZE
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.log.actions import Action, AddFile, now_ms
from dvlake.log.stats import with_loose_bounds
from dvlake.spark.dv_build import RESULT_SCHEMA, FileToMark, build_and_write_dvs
from dvlake.spark.dv_scan import path_key
from dvlake.spark.scan import ScanPlan


@dataclass
class MarkOutcome:
    """The log actions and counts of marking rows in DVs."""

    actions: list[Action] = field(default_factory=list)
    dv_pairs: list[tuple[bool, bool]] = field(default_factory=list)  # (old had a DV, new has a DV) per touched file
    touched: list[AddFile] = field(default_factory=list)             # every file whose DV changed or that was removed
    touched_positions: list[int] = field(default_factory=list)      # their positions in the plan
    newly_marked_rows: int = 0
    removed_files: int = 0       # files fully removed (every row deleted)
    removed_bytes: int = 0

    def dv_metrics(self, prefix: str = "") -> dict[str, int]:
        """delta-spark's DV metrics (``numDeletionVectorsAdded`` …), optionally prefixed (MERGE's ``numTarget…``)."""
        return dv_counts(self.dv_pairs, prefix)


def dv_counts(pairs: list[tuple[bool, bool]], prefix: str = "") -> dict[str, int]:
    """delta-spark's DV metrics from (old has DV, new has DV) per touched file (added/removed include updated)."""
    updated = sum(1 for o, n in pairs if o and n)
    added = sum(1 for o, n in pairs if n and not o)
    removed = sum(1 for o, n in pairs if o and not n)
    name = "numDeletionVectors" if not prefix else f"{prefix}DeletionVectors"
    return {f"{name}Added": added + updated, f"{name}Removed": removed + updated, f"{name}Updated": updated}


def _coalescing(spark: SparkSession) -> bool:
    """Whether adaptive execution merges small shuffle partitions (Spark's default)."""
    return all(str(spark.conf.get(key, "true")).strip().lower() == "true"
               for key in ("spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled"))


def mark_rows(spark: SparkSession, table_root: str, plan: ScanPlan, candidates: list[AddFile], matches: DataFrame,
              file_col: str, row_col: str, *, by_index: bool = False) -> MarkOutcome:
    """Mark ``matches`` (``file_col``, ``row_col``) in the DVs of ``plan.files`` (``candidates`` are their adds).

    ``file_col`` holds the file's location as the scan reports it (``_metadata.file_path``), or with
    ``by_index`` the file's position in ``plan.files``.
    """
    if not plan.files:
        return MarkOutcome()
    infos = {i: FileToMark(f.num_records, json.dumps(f.dv.to_json()) if f.dv else None, f.path)
             for i, f in enumerate(plan.files)}
    index_of_path = None if by_index else {path_key(f.path): i for i, f in enumerate(plan.files)}
    target = int(spark.conf.get(DV_PACKING_TARGET_SIZE, str(DEFAULT_DV_PACKING_TARGET)) or DEFAULT_DV_PACKING_TARGET)
    fn = build_and_write_dvs(table_root, infos, target, file_col, row_col, index_of_path, confine=plan.confine)
    pairs = matches.select(file_col, row_col)
    if _coalescing(spark):
        # Spark's adaptive execution sizes the tasks by the matched rows it shuffles (as delta-spark's DV writer gets
        # them): a DELETE of a few rows over hundreds of files is one task, so one DV file; a large one is spread.
        shuffled = pairs.repartition(file_col)
    else:  # without it, a fixed count: a task per 64 candidate files
        shuffle = int(spark.conf.get("spark.sql.shuffle.partitions", "200") or 200)
        shuffled = pairs.repartition(max(1, min(shuffle, math.ceil(len(plan.files) / 64))), file_col)
    results = shuffled.mapInArrow(fn, RESULT_SCHEMA).collect()
    ts = now_ms()
    out = MarkOutcome()
    for r in sorted(results, key=lambda r: r.file_index):
        old = candidates[r.file_index]
        out.newly_marked_rows += r.cardinality - r.previous_cardinality
        out.touched.append(old)
        out.touched_positions.append(int(r.file_index))
        out.actions.append(old.remove(ts))
        if r.all_deleted:
            out.removed_files += 1
            out.removed_bytes += old.size
            out.dv_pairs.append((old.deletion_vector is not None, False))
            continue
        desc = DeletionVectorDescriptor.from_json(json.loads(r.dv))
        out.actions.append(replace(old, deletion_vector=desc, data_change=True, stats=with_loose_bounds(old.stats)))
        out.dv_pairs.append((old.deletion_vector is not None, True))
    return out
