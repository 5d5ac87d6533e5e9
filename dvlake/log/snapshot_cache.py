"""The process's cache of each table's latest replayed state, moved forward commit by commit.

Every command that starts from a path loads the table's latest snapshot; replaying a million-file checkpoint each
time is seconds of work that repeats itself (BENCHMARKS.md, "Snapshot load"). With the cache on, a load lists
``_delta_log`` (the listing is what tells a new version from an unchanged one) and then:

- the same latest version, whose commit file is the one cached (path and modification time): the cached state, no
  file read at all;
- newer commits, all present after the cached version: only those commits are read and applied on the cached state
  (``replay.replay_onto``: per (path, DV) key the last action wins, the same rule as a checkpoint plus commits);
- anything else (no entry yet, the cached commit gone or rewritten, the table recreated with fewer versions, a gap
  left by log cleanup, a checkpoint newer than the cached version): a full replay, as without the cache. A new
  checkpoint is read rather than applied over: its writer dropped the tombstones older than the retention then, and
  a fresh load starts from it, so only reading it gives the same tombstones (once per checkpoint interval).

The cached state is never handed out itself: each load gets a copy of its mutable parts (``txns``, ``domains``); the
Arrow tables are immutable. Time travel (a version or timestamp) never uses it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

from dvlake.config import SNAPSHOT_CACHE_ENV
from dvlake.log.replay import LogState, replay, replay_onto
from dvlake.log.segment import LogListing, list_log
from dvlake.storage.base import Storage

#: Tables kept (least recently used dropped first): a cached million-file state holds its Arrow tables in memory.
MAX_TABLES = 16

_switch: list[bool | None] = [None]  # set by ``enable``; None: the environment decides


def enabled() -> bool:
    """Whether ``Snapshot.load`` uses the cache: ``enable(...)`` when called, else ``DVLAKE_SNAPSHOT_CACHE=1``."""
    if _switch[0] is not None:
        return _switch[0]
    return os.environ.get(SNAPSHOT_CACHE_ENV, "0").strip().lower() in ("1", "true", "yes", "on")


def enable(on: bool | None = True) -> None:
    """Turn the cache on or off for this process (None: back to the environment's choice); off also empties it."""
    _switch[0] = on
    if not on:
        SHARED.clear()


@dataclass
class CacheStats:
    """What the loads did: answered from the cache, moved forward by ``commits_read`` commits, or replayed."""

    hits: int = 0
    forwards: int = 0
    commits_read: int = 0
    full_replays: int = 0


class SnapshotCache:
    """The latest (listing, state) of each table root, moved forward from the cached version on new commits."""

    def __init__(self, max_tables: int = MAX_TABLES) -> None:
        self._lock = threading.Lock()
        # root -> (state, the commit file (path, mtime) its version was read with: a table recreated at the same path
        # shows another file or time for that version, and is replayed in full)
        self._tables: OrderedDict[str, tuple[LogState, tuple[str, int] | None]] = OrderedDict()
        self._max = max_tables
        self.stats = CacheStats()

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()

    def latest(self, root: str, storage: Storage) -> tuple[LogListing, LogState]:
        """The log listing and the replayed state of ``root``'s latest version (``root`` normalised)."""
        listing = list_log(storage, root)
        with self._lock:
            known, cached_commit = self._tables.get(root, (None, None))
        latest = listing.latest_version
        state: LogState | None = None
        if known is not None and cached_commit is not None and listing.commits.get(known.version) == cached_commit:
            if latest == known.version:
                with self._lock:
                    self.stats.hits += 1
                return listing, _copy(known)
            newer_checkpoint = any(c.version > known.version for c in listing.checkpoints)
            if latest > known.version and not newer_checkpoint \
                    and all(v in listing.commits for v in range(known.version + 1, latest + 1)):
                state = replay_onto(storage, root, listing, known, latest)
                with self._lock:
                    self.stats.forwards += 1
                    self.stats.commits_read += latest - known.version
        if state is None:
            state = replay(storage, root, listing, None)
            with self._lock:
                self.stats.full_replays += 1
        self._remember(root, state, listing.commits.get(state.version))
        return listing, _copy(state)

    def _remember(self, root: str, state: LogState, commit: tuple[str, int] | None) -> None:
        with self._lock:
            self._tables[root] = (state, commit)
            self._tables.move_to_end(root)
            while len(self._tables) > self._max:
                self._tables.popitem(last=False)


def _copy(state: LogState) -> LogState:
    """``state`` with its own dicts (the Arrow tables are immutable and shared)."""
    return replace(state, txns=dict(state.txns), domains=dict(state.domains))


SHARED = SnapshotCache()
