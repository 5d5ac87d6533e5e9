"""Listing ``_delta_log``: which checkpoint and which commits make up a version.

A log segment is the newest usable checkpoint at or below the wanted version plus the
contiguous JSON commits after it. ``_last_checkpoint`` is a hint we tolerate being absent or
corrupt; the listing is the truth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from dvlake.errors import (
    CorruptLogError,
    NotARegularFileError,
    PathOutsideTableRootError,
    TableNotFoundError,
    VersionNotFoundError,
)
from dvlake.storage.base import OddEntry, Storage
from dvlake.storage.paths import join

LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_MULTIPART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2 = re.compile(r"^(\d{20})\.checkpoint\.([0-9a-fA-F-]{36})\.(json|parquet)$")
#: every name the log is read from: commits, checkpoints (any kind), CRCs, compacted logs, _last_checkpoint
_LOG_FILE = re.compile(r"^(\d{20}\.(json|crc|checkpoint.*\.(json|parquet))|\d{20}\.\d{20}\.compacted\.json"
                       r"|_last_checkpoint)$")


def commit_file_name(version: int) -> str:
    return f"{version:020d}.json"


def log_path(table_root: str) -> str:
    return join(table_root, LOG_DIR)


@dataclass(frozen=True)
class Checkpoint:
    """One complete checkpoint: its version and its file(s) in part order."""

    version: int
    kind: str  # 'classic' | 'multipart' | 'v2'
    files: tuple[str, ...]


@dataclass
class LogListing:
    """What ``_delta_log`` holds: commit files with their mtimes and complete checkpoints."""

    commits: dict[int, tuple[str, int]] = field(default_factory=dict)  # version -> (path, mtime_ms)
    #: version -> (size, the store's entity tag or None): with the mtime, what tells a rewritten commit file from
    #: the one a cached state was read from (``snapshot_cache``)
    commit_files: dict[int, tuple[int, str | None]] = field(default_factory=dict)
    checkpoints: list[Checkpoint] = field(default_factory=list)  # ascending by version

    @property
    def latest_version(self) -> int:
        candidates = list(self.commits) + [c.version for c in self.checkpoints]
        return max(candidates) if candidates else -1


def list_log(storage: Storage, table_root: str) -> LogListing:
    """List and classify ``_delta_log`` (ignoring .crc, compacted logs and temp files)."""
    listing = LogListing()
    multipart: dict[tuple[int, int], dict[int, str]] = {}
    v2: dict[int, list[str]] = {}
    try:
        infos, odd = storage.list_dir_strict(log_path(table_root), table_root)
    except NotADirectoryError:  # the "table root" is a regular file
        infos, odd = [], []
    _refuse_odd_log_files(odd)
    for info in infos:
        name = info.path.rsplit("/", 1)[-1]
        if m := _COMMIT.match(name):
            listing.commits[int(m.group(1))] = (info.path, info.mtime_ms)
            listing.commit_files[int(m.group(1))] = (info.size, info.etag)
        elif m := _CLASSIC.match(name):
            listing.checkpoints.append(Checkpoint(int(m.group(1)), "classic", (info.path,)))
        elif m := _MULTIPART.match(name):
            multipart.setdefault((int(m.group(1)), int(m.group(3))), {})[int(m.group(2))] = info.path
        elif m := _V2.match(name):
            v2.setdefault(int(m.group(1)), []).append(info.path)
    for (version, total), parts in multipart.items():
        if len(parts) == total and set(parts) == set(range(1, total + 1)):  # incomplete sets are ignored
            listing.checkpoints.append(Checkpoint(version, "multipart", tuple(parts[i] for i in range(1, total + 1))))
    for version, paths in v2.items():
        listing.checkpoints.append(Checkpoint(version, "v2", (sorted(paths)[0],)))
    listing.checkpoints.sort(key=lambda c: (c.version, c.kind != "v2"))
    return listing


def _refuse_odd_log_files(odd: list[OddEntry]) -> None:
    """A log file (commit, checkpoint, CRC, ``_last_checkpoint``) that is not a regular file inside the table
    is an error naming it: skipped, a FIFO commit would make the table read as an older version (and every
    writer retry that version forever); followed, a symlink would read another table's log."""
    for entry in odd:
        name = entry.path.rsplit("/", 1)[-1]
        if not _LOG_FILE.match(name):
            continue  # _sidecars/, _staged_commits/ and foreign entries are not log files
        if entry.outside_root:
            raise PathOutsideTableRootError(
                f"Delta log file {entry.path} is {entry.reason}; the log is read "
                "only from regular files inside the table's _delta_log. Replace the link with the file itself.")
        raise NotARegularFileError(
            f"Delta log file {entry.path} is {entry.reason}, not a regular file; the log "
            "is read only from regular files. Restore the file from a backup (or remove it if it is not part of "
            "the table's history).")


def commit_timestamps(listing: LogListing) -> dict[int, int]:
    """File-modification timestamps made monotonic, as delta-spark does for time travel."""
    out: dict[int, int] = {}
    prev = None
    for v in sorted(listing.commits):
        ts = listing.commits[v][1]
        if prev is not None and ts <= prev:
            ts = prev + 1
        out[v] = ts
        prev = ts
    return out


def select_segment(listing: LogListing, table_root: str, version: int | None) -> tuple[int, list[Checkpoint]]:
    """The target version and the checkpoints at or below it, newest first.

    The caller tries them in order and falls back to an older one (or to commit 0) when a
    checkpoint cannot be read.
    """
    if not listing.commits and not listing.checkpoints:
        raise TableNotFoundError(f"{table_root} is not a Delta table: {log_path(table_root)} has no commit or checkpoint")
    latest = listing.latest_version
    target = latest if version is None else version
    if target < earliest_version(listing) or target > latest:
        cleaned = (" (the log files of older versions were removed by log cleanup after delta.logRetentionDuration, or "
                   "never existed)") if target < earliest_version(listing) and earliest_version(listing) > 0 else ""
        raise VersionNotFoundError(
            f"cannot time travel {table_root} to version {version}: available versions are "
            f"{earliest_version(listing)} to {latest}{cleaned}")
    return target, [c for c in reversed(listing.checkpoints) if c.version <= target]


def earliest_version(listing: LogListing) -> int:
    """The oldest version that can be reconstructed (commit 0, or the oldest checkpoint)."""
    if 0 in listing.commits:
        return 0
    return listing.checkpoints[0].version if listing.checkpoints else min(listing.commits, default=0)


def commits_after(listing: LogListing, table_root: str, start: int, target: int) -> list[int]:
    """Commit versions start+1..target, checking that none is missing."""
    versions = list(range(start + 1, target + 1))
    missing = [v for v in versions if v not in listing.commits]
    if missing:
        raise CorruptLogError(
            f"{log_path(table_root)} is missing commit file(s) {[commit_file_name(v) for v in missing[:5]]} "
            f"needed to reconstruct version {target}; the log is incomplete (was it cleaned up or copied partially?)")
    return versions
