"""MERGE with deletion vectors: changed target rows marked in DVs, updated and inserted rows written to new files."""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import functions as F

from dvlake.commands.dml.cdc_write import cdf_enabled
from dvlake.commands.dml.dv_marking import mark_rows
from dvlake.commands.dml.merge.prepared import Matches, PreparedMerge
from dvlake.commands.dml.merge.repartition import repartition_before_write
from dvlake.commands.dml.merge.spec import M_DELETE, M_UPDATE, MARKED, N_INSERT, NOOP, S_UPDATE, updated_rows
from dvlake.commands.dml.merge.steps import change_files, multiple_matches, row_metrics
from dvlake.commands.dml.shared import (
    write_rows,
)
from dvlake.commands.dml.template import Outcome
from dvlake.log.actions import Action, AddCDCFile
from dvlake.log.stats import num_records_of
from dvlake.spark import row_tracking
from dvlake.spark.dv_build import Kinds


def merge_with_dvs(prep: PreparedMerge, found: Matches) -> Outcome:
    """MERGE with deletion vectors, in as few passes as the semantics allow.

    The marks (file, row, clause outcome) build the DVs, count each clause outcome and find a target row matched
    twice — on the driver before anything is written when the change is small (``dv_marking``); the raise comes
    before any commit either way. An upsert with a broadcast source gathers them in the job that materialized the
    matches (``dv_pairs``); otherwise one pass over the materialized matches (plus the unmatched target rows with
    NOT MATCHED BY SOURCE clauses) reads them.
    A second pass writes the updated and inserted rows; the inserted count is what it wrote less the updated."""
    spark, snapshot, plan, candidates, sides, schema, md = prep.spark, prep.snapshot, prep.plan, prep.candidates, \
        prep.sides, prep.schema, prep.md
    matches, num_pairs, root = found.matches, found.num_pairs, snapshot.table_root
    matched, not_matched, by_source = prep.matched, prep.not_matched, prep.by_source
    if matched:  # no-op rows kept: a target row matched twice fails even where no clause takes it
        matched_frame = prep.matched_outcomes(matches, keep_noop=True,
                                      index_col=found.index_col)
        taken = matched_frame.filter(F.col(sides.kind) != NOOP)
        marks = matched_frame.select(sides.fid, sides.rid, sides.kind)
    else:
        taken = None
        marks = matches.select(sides.fid, sides.rid, F.lit(NOOP).alias(sides.kind))
    by_source_frame = None
    if by_source:
        by_source_frame = prep.by_source_outcomes(prep.unmatched_targets(found, matches))
        marks = marks.unionByName(by_source_frame.select(sides.fid, sides.rid, sides.kind))
    checked_kinds: frozenset[int] = frozenset() if found.exempt else frozenset({NOOP, M_UPDATE, M_DELETE})
    # the pairs fed: one per match, and with BY SOURCE clauses at most one per target row besides
    bound: int | None = num_pairs
    if by_source:
        bound = None if any(f.num_records is None for f in plan.files) else \
            num_pairs + sum(int(f.num_records or 0) for f in plan.files)
    outcome = mark_rows(spark, root, plan, candidates, marks, sides.fid, sides.rid, by_index=True, rows=bound,
                        exact=not by_source and not found.exempt, kinds=Kinds(sides.kind, frozenset(MARKED), checked_kinds),
                        gathered=found.watch.pairs())
    if outcome.duplicate:
        raise multiple_matches(root, None)
    insert_frame = None
    if not_matched:
        insert_frame = prep.insert_outcomes(prep.unmatched_sources(found))
    counts = outcome.kind_counts
    scan_ms = int((time.monotonic() - found.scan_started) * 1000)

    t2 = time.monotonic()
    actions: list[Action] = list(outcome.actions)
    updated = updated_rows(counts)
    written = [f.filter(F.col(sides.kind) == k) for f, k in ((taken, M_UPDATE), (by_source_frame, S_UPDATE))
               if f is not None and counts.get(k, 0)]
    if insert_frame is not None:
        written.append(insert_frame)
    new_adds: list[Any] = []
    if written:
        rows = written[0]
        for w in written[1:]:
            rows = rows.unionByName(w)
        ids = row_tracking.ids_frame(spark, snapshot, plan)  # row tracking: updated rows keep their target row's id
        rows = row_tracking.with_kept_ids(rows, ids, sides.fid, sides.rid, [f.name for f in schema.fields],
                                          keep_commit_version=False)
        new_adds = write_rows(repartition_before_write(spark, rows, md), root, snapshot, md, snapshot.protocol,
                              skip_empty=True)
    counts[N_INSERT] = sum(num_records_of(a.stats) or 0 for a in new_adds) - updated
    actions += new_adds
    cdc: list[AddCDCFile] = []
    if outcome.touched and cdf_enabled(md):  # insert-only outcomes need none: their adds read as inserts
        changes = [f for f in (taken, by_source_frame, insert_frame) if f is not None]
        union = changes[0]
        for f in changes[1:]:
            union = union.unionByName(f)
        cdc = change_files(spark, snapshot, plan, union, sides, prep.old_row, schema, md,
                            outcome.touched_positions)
        actions += cdc
    metrics: dict[str, Any] = outcome.dv_metrics("numTarget")
    metrics.update(row_metrics(found.num_source_rows, counts, 0))
    metrics.update({"numTargetFilesAdded": len(new_adds), "numTargetFilesRemoved": outcome.removed_files,
                    "numTargetBytesAdded": sum(a.size for a in new_adds), "numTargetBytesRemoved": outcome.removed_bytes,
                    "numTargetChangeFilesAdded": len(cdc), "materializeSourceTimeMs": found.materialize_ms, "scanTimeMs": scan_ms,
                    "rewriteTimeMs": int((time.monotonic() - t2) * 1000)})
    return Outcome(actions, metrics)
