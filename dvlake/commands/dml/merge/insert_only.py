"""Insert-only MERGE (only NOT MATCHED clauses): the source anti-joined with the target, new files added, no target
file touched.
"""

from __future__ import annotations

import time
from typing import Any

from pyspark.sql import Observation
from pyspark.sql import functions as F

from dvlake.commands.dml.dv_marking import dv_counts
from dvlake.commands.dml.merge.frames import flat_target, with_unqualified, wrap_source, wrap_target
from dvlake.commands.dml.merge.names import SOURCE_ONLY
from dvlake.commands.dml.merge.prepared import PreparedMerge
from dvlake.commands.dml.merge.repartition import repartition_before_write
from dvlake.commands.dml.merge.spec import N_INSERT
from dvlake.commands.dml.merge.steps import row_metrics
from dvlake.commands.dml.shared import (
    unique_name,
    write_rows,
)
from dvlake.commands.dml.template import Outcome
from dvlake.log.stats import num_records_of


def merge_insert_only(prep: PreparedMerge) -> Outcome:
    """No MATCHED / NOT MATCHED BY SOURCE clause: anti join, insert, add files; the target is only read."""
    spark, snapshot, sides, schema, md, spec = prep.spark, prep.snapshot, prep.sides, prep.schema, prep.md, prep.spec
    t0 = time.monotonic()
    observation = Observation(unique_name("source_rows"))
    source = spec.source.observe(observation, F.count(F.lit(1)).alias("n"))
    src = wrap_source(source, sides, with_id=False)
    target = wrap_target(flat_target(spark, snapshot, prep.plan, sides), sides)
    unmatched = with_unqualified(src.join(target, prep.on, "left_anti"), prep.names, SOURCE_ONLY)
    changes = prep.insert_outcomes(unmatched)
    new_rows = changes.select(*[F.col(f"`{f.name}`") for f in schema.fields])
    new_adds = write_rows(repartition_before_write(spark, new_rows, md), snapshot.table_root, snapshot, md, snapshot.protocol)
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
    return Outcome(list(new_adds), metrics)
