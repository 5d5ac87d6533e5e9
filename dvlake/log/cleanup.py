"""Log cleanup: after a checkpoint, drop commits and checkpoints older than ``delta.logRetentionDuration``.

As delta-spark's MetadataCleanup: the cutoff is ``now - delta.logRetentionDuration`` (default 30 days)
truncated to the start of its UTC day, and the log is cut only at a checkpoint ``C`` all of whose
earlier commits are older than the cutoff; every file of a version below ``C`` (commit, checkpoint,
checksum, compacted log) is deleted, oldest first, so readers always find a checkpoint and the
contiguous commits after it. Every version from ``C`` on stays reconstructable; time travel to an
older one fails with VersionNotFoundError naming the available range. With
``delta.requireCheckpointProtectionBeforeVersion = P`` nothing below ``P`` is removed unless the cut
reaches ``P`` (delta-spark's checkpointProtection).

The native scan's listing files (``SCAN_LISTINGS_SUBDIR``, written by large reads) go by the same cutoff, by their
modification time: a read rewrites its listing when the file is gone, so only a plan older than the retention could
miss one, and that fails with ``ScanListingError``, never reads rows without their DVs.
"""

from __future__ import annotations

import logging
import re

from dvlake.config import LOG_RETENTION, parse_interval_ms
from dvlake.log.actions import now_ms
from dvlake.log.segment import commit_timestamps, list_log, log_path
from dvlake.storage.base import Storage

log = logging.getLogger(__name__)

ENABLE_CLEANUP = "delta.enableExpiredLogCleanup"
CHECKPOINT_PROTECTION = "delta.requireCheckpointProtectionBeforeVersion"
DAY_MS = 86_400_000
MINUTE_MS = 60_000
_VERSIONED = re.compile(r"^(\d{20})\.(?:json|crc|checkpoint\..*parquet|checkpoint\..*json)$")
#: Where large reads leave their native-scan listing files, under the table root: inside ``_delta_log``, where no
#: Delta reader parses names it does not know and VACUUM never walks (``spark/scan_listing.py`` writes them).
SCAN_LISTINGS_SUBDIR = "_delta_log/_dvlake/scan"
_COMPACTED = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


def log_retention_ms(configuration: dict[str, str]) -> int:
    return parse_interval_ms(configuration.get(LOG_RETENTION, "interval 30 days"))


def cleanup_cut(storage: Storage, table_root: str, configuration: dict[str, str], now: int | None = None,
                retention_ms: int | None = None, granularity_ms: int = DAY_MS) -> int | None:
    """The checkpoint version below which the log may be deleted, or None when nothing may go.

    ``retention_ms`` overrides ``delta.logRetentionDuration`` and ``granularity_ms`` the truncation of the
    cutoff: DROP FEATURE … TRUNCATE HISTORY cleans up with its own retention at minute granularity.
    """
    listing = list_log(storage, table_root)
    retention = log_retention_ms(configuration) if retention_ms is None else retention_ms
    cutoff = ((now if now is not None else now_ms()) - retention) // granularity_ms * granularity_ms
    stamps = commit_timestamps(listing)
    cut = None
    for cp in listing.checkpoints:
        earlier = [ts for v, ts in stamps.items() if v < cp.version]
        if cp.version > 0 and earlier and max(earlier) <= cutoff:
            cut = cp.version
    protected = int(configuration.get(CHECKPOINT_PROTECTION, "0") or 0)
    if cut is None or (protected > 0 and cut < protected):
        return None
    return cut


def cleanup_expired_logs(storage: Storage, table_root: str, configuration: dict[str, str],
                         now: int | None = None, retention_ms: int | None = None,
                         granularity_ms: int = DAY_MS) -> list[str]:
    """Delete the log files of versions below the cut, and scan listings older than the retention; returns what was
    deleted (log files oldest first, then listings)."""
    listings = cleanup_scan_listings(storage, table_root, configuration, now, retention_ms)
    cut = cleanup_cut(storage, table_root, configuration, now, retention_ms, granularity_ms)
    if cut is None:
        return listings
    doomed: list[tuple[int, str]] = []
    for info in storage.list_dir(log_path(table_root)):
        name = info.path.rsplit("/", 1)[-1]
        if (m := _VERSIONED.match(name)) and int(m.group(1)) < cut:
            doomed.append((int(m.group(1)), info.path))
        elif (m := _COMPACTED.match(name)) and int(m.group(2)) < cut:
            doomed.append((int(m.group(2)), info.path))
    doomed.sort()
    # oldest first; on object stores in batched requests, whose order inside a batch no reader depends on: every
    # version below the cut is older than the checkpoint readers start from
    storage.delete_many([path for _, path in doomed])
    if doomed:
        log.info("log cleanup of %s removed %s files of versions below %s", table_root, len(doomed), cut)
    return [p for _, p in doomed] + listings


def cleanup_scan_listings(storage: Storage, table_root: str, configuration: dict[str, str], now: int | None = None,
                          retention_ms: int | None = None) -> list[str]:
    """Delete the native-scan listing files last written before ``now - retention`` (see the module docstring)."""
    retention = log_retention_ms(configuration) if retention_ms is None else retention_ms
    cutoff = (now if now is not None else now_ms()) - retention
    folder = f"{table_root.rstrip('/')}/{SCAN_LISTINGS_SUBDIR}"
    old = sorted(info.path for info in storage.list_dir(folder)
                 if info.path.endswith(".listing.gz") and info.mtime_ms < cutoff)
    storage.delete_many(old)
    return old
