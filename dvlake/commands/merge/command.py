"""The MERGE command: checks, the source prepared once, the matches, and the path taken (insert-only, deletion vectors,
copy-on-write).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from dvlake.commands.cdc_write import cdf_enabled, check_no_reserved_columns
from dvlake.commands.dml import (
    Committed,
    as_column,
    run_row_level,
    sub_plan,
    use_dvs,
    write_rows,
)
from dvlake.commands.dv_marking import counted, dv_counts
from dvlake.commands.dv_pairs import PairWatch
from dvlake.commands.merge.clauses import clause_frame, no_value
from dvlake.commands.merge.evolution import evolved_metadata, evolves
from dvlake.commands.merge.frames import (
    Sides,
    flat_target,
    matching_pairs,
    old_row_columns,
    resolved_names,
    with_unqualified,
    wrap_source,
    wrap_target,
)
from dvlake.commands.merge.insert_only import merge_insert_only
from dvlake.commands.merge.names import SOURCE_ONLY, TARGET_ONLY
from dvlake.commands.merge.pruning import target_only
from dvlake.commands.merge.source import materializes
from dvlake.commands.merge.spec import (
    M_DELETE,
    M_UPDATE,
    MARKED,
    MATCHED,
    N_INSERT,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    S_DELETE,
    S_UPDATE,
    WRITTEN,
    MergeClause,
    MergeSpec,
)
from dvlake.commands.merge.steps import (
    Gathered,
    broadcastable,
    change_files,
    commit_merge,
    gathering_marks,
    now,
    row_metrics,
    unmatched_target,
    without_duplicate_matches,
)
from dvlake.commands.merge.with_dvs import merge_with_dvs
from dvlake.commands.store_assign import casting
from dvlake.config import (
    MERGE_DVS_PERSISTENT,
    MERGE_INSERT_ONLY_FAST_PATH,
)
from dvlake.errors import (
    DeltaAnalysisException,
    NonLastClauseOmitConditionError,
)
from dvlake.log import features, generated
from dvlake.log.actions import Action, AddCDCFile
from dvlake.log.condition import Condition
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import num_records_of
from dvlake.spark import row_tracking
from dvlake.spark.layout import logical_struct
from dvlake.spark.scan import ScanPlan, plan_scan, prune_plan
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
            parsed.refuse_subqueries(f"{what} condition of MERGE operation")
    root = normalize_table_root(path)
    return run_row_level(spark, root, "MERGE", lambda snapshot: merge_once(spark, snapshot, spec))


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


def merge_once(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec) -> Committed:
    """One attempt at ``snapshot`` (raises the concurrency exceptions instead of retrying)."""
    started = time.monotonic()
    root = snapshot.table_root
    features.check_can_write(snapshot.protocol, snapshot.metadata, root)
    check_no_reserved_columns(snapshot.metadata, root)  # before any data is read or written
    txn = OptimisticTransaction(root, snapshot)
    plan = plan_scan(spark, snapshot)
    txn.read_whole_table()

    evolving = evolves(spark, spec)
    new_md = evolved_metadata(snapshot, spec, evolving)
    if new_md is not None:
        txn.update_metadata(new_md)
    md = new_md or snapshot.metadata
    schema = logical_struct(md.schema)
    gen_exprs = generated.expressions(txn.protocol, md)  # computed where a clause does not assign them
    old_columns = [f.name for f in plan.logical_schema.fields]
    lower_t = {c.lower() for c in old_columns}
    sides, names = resolved_names(spark, spec, plan, schema)
    where = f"MERGE INTO {root}"
    on = as_column(spec.condition)
    matched = [c for c in spec.clauses if c.kind == MATCHED]
    not_matched = [c for c in spec.clauses if c.kind == NOT_MATCHED]
    by_source = [c for c in spec.clauses if c.kind == NOT_MATCHED_BY_SOURCE]
    plan = _files_to_read(spark, snapshot, plan, spec, sides, by_source)
    adds = snapshot.add_files()
    candidates = [adds[i] for i in plan.rows_indexes]
    txn.read_files(candidates)  # a file proven unable to match (or be taken by a BY SOURCE clause) was not read
    rules = casting(spark, allow_missing=evolving)
    old_row = old_row_columns(plan.logical_schema, schema, rules)

    def target_frame(p: Any) -> DataFrame:
        return wrap_target(flat_target(spark, snapshot, p, sides), sides)

    def old_value(name: str) -> Column:
        if name.lower() in lower_t:
            return F.col(sides.tgt).getField(next(c for c in old_columns if c.lower() == name.lower()))
        return F.lit(None).cast(schema[name].dataType)

    null_value = no_value

    insert_kinds = {"insert": N_INSERT}
    fast = str(spark.conf.get(MERGE_INSERT_ONLY_FAST_PATH, "true")).lower() == "true"
    if not matched and not by_source and fast:
        return merge_insert_only(spark, snapshot, spec, txn, plan, sides, names, on, not_matched, schema, md, evolving,
                            where, target_frame, null_value, started, rules)

    t0 = time.monotonic()
    source, num_source_rows, broadcast = _prepared_source(spark, spec, sides)
    materialize_ms = int((time.monotonic() - t0) * 1000)
    src = wrap_source(source, sides, with_id=True)

    t1 = time.monotonic()
    unwrapped = flat_target(spark, snapshot, plan, sides)
    target = wrap_target(unwrapped, sides)
    joined = matching_pairs(source, unwrapped, on, sides)
    exempt = len(matched) == 1 and matched[0].action == "delete" and matched[0].condition is None
    with_dvs = use_dvs(spark, snapshot, MERGE_DVS_PERSISTENT)
    gather = with_dvs and bool(matched) and not by_source and not exempt and broadcast
    not_gathered: tuple[DataFrame, PairWatch, str | None] = (joined, PairWatch(None), None)
    joined, watch, index_col = gathering_marks(spark, joined, plan, sides, matched) if gather else not_gathered
    matches, num_pairs = counted(joined, "matched_pairs")
    # every source row that matched, taken before duplicates are dropped below: a source row whose target row
    # another source row already deletes still matched, and must never reach a NOT MATCHED clause
    # (only ever the right side of a left anti join: no distinct, which would shuffle; broadcast when few)
    matched_sources = matches.select(sides.sid)
    if broadcastable(spark, matched_sources.schema, num_pairs):
        matched_sources = F.broadcast(matched_sources)
    if with_dvs and (matched or by_source):
        if exempt:  # duplicates are harmless to a lone unconditional delete, but each row is counted (and fed) once
            matches = matches.dropDuplicates([sides.fid, sides.rid])
        return merge_with_dvs(spark, snapshot, spec, txn, plan, candidates, sides, names, schema, md, evolving, where,
                               rules, src, target, matches, matched_sources, num_pairs, exempt, old_row,
                               old_value, (num_source_rows, materialize_ms, t1, started), new_md is not None,
                               Gathered(watch, index_col))
    if matched or by_source:
        matches = without_duplicate_matches(matches, sides, exempt, root)

    parts = []
    if matched:
        parts.append(clause_frame(matches, matched, {"update": M_UPDATE, "delete": M_DELETE}, schema, sides, old_value,
                                   evolving, where, rules, generated=gen_exprs))
    if not_matched:
        unmatched_src = with_unqualified(src.join(matched_sources, sides.sid, "left_anti"), names, SOURCE_ONLY)
        parts.append(clause_frame(unmatched_src, not_matched, insert_kinds, schema, sides, null_value, evolving, where,
                                   rules, generated=gen_exprs))
    if by_source:
        unmatched_tgt = with_unqualified(unmatched_target(spark, target, matches, sides, num_pairs), names, TARGET_ONLY)
        parts.append(clause_frame(unmatched_tgt, by_source, {"update": S_UPDATE, "delete": S_DELETE}, schema, sides,
                                   old_value, evolving, where, rules, generated=gen_exprs))
    changes = functools.reduce(DataFrame.unionByName, parts)
    counts = {int(r[0]): int(r[1]) for r in changes.groupBy(sides.kind).count().collect()}
    scan_ms = int((time.monotonic() - t1) * 1000)

    t2 = time.monotonic()
    marks = changes.filter(F.col(sides.kind).isin(*MARKED)).select(sides.fid, sides.rid)
    ids = row_tracking.ids_frame(spark, snapshot, plan)  # row tracking: updated rows keep their target row's id
    new_rows = row_tracking.with_kept_ids(changes.filter(F.col(sides.kind).isin(*WRITTEN)), ids, sides.fid, sides.rid,
                                          [f.name for f in schema.fields], keep_commit_version=False)
    any_marked = any(counts.get(k, 0) for k in MARKED)
    actions: list[Action] = []
    metrics: dict[str, Any] = {}
    if any_marked:
        touched_idx = sorted(int(r[0]) for r in marks.select(sides.fid).distinct().collect())
        touched_plan = sub_plan(plan, touched_idx)
        positions = F.array(*[F.lit(i) for i in touched_idx])
        kept = flat_target(spark, snapshot, touched_plan, sides)
        kept = kept.withColumn(sides.fid, F.element_at(positions, F.col(sides.fid) + 1))
        kept = kept.join(marks, [sides.fid, sides.rid], "left_anti")
        copied_rows = row_tracking.with_kept_ids(kept.select(*old_row, sides.fid, sides.rid), ids, sides.fid, sides.rid,
                                                 [f.name for f in schema.fields], keep_commit_version=True)
        touched = [candidates[i] for i in touched_idx]
        ts = now()
        actions += [a.remove(ts) for a in touched]
        metrics.update(dv_counts([(a.deletion_vector is not None, False) for a in touched], "numTarget"))
        files_removed, bytes_removed = len(touched), sum(a.size for a in touched)
        touched_positions = touched_idx
        written = new_rows.unionByName(copied_rows)
    else:
        metrics.update(dv_counts([], "numTarget"))
        files_removed = bytes_removed = 0
        touched_positions = []
        written = new_rows
    inserted = counts.get(N_INSERT, 0)
    updated = counts.get(M_UPDATE, 0) + counts.get(S_UPDATE, 0)
    new_adds = write_rows(written, root, snapshot, md, txn.protocol) if (inserted or updated or any_marked) else []
    total_written = sum(num_records_of(a.stats) or 0 for a in new_adds)
    copied = total_written - inserted - updated if any_marked else 0
    actions += new_adds
    cdc: list[AddCDCFile] = []
    if any_marked and cdf_enabled(md):  # insert-only outcomes need none: their adds read as inserts
        cdc = change_files(spark, snapshot, plan, changes, sides, old_row, schema, md, touched_positions)
        actions += cdc
    rewrite_ms = int((time.monotonic() - t2) * 1000)
    metrics.update(row_metrics(num_source_rows, counts, copied))
    metrics.update({"numTargetFilesAdded": len(new_adds), "numTargetFilesRemoved": files_removed,
                    "numTargetBytesAdded": sum(a.size for a in new_adds), "numTargetBytesRemoved": bytes_removed,
                    "numTargetChangeFilesAdded": len(cdc), "materializeSourceTimeMs": materialize_ms, "scanTimeMs": scan_ms,
                    "rewriteTimeMs": rewrite_ms})
    return commit_merge(spark, txn, spec, actions, metrics, started, new_md is not None)


def _files_to_read(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, spec: MergeSpec, sides: Sides,
                   by_source: list[MergeClause]) -> ScanPlan:
    """The target files a row of which can be matched, or taken by a NOT MATCHED BY SOURCE clause
    (``merge_pruning.py``)."""
    alias = spec.target_alias
    conditions = [target_only(spec.condition, alias, sides.tgt_columns, sides.unqualified_tgt)]
    every = [c for c in sides.tgt_columns if not alias or c.lower() != alias.lower()]
    for c in by_source:
        conditions.append(target_only(c.condition, alias, sides.tgt_columns, every) if c.condition is not None else None)
    if any(c is None for c in conditions):
        return plan  # some part may hold anywhere: every file is read
    return prune_plan(spark, snapshot, plan, [c for c in conditions if c is not None])
