"""The MERGE command: checks, the source prepared once, the matches, and the path taken (insert-only, deletion vectors,
copy-on-write).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dvlake.commands.dml import template as row_level
from dvlake.commands.dml.cdc_write import check_no_reserved_columns
from dvlake.commands.dml.dv_marking import counted
from dvlake.commands.dml.dv_pairs import PairWatch
from dvlake.commands.dml.merge.copy_on_write import merge_copy_on_write
from dvlake.commands.dml.merge.evolution import evolved_metadata, evolves
from dvlake.commands.dml.merge.frames import (
    Sides,
    flat_target,
    matching_pairs,
    old_row_columns,
    resolved_names,
    wrap_source,
    wrap_target,
)
from dvlake.commands.dml.merge.identity import check_updates as check_identity_updates
from dvlake.commands.dml.merge.identity import with_moved_marks
from dvlake.commands.dml.merge.insert_only import merge_insert_only
from dvlake.commands.dml.merge.prepared import Matches, PreparedMerge, generated_of
from dvlake.commands.dml.merge.pruning import target_only
from dvlake.commands.dml.merge.source import materializes, refuse_nondeterministic
from dvlake.commands.dml.merge.spec import (
    MATCHED,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    MergeClause,
    MergeSpec,
)
from dvlake.commands.dml.merge.steps import broadcastable, gathering_marks, merge_parameters
from dvlake.commands.dml.merge.with_dvs import merge_with_dvs
from dvlake.commands.dml.shared import Committed, use_dvs
from dvlake.commands.dml.store_assign import casting
from dvlake.commands.dml.template import Outcome, Prepared
from dvlake.commands.writes.type_evolution import automatic_mode
from dvlake.config import (
    MERGE_DVS_PERSISTENT,
    MERGE_INSERT_ONLY_FAST_PATH,
)
from dvlake.errors import (
    DeltaAnalysisException,
    NonLastClauseOmitConditionError,
)
from dvlake.log.condition import Condition
from dvlake.log.snapshot import Snapshot
from dvlake.log.type_widening import AUTOMATIC_ALWAYS
from dvlake.spark.layout import logical_struct
from dvlake.spark.pruning import column_of
from dvlake.spark.scan import ScanPlan, plan_scan, plan_scan_any, schema_plan
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

_OMIT_CONDITION_CLASS = {MATCHED: ("MATCHED", "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION"),
                         NOT_MATCHED: ("NOT MATCHED [BY TARGET]", "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION"),
                         NOT_MATCHED_BY_SOURCE: ("NOT MATCHED BY SOURCE",
                                                 "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION")}


def _check_clauses(clauses: list[MergeClause]) -> None:
    if not clauses:
        raise DeltaAnalysisException("There must be at least one WHEN clause in a MERGE statement: add WHEN MATCHED, "
                                     "WHEN NOT MATCHED or WHEN NOT MATCHED BY SOURCE.", "DELTA_MERGE_MISSING_WHEN")
    for kind, (label, error_class) in _OMIT_CONDITION_CLASS.items():
        of_kind = [c for c in clauses if c.kind == kind]
        if any(c.condition is None for c in of_kind[:-1]):
            raise NonLastClauseOmitConditionError(
                f"When there are more than one {label} clauses in a MERGE statement, only the last {label} clause can "
                "omit the condition (the clauses are tried in order, so the ones after it could never run).",
                error_class)


def merge(spark: SparkSession, path: str, spec: MergeSpec) -> dict[str, Any]:
    """Run a MERGE described by ``spec``; returns the commit's operationMetrics."""
    _check_clauses(spec.clauses)
    for what, condition in [("search", spec.condition), *[(c.kind.upper(), c.condition) for c in spec.clauses]]:
        parsed = Condition.of(condition)
        if parsed is not None:
            parsed.refuse_subqueries("MERGE", f"{what} condition of MERGE operation")
    root = normalize_table_root(path)
    return row_level.run(MergeCommand(spark, spec), root)


def merge_once(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec) -> Committed:
    """One attempt at ``snapshot`` (raises the concurrency exceptions instead of retrying)."""
    return row_level.attempt(MergeCommand(spark, spec), snapshot)


def _prepared_source(spark: SparkSession, spec: MergeSpec, sides: Sides) -> tuple[DataFrame, int, bool]:
    """The source with a row id, materialized unless re-reading it cannot change the answer; its row count; and
    whether it is small enough to broadcast (the target is then read once and never shuffled)."""
    source = spec.source.withColumn(sides.sid, F.monotonically_increasing_id())
    if materializes(spark, spec.source):  # ``none`` only where re-reading the source cannot change the answer
        source, num_source_rows = counted(source, "source_rows")  # counted in the job that materializes it
    else:
        num_source_rows = source.count()
    broadcast = broadcastable(spark, source.schema, num_source_rows)
    return (F.broadcast(source) if broadcast else source), num_source_rows, broadcast


@dataclass
class MergeCommand:
    """MERGE in the row-level template: names, evolution and pruning in ``prepare``; the matches and the path
    (insert-only, deletion vectors, copy-on-write) in ``execute``."""

    spark: SparkSession
    spec: MergeSpec
    operation = "MERGE"
    reports_elided = True  # a MERGE that changed nothing still reports its metrics (numSourceRows, …)

    def prepare(self, snapshot: Snapshot) -> Prepared[PreparedMerge]:
        spark, spec = self.spark, self.spec
        root = snapshot.table_root
        check_no_reserved_columns(snapshot.metadata, root)  # before any data is read or written
        check_identity_updates(snapshot.protocol, snapshot.metadata, spec)
        plan = schema_plan(spark, snapshot)  # names first; the files once the conditions that prune them are known
        evolving = evolves(spark, spec)
        new_md = evolved_metadata(snapshot, spec, evolving, automatic_mode(spark) if evolving else AUTOMATIC_ALWAYS)
        md = new_md or snapshot.metadata
        schema = logical_struct(md.schema)
        sides, names = resolved_names(spark, spec, plan, schema)
        rules = casting(spark, allow_missing=evolving)
        old_row = old_row_columns(plan.logical_schema, schema, rules)
        by_source = [c for c in spec.clauses if c.kind == NOT_MATCHED_BY_SOURCE]
        plan = _files_to_read(spark, snapshot, plan, spec, sides, by_source)
        candidates = row_level.candidates_of(snapshot, plan)
        prep = PreparedMerge(spark, snapshot, spec, plan, candidates, sides, names, schema, md, evolving, rules,
                             column_of(spec.condition), old_row, new_md is not None, generated_of(snapshot, md))
        fast = str(spark.conf.get(MERGE_INSERT_ONLY_FAST_PATH, "true")).lower() == "true"
        if not prep.matched and not by_source and fast:
            path = row_level.INSERT_ONLY
        else:
            path = row_level.WITH_DVS if use_dvs(spark, snapshot, MERGE_DVS_PERSISTENT) else row_level.COPY_ON_WRITE
            refuse_nondeterministic(spark, spec.source)  # the source is read twice (delta-spark's check)
        # a file proven unable to match (or be taken by a BY SOURCE clause) is not read, so not registered
        return Prepared(snapshot, plan, candidates, path, prep, new_md, merge_parameters(spec))

    def execute(self, prepared: Prepared[PreparedMerge], txn: OptimisticTransaction) -> Outcome:
        prep = prepared.detail
        return with_moved_marks(self._run_path(prepared), txn, prep.snapshot.protocol, prep.root, prep.spec.source)

    def _run_path(self, prepared: Prepared[PreparedMerge]) -> Outcome:
        prep = prepared.detail
        if prepared.path == row_level.INSERT_ONLY:
            return merge_insert_only(prep)
        found = _matches(prep, with_dvs=prepared.path == row_level.WITH_DVS)
        if prepared.path == row_level.WITH_DVS and (prep.matched or prep.by_source):
            return merge_with_dvs(prep, found)
        general_insert_only = not prep.matched and not prep.by_source  # the insert-only fast path is switched off
        return merge_copy_on_write(prep, found, general_insert_only=general_insert_only,
                                   rewrite_matched_files=general_insert_only and prepared.path == row_level.COPY_ON_WRITE)

    def empty_metrics(self, outcome: Outcome) -> dict[str, Any]:
        return outcome.metrics


def _matches(prep: PreparedMerge, with_dvs: bool) -> Matches:
    """The source prepared once, the matched pairs materialized (and, for an upsert with a broadcast source on the
    DV path, their marks gathered in the same job)."""
    spark, sides, plan, matched = prep.spark, prep.sides, prep.plan, prep.matched
    t0 = time.monotonic()
    source, num_source_rows, broadcast = _prepared_source(spark, prep.spec, sides)
    materialize_ms = int((time.monotonic() - t0) * 1000)
    src = wrap_source(source, sides, with_id=True)

    t1 = time.monotonic()
    unwrapped = flat_target(spark, prep.snapshot, plan, sides)
    target = wrap_target(unwrapped, sides)
    joined = matching_pairs(source, unwrapped, prep.on, sides)
    exempt = len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None
    gather = with_dvs and bool(matched) and not prep.by_source and not exempt and broadcast
    not_gathered: tuple[DataFrame, PairWatch, str | None] = (joined, PairWatch(None), None)
    joined, watch, index_col = gathering_marks(spark, joined, plan, sides, matched) if gather else not_gathered
    matches, num_pairs = counted(joined, "matched_pairs")
    # every source row that matched, taken before duplicates are dropped below: a source row whose target row
    # another source row already deletes still matched, and must never reach a NOT MATCHED clause
    # (only ever the right side of a left anti join: no distinct, which would shuffle; broadcast when few)
    matched_sources = matches.select(sides.sid)
    if broadcastable(spark, matched_sources.schema, num_pairs):
        matched_sources = F.broadcast(matched_sources)
    if with_dvs and (matched or prep.by_source) and exempt:
        # duplicates are harmless to a lone unconditional delete, but each row is counted (and fed) once
        matches = matches.dropDuplicates([sides.fid, sides.rid])
    return Matches(src, target, matches, matched_sources, num_pairs, exempt, num_source_rows, materialize_ms, t1,
                   watch, index_col)


def _files_to_read(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, spec: MergeSpec, sides: Sides,
                   by_source: list[MergeClause]) -> ScanPlan:
    """The target files a row of which can be matched, or taken by a NOT MATCHED BY SOURCE clause
    (``merge_pruning.py``), planned from ``snapshot`` (``plan`` gives the schemas only): pruned before any file is
    described, so a MERGE into a few partitions of a large table builds objects for those files alone."""
    alias = spec.target_alias
    conditions = [target_only(spec.condition, alias, sides.tgt_columns, sides.unqualified_tgt)]
    every = [c for c in sides.tgt_columns if not alias or c.lower() != alias.lower()]
    for c in by_source:
        conditions.append(target_only(c.condition, alias, sides.tgt_columns, every) if c.condition is not None else None)
    if any(c is None for c in conditions):
        return plan_scan(spark, snapshot)  # some part may hold anywhere: every file is read
    return plan_scan_any(spark, snapshot, [c for c in conditions if c is not None])
