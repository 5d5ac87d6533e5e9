"""DELETE: mark matching rows in deletion vectors (merge-on-read), or rewrite files (copy-on-write).

With DVs enabled (and ``spark.databricks.delta.delete.deletionVectors.persistent`` not false):
1. no condition, or one on partition columns only → whole files are removed, no data is read;
2. otherwise the candidate files (partition pruning + data skipping) are scanned for the
   condition's columns plus the row index, already-deleted rows excluded; matched (file, row)
   pairs are shuffled by file and each task ORs them into the file's DV and packs its DVs into
   one new DV file (``spark/dv_build.py``); only descriptors come back to the driver;
3. one commit: per touched file ``remove`` (old add, old DV) + ``add`` (same path, new DV,
   ``tightBounds: false``), or a plain ``remove`` when every row is now deleted.
A conflict with a concurrent DELETE/UPDATE on the same files re-runs the command on the new
snapshot (a DELETE is re-evaluated against the winner's result, which is what serial order means).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, SparkSession

from dvlake.commands.data_files import write_table_files
from dvlake.commands.dml import template as row_level
from dvlake.commands.dml.cdc_write import cdf_enabled, with_change_type, write_change_files
from dvlake.commands.dml.checks import require_deterministic
from dvlake.commands.dml.dv_marking import dv_counts, mark_rows
from dvlake.commands.dml.shared import Committed
from dvlake.commands.dml.subquery_condition import bind_with_tables, refuse_unread_delta_tables
from dvlake.commands.dml.template import Outcome, Prepared
from dvlake.config import DELETE_DVS_PERSISTENT
from dvlake.log.actions import AddCDCFile, AddFile, RemoveFile, now_ms
from dvlake.log.cdf_plan import DELETE
from dvlake.log.condition import Condition
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import num_records_of
from dvlake.spark import row_tracking
from dvlake.spark.bound import BoundCondition, bind
from dvlake.spark.dv_scan import FILE_INDEX_COL, FILE_PATH_COL, ROW_INDEX_COL
from dvlake.spark.layout import logical_struct
from dvlake.spark.scan import ScanPlan, check_condition, logical_frame, match_frame, plan_scan
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction


def delete(spark: SparkSession, path: str, condition: str | Column | Condition | None = None, *,
           alias: str | None = None) -> dict[str, Any]:
    """Delete rows matching ``condition``; returns the commit's operationMetrics (empty if nothing changed, unless
    ``spark.databricks.delta.skipRecordingEmptyCommits`` is false: then an empty DELETE commit is recorded).

    ``alias`` names the table in the condition (``DELETE FROM … AS t WHERE t.id = 3``). The condition may hold
    subqueries (EXISTS, IN, scalar; correlated or not), as in delta-spark: Spark evaluates the whole condition over
    the target's live rows at the command's snapshot (``subquery_condition.py``).
    """
    root = normalize_table_root(path)
    cond = Condition.of(condition, alias)  # parsed once, before any Spark work
    if cond is not None:
        refuse_unread_delta_tables(spark, cond)
    return row_level.run(DeleteCommand(spark, cond), root)


def _delete_once(spark: SparkSession, snapshot: Snapshot, condition: str | Column | Condition | None) -> Committed:
    """One attempt at ``snapshot`` (raises the concurrency exceptions instead of retrying)."""
    return row_level.attempt(DeleteCommand(spark, Condition.of(condition)), snapshot)


@dataclass
class DeleteCommand:
    """DELETE in the row-level template: the condition checked and pruned in ``prepare``, the path run in
    ``execute``. ``operation`` names the command in messages and the log (``replaceWhere`` reuses the plan)."""

    spark: SparkSession
    condition: Condition | None
    operation: str = "DELETE"
    #: a DELETE refuses a non-deterministic condition; ``replaceWhere`` lets Spark decide, as before
    deterministic_only: bool = True
    reports_elided = False

    def prepare(self, snapshot: Snapshot) -> Prepared[BoundCondition | None]:
        spark, condition = self.spark, self.condition
        if condition is not None and condition.query_text is not None:  # subqueries over Delta tables
            bound: BoundCondition | None = bind_with_tables(spark, snapshot, condition, self.operation,
                                                            self.deterministic_only)
        else:
            probe = check_condition(spark, snapshot, condition, self.operation)
            bound = bind(spark, condition, logical_struct(snapshot.schema)) if condition is not None else None
            if self.deterministic_only and bound is not None and probe is not None:
                require_deterministic(probe, bound.column, "DELETE", bound.display(), bound.condition)
        subqueries = condition is not None and condition.has_subquery
        # only the subquery-free conjuncts prune: a subquery's value depends on rows outside the file
        plan = plan_scan(spark, snapshot, condition.pruning_part() if condition is not None else None)
        path = row_level.choose_path(spark, snapshot, plan, condition, DELETE_DVS_PERSISTENT)
        return Prepared(snapshot, plan, row_level.candidates_of(snapshot, plan), path, bound,
                        parameters={"predicate": _predicate_param(condition)}, reads_every_file=subqueries)

    def execute(self, prepared: Prepared[BoundCondition | None], txn: OptimisticTransaction) -> Outcome:
        snapshot, plan, candidates, condition = prepared.snapshot, prepared.plan, prepared.candidates, prepared.detail
        scan_ms = 0
        if prepared.path == row_level.NOTHING:
            return Outcome([], {})
        if prepared.path == row_level.PARTITION_ONLY or condition is None:
            metrics, actions = _remove_whole_files(candidates)
        elif prepared.path == row_level.WITH_DVS:
            t0 = time.monotonic()
            metrics, actions = _delete_with_dvs(self.spark, snapshot, plan, candidates, condition)
            scan_ms = int((time.monotonic() - t0) * 1000)
        else:
            metrics, actions = _delete_copy_on_write(self.spark, snapshot, plan, candidates, condition)
        metrics.setdefault("scanTimeMs", scan_ms)
        metrics.setdefault("rewriteTimeMs", 0)
        return Outcome(actions, metrics)

    def empty_metrics(self, outcome: Outcome) -> dict[str, Any]:
        return {**_remove_whole_files([])[0], "scanTimeMs": 0, "rewriteTimeMs": 0}  # every count zero


def _predicate_param(condition: Condition | None) -> str:
    return condition.predicate_param() if condition is not None else json.dumps(["true"])


def matching_rows_actions(spark: SparkSession, snapshot: Snapshot, condition: str | Column | Condition,
                          txn: OptimisticTransaction, command: str = "replaceWhere") -> tuple[dict[str, Any], list[Any]]:
    """The actions (removes, re-added files with DVs, rewritten files) that delete the rows matching ``condition``,
    without committing: a write with ``replaceWhere`` commits them together with its new files.

    Plans and chooses as DELETE does (the same ``DeleteCommand``): whole files for a partition-only condition, DVs
    where the table and session allow them, copy-on-write otherwise. Registers what it read on ``txn``.
    """
    cond = Condition.of(condition)
    assert cond is not None
    deleting = DeleteCommand(spark, cond, operation=command, deterministic_only=False)
    prepared = deleting.prepare(snapshot)
    txn.read_files(prepared.candidates)
    txn.read_whole_table()
    if prepared.path == row_level.NOTHING:  # as before the template: a partition-only plan of no file is a no-op
        return (_remove_whole_files([])[0] if cond.references_only(set(snapshot.partition_columns)) else {}), []
    outcome = deleting.execute(prepared, txn)
    return outcome.metrics, list(outcome.actions)


def _remove_whole_files(files: list[AddFile]) -> tuple[dict[str, Any], list[RemoveFile]]:
    ts = now_ms()
    removes = [a.remove(ts) for a in files]
    deleted = 0
    for a in files:
        deleted += (num_records_of(a.stats) or 0) - (a.deletion_vector.cardinality if a.deletion_vector else 0)
    metrics = {"numRemovedFiles": len(removes), "numAddedFiles": 0, "numAddedChangeFiles": 0,
               **dv_counts([(a.deletion_vector is not None, False) for a in files]),
               "numDeletedRows": deleted, "numCopiedRows": 0, "numAddedBytes": 0,
               "numRemovedBytes": sum(a.size for a in files)}
    return metrics, removes


def _delete_with_dvs(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, candidates: list[AddFile],
                     condition: BoundCondition) -> tuple[dict[str, Any], list[Any]]:
    if not plan.files:
        return {}, []
    matches = condition.matching(match_frame(spark, snapshot, plan))
    outcome = mark_rows(spark, snapshot.table_root, plan, candidates, matches, FILE_PATH_COL, ROW_INDEX_COL)
    metrics = {"numRemovedFiles": outcome.removed_files, "numAddedFiles": 0, "numAddedChangeFiles": 0,
               **outcome.dv_metrics(), "numDeletedRows": outcome.newly_marked_rows, "numCopiedRows": 0,
               "numAddedBytes": 0, "numRemovedBytes": outcome.removed_bytes}
    return metrics, outcome.actions


def _delete_copy_on_write(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, candidates: list[AddFile],
                          condition: BoundCondition) -> tuple[dict[str, Any], list[Any]]:
    """Rewrite every file that has a matching row, keeping the rows that do not match."""
    if not plan.files:
        return {}, []
    t0 = time.monotonic()
    df = logical_frame(spark, snapshot, plan, include_row_index=True)
    touched_idx = sorted(r[0] for r in condition.matching(df).select(FILE_INDEX_COL).distinct().collect())
    scan_ms = int((time.monotonic() - t0) * 1000)
    if not touched_idx:
        return {}, []
    t1 = time.monotonic()
    sub = plan.restricted(touched_idx)
    kept = condition.not_matching(row_tracking.scan_frame(spark, snapshot, sub))
    kept, kept_ids = row_tracking.materialize(kept, snapshot)  # row ids and versions kept (row tracking)
    md = snapshot.metadata
    new_adds = write_table_files(kept, snapshot.table_root, snapshot.storage, md, snapshot.protocol, extra=kept_ids)
    cdc: list[AddCDCFile] = []
    if cdf_enabled(md):  # the change feed's rows: the deleted ones (the copied rows did not change)
        deleted = condition.matching(logical_frame(spark, snapshot, sub))
        cdc = write_change_files(with_change_type(deleted, DELETE), snapshot)
    rewrite_ms = int((time.monotonic() - t1) * 1000)
    ts = now_ms()
    touched = [candidates[i] for i in touched_idx]
    before = sum((num_records_of(a.stats) or 0) - (a.deletion_vector.cardinality if a.deletion_vector else 0)
                 for a in touched)
    copied = sum(num_records_of(a.stats) or 0 for a in new_adds)
    metrics = {"numRemovedFiles": len(touched), "numAddedFiles": len(new_adds), "numAddedChangeFiles": len(cdc),
               **dv_counts([(a.deletion_vector is not None, False) for a in touched]),
               "numDeletedRows": before - copied, "numCopiedRows": copied,
               "numAddedBytes": sum(a.size for a in new_adds), "numRemovedBytes": sum(a.size for a in touched),
               "scanTimeMs": scan_ms, "rewriteTimeMs": rewrite_ms}
    return metrics, [*[a.remove(ts) for a in touched], *new_adds, *cdc]
