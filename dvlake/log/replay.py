"""Log replay: checkpoint + commits → the live files and tombstones of one version.

Files are keyed by (path, DV unique id) — the rule deletion vectors brought into the protocol
— so replacing a file's DV is a remove of (path, old DV) plus an add of (path, new DV), and
the last action on a key wins. The checkpoint part stays in Arrow; only the keys the JSON
commits touch are handled in Python, which keeps a million-file table fast to load.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dvlake.dv.descriptor import dv_unique_id
from dvlake.errors import CorruptLogError
from dvlake.log.actions import CommitInfo, DomainMetadata, Metadata, Protocol, Txn
from dvlake.log.arrow import ADD_SCHEMA, REMOVE_SCHEMA, any_value_contains, dv_unique_ids, rows_to_table, take_rows
from dvlake.log.checkpoint import CheckpointContents, read_checkpoint
from dvlake.log.partition_index import PartitionCodes, moved_forward
from dvlake.log.segment import Checkpoint, LogListing, commits_after, select_segment
from dvlake.storage.base import Storage

log = logging.getLogger(__name__)
KEY_SEP = "\x1f"


def normalize_path(path: str) -> str:
    """Paths are compared URL-decoded (delta-spark compares them as URIs)."""
    return unquote(path) if "%" in path else path


def dv_unique_id_of(dv: dict[str, Any] | None) -> str | None:
    """The unique id of a DV as it appears in a JSON action (None for no DV)."""
    if not dv:
        return None
    return dv_unique_id(dv["storageType"], dv["pathOrInlineDv"], dv.get("offset"))


def file_key(path: str, dv: dict[str, Any] | None) -> str:
    return normalize_path(path) + KEY_SEP + (dv_unique_id_of(dv) or "")


def file_keys(table: pa.Table) -> pa.Array:
    """The (path, dvId) key of every row of a file table, as one string per row."""
    paths = table.column("path").combine_chunks() if table.num_rows else pa.array([], pa.string())
    if len(paths) and any_value_contains(paths, b"%"):
        paths = pa.array([normalize_path(p) for p in paths.to_pylist()], pa.string())
    ids = pc.fill_null(dv_unique_ids(table.column("deletionVector")), "")
    return pc.binary_join_element_wise(paths, ids, KEY_SEP)


@dataclass
class DerivedFacts:
    """What is computed from a state's file table on demand, kept for the next plan and for a replay onto the
    state (the snapshot cache hands out copies of a cached state; they share this holder). ``partition_codes`` is
    valid for the file table ``codes_of`` alone (compared by identity: a table is immutable)."""

    codes_of: pa.Table | None = None
    partition_codes: PartitionCodes | None = None

    def codes_for(self, files: pa.Table) -> PartitionCodes | None:
        return self.partition_codes if self.codes_of is files else None


@dataclass
class LogState:
    """Everything replay produces for one version."""

    version: int
    protocol: Protocol
    metadata: Metadata
    files: pa.Table
    tombstones: pa.Table
    txns: dict[str, Txn] = field(default_factory=dict)
    domains: dict[str, DomainMetadata] = field(default_factory=dict)
    commit_info: CommitInfo | None = None  # of the snapshot's own version, when replayed from JSON
    checkpoint_version: int | None = None
    #: whether a path of ``files`` or ``tombstones`` may need URL-decoding ('%'); False lets a replay onto this
    #: state compare raw paths without scanning the whole table for '%' again
    encoded_paths: bool = True
    derived: DerivedFacts = field(default_factory=DerivedFacts, repr=False, compare=False)


def read_commit(storage: Storage, path: str) -> list[dict[str, Any]]:
    """The JSON lines of one commit file (parsed by orjson: JSON parsing dominates replay time)."""
    data = storage.read_bytes(path)
    if not data.strip():  # every commit holds at least commitInfo; an empty file is a torn or truncated write
        raise CorruptLogError(f"commit file {path} is empty; a Delta commit has at least one action. Restore the file "
                              "from a backup, or copy the table without this version")
    try:
        lines = [orjson.loads(line) for line in data.splitlines() if line.strip()]
    except ValueError as exc:
        raise CorruptLogError(f"commit file {path} is not valid JSON lines: {exc}") from exc
    if not all(isinstance(line, dict) for line in lines):
        raise CorruptLogError(f"commit file {path} has a line that is not a JSON object (each line is one action)")
    return lines


def _newest_usable_checkpoint(storage: Storage, table_root: str,
                              candidates: list[Checkpoint]) -> tuple[CheckpointContents | None, int]:
    """The first checkpoint of ``candidates`` (newest first) that reads cleanly and its version; (None, -1) if none.

    A damaged checkpoint is skipped with a warning, not fatal: the commits before it still rebuild the same state.
    """
    for cp in candidates:
        try:
            return read_checkpoint(storage, table_root, cp), cp.version
        except CorruptLogError as exc:
            log.warning("ignoring unusable checkpoint, falling back to an older one: %s", exc)
    return None, -1


def replay(storage: Storage, table_root: str, listing: LogListing, version: int | None = None) -> LogState:
    """Reconstruct one version of the table from its log."""
    target, candidates = select_segment(listing, table_root, version)
    base, start = _newest_usable_checkpoint(storage, table_root, candidates)
    return _replay_onto(storage, table_root, listing, base, start, target, start if base else None)


def replay_onto(storage: Storage, table_root: str, listing: LogListing, state: LogState, target: int) -> LogState:
    """``state`` moved forward to ``target`` by the commits after it alone: the state of a version is, for every
    (path, DV) key, the last action on it, so a known version's files and tombstones are as good a base as a
    checkpoint's (``dvlake.log.snapshot_cache``). A commit missing between them is ``CorruptLogError``, as in
    ``replay``; the caller replays from a checkpoint instead when cleanup removed them."""
    base = CheckpointContents(state.files, state.tombstones, state.protocol, state.metadata, dict(state.txns),
                              dict(state.domains))
    return _replay_onto(storage, table_root, listing, base, state.version, target, state.checkpoint_version,
                        base_checked=True, base_encoded=state.encoded_paths,
                        base_codes=state.derived.codes_for(state.files))


def _replay_onto(storage: Storage, table_root: str, listing: LogListing, base: CheckpointContents | None, start: int,
                 target: int, checkpoint_version: int | None, base_checked: bool = False,
                 base_encoded: bool | None = None, base_codes: PartitionCodes | None = None) -> LogState:
    """The commits ``start``+1..``target`` applied on ``base`` (a checkpoint's contents, a known state, or None).

    ``base_checked``: the base is a state this module built (its live paths already proven unique), so only the
    paths the commits add are checked against it. ``base_encoded``: whether a path of the base may need
    URL-decoding, when known (None: look). ``base_codes``: the base files' partition codes, when known (moved
    forward with the files, so the next plan does not code a million files again)."""
    tail = _read_commits(storage, listing, commits_after(listing, table_root, start, target), target, base)
    protocol, metadata, latest = tail.protocol, tail.metadata, tail.latest

    if protocol is None or metadata is None:
        raise CorruptLogError(f"the log of {table_root} has no protocol or metaData action up to version {target}")

    if base is not None and base_encoded is None:
        base_encoded = any_value_contains(base.adds.column("path"), b"%") or \
            any_value_contains(base.removes.column("path"), b"%")
    try:
        encoded = bool(base_encoded) or any("%" in action["path"] for _, action in latest.values())
        files, tombstones, dropped = _merge(base, latest, encoded)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # Arrow refuses a field of the wrong type
        raise CorruptLogError(f"the log of {table_root} up to version {target} has an add or remove action with a "
                              f"malformed field ({type(exc).__name__}: {exc})") from exc
    new_adds = sum(1 for is_add, _ in latest.values() if is_add)
    if not (base_checked and _added_paths_unique(files, new_adds, encoded)):
        check_paths_unique(files, table_root, target, encoded)
    derived = DerivedFacts()
    if base_codes is not None:
        added = files.slice(files.num_rows - new_adds).column("partitionValues")
        derived = DerivedFacts(files, moved_forward(base_codes, dropped, added))
    return LogState(target, protocol, metadata, files, tombstones, tail.txns, tail.domains, tail.commit_info,
                    checkpoint_version, encoded, derived)


@dataclass
class _CommitsRead:
    """What a run of JSON commits says on top of a base: the last action per file key, and the newest of the rest."""

    protocol: Protocol | None
    metadata: Metadata | None
    txns: dict[str, Txn]
    domains: dict[str, DomainMetadata]
    latest: dict[str, tuple[bool, dict[str, Any]]] = field(default_factory=dict)
    commit_info: CommitInfo | None = None


def _read_commits(storage: Storage, listing: LogListing, versions: list[int], target: int,
                  base: CheckpointContents | None) -> _CommitsRead:
    """The commits ``versions`` read in order over ``base``'s protocol, metadata, txns and domains."""
    out = _CommitsRead(base.protocol if base else None, base.metadata if base else None,
                       dict(base.txns) if base else {}, dict(base.domains) if base else {})
    latest = out.latest
    for v in versions:
        path = listing.commits[v][0]
        try:
            for line in read_commit(storage, path):
                if (add := line.get("add")) is not None:
                    latest[file_key(add["path"], add.get("deletionVector"))] = (True, add)
                elif (rm := line.get("remove")) is not None:
                    latest[file_key(rm["path"], rm.get("deletionVector"))] = (False, rm)
                elif (p := line.get("protocol")) is not None:
                    out.protocol = Protocol.from_json(p)
                elif (m := line.get("metaData")) is not None:
                    out.metadata = Metadata.from_json(m)
                elif (t := line.get("txn")) is not None:
                    txn = Txn.from_json(t)
                    out.txns[txn.app_id] = txn
                elif (d := line.get("domainMetadata")) is not None:
                    dm = DomainMetadata.from_json(d)
                    if dm.removed:
                        out.domains.pop(dm.domain, None)
                    else:
                        out.domains[dm.domain] = dm
                elif (ci := line.get("commitInfo")) is not None and v == target:
                    out.commit_info = CommitInfo.from_json(ci)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a field missing or of the wrong type
            raise CorruptLogError(f"commit file {path} has a malformed action ({type(exc).__name__}: {exc}); the log "
                                  "was damaged or written by a broken writer") from exc
    return out


def check_paths_unique(files: pa.Table, table_root: str, version: int, encoded: bool = True) -> None:
    """Refuse a snapshot where one data file is live twice (e.g. with and without a DV).

    The protocol forbids it; reading both adds would return the file's rows twice. One
    vectorised distinct count (paths compared URL-decoded, as keys are; ``encoded=False``: no path needs it).
    """
    if files.num_rows < 2:
        return
    paths = files.column("path").combine_chunks()
    if encoded and any_value_contains(paths, b"%"):
        paths = pa.array([normalize_path(p) for p in paths.to_pylist()], pa.string())
    if pc.count_distinct(paths).as_py() == files.num_rows:
        return
    counts = pc.value_counts(paths)
    dup = next(v["values"] for v in counts.to_pylist() if v["counts"] > 1)
    raise CorruptLogError(
        f"the log of {table_root} at version {version} has the data file {dup!r} live more than once (two add actions "
        "for one path without a remove between them); the protocol forbids it and reading it would duplicate rows")


def _merge(base: CheckpointContents | None, latest: dict[str, tuple[bool, dict[str, Any]]],
           encoded: bool) -> tuple[pa.Table, pa.Table, np.ndarray]:
    """Checkpoint files whose key no commit touched, plus the last action of every touched key (``encoded``: a
    path of either may need URL-decoding); and the rows of the base's files that were dropped."""
    new_adds = rows_to_table([a for is_add, a in latest.values() if is_add], ADD_SCHEMA)
    new_removes = rows_to_table([r for is_add, r in latest.values() if not is_add], REMOVE_SCHEMA)
    if base is None:
        return new_adds, new_removes, _NO_ROWS
    touched = pa.array(list(latest), pa.string())
    touched_paths = pa.array(sorted({normalize_path(a["path"]) for _, a in latest.values()}), pa.string())
    kept_adds, dropped = _without_keys(base.adds, touched, touched_paths, encoded)
    kept_removes, _ = _without_keys(base.removes, touched, touched_paths, encoded)
    return _appended(kept_adds, new_adds), _appended(kept_removes, new_removes), dropped


_NO_ROWS = np.zeros(0, dtype=np.int64)


#: chunks a state's file table may hold before it is compacted into one (each commit replayed onto a known state
#: appends a few zero-copy slices instead of copying the whole table)
MAX_CHUNKS = 64


def _appended(kept: pa.Table, new: pa.Table) -> pa.Table:
    """``kept`` then ``new``; copied into one chunk only once the table has grown too many chunks."""
    out = pa.concat_tables([kept, new]) if new.num_rows else kept
    return out.combine_chunks() if out.num_columns and out.column(0).num_chunks > MAX_CHUNKS else out


def _without_keys(table: pa.Table, touched: pa.Array, touched_paths: pa.Array,
                  encoded: bool) -> tuple[pa.Table, np.ndarray]:
    """``table`` without its rows whose (path, DV) key is in ``touched``, and the positions of those rows.

    A replay onto a large known state touches few keys: keys are built only for the rows whose path is touched
    (where no path needs URL-decoding, a raw path equals its key's path), and the rows are dropped by slicing, so
    the cost grows with the commits, not with the table. Otherwise every key is built, as a checkpoint needs."""
    if not table.num_rows or not len(touched):
        return table, _NO_ROWS
    paths = table.column("path")
    if encoded and any_value_contains(paths, b"%"):
        dropped = _mask(pc.is_in(file_keys(table), value_set=touched))
        return table.filter(pa.array(~dropped)), np.nonzero(dropped)[0]
    maybe = np.nonzero(_mask(pc.is_in(paths, value_set=touched_paths)))[0]
    if not len(maybe):
        return table, _NO_ROWS
    hit = maybe[_mask(pc.is_in(file_keys(take_rows(table, maybe)), value_set=touched))]
    pieces, start = [], 0
    for row in hit.tolist():
        if row > start:
            pieces.append(table.slice(start, row - start))
        start = row + 1
    if start < table.num_rows:
        pieces.append(table.slice(start))
    return (pa.concat_tables(pieces) if pieces else table.slice(0, 0)), hit


def _mask(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)


def _added_paths_unique(files: pa.Table, added: int, encoded: bool) -> bool:
    """Whether the last ``added`` rows of ``files`` (a commit's adds after a checked state's kept files) bring no
    path twice and none already live; False also when it cannot say cheaply (then ``check_paths_unique`` decides)."""
    if added == 0:
        return True
    kept, new = files.slice(0, files.num_rows - added), files.slice(files.num_rows - added)
    new_paths = pa.array([normalize_path(p) for p in new.column("path").to_pylist()], pa.string())
    if pc.count_distinct(new_paths).as_py() != added:
        return False
    kept_paths = kept.column("path")
    if not kept.num_rows:
        return True
    if encoded and any_value_contains(kept_paths, b"%"):
        return False
    return not pc.any(pc.is_in(kept_paths, value_set=new_paths)).as_py()
