"""Insert-only MERGE (only NOT MATCHED clauses): the source anti-joined with the target, new files added, no target
file touched.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.commands.dml import (
    Committed,
    unique_name,
    write_rows,
)
from dvlake.commands.dv_marking import dv_counts
from dvlake.commands.merge.clauses import clause_frame
from dvlake.commands.merge.frames import Sides, with_unqualified, wrap_source
from dvlake.commands.merge.names import SOURCE_ONLY, MergeNames
from dvlake.commands.merge.spec import N_INSERT, MergeClause, MergeSpec
from dvlake.commands.merge.steps import commit_merge, row_metrics
from dvlake.commands.store_assign import Casting
from dvlake.log import generated
from dvlake.log.actions import Metadata
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import num_records_of
from dvlake.txn.transaction import OptimisticTransaction


def merge_insert_only(spark: SparkSession, snapshot: Snapshot, spec: MergeSpec, txn: OptimisticTransaction, plan: Any,
                 sides: Sides, names: MergeNames, on: Column, clauses: list[MergeClause], schema: StructType,
                 md: Metadata, evolving: bool, where: str, target_frame: Callable[[Any], DataFrame],
                 null_value: Callable[[str], Column | None], started: float, rules: Casting) -> Committed:
    """No MATCHED / NOT MATCHED BY SOURCE clause: anti join, insert, add files; the target is only read."""
    from pyspark.sql import Observation

    t0 = time.monotonic()
    observation = Observation(unique_name("source_rows"))
    source = spec.source.observe(observation, F.count(F.lit(1)).alias("n"))
    src = wrap_source(source, sides, with_id=False)
    unmatched = with_unqualified(src.join(target_frame(plan), on, "left_anti"), names, SOURCE_ONLY)
    changes = clause_frame(unmatched, clauses, {"insert": N_INSERT}, schema, sides, null_value, evolving, where, rules,
                           generated=generated.expressions(txn.protocol, md))
    new_rows = changes.select(*[F.col(f"`{f.name}`") for f in schema.fields])
    new_adds = write_rows(new_rows, snapshot.table_root, snapshot, md, txn.protocol)
    inserted = sum(num_records_of(a.stats) or 0 for a in new_adds)
    try:
        num_source_rows = int(observation.get.get("n", 0))
    except Exception:  # noqa: BLE001 - no action observed the source (empty plan); count it
        num_source_rows = spec.source.count()
    metrics: dict[str, Any] = dv_counts([], "numTarget")
    metrics.update(row_metrics(num_source_rows, {N_INSERT: inserted}, 0))
    metrics.update({"numTargetFilesAdded": len(new_adds), "numTargetFilesRemoved": 0,
                    "numTargetBytesAdded": sum(a.size for a in new_adds), "numTargetBytesRemoved": 0,
                    "numTargetChangeFilesAdded": 0, "materializeSourceTimeMs": 0, "scanTimeMs": 0,
                    "rewriteTimeMs": int((time.monotonic() - t0) * 1000)})
    return commit_merge(spark, txn, spec, list(new_adds), metrics, started, txn.new_metadata is not None)
