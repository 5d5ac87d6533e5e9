"""MERGE by copy-on-write: every target file with a changed row is rewritten whole (its untouched rows copied), updated
and inserted rows are written beside them; the path taken when deletion vectors are off (``with_dvs`` is the other)."""

from __future__ import annotations

import functools
import time
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dvlake.commands.dml.cdc_write import cdf_enabled
from dvlake.commands.dml.dv_marking import dv_counts
from dvlake.commands.dml.merge.frames import flat_target
from dvlake.commands.dml.merge.prepared import Matches, PreparedMerge
from dvlake.commands.dml.merge.repartition import repartition_before_write
from dvlake.commands.dml.merge.spec import MARKED, N_INSERT, WRITTEN, updated_rows
from dvlake.commands.dml.merge.steps import (
    change_files,
    row_metrics,
    without_duplicate_matches,
)
from dvlake.commands.dml.shared import sub_plan, write_rows
from dvlake.commands.dml.template import Outcome
from dvlake.log.actions import Action, AddCDCFile, now_ms
from dvlake.log.stats import num_records_of
from dvlake.spark import row_tracking


def merge_copy_on_write(prep: PreparedMerge, found: Matches, *, general_insert_only: bool = False,
                        rewrite_matched_files: bool = False) -> Outcome:
    """MERGE without deletion vectors: the clause outcomes are counted in one pass over the changes; a second pass
    writes the updated and inserted rows with the untouched rows of every file a clause took a row from, and those
    files are removed.

    ``general_insert_only``: an insert-only MERGE run on the general path
    (``spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled=false``), where delta-spark still refuses a
    target row matched by two source rows; ``rewrite_matched_files`` (without deletion vectors) also rewrites every
    file with a matched row, copying its rows, as delta-spark's general path does."""
    spark, snapshot, plan, candidates, sides, schema, md = prep.spark, prep.snapshot, prep.plan, prep.candidates, \
        prep.sides, prep.schema, prep.md
    matches, root = found.matches, snapshot.table_root
    matched, not_matched, by_source = prep.matched, prep.not_matched, prep.by_source
    if matched or by_source or general_insert_only:
        matches = without_duplicate_matches(matches, sides, found.exempt and not general_insert_only, root)

    parts = []
    if matched:
        parts.append(prep.matched_outcomes(matches))
    if not_matched:
        parts.append(prep.insert_outcomes(prep.unmatched_sources(found)))
    if by_source:
        parts.append(prep.by_source_outcomes(prep.unmatched_targets(found, matches)))
    changes = functools.reduce(DataFrame.unionByName, parts)
    counts = {int(r[0]): int(r[1]) for r in changes.groupBy(sides.kind).count().collect()}
    scan_ms = int((time.monotonic() - found.scan_started) * 1000)

    t2 = time.monotonic()
    marks = changes.filter(F.col(sides.kind).isin(*MARKED)).select(sides.fid, sides.rid)
    ids = row_tracking.ids_frame(spark, snapshot, plan)  # row tracking: updated rows keep their target row's id
    new_rows = row_tracking.with_kept_ids(changes.filter(F.col(sides.kind).isin(*WRITTEN)), ids, sides.fid, sides.rid,
                                          [f.name for f in schema.fields], keep_commit_version=False)
    changed = any(counts.get(k, 0) for k in MARKED)
    touched_by = matches if rewrite_matched_files else marks
    touched_idx = sorted(int(r[0]) for r in touched_by.select(sides.fid).distinct().collect()) \
        if changed or rewrite_matched_files else []
    any_marked = bool(touched_idx)
    actions: list[Action] = []
    metrics: dict[str, Any] = {}
    if any_marked:
        touched_plan = sub_plan(plan, touched_idx)
        positions = F.array(*[F.lit(i) for i in touched_idx])
        kept = flat_target(spark, snapshot, touched_plan, sides)
        kept = kept.withColumn(sides.fid, F.element_at(positions, F.col(sides.fid) + 1))
        kept = kept.join(marks, [sides.fid, sides.rid], "left_anti")
        copied_rows = row_tracking.with_kept_ids(kept.select(*prep.old_row, sides.fid, sides.rid), ids, sides.fid, sides.rid,
                                                 [f.name for f in schema.fields], keep_commit_version=True)
        touched = [candidates[i] for i in touched_idx]
        ts = now_ms()
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
    updated = updated_rows(counts)
    new_adds = (write_rows(repartition_before_write(spark, written, md), root, snapshot, md, snapshot.protocol)
                if (inserted or updated or any_marked) else [])
    total_written = sum(num_records_of(a.stats) or 0 for a in new_adds)
    copied = total_written - inserted - updated if any_marked else 0
    actions += new_adds
    cdc: list[AddCDCFile] = []
    if changed and cdf_enabled(md):  # insert-only outcomes need none: their adds read as inserts (copies neither)
        cdc = change_files(spark, snapshot, plan, changes, sides, prep.old_row, schema, md, touched_positions)
        actions += cdc
    rewrite_ms = int((time.monotonic() - t2) * 1000)
    metrics.update(row_metrics(found.num_source_rows, counts, copied))
    metrics.update({"numTargetFilesAdded": len(new_adds), "numTargetFilesRemoved": files_removed,
                    "numTargetBytesAdded": sum(a.size for a in new_adds), "numTargetBytesRemoved": bytes_removed,
                    "numTargetChangeFilesAdded": len(cdc), "materializeSourceTimeMs": found.materialize_ms, "scanTimeMs": scan_ms,
                    "rewriteTimeMs": rewrite_ms})
    return Outcome(actions, metrics)
