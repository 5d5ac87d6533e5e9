"""RESTORE: make the latest version of a table equal to an older one, deletion vectors included.

The diff is keyed by (path, DV unique id) with "no DV" as a key of its own, as delta-spark's
RestoreTableCommand does: a file whose DV changed since the target version becomes
``remove(path, DV now)`` + ``add(path, DV then)``, so rows un-deleted by the restore come back
(delta-rs' RESTORE once diffed by path only and committed nothing, delta-rs#4613). Metadata is
the target version's; the protocol is the union of both (never a downgrade). Every data file
*and every deletion-vector file* the restored version needs is checked before anything is
committed: delta-spark checks data files only, and a missing DV file would fail every later read.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dvlake.commands.maintenance.vacuum import spark_conf
from dvlake.config import RESTORE_ENFORCE_RETENTION as ENFORCE_RETENTION
from dvlake.config import deleted_file_retention_ms
from dvlake.errors import RestoreError, RestoreMissingFilesError, TimeTravelBeyondRetentionError
from dvlake.log.actions import Action, AddFile, DomainMetadata, now_ms
from dvlake.log.protocol_ops import merge_protocols
from dvlake.log.replay import file_keys
from dvlake.log.segment import earliest_version
from dvlake.log.snapshot import Snapshot, _clean, version_at_timestamp
from dvlake.storage.base import Storage
from dvlake.storage.paths import absolute_file_location, normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

IGNORE_MISSING = "spark.sql.files.ignoreMissingFiles"
METRICS = ("tableSizeAfterRestore", "numOfFilesAfterRestore", "numRemovedFiles", "numRestoredFiles",
           "removedFilesSize", "restoredFilesSize")
#: The SQL result's columns (delta-spark's snake_case forms of the metrics, same order).
RESULT_COLUMNS = ("table_size_after_restore", "num_of_files_after_restore", "num_removed_files", "num_restored_files",
                  "removed_files_size", "restored_files_size")
MAX_LISTED_MISSING = 100


def restore(spark: Any, path: str, version: int | None = None, timestamp: Any = None) -> dict[str, int]:
    """Restore the table at ``path`` to ``version`` or ``timestamp``; returns delta-spark's metrics."""
    if (version is None) == (timestamp is None):
        raise RestoreError("RESTORE needs exactly one of a version or a timestamp", "DELTA_CANNOT_RESTORE_TABLE_VERSION")
    conf = spark_conf(spark)
    root = normalize_table_root(path)
    current = Snapshot.load(root)
    if timestamp is not None:
        version = version_at_timestamp(current.storage, root, current.listing, timestamp)
    if version is None:  # unreachable: exactly one of version/timestamp was checked above
        raise RestoreError("RESTORE could not resolve a version to restore to")
    earliest = earliest_version(current.listing)
    if version >= current.version or version < earliest:
        raise RestoreError(
            f"Cannot restore {root} to version {version}: the version to restore should be less than the last "
            f"available version ({current.version}) and not before the earliest one ({earliest}). "
            f"Available versions: [{earliest}, {current.version}].")
    target = Snapshot.load(root, version=version, storage=current.storage)
    _check_within_retention(conf(ENFORCE_RETENTION, "true").lower() == "true", current, version)

    key_now, key_then = file_keys(current.files), file_keys(target.files)
    to_add = target.files.filter(pc.invert(pc.is_in(key_then, value_set=key_now)))
    to_remove = current.files.filter(pc.invert(pc.is_in(key_now, value_set=key_then)))
    adds = [replace(AddFile.from_json(_clean(r)), data_change=True) for r in to_add.to_pylist()]
    if conf(IGNORE_MISSING, "false").lower() != "true":
        _check_files_exist(current.storage, root, adds, version)
    ts = now_ms()
    removes = [AddFile.from_json(_clean(r)).remove(ts) for r in to_remove.to_pylist()]
    metrics = {
        "tableSizeAfterRestore": _sum(target.files, "size"), "numOfFilesAfterRestore": target.num_files,
        "numRemovedFiles": len(removes), "numRestoredFiles": len(adds),
        "removedFilesSize": _sum(to_remove, "size"), "restoredFilesSize": _sum(to_add, "size"),
    }
    txn = OptimisticTransaction(root, current)
    txn.require_loose_dv_stats = False
    txn.read_whole_table()
    # RESTORE's diff depends on every current file *and its DV*: a concurrent remove or DV replacement of any of
    # them (even one the restore leaves alone) would be silently kept or undone, so each is a read file.
    txn.read_files({"path": p} for p in current.files.column("path").to_pylist())
    if target.metadata != current.metadata:
        txn.update_metadata(target.metadata)
    protocol = merge_protocols(current.protocol, target.protocol)
    if protocol != current.protocol:
        txn.update_protocol(protocol)
    actions: list[Action] = [*removes, *adds, *_domain_changes(current, target)]
    txn.commit(actions, "RESTORE",
               {"version": version if timestamp is None else None, "timestamp": _ts_param(timestamp)}, metrics)
    return metrics


def _sum(table: pa.Table, column: str) -> int:
    return int(pc.sum(table.column(column)).as_py() or 0) if table.num_rows else 0


def _ts_param(timestamp: Any) -> Any:
    if timestamp is None:
        return None
    return timestamp.isoformat() if isinstance(timestamp, (dt.date, dt.datetime)) else str(timestamp)


def _check_within_retention(enforce: bool, current: Snapshot, version: int) -> None:
    """delta-spark 4.1+: no RESTORE to a version older than delta.deletedFileRetentionDuration (VACUUM may have run)."""
    if not enforce:
        return
    retention = deleted_file_retention_ms(current.configuration)
    committed = current.commit_timestamp(version) if version in current.listing.commits else None
    if committed is not None and committed < now_ms() - retention:
        raise TimeTravelBeyondRetentionError(
            f"Cannot restore {current.table_root} to version {version}: it is older than the table's "
            f"delta.deletedFileRetentionDuration ({retention // 3_600_000} hours), so VACUUM may have deleted its files. "
            f"Raise the property, or set {ENFORCE_RETENTION} = false if you know its files are all still there.")


def _check_files_exist(storage: Storage, root: str, adds: list[AddFile], version: int) -> None:
    """Every data file and on-disk DV file the restored adds need, checked in parallel before committing."""
    needed: dict[str, str] = {}
    for a in adds:
        needed.setdefault(absolute_file_location(root, a.path), "data file")
        dv = a.deletion_vector
        if dv is not None and dv.is_on_disk:
            needed.setdefault(dv.absolute_path(root), "deletion vector file")
    locations = list(needed)
    with ThreadPoolExecutor(max_workers=16) as pool:
        present = list(pool.map(storage.exists, locations))
    missing = [loc for loc, ok in zip(locations, present, strict=True) if not ok]
    if missing:
        listed = "\n".join(f"  {needed[m]}: {m}" for m in missing[:MAX_LISTED_MISSING])
        raise RestoreMissingFilesError(
            f"Not all files from version {version} of {root} are available in the file system ({len(missing)} missing, "
            f"first {min(len(missing), MAX_LISTED_MISSING)} listed):\n{listed}\nA VACUUM probably deleted them; restore "
            f"a newer version, or set {IGNORE_MISSING} = true to restore without them (their rows will be lost).")


def _domain_changes(current: Snapshot, target: Snapshot) -> list[DomainMetadata]:
    """Domain metadata as of the target version: changed/added domains re-set, newer domains removed.

    Row tracking's high-water mark is the exception: it never goes back, or ids handed out after the
    target version would be handed out again (the restored files keep their own ids, all below it).
    """
    from dvlake.log.row_tracking import DOMAIN as ROW_TRACKING_DOMAIN

    out = [d for name, d in target.domains.items() if current.domains.get(name) != d and name != ROW_TRACKING_DOMAIN]
    out += [DomainMetadata(name, d.configuration, removed=True) for name, d in current.domains.items()
            if name not in target.domains and name != ROW_TRACKING_DOMAIN]
    return out
