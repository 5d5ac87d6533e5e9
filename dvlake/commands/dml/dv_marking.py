"""Marking matched rows of existing files in deletion vectors: the part DELETE, UPDATE and MERGE share.

Given a DataFrame of matched (file, row index) pairs, the DVs are built where it is cheapest:

- **on the driver** when the pairs are known to be few (at most ``spark.dvlake.dml.driverMarkRows``):
  the pairs the caller's own job already gathered (``dv_pairs.py``: UPDATE's write, an upsert's matches), else
  one Arrow collect of the pairs; no shuffle, no Python worker stage. The planned files' existing DVs count
  against the bound too (the driver decodes those it ORs into). "Known" means the caller counted
  them in a pass it runs anyway (UPDATE's and MERGE's materialized matches), or the planned files hold
  no more rows than that, or else the pairs are materialized here (``localCheckpoint``) with their count
  observed in that same job. The bound caps the driver's memory: it never holds more row indexes.
- **on executors** otherwise: the pairs are shuffled by file (as many tasks as adaptive execution makes
  of the shuffled rows: one for a small change) and each task ORs them into the file's existing DV and
  packs its new DVs into one DV file; only descriptors come back to the driver.

Both run ``spark/dv_build.py``. Each touched file then becomes ``remove`` (old add, old DV) + ``add``
(same path, new DV, ``tightBounds: false``), or a plain ``remove`` when every one of its rows is now
deleted. A pair naming an already deleted row is a no-op, and a file whose DV would not change is left alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from dvlake.commands.dml.dv_pairs import Pairs
from dvlake.commands.dml.shared import unique_name
from dvlake.config import DEFAULT_DML_DRIVER_MARK_ROWS, DEFAULT_DV_PACKING_TARGET, DML_DRIVER_MARK_ROWS, DV_PACKING_TARGET_SIZE
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import InvalidArgumentError
from dvlake.log.actions import Action, AddFile, now_ms
from dvlake.log.stats import with_loose_bounds
from dvlake.spark.dv_build import RESULT_SCHEMA, FileToMark, Kinds, MarkAccumulator, build_and_write_dvs
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
    kind_counts: dict[int, int] = field(default_factory=dict)  # pairs per kind (with a ``Kinds``)
    duplicate: bool = False      # a checked kind named some row twice: nothing was marked (the caller fails)
    on_driver: bool = False      # the DVs were built on the driver

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


def driver_mark_rows(spark: SparkSession) -> int:
    """The most pairs whose DVs are built on the driver (``spark.dvlake.dml.driverMarkRows``)."""
    text = str(spark.conf.get(DML_DRIVER_MARK_ROWS, str(DEFAULT_DML_DRIVER_MARK_ROWS)) or DEFAULT_DML_DRIVER_MARK_ROWS)
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"{DML_DRIVER_MARK_ROWS} must be a whole number of rows (0: never on the driver); "
                                   f"got {text!r}") from None
    return max(0, value)


def counted(df: DataFrame, name: str = "rows") -> tuple[DataFrame, int]:
    """``df`` materialized (``localCheckpoint``) and its row count, observed in the same job (no second pass)."""
    observation = Observation(unique_name(name))
    materialized = df.observe(observation, F.count(F.lit(1)).alias("n")).localCheckpoint(eager=True)
    try:
        return materialized, int(observation.get["n"])
    except Exception:  # noqa: BLE001 - a server that returns no observed metrics for a checkpoint: count it
        return materialized, materialized.count()


def _rows_bound(plan: ScanPlan) -> int | None:
    """At most this many physical rows in the planned files (None when a file's count is unknown)."""
    if any(f.num_records is None for f in plan.files):
        return None
    return sum(int(f.num_records or 0) for f in plan.files)


def _deleted_rows(plan: ScanPlan) -> int:
    """The rows the planned files' existing DVs delete: what building on the driver may have to decode."""
    return sum(f.dv.cardinality for f in plan.files if f.dv is not None)


def driver_room(spark: SparkSession, plan: ScanPlan) -> int:
    """How many new pairs the driver may take for ``plan``: it ORs them into the planned files' existing DVs, so
    those DVs' rows count against ``spark.dvlake.dml.driverMarkRows`` too."""
    return driver_mark_rows(spark) - _deleted_rows(plan)


def mark_rows(spark: SparkSession, table_root: str, plan: ScanPlan, candidates: list[AddFile], matches: DataFrame,
              file_col: str, row_col: str, *, by_index: bool = False, rows: int | None = None, exact: bool = False,
              kinds: Kinds | None = None, gathered: Pairs | None = None) -> MarkOutcome:
    """Mark ``matches`` (``file_col``, ``row_col``) in the DVs of ``plan.files`` (``candidates`` are their adds).

    ``file_col`` holds the file's location as the scan reports it (``_metadata.file_path``), or with
    ``by_index`` the file's position in ``plan.files``. ``rows``: an upper bound of the pairs, when the caller
    knows one (``exact``: the count itself, never re-counted); without it each pair must be a distinct physical row of
    the planned files (DELETE).
    ``kinds``: only pairs of its marked kinds are marked; all are counted per kind, checked ones for duplicates.
    ``gathered``: every pair of ``matches`` already on the driver (``dv_pairs.py``, ``by_index`` positions): the
    DVs are built from them when they fit the driver's bound, with no job reading ``matches``.
    """
    if not plan.files:
        return MarkOutcome()
    infos = {i: FileToMark(f.num_records, json.dumps(f.dv.to_json()) if f.dv else None, f.path)
             for i, f in enumerate(plan.files)}
    index_of_path = None if by_index else {path_key(f.path): i for i, f in enumerate(plan.files)}
    target = int(spark.conf.get(DV_PACKING_TARGET_SIZE, str(DEFAULT_DV_PACKING_TARGET)) or DEFAULT_DV_PACKING_TARGET)
    pairs = matches.select(file_col, row_col, *([kinds.column] if kinds is not None else []))
    # the driver ORs the new pairs into the touched files' existing DVs: those rows count against its bound too
    room = driver_room(spark, plan)
    if gathered is not None and by_index and gathered.count <= room:
        if gathered.count == 0:
            return MarkOutcome()
        acc = MarkAccumulator(kinds)
        acc.add(gathered.files, gathered.rows, gathered.kinds if kinds is not None else None)
        return _outcome(_records(acc.write(table_root, infos, target, plan.confine)), candidates, True)
    bound = rows if rows is not None else _rows_bound(plan)
    if room > 0 and (bound is None or bound > room) and not (exact and bound is not None):
        pairs, bound = counted(pairs, "marked_rows")  # one job that a later shuffle or collect reads back
    if bound == 0:
        return MarkOutcome()
    if room > 0 and bound is not None and bound <= room:
        acc = MarkAccumulator(kinds)
        acc.add_batch(pairs.toArrow(), file_col, row_col, index_of_path)
        results: list[Any] = _records(acc.write(table_root, infos, target, plan.confine))
        on_driver = True
    else:
        fn = build_and_write_dvs(table_root, infos, target, file_col, row_col, index_of_path, confine=plan.confine,
                                 kinds=kinds)
        if _coalescing(spark):
            # Spark's adaptive execution sizes the tasks by the matched rows it shuffles (as delta-spark's DV writer
            # gets them): a DELETE of a few rows over hundreds of files is one task, so one DV file; a large one is
            # spread.
            shuffled = pairs.repartition(file_col)
        else:  # without it, a fixed count: a task per 64 candidate files
            shuffle = int(spark.conf.get("spark.sql.shuffle.partitions", "200") or 200)
            shuffled = pairs.repartition(max(1, min(shuffle, math.ceil(len(plan.files) / 64))), file_col)
        results = [r.asDict() for r in shuffled.mapInArrow(fn, RESULT_SCHEMA).collect()]
        on_driver = False
    return _outcome(results, candidates, on_driver)


def _records(columns: dict[str, list]) -> list[dict[str, Any]]:
    names = list(columns)
    return [dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def _outcome(results: list[dict[str, Any]], candidates: list[AddFile], on_driver: bool) -> MarkOutcome:
    """The log actions and counts from one result row per file seen."""
    ts = now_ms()
    out = MarkOutcome(on_driver=on_driver)
    for r in results:
        for kind, n in json.loads(r["kind_counts"] or "{}").items():
            out.kind_counts[int(kind)] = out.kind_counts.get(int(kind), 0) + int(n)
        out.duplicate = out.duplicate or bool(r["duplicate"])
    if out.duplicate:
        return out  # nothing was marked: the caller raises
    for r in sorted((r for r in results if r["changed"]), key=lambda r: r["file_index"]):
        old = candidates[r["file_index"]]
        out.newly_marked_rows += r["cardinality"] - r["previous_cardinality"]
        out.touched.append(old)
        out.touched_positions.append(int(r["file_index"]))
        out.actions.append(old.remove(ts))
        if r["all_deleted"]:
            out.removed_files += 1
            out.removed_bytes += old.size
            out.dv_pairs.append((old.deletion_vector is not None, False))
            continue
        desc = DeletionVectorDescriptor.from_json(json.loads(r["dv"]))
        out.actions.append(replace(old, deletion_vector=desc, data_change=True, stats=with_loose_bounds(old.stats)))
        out.dv_pairs.append((old.deletion_vector is not None, True))
    return out
