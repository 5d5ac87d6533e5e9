"""The process's cache of each table's latest replayed state, moved forward commit by commit (on by default).

Every command that starts from a path loads the table's latest snapshot; replaying a million-file checkpoint each
time is seconds of work that repeats itself (BENCHMARKS.md, "Snapshot load"). A load through the cache still lists
``_delta_log`` (the listing is what tells a new version from an unchanged one, and what other processes committed),
checks that the commit file of the cached version is the very file the state was read from, and then:

- the same latest version: the cached state (no replay);
- newer commits, all present after the cached version: only those commits are read and applied on the cached state
  (``replay.replay_onto``: per (path, DV) key the last action wins, the same rule as a checkpoint plus commits);
- anything else (no entry yet, the cached commit gone or rewritten, the table deleted and recreated, a gap left by
  log cleanup, a checkpoint the state was not read from): a full replay, as without the cache. A new checkpoint is
  read rather than applied over: its writer dropped the tombstones older than the retention then, and a fresh load
  starts from it, so only reading it gives the same tombstones (once per checkpoint interval). Except the one this
  process just wrote from the cached state itself (``adopt_checkpoint``): the tombstones it kept are known, so the
  entry takes them and stands as read from it.

Which file is "the very file" (``commit_identity``): its path, modification time and size, plus the store's entity
tag where the listing gives one (S3, GCS, Azure: a new ETag on every write), else a digest of its bytes (one small
read per load: local files, ``memory://``). Modification times alone are not enough: S3 and Azure list them to the
second and ext4 stamps them from a coarse clock, so a table deleted and recreated at the same path with as many
versions and an equally long last commit can show the same (path, mtime, size). The identity is taken before the
state is read, so a table replaced while it is read leaves an entry that fails the next check, never a stale hit.
The other commits the state was read from (those after its checkpoint) must still be listed as they were (path,
time, size, tag: no read), and every commit a fresh load would need must be listed, so a commit removed from the
middle of the log is the fresh load's ``CorruptLogError``, not a hit. What is not re-read is the content of those
older commits: the protocol never rewrites a commit file, and one rewritten by hand with the same size within the
same timestamp tick is not seen (delta-spark's cached snapshots do not re-read them either).

Entries are keyed by (root, ``Storage.cache_identity()``): two storages that read one URI from different stores
(another endpoint or credentials after ``objectstore.configure``, a forgotten ``memory://`` store) never share one,
and a storage without an identity (a registered scheme, ``pyarrow.fs``) is not cached at all. Confinement is not part
of the key: it is applied when data and DV paths are resolved, never to the log's state.

The cached state is never handed out itself: each load gets its own copy of every mutable part (``txns``,
``domains``, the metadata's and commitInfo's dicts); the Arrow tables are immutable and shared. Loads of one table
are serialised (one replays, the others then hit); loads of different tables run in parallel. Time travel (a
version or timestamp) never uses the cache. The cache lives in the driver or Spark Connect client process only:
executors open files by path and never load snapshots through it.

Switches: ``enable(False)`` (this process), ``DVLAKE_SNAPSHOT_CACHE=0`` (the environment) or the session setting
``spark.dvlake.snapshotCache.enabled=false`` (``set_session_choice``, applied by the Spark faces) turn it off; any of
them saying off wins, except an explicit ``enable(True)``.
"""

from __future__ import annotations

import copy
import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace

import pyarrow as pa

from dvlake.config import SNAPSHOT_CACHE_ENV, SNAPSHOT_CACHE_MAX_FILES_ENV
from dvlake.errors import InvalidArgumentError
from dvlake.log.actions import CommitInfo
from dvlake.log.replay import LogState, replay, replay_onto
from dvlake.log.segment import LogListing, list_log
from dvlake.storage.base import Storage

#: Tables kept at most (least recently used dropped first).
MAX_TABLES = 16
#: File rows (live files plus tombstones) kept over all tables: a million-file state holds a few hundred MB of Arrow
#: tables, so the bound is on rows, not tables. A state larger than the whole bound is not kept.
DEFAULT_MAX_FILES = 2_000_000

_LOAD_LOCKS = 64
_OFF = ("0", "false", "no", "off")
_ON = ("1", "true", "yes", "on")
_switch: list[bool | None] = [None]  # set by ``enable``; None: the environment and the session decide
_session: list[bool | None] = [None]  # the session setting, as the Spark faces last read it


def enabled() -> bool:
    """Whether ``Snapshot.load`` uses the cache: ``enable(...)`` when called; else on unless the environment
    (``DVLAKE_SNAPSHOT_CACHE=0``) or the session setting turned it off."""
    if _switch[0] is not None:
        return _switch[0]
    if os.environ.get(SNAPSHOT_CACHE_ENV, "").strip().lower() in _OFF:
        return False
    return _session[0] is not False


def enable(on: bool | None = True) -> None:
    """Turn the cache on or off for this process (None: back to the environment's and session's choice); off also
    empties it."""
    _switch[0] = on
    if not enabled():
        SHARED.clear()


def set_session_choice(value: str | None) -> None:
    """The session setting's value (``true``/``false``, None when unset), as the Spark layer reads it."""
    if value is None:
        choice = None
    elif str(value).strip().lower() in _ON:
        choice = True
    elif str(value).strip().lower() in _OFF:
        choice = False
    else:
        raise InvalidArgumentError(f"the snapshot cache setting must be true or false; got {value!r}")
    _session[0] = choice
    if not enabled():
        SHARED.clear()


def max_files_from_env() -> int:
    """``DVLAKE_SNAPSHOT_CACHE_MAX_FILES`` when set (a whole number), else ``DEFAULT_MAX_FILES``."""
    raw = os.environ.get(SNAPSHOT_CACHE_MAX_FILES_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_FILES
    if not raw.isdigit():
        raise InvalidArgumentError(f"{SNAPSHOT_CACHE_MAX_FILES_ENV} must be a whole number of file rows; got {raw!r}")
    return int(raw)


#: (path, mtime ms, size, "etag" | "blake2b", the tag or the digest)
CommitIdentity = tuple[str, int, int | None, str, str | bytes]


def commit_identity(storage: Storage, listing: LogListing, version: int) -> CommitIdentity | None:
    """What tells the commit file of ``version`` from any other file written at its path (see the module's note);
    None when the version has no commit file (only a checkpoint), which is then not cached."""
    if version not in listing.commits:
        return None
    path, mtime = listing.commits[version]
    size, etag = listing.commit_files.get(version, (None, None))
    if etag:
        return path, mtime, size, "etag", etag
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:  # removed since the listing: the caller replays (and fails as a fresh load would)
        return None
    return path, mtime, size, "blake2b", hashlib.blake2b(data, digest_size=16).digest()


@dataclass
class CacheStats:
    """What the loads did: answered from the cache, moved forward by ``commits_read`` commits, or replayed."""

    hits: int = 0
    forwards: int = 0
    commits_read: int = 0
    full_replays: int = 0
    evictions: int = 0
    adopted_checkpoints: int = 0


#: a commit file as the listing shows it: (path, mtime ms, size, entity tag or None)
Listed = tuple[str, int, int | None, str | None]


def _listed(listing: LogListing, version: int) -> Listed | None:
    if version not in listing.commits:
        return None
    path, mtime = listing.commits[version]
    size, etag = listing.commit_files.get(version, (None, None))
    return path, mtime, size, etag


def _segment(listing: LogListing, after: int, upto: int) -> dict[int, Listed | None]:
    """The listed commit files ``after``+1..``upto``: the ones a fresh load would read on top of its checkpoint."""
    return {v: _listed(listing, v) for v in range(after + 1, upto + 1)}


@dataclass(frozen=True)
class _Entry:
    state: LogState
    commit: CommitIdentity  # the commit file of ``state.version``, as it was before the state was read
    segment: dict[int, Listed | None]  # the commits after the state's checkpoint, as listed before they were read
    rows: int  # live files plus tombstones: what the memory bound counts


class SnapshotCache:
    """The latest state of each (table root, store), moved forward from the cached version on new commits."""

    def __init__(self, max_tables: int = MAX_TABLES, max_files: int | None = None) -> None:
        self._lock = threading.Lock()
        self._tables: OrderedDict[tuple[str, object], _Entry] = OrderedDict()
        self._loading = [threading.Lock() for _ in range(_LOAD_LOCKS)]  # striped by key: no lock kept per table
        self._max = max_tables
        self._max_files = max_files_from_env() if max_files is None else max_files
        self.stats = CacheStats()

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()

    def cached_files(self) -> int:
        """File rows held over all tables (the memory bound's measure)."""
        with self._lock:
            return sum(e.rows for e in self._tables.values())

    def latest(self, root: str, storage: Storage) -> tuple[LogListing, LogState]:
        """The log listing and the replayed state of ``root``'s latest version (``root`` normalised)."""
        key = (root, storage.cache_identity())
        if key[1] is None:  # a store the cache cannot tell apart from another: replay, as without it
            listing = list_log(storage, root)
            return listing, replay(storage, root, listing, None)
        with self._loading[hash(key) % _LOAD_LOCKS]:  # one load of a table at a time: the others wait for its replay and hit
            return self._latest(key, root, storage)

    def _latest(self, key: tuple[str, object], root: str, storage: Storage) -> tuple[LogListing, LogState]:
        listing = list_log(storage, root)
        with self._lock:
            entry = self._tables.get(key)
        latest = listing.latest_version
        state: LogState | None = None
        target_commit: CommitIdentity | None = None
        segment: dict[int, Listed | None] = {}  # as listed before anything was read: a later rewrite shows as a change
        if entry is not None and _reusable(entry, listing) \
                and commit_identity(storage, listing, entry.state.version) == entry.commit:
            known = entry.state
            if latest == known.version:
                with self._lock:
                    self.stats.hits += 1
                    if key in self._tables:
                        self._tables.move_to_end(key)
                return listing, _copy(known)
            if latest > known.version and all(v in listing.commits for v in range(known.version + 1, latest + 1)):
                target_commit = commit_identity(storage, listing, latest)  # before the commits are read
                segment = {**entry.segment, **_segment(listing, known.version, latest)}
                state = replay_onto(storage, root, listing, known, latest)
                with self._lock:
                    self.stats.forwards += 1
                    self.stats.commits_read += latest - known.version
        if state is None:
            target_commit = commit_identity(storage, listing, latest) if latest >= 0 else None
            state = replay(storage, root, listing, None)
            segment = _segment(listing, state.checkpoint_version if state.checkpoint_version is not None else -1, latest)
            with self._lock:
                self.stats.full_replays += 1
        if target_commit is not None and state.version == latest:
            self._remember(key, state, target_commit, segment)
        return listing, _copy(state)

    def adopt_checkpoint(self, root: str, storage: Storage, state: LogState, tombstones: pa.Table) -> bool:
        """After this process wrote the checkpoint of ``state``'s version from ``state`` itself (its files, and
        ``tombstones``: the ones the writer kept), the cached entry of that very state stands as read from the
        checkpoint: the next load moves forward from it instead of reading a million-file checkpoint back (what a
        fresh load reads from it is what was just written). Only the entry whose files are ``state``'s (the same
        immutable table) is changed; False when there is none."""
        key = (root, storage.cache_identity())
        with self._lock:
            entry = self._tables.get(key)
            if entry is None or entry.state.files is not state.files or entry.state.version != state.version:
                return False
            adopted = replace(entry.state, tombstones=tombstones, checkpoint_version=state.version, commit_info=None)
            self._tables[key] = _Entry(adopted, entry.commit, {}, adopted.files.num_rows + tombstones.num_rows)
            self.stats.adopted_checkpoints += 1
        return True

    def _remember(self, key: tuple[str, object], state: LogState, commit: CommitIdentity,
                  segment: dict[int, Listed | None]) -> None:
        rows = state.files.num_rows + state.tombstones.num_rows
        with self._lock:
            self._tables.pop(key, None)
            if rows > self._max_files:
                return  # larger than the whole bound: kept by no one, replayed per load as without the cache
            self._tables[key] = _Entry(state, commit, segment, rows)
            total = sum(e.rows for e in self._tables.values())
            while len(self._tables) > self._max or total > self._max_files:
                _, dropped = self._tables.popitem(last=False)
                total -= dropped.rows
                self.stats.evictions += 1


def _reusable(entry: _Entry, listing: LogListing) -> bool:
    """Whether the cached state may answer or be moved forward, i.e. a fresh load would read what it was read from:
    not older than the listing's latest version; read from the newest checkpoint the listing holds (a fresh load
    starts from that one; see the module's note); every commit a fresh load needs still listed (a missing one is its
    ``CorruptLogError``, not a hit); and every commit the state was read from listed as it was then (path, time,
    size, tag: a file rewritten or replaced since is read again)."""
    known = entry.state
    latest = listing.latest_version
    if latest < known.version:
        return False
    newest_checkpoint = max((c.version for c in listing.checkpoints if c.version <= latest), default=-1)
    if newest_checkpoint > (known.checkpoint_version if known.checkpoint_version is not None else -1):
        return False
    if not all(v in listing.commits for v in range(newest_checkpoint + 1, latest + 1)):
        return False
    return all(_listed(listing, v) == listed for v, listed in entry.segment.items())


def _copy(state: LogState) -> LogState:
    """``state`` with its own mutable parts: dicts of txns and domains, the metadata's and commitInfo's dicts (the
    actions are frozen dataclasses, but a dict inside one is not; the Arrow tables are immutable and shared)."""
    metadata = replace(state.metadata, configuration=dict(state.metadata.configuration),
                       format_options=dict(state.metadata.format_options), extra=copy.deepcopy(state.metadata.extra))
    commit_info = CommitInfo(copy.deepcopy(state.commit_info.values)) if state.commit_info is not None else None
    return replace(state, metadata=metadata, txns=dict(state.txns), domains=dict(state.domains),
                   commit_info=commit_info)


SHARED = SnapshotCache()
