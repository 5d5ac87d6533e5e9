"""Auto-compaction: a DML that leaves bad files behind compacts them in a follow-up commit of its own.

With the table property ``delta.autoOptimize.autoCompact`` (delta-spark's; ``true``/``auto``/
``legacy`` turn it on, default off), after a DML commit dvlake looks at the partitions that
commit touched. A partition is compacted when a file the commit added (or re-added with a new
DV) now has more than ``optimize.maxDeletedRowsRatio`` of its rows deleted, or when it holds at
least ``autoCompact.minNumFiles`` (50) files smaller than ``autoCompact.maxFileSize`` (128 MiB).
This is the design's "compact as part of the DML operation that pushes the file over the
invalid-row threshold", as a separate OPTIMIZE commit with ``auto: true``.

The DML has already committed when this runs: any failure here is logged and swallowed, so it
can never fail or undo the DML (its commit stands; the next DML or an OPTIMIZE tries again).

It is the last post-commit hook of ``txn/hooks.py``, registered here (the transaction layer cannot import
Spark): after a commit of DELETE, UPDATE or MERGE whose transaction carries the command's Spark session
(``row_level.begin`` puts it in ``hook_context``), ``maybe_auto_compact`` runs once. Its own OPTIMIZE
commit carries no session, so it never compacts again after itself.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from pyspark.sql import SparkSession

from dvlake.commands.maintenance.optimize import OptimizeOutcome, OptimizeRequest, OptimizeSettings, dv_needs_purge, optimize
from dvlake.config import (
    AUTO_COMPACT,
    AUTO_COMPACT_MAX_FILE_SIZE,
    AUTO_COMPACT_MIN_NUM_FILES,
    DEFAULT_AUTO_COMPACT_MAX_FILE_SIZE,
    DEFAULT_AUTO_COMPACT_MIN_NUM_FILES,
)
from dvlake.log.actions import AddFile
from dvlake.log.replay import read_commit
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import normalize_table_root
from dvlake.txn import hooks

log = logging.getLogger(__name__)

ON_VALUES = ("true", "auto", "legacy")


def auto_compact_enabled(configuration: dict[str, str]) -> bool:
    return str(configuration.get(AUTO_COMPACT, "false")).strip().lower() in ON_VALUES


def maybe_auto_compact(spark: SparkSession, path: str, version: int | None) -> OptimizeOutcome | None:
    """Compact what the DML commit ``version`` left behind, when the table asks for it; never raises."""
    if version is None:
        return None
    try:
        return _auto_compact(spark, normalize_table_root(path), version)
    except Exception as exc:  # noqa: BLE001 - the DML committed; compaction is a best-effort follow-up
        log.warning("auto-compaction after version %s of %s failed (the DML's commit stands): %s", version, path, exc)
        return None


#: The operations auto-compaction follows, and the ``hook_context`` key their transactions carry the session under.
DML_OPERATIONS = frozenset({"DELETE", "UPDATE", "MERGE"})
SESSION = "spark"


def after_dml_commit(event: hooks.AfterCommit) -> None:
    """The post-commit hook: auto-compaction after a DML commit made with a Spark session."""
    spark = event.context.get(SESSION)
    # the committed metadata says whether the table asks for compaction: no snapshot is loaded when it does not
    if spark is not None and event.operation in DML_OPERATIONS and auto_compact_enabled(event.metadata.configuration):
        maybe_auto_compact(spark, event.table_root, event.version)


hooks.register("auto-compact", after_dml_commit)


def _auto_compact(spark: SparkSession, root: str, version: int) -> OptimizeOutcome | None:
    snapshot = Snapshot.load(root)
    if not auto_compact_enabled(snapshot.configuration):
        return None
    if version not in snapshot.listing.commits:
        return None
    lines = read_commit(snapshot.storage, snapshot.listing.commits[version][0])
    touched_paths = {ln["add"]["path"] for ln in lines if ln.get("add")}
    touched_parts = {_key(ln[k].get("partitionValues") or {}) for ln in lines for k in ("add", "remove") if ln.get(k)}
    if not touched_parts:
        return None
    max_size = int(str(spark.conf.get(AUTO_COMPACT_MAX_FILE_SIZE, str(DEFAULT_AUTO_COMPACT_MAX_FILE_SIZE))))
    min_files = int(str(spark.conf.get(AUTO_COMPACT_MIN_NUM_FILES, str(DEFAULT_AUTO_COMPACT_MIN_NUM_FILES))))
    session = OptimizeSettings.from_session(spark)
    settings = OptimizeSettings(min_file_size=max_size, max_file_size=max_size,
                                max_deleted_rows_ratio=session.max_deleted_rows_ratio, max_threads=session.max_threads,
                                repartition=session.repartition)
    by_part: dict[tuple[tuple[str, Any], ...], list[AddFile]] = defaultdict(list)
    for a in snapshot.add_files():
        key = _key(a.partition_values)
        if key in touched_parts:
            by_part[key].append(a)
    chosen = [dict(k) for k, files in by_part.items()
              if any(a.path in touched_paths and dv_needs_purge(a, settings.max_deleted_rows_ratio) for a in files)
              or sum(1 for a in files if a.size < max_size) >= min_files]
    if not chosen:
        return None
    return optimize(spark, root, OptimizeRequest(auto=True, partitions=chosen, settings=settings))


def _key(partition_values: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(partition_values.items()))
