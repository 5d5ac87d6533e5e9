"""UPDATE: mark the matched rows in deletion vectors and write only the updated rows, or rewrite files.

As delta-spark's UpdateCommand:
1. no condition, or one on partition columns only → the candidate files are removed whole and all
   their rows rewritten with the assignments applied (no DVs, even on the DV path);
2. DVs on (``delta.enableDeletionVectors`` and ``spark.databricks.delta.update.deletionVectors.persistent``
   not false) → one job for a small change: the scan of the live rows the condition matches writes them,
   updated, into new files and gathers their (file, row) pairs as it goes (``dv_pairs.py``); the pairs are
   marked in each touched file's DV by the same code as DELETE (``dv_marking.py``: on the driver for a small
   change; for a large one the pairs are read again and the DVs built on executors);
3. DVs off → copy-on-write: every touched file is rewritten, matched rows updated, others copied.
One commit; a conflict with a concurrent DML on the same files re-runs the command on the new snapshot.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dvlake.commands.dml import template as row_level
from dvlake.commands.dml.cdc_write import cdf_enabled, check_no_reserved_columns, with_change_type, write_change_files
from dvlake.commands.dml.checks import refuse_set_value_kinds, require_deterministic
from dvlake.commands.dml.dv_marking import driver_room, dv_counts, mark_rows
from dvlake.commands.dml.dv_pairs import watch_pairs
from dvlake.commands.dml.shared import (
    Committed,
    as_column,
    assigned_columns,
    predicate_param,
    resolve_assignments,
    sub_plan,
    unique_name,
    write_rows,
)
from dvlake.commands.dml.store_assign import Casting, casting
from dvlake.commands.dml.template import Outcome, Prepared
from dvlake.config import UPDATE_DVS_PERSISTENT
from dvlake.errors import InvalidArgumentError
from dvlake.log import generated, identity
from dvlake.log.actions import Action, AddCDCFile, AddFile, now_ms
from dvlake.log.cdf_plan import UPDATE_POSTIMAGE, UPDATE_PREIMAGE
from dvlake.log.condition import Condition
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import num_records_of
from dvlake.spark import constraints, row_tracking
from dvlake.spark.bound import bind
from dvlake.spark.dv_scan import FILE_INDEX_COL, ROW_INDEX_COL
from dvlake.spark.names import case_sensitive
from dvlake.spark.scan import ScanPlan, logical_frame, plan_scan
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

Assignments = dict[str, str | Column]


def update(spark: SparkSession, path: str, assignments: Assignments, condition: str | Column | Condition | None = None, *,
           alias: str | None = None) -> dict[str, Any]:
    """Set ``assignments`` on the rows matching ``condition``; returns the commit's operationMetrics ({} if none;
    an empty UPDATE commit is recorded when ``spark.databricks.delta.skipRecordingEmptyCommits`` is false).

    ``alias`` names the table in the condition and values (``t.id``) as ``UPDATE … AS t`` does.
    """
    if not assignments:
        raise InvalidArgumentError("UPDATE needs at least one assignment, e.g. set={'col': 'col + 1'}")
    root = normalize_table_root(path)
    return row_level.run(UpdateCommand.of(spark, assignments, condition, alias), root)


def update_once(spark: SparkSession, snapshot: Snapshot, assignments: Assignments,
                condition: str | Column | Condition | None, alias: str | None = None) -> Committed:
    """One attempt at ``snapshot`` (raises the concurrency exceptions instead of retrying)."""
    return row_level.attempt(UpdateCommand.of(spark, assignments, condition, alias), snapshot)


@dataclass
class UpdateCommand:
    """UPDATE in the row-level template: condition and assignments resolved and checked in ``prepare`` (before
    any data is read), the path run in ``execute``."""

    spark: SparkSession
    assignments: Assignments
    condition: Condition | None
    alias: str | None
    operation = "UPDATE"
    reports_elided = False

    @classmethod
    def of(cls, spark: SparkSession, assignments: Assignments, condition: str | Column | Condition | None,
           alias: str | None) -> UpdateCommand:
        """The command with its condition parsed once (and its subqueries refused) for every attempt."""
        parsed = Condition.of(condition, alias)
        if parsed is not None:
            parsed.refuse_subqueries("UPDATE")
        return cls(spark, assignments, parsed, alias)

    def prepare(self, snapshot: Snapshot) -> Prepared[PreparedUpdate]:
        spark, parsed, alias = self.spark, self.condition, self.alias
        root = snapshot.table_root
        check_no_reserved_columns(snapshot.metadata, root)  # before any data is read or written
        plan = plan_scan(spark, snapshot, parsed)
        schema = plan.logical_schema
        # from here on the condition is the Column Spark evaluates: the user's text, ``*`` spelled as the table's columns
        bound = bind(spark, parsed, schema) if parsed is not None else None
        condition = bound.column if bound is not None else None
        paths = resolve_assignments(schema, self.assignments, f"UPDATE {root}", strip_qualifier=alias,
                                    case_sensitive=case_sensitive(spark))
        if identity.enforced(snapshot.protocol):  # before any data is read
            identity.refuse_update(identity.columns(snapshot.schema), [p[0] for p in paths])
        empty = _aliased(spark.createDataFrame([], schema), alias)
        if condition is not None:
            empty.filter(condition).schema  # noqa: B018 - analysis only: a bad condition fails before any scan
            require_deterministic(empty, condition, "UPDATE", parsed.display() if parsed else str(condition), parsed)
        for value in self.assignments.values():
            refuse_set_value_kinds(empty, as_column(value), value if isinstance(value, str) else None, "UpdateCommand")
        rules = casting(spark)
        columns = assigned_columns(empty, schema, paths, _same_column, rules)  # validates types before any scan
        assigned = {path[0] for path in paths}
        resolved = Assigned(paths, rules, columns, {name: text for name, text in generated.expressions(
            snapshot.protocol, snapshot.metadata).items() if name not in assigned})
        path = row_level.choose_path(spark, snapshot, plan, parsed, UPDATE_DVS_PERSISTENT)
        candidates = row_level.candidates_of(snapshot, plan)
        return Prepared(snapshot, plan, candidates, path,
                        PreparedUpdate(spark, snapshot, plan, candidates, resolved, condition, alias),
                        parameters={"predicate": predicate_param(parsed)})

    def execute(self, prepared: Prepared[PreparedUpdate], txn: OptimisticTransaction) -> Outcome:
        prep = prepared.detail
        metrics: dict[str, Any]
        actions: list[Action]
        if prepared.path == row_level.NOTHING:
            metrics, actions = {}, []
        elif prepared.path == row_level.PARTITION_ONLY:
            metrics, actions = _rewrite_whole_files(prep)
        elif prepared.path == row_level.WITH_DVS:
            metrics, actions = _update_with_dvs(prep)
        else:
            metrics, actions = _update_copy_on_write(prep)
        metrics["numAddedChangeFiles"] = sum(1 for a in actions if isinstance(a, AddCDCFile))
        return Outcome(actions, metrics)

    def empty_metrics(self, outcome: Outcome) -> dict[str, Any]:
        return {"numRemovedFiles": 0, "numAddedFiles": 0, **dv_counts([]), "numUpdatedRows": 0, "numCopiedRows": 0,
                "numAddedBytes": 0, "numRemovedBytes": 0, "scanTimeMs": 0, "rewriteTimeMs": 0, "numAddedChangeFiles": 0}


def _aliased(df: DataFrame, alias: str | None) -> DataFrame:
    return df.alias(alias) if alias else df


@dataclass(frozen=True)
class Assigned:
    """The resolved assignments (column path → value) and the cast rules they are applied with."""

    paths: dict[tuple[str, ...], Column]
    rules: Casting
    #: one Column per table column, the assignments applied (``assigned_columns``): names only, so the same Columns
    #: serve every frame of the table's columns (under the same alias) the command updates
    columns: list[Column]
    #: generated columns no assignment sets (name → expression): recomputed from the updated values, as
    #: delta-spark's ``generateUpdateExprsForGeneratedColumns`` does; an assigned one is checked on write
    recomputed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreparedUpdate:
    """One UPDATE planned on ``snapshot``, passed whole to the path it takes (partition-only, deletion vectors,
    copy-on-write) in place of seven positional parameters: a path cannot get two of them in the wrong order, and
    a new piece of the plan is added here once (as MERGE's ``PreparedMerge``)."""

    spark: SparkSession
    snapshot: Snapshot
    plan: ScanPlan
    #: the snapshot's add actions the plan reads, in the plan's order
    candidates: list[AddFile]
    assigned: Assigned
    #: the condition as the Column Spark evaluates (None: every row of the candidates)
    condition: Column | None
    #: the table's name in the condition and values (``UPDATE … AS t``)
    alias: str | None

    @property
    def matching(self) -> Column:
        """The condition, or true where there is none."""
        return self.condition if self.condition is not None else F.lit(True)

    def aliased(self, df: DataFrame) -> DataFrame:
        """``df`` under the table's alias, so the condition and values resolve ``t.col``."""
        return _aliased(df, self.alias)

    def updated(self, df: DataFrame, condition: Column | None) -> DataFrame:
        """``df`` with the assignments applied to the rows matching ``condition`` (all rows when None)."""
        return _updated(df, self.plan, self.assigned, condition)

    def change_files(self, matched: DataFrame) -> list[AddCDCFile]:
        """The change feed's files for the ``matched`` rows (none when the feed is off)."""
        return _change_files(self.snapshot, self.plan, self.assigned, matched)


def _same_column(name: str) -> Column:
    return F.col(f"`{name}`")


def _updated(df: DataFrame, plan: ScanPlan, resolved: Assigned, condition: Column | None) -> DataFrame:
    """``df`` with the assignments applied to the rows matching ``condition`` (all rows when None)."""
    schema = plan.logical_schema
    cols = resolved.columns
    if condition is None:
        return constraints.computed(df.select(*cols, *row_tracking.carried(df, None)), schema, resolved.recomputed)
    names = [f.name for f in schema.fields]
    matched = F.coalesce(condition, F.lit(False))
    flag = unique_name("updated")
    out = df.select(*[F.when(condition, new).otherwise(F.col(f"`{n}`")).alias(n)
                      for new, n in zip(cols, names, strict=True)],
                    *row_tracking.carried(df, matched), *([matched.alias(flag)] if resolved.recomputed else []))
    if not resolved.recomputed:
        return out
    return constraints.computed(out, schema, resolved.recomputed, F.col(flag)).drop(flag)


def _change_files(snapshot: Snapshot, plan: ScanPlan, resolved: Assigned, matched: DataFrame) -> list[AddCDCFile]:
    """With the change feed on: the matched rows as ``update_preimage`` and, updated, as ``update_postimage``."""
    if not cdf_enabled(snapshot.metadata):
        return []
    names = [F.col(f"`{f.name}`") for f in plan.logical_schema.fields]
    pre = with_change_type(matched.select(*names), UPDATE_PREIMAGE)
    # without row tracking's columns (``carried``): change files have the table's columns only
    post = with_change_type(_updated(matched, plan, resolved, None).select(*names), UPDATE_POSTIMAGE)
    return write_change_files(pre.unionByName(post), snapshot)


def _rewrite_whole_files(prep: PreparedUpdate) -> tuple[dict[str, Any], list[Action]]:
    """Partition-only (or no) condition: every row of the candidate files matches; rewrite them all, no DVs."""
    spark, snapshot, plan, candidates, condition = prep.spark, prep.snapshot, prep.plan, prep.candidates, prep.condition
    t0 = time.monotonic()
    new_adds = write_rows(prep.updated(prep.aliased(row_tracking.scan_frame(spark, snapshot, plan)), condition),
                          snapshot.table_root, snapshot)
    matched = prep.aliased(logical_frame(spark, snapshot, plan))
    cdc = prep.change_files(matched if condition is None else matched.filter(condition))
    ts = now_ms()
    updated = sum(num_records_of(a.stats) or 0 for a in new_adds)
    metrics = {"numRemovedFiles": len(candidates), "numAddedFiles": len(new_adds), "numUpdatedRows": updated,
               "numCopiedRows": 0, "numAddedBytes": sum(a.size for a in new_adds),
               "numRemovedBytes": sum(a.size for a in candidates), "scanTimeMs": 0,
               "rewriteTimeMs": int((time.monotonic() - t0) * 1000)}
    return metrics, [*[a.remove(ts) for a in candidates], *new_adds, *cdc]


def _update_with_dvs(prep: PreparedUpdate) -> tuple[dict[str, Any], list[Action]]:
    """One job for a small change: the scan that writes the updated rows also gathers their (file, row) pairs
    (``dv_pairs.py``), from which the driver builds the DVs. The count is the written files' row count. When
    the pairs did not all come back (a large or skewed change), ``mark_rows`` reads them with a scan of its own."""
    spark, snapshot, plan, candidates = prep.spark, prep.snapshot, prep.plan, prep.candidates
    t0 = time.monotonic()
    if row_tracking.materialized_columns(snapshot) is not None:
        # row tracking: the updated rows keep their ids, which the tracked scan carries
        base = row_tracking.tracked_frame(spark, snapshot, plan, keep_row_index=True)
    else:
        base = logical_frame(spark, snapshot, plan, include_row_index=True)
    live = prep.aliased(base).filter(prep.matching)
    watched, watch = watch_pairs(spark, live, plan, driver_room(spark, plan), FILE_INDEX_COL, ROW_INDEX_COL)
    rows = prep.aliased(watched.drop(FILE_INDEX_COL, ROW_INDEX_COL))
    new_adds = write_rows(prep.updated(rows, None), snapshot.table_root, snapshot, skip_empty=True)
    count = sum(num_records_of(a.stats) or 0 for a in new_adds)
    scan_ms = int((time.monotonic() - t0) * 1000)  # the scan and the write of the updated rows are one job
    t1 = time.monotonic()
    if count == 0:
        return {}, []
    outcome = mark_rows(spark, snapshot.table_root, plan, candidates, live, FILE_INDEX_COL, ROW_INDEX_COL,
                        by_index=True, rows=count, exact=True, gathered=watch.pairs())
    if not outcome.touched:  # cannot happen for live rows; the written files stay uncommitted (VACUUM drops them)
        return {}, []
    cdc = prep.change_files(prep.aliased(live.drop(FILE_INDEX_COL, ROW_INDEX_COL)))
    metrics = {"numRemovedFiles": len(outcome.touched), "numAddedFiles": len(new_adds), **outcome.dv_metrics(),
               "numUpdatedRows": outcome.newly_marked_rows, "numCopiedRows": 0,
               "numAddedBytes": sum(a.size for a in new_adds), "numRemovedBytes": 0, "scanTimeMs": scan_ms,
               "rewriteTimeMs": int((time.monotonic() - t1) * 1000)}
    return metrics, [*outcome.actions, *new_adds, *cdc]


def _update_copy_on_write(prep: PreparedUpdate) -> tuple[dict[str, Any], list[Action]]:
    """Every file with a matching row rewritten whole: matched rows updated, the others copied."""
    spark, snapshot, plan, candidates, cond = prep.spark, prep.snapshot, prep.plan, prep.candidates, prep.matching
    t0 = time.monotonic()
    df = prep.aliased(logical_frame(spark, snapshot, plan, include_row_index=True))
    counts = {r[0]: r[1] for r in df.filter(cond).groupBy(FILE_INDEX_COL).count().collect()}
    scan_ms = int((time.monotonic() - t0) * 1000)
    if not counts:
        return {}, []
    t1 = time.monotonic()
    touched_idx = sorted(counts)
    touched_plan = sub_plan(plan, touched_idx)
    new_adds = write_rows(prep.updated(prep.aliased(row_tracking.scan_frame(spark, snapshot, touched_plan)),
                                       prep.condition), snapshot.table_root, snapshot)
    cdc = prep.change_files(prep.aliased(logical_frame(spark, snapshot, touched_plan)).filter(cond))
    ts = now_ms()
    touched = [candidates[i] for i in touched_idx]
    updated = sum(counts.values())
    written = sum(num_records_of(a.stats) or 0 for a in new_adds)
    metrics = {"numRemovedFiles": len(touched), "numAddedFiles": len(new_adds), "numUpdatedRows": updated,
               "numCopiedRows": written - updated, "numAddedBytes": sum(a.size for a in new_adds),
               "numRemovedBytes": sum(a.size for a in touched), "scanTimeMs": scan_ms,
               "rewriteTimeMs": int((time.monotonic() - t1) * 1000)}
    metrics.update(dv_counts([(a.deletion_vector is not None, False) for a in touched]))
    return metrics, [*[a.remove(ts) for a in touched], *new_adds, *cdc]
