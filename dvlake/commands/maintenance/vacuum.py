"""VACUUM: delete the files a table no longer needs, deletion-vector files included.

What stays ("the live set", as delta-spark's ``getValidFilesFromSnapshot``): every data file and every
on-disk ``u`` deletion-vector file (with or without its random prefix folder) of the live ``add``s and of
the tombstones still inside ``delta.deletedFileRetentionDuration``, and every folder above them.
``p`` (absolute) DVs and absolute data paths add nothing, and VACUUM never deletes outside the table
root: the listing never leaves it or follows a link, log paths with ``..`` or outside the root are
dropped, and every delete re-checks the real location (``storage/tree.py``).

FULL lists the table folder (hidden ``_*``/``.*`` names skipped except ``_change_data``,
``_delta_index`` and partition folders); LITE takes its candidates from the ``remove``/``cdc`` actions
of the commits since the last VACUUM (``_delta_log/_last_vacuum_info``). Candidates older than the
retention and not live are deleted in parallel threads.

Memory bound: the live set is held as one Arrow string array (the snapshot holds those paths anyway);
the listing is streamed in batches of ``BATCH`` entries and candidates are spilled to a temporary Arrow
file, so 1,000,000 stale files never sit in driver memory at once. Folders of the table are kept in
a dict (one entry per folder). DRY RUN returns its paths as a DataFrame, so it holds them all.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dvlake.commands.common import mode_of, physical_partition_columns
from dvlake.config import RETENTION_CHECK, deleted_file_retention_ms
from dvlake.config import VACUUM_LITE_DEFAULT as LITE_DEFAULT
from dvlake.config import VACUUM_LOGGING as LOGGING
from dvlake.config import VACUUM_PARALLELISM as PARALLELISM
from dvlake.config import VACUUM_RETENTION_WINDOW_IGNORE as RETENTION_WINDOW_IGNORE
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import InvalidArgumentError, VacuumLiteError, VacuumRetentionError
from dvlake.log import features
from dvlake.log.actions import now_ms
from dvlake.log.replay import read_commit
from dvlake.log.segment import commit_timestamps, log_path
from dvlake.log.snapshot import Snapshot
from dvlake.storage.base import Storage
from dvlake.storage.paths import decode_relative_path, has_scheme, join, normalize_table_root
from dvlake.storage.tree import RootGuard, delete_many_inside, remove_empty_dir, safe_relative, walk_tree
from dvlake.txn.transaction import OptimisticTransaction

log = logging.getLogger(__name__)

LAST_VACUUM_INFO = "_last_vacuum_info"
#: Schemes for which delta-spark writes VACUUM START/END commits when vacuum.logging.enabled is unset.
LOGGED_SCHEMES = {"wasbs", "wasbss", "abfs", "abfss", "adl", "gs", "file", "hdfs"}
BATCH = 100_000
DEFAULT_PARALLELISM = 16
HOUR_MS = 3_600_000

Conf = Callable[[str, str], str]


@dataclass
class VacuumResult:
    """What a VACUUM did (or, with DRY RUN, would do)."""

    table_root: str
    dry_run: bool
    mode: str
    delete_before_ms: int
    paths: list[str] = field(default_factory=list)  # DRY RUN only: absolute paths that would go
    num_files_to_delete: int = 0  # files + folders
    size_to_delete: int = 0
    num_deleted: int = 0
    num_dirs: int = 0
    committed_versions: list[int] = field(default_factory=list)


def spark_conf(spark: Any) -> Conf:
    """Session settings as a getter: from a SparkSession, a plain dict (no Spark needed), or defaults (None)."""
    if spark is None:
        return lambda key, default: default
    if isinstance(spark, Mapping):
        return lambda key, default: str(spark.get(key, default))
    return lambda key, default: str(spark.conf.get(key, default))


# --- the live set ----------------------------------------------------------------------------------


def in_root_relative(table_root: str, raw: str) -> str | None:
    """The table-relative, decoded path of a log path, or None if it lies outside the root."""
    decoded = decode_relative_path(raw)
    if has_scheme(raw) or decoded.startswith("/"):
        root = table_root.rstrip("/") + "/"
        if not decoded.startswith(root):
            return None
        decoded = decoded[len(root):]
    return safe_relative(decoded)


_NEEDS_PYTHON = r"%|:|^/|(^|/)\.\.?(/|$)|//"


def _relative_array(table_root: str, paths: pa.Array) -> pa.Array:
    """Vectorized ``in_root_relative``: plain relative paths stay as they are, odd ones go through Python."""
    if not len(paths):
        return pa.array([], pa.string())
    odd = pc.fill_null(pc.match_substring_regex(paths, _NEEDS_PYTHON), False)
    if not pc.any(odd).as_py():
        return paths
    plain = pc.filter(paths, pc.invert(odd))
    fixed = [in_root_relative(table_root, p) for p in pc.filter(paths, odd).to_pylist()]
    return pa.concat_arrays([plain, pa.array([p for p in fixed if p is not None], pa.string())])


def _dv_relative_paths(dv: pa.ChunkedArray | pa.Array) -> list[str]:
    """Table-relative paths of the distinct on-disk ``u`` DV files in a DV column."""
    if isinstance(dv, pa.ChunkedArray):
        dv = dv.combine_chunks() if dv.num_chunks else pa.array([], dv.type)
    if not len(dv):
        return []
    st = dv.field("storageType")
    u = pc.filter(dv.field("pathOrInlineDv"), pc.fill_null(pc.equal(st, "u"), False))
    out = []
    for token in pc.unique(u).to_pylist():
        rel = safe_relative(DeletionVectorDescriptor("u", token, 0, 0).relative_path())
        if rel is not None:
            out.append(rel)
    return out


def live_set(snapshot: Snapshot, delete_before: int) -> tuple[pa.Array, set[str]]:
    """Distinct live relative paths (data + DV files) and every folder above them."""
    files = snapshot.files
    tombs = snapshot.tombstones
    if tombs.num_rows:
        keep = pc.fill_null(pc.greater_equal(tombs.column("deletionTimestamp"), delete_before), False)
        tombs = tombs.filter(keep)
    root = snapshot.table_root
    parts: list[pa.Array] = []
    dv_paths: list[str] = []
    for table in (files, tombs):
        if table.num_rows:
            parts.append(_relative_array(root, table.column("path").combine_chunks()))
            dv_paths.extend(_dv_relative_paths(table.column("deletionVector")))
    parts.append(pa.array(dv_paths, pa.string()))
    live = pc.unique(pa.concat_arrays(parts)) if parts else pa.array([], pa.string())
    dirs: set[str] = set()
    parents = pc.unique(pc.replace_substring_regex(pc.filter(live, pc.match_substring(live, "/")), r"/[^/]*$", ""))
    for d in parents.to_pylist():
        while d and d not in dirs:
            dirs.add(d)
            d = d.rsplit("/", 1)[0] if "/" in d else ""
    return live, dirs


# --- candidates ------------------------------------------------------------------------------------


def hidden_rule(partition_columns: Iterable[str], iceberg_metadata: bool = False) -> Callable[[str], bool]:
    """delta-spark's hidden-name rule for VACUUM's listing.

    With Iceberg metadata (UniForm, or published by ``dvlake uniform sync``) a folder named
    ``metadata`` is hidden too, as delta-spark hides it for UniForm tables: its manifests and Puffin
    files are referenced by Iceberg snapshots, not by the Delta log.
    """
    prefixes = tuple(f"{c}=" for c in partition_columns)

    def hidden(name: str) -> bool:
        if iceberg_metadata and name == "metadata":
            return True
        if not name.startswith(("_", ".")):
            return False
        if name.startswith(("_delta_index", "_change_data")):
            return False
        return not (prefixes and name.startswith(prefixes))

    return hidden


def _has_iceberg_metadata(snapshot: Snapshot) -> bool:
    from dvlake.uniform.convert import METADATA_DIR, VERSION_HINT, iceberg_enabled

    return iceberg_enabled(snapshot.configuration) or snapshot.storage.exists(
        f"{snapshot.table_root}/{METADATA_DIR}/{VERSION_HINT}")


def _iceberg_expired(snapshot: Snapshot, delete_before: int) -> list[str]:
    """UniForm: files under ``metadata/`` only Iceberg snapshots outside VACUUM's window use (``uniform/expire.py``).

    Those snapshots name data and DV files this VACUUM may delete, so their metadata goes with them;
    the snapshots inside the window (the ones Delta time travel still serves) keep every file.
    """
    if not _has_iceberg_metadata(snapshot):
        return []
    from dvlake.uniform.expire import expired_files

    try:
        return expired_files(snapshot.storage, snapshot.table_root, delete_before)
    except Exception as exc:  # noqa: BLE001 - Iceberg metadata is derived; VACUUM of the Delta table goes on
        log.warning("VACUUM of %s leaves its Iceberg metadata as it is: %s", snapshot.table_root, exc)
        return []


def _delete_iceberg(storage: Storage, root: str, paths: list[str]) -> int:
    guard = RootGuard(storage, root)
    deleted = delete_many_inside(guard, [p[len(root.rstrip("/")) + 1:] for p in paths])
    if paths:
        from dvlake.uniform.state import forget

        forget(root)
    return deleted


@dataclass
class _Candidates:
    """Candidate files spilled to a temporary Arrow file, plus candidate folders (in memory)."""

    spill_path: str
    num_files: int = 0
    size: int = 0
    dirs: list[str] = field(default_factory=list)
    dirs_listed: int = 0
    window_end: int | None = None  # LITE: the last commit whose removes it took

    def batches(self) -> Iterator[list[str]]:
        if not self.num_files:
            return
        with pa.memory_map(self.spill_path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i).column(0).to_pylist()


_SPILL_SCHEMA = pa.schema([("path", pa.string())])


class _Spiller:
    def __init__(self, candidates: _Candidates) -> None:
        self.c = candidates
        self.sink = pa.OSFile(candidates.spill_path, "wb")
        self.writer = pa.ipc.new_file(self.sink, _SPILL_SCHEMA)

    def take(self, paths: list[str], sizes: list[int], mtimes: list[int], live: pa.Array, delete_before: int) -> None:
        if not paths:
            return
        batch = pa.table({"path": pa.array(paths, pa.string()), "size": pa.array(sizes, pa.int64()),
                          "mtime": pa.array(mtimes, pa.int64())})
        old = pc.less(batch.column("mtime"), delete_before)
        batch = batch.filter(pc.and_(old, pc.invert(pc.is_in(batch.column("path"), value_set=live))))
        if batch.num_rows:
            self.c.num_files += batch.num_rows
            self.c.size += pc.sum(batch.column("size")).as_py() or 0
            self.writer.write_table(pa.table({"path": batch.column("path")}, schema=_SPILL_SCHEMA))

    def close(self) -> None:
        self.writer.close()
        self.sink.close()


def _full_candidates(snapshot: Snapshot, live: pa.Array, live_dirs: set[str], delete_before: int,
                     spill: str) -> _Candidates:
    md = snapshot.metadata
    parts = list(md.partition_columns)
    parts += physical_partition_columns(md.schema, parts, mode_of(md)) if parts else []
    cands = _Candidates(spill)
    spiller = _Spiller(cands)
    paths: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []
    try:
        for e in walk_tree(snapshot.storage, snapshot.table_root, hidden_rule(parts, _has_iceberg_metadata(snapshot))):
            if e.is_dir:
                cands.dirs_listed += 1
                if e.mtime_ms < delete_before and e.relative not in live_dirs:
                    cands.dirs.append(e.relative)
                continue
            paths.append(e.relative)
            sizes.append(e.size)
            mtimes.append(e.mtime_ms)
            if len(paths) >= BATCH:
                spiller.take(paths, sizes, mtimes, live, delete_before)
                paths, sizes, mtimes = [], [], []
        spiller.take(paths, sizes, mtimes, live, delete_before)
    finally:
        spiller.close()
    return cands


def _read_last_vacuum_info(storage: Storage, root: str) -> int | None:
    try:
        info = json.loads(storage.read_bytes(join(log_path(root), LAST_VACUUM_INFO)))
    except (FileNotFoundError, ValueError, OSError):
        return None
    value = info.get("latestCommitVersionOutsideOfRetentionWindow") if isinstance(info, dict) else None
    return int(value) if value is not None else None


def latest_commit_outside_window(snapshot: Snapshot, delete_before: int) -> int | None:
    """The newest commit (up to the snapshot) whose timestamp is older than ``delete_before``."""
    stamps = commit_timestamps(snapshot.listing)
    older = [v for v, ts in stamps.items() if v <= snapshot.version and ts < delete_before]
    return max(older) if older else None


def _lite_candidates(snapshot: Snapshot, live: pa.Array, delete_before: int, spill: str) -> _Candidates:
    listing = snapshot.listing
    last = _read_last_vacuum_info(snapshot.storage, snapshot.table_root)
    earliest = min(listing.commits) if listing.commits else 0
    if last is not None and last + 1 >= earliest:
        start = last + 1
    elif earliest == 0:
        start = 0
    else:
        raise VacuumLiteError(
            f"VACUUM LITE cannot delete all eligible files of {snapshot.table_root}: commits before version {earliest} "
            "are gone from the log and there is no usable _delta_log/_last_vacuum_info. Please run VACUUM FULL.")
    end = latest_commit_outside_window(snapshot, delete_before)
    cands = _Candidates(spill)
    spiller = _Spiller(cands)
    root = snapshot.table_root
    stamps = commit_timestamps(listing)
    paths: list[str] = []
    sizes: list[int] = []
    mtimes: list[int] = []

    def take(raw: str | None, size: int | None, mtime: int, relative: str | None = None) -> None:
        rel = relative if relative is not None else (in_root_relative(root, raw) if raw else None)
        if rel is None:
            return
        paths.append(rel)
        sizes.append(int(size or 0))
        mtimes.append(mtime)

    try:
        for v in range(start, (end if end is not None else start - 1) + 1):
            if v not in listing.commits:
                continue
            for line in read_commit(snapshot.storage, listing.commits[v][0]):
                if (rm := line.get("remove")) is not None:
                    ts = int(rm.get("deletionTimestamp") or 0)
                    take(rm["path"], rm.get("size"), ts)
                    dv = rm.get("deletionVector")
                    if dv and dv.get("storageType") == "u":
                        desc = DeletionVectorDescriptor.from_json(dv)
                        take(None, desc.size_in_bytes, ts, safe_relative(desc.relative_path()))
                elif (cdc := line.get("cdc")) is not None:
                    take(cdc["path"], cdc.get("size"), stamps.get(v, 0))
            if len(paths) >= BATCH:
                spiller.take(*_dedupe(paths, sizes, mtimes), live, delete_before)
                paths, sizes, mtimes = [], [], []
        spiller.take(*_dedupe(paths, sizes, mtimes), live, delete_before)
    finally:
        spiller.close()
    cands.window_end = end
    return cands


def _dedupe(paths: list[str], sizes: list[int], mtimes: list[int]) -> tuple[list[str], list[int], list[int]]:
    seen: dict[str, int] = {}
    for i, p in enumerate(paths):
        seen.setdefault(p, i)
    idx = list(seen.values())
    return [paths[i] for i in idx], [sizes[i] for i in idx], [mtimes[i] for i in idx]


# --- the command -----------------------------------------------------------------------------------


def _retention_ms(conf: Conf, retention_hours: float | None, table_ms: int) -> int | None:
    """The accepted RETAIN in ms (None: use the table's), after delta-spark's checks."""
    if retention_hours is not None and retention_hours != 0 and conf(RETENTION_WINDOW_IGNORE, "true").lower() == "true":
        log.warning("VACUUM RETAIN %s HOURS is ignored (spark.databricks.delta.vacuum.retentionWindowIgnore.enabled "
                    "is true, as in delta-spark 4.1+); the table's delta.deletedFileRetentionDuration applies", retention_hours)
        retention_hours = None
    if retention_hours is None:
        return None
    if retention_hours < 0:
        raise VacuumRetentionError(
            f"Retention for VACUUM cannot be less than 0 hours; got {retention_hours}.",
            "DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE")
    ms = int(retention_hours * HOUR_MS)
    if conf(RETENTION_CHECK, "true").lower() == "true" and ms < table_ms:
        hours = math.ceil(table_ms / HOUR_MS)
        raise VacuumRetentionError(
            f"Are you sure you would like to vacuum files with such a low retention period ({retention_hours} hours, "
            f"below the table's delta.deletedFileRetentionDuration of {hours} hours)? If you have writers that are "
            "currently writing to this table, there is a risk that you may corrupt the state of your Delta table. If "
            "you are certain that there are no operations being performed on this table, such as "
            "insert/upsert/delete/optimize, then you may turn off this check by setting: "
            f"{RETENTION_CHECK} = false. If you are not sure, please use a value not less than {hours} hours.")
    return ms


def _logging_enabled(conf: Conf, root: str) -> bool:
    value = conf(LOGGING, "")
    if value:
        return value.lower() == "true"
    scheme = root.split("://", 1)[0].lower() if has_scheme(root) else "file"
    return scheme in LOGGED_SCHEMES


def vacuum(spark: Any, path: str, retention_hours: float | None = None, mode: str | None = None,
           dry_run: bool = False, *, now: int | None = None) -> VacuumResult:
    """Run VACUUM on the table at ``path``; ``mode`` is 'FULL' or 'LITE' (default per vacuum.lite.enabled).

    ``now`` (epoch ms) replaces the clock, for tests that place the retention horizon between commits.
    """
    conf = spark_conf(spark)
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    features.check_can_write(snapshot.protocol, None, root)
    mode = (mode or ("LITE" if conf(LITE_DEFAULT, "false").lower() == "true" else "FULL")).upper()
    if mode not in ("FULL", "LITE"):
        raise InvalidArgumentError(f"VACUUM type must be FULL or LITE; got {mode!r}")
    table_ms = deleted_file_retention_ms(snapshot.configuration)
    specified = _retention_ms(conf, retention_hours, table_ms)
    clock = now if now is not None else now_ms()
    delete_before = clock - (specified if specified is not None else table_ms)
    live, live_dirs = live_set(snapshot, delete_before)
    result = VacuumResult(root, dry_run, mode, delete_before)
    with tempfile.TemporaryDirectory(prefix="dvlake-vacuum-") as tmp:
        spill = os.path.join(tmp, "candidates.arrow")
        if mode == "FULL":
            cands = _full_candidates(snapshot, live, live_dirs, delete_before, spill)
            window_end = latest_commit_outside_window(snapshot, delete_before)
        else:
            cands = _lite_candidates(snapshot, live, delete_before, spill)
            window_end = cands.window_end
        dirs = sorted(cands.dirs, key=lambda d: d.count("/"), reverse=True)
        result.num_files_to_delete = cands.num_files + len(dirs)
        result.size_to_delete = cands.size
        result.num_dirs = cands.dirs_listed + 1
        iceberg_expired = _iceberg_expired(snapshot, delete_before)
        result.num_files_to_delete += len(iceberg_expired)
        if dry_run:
            result.paths.extend(iceberg_expired)
            for batch in cands.batches():
                result.paths.extend(join(root, p) for p in batch)
            result.paths.extend(join(root, d) for d in dirs)
            log.info("Found %s files (%s bytes) and directories in a total of %s directories that are safe to delete",
                     result.num_files_to_delete, result.size_to_delete, result.num_dirs)
            return result
        logged = _logging_enabled(conf, root)
        params: dict[str, Any] = {"retentionCheckEnabled": conf(RETENTION_CHECK, "true").lower() == "true",
                                  "defaultRetentionMillis": table_ms}
        if specified is not None:
            params["specifiedRetentionMillis"] = specified
        if logged:
            start = OptimisticTransaction(root, snapshot).commit(
                [], "VACUUM START", params,
                {"numFilesToDelete": result.num_files_to_delete, "sizeOfDataToDelete": result.size_to_delete})
            result.committed_versions.append(start)
        try:
            result.num_deleted = _delete_all(snapshot.storage, root, cands, dirs, int(conf(PARALLELISM, "0")))
            result.num_deleted += _delete_iceberg(snapshot.storage, root, iceberg_expired)
        except BaseException:
            if logged:
                try:
                    _end_commit(root, {"status": "FAILED"}, None, result)
                except Exception as exc:  # noqa: BLE001 - the deletion error is the one to report
                    log.warning("could not record VACUUM END (FAILED) on %s: %s", root, exc)
            raise
        if logged:
            _end_commit(root, {"status": "COMPLETED"},
                        {"numDeletedFiles": result.num_deleted, "numVacuumedDirectories": result.num_dirs}, result)
        last = _read_last_vacuum_info(snapshot.storage, root)
        value = window_end if window_end is not None else last
        snapshot.storage.write(join(log_path(root), LAST_VACUUM_INFO),
                               orjson.dumps({"latestCommitVersionOutsideOfRetentionWindow": value}))
    return result


def _end_commit(root: str, params: dict[str, Any], metrics: dict[str, Any] | None, result: VacuumResult) -> None:
    txn = OptimisticTransaction(root, Snapshot.load(root))
    result.committed_versions.append(txn.commit([], "VACUUM END", params, metrics))


def _delete_all(storage: Storage, root: str, cands: _Candidates, dirs: list[str], parallelism: int) -> int:
    """Delete candidate files in parallel threads (chunk by chunk; on object stores each chunk is batched
    requests), then empty folders deepest first."""
    guard = RootGuard(storage, root)
    workers = parallelism if parallelism > 0 else DEFAULT_PARALLELISM
    deleted = 0
    t0 = time.monotonic()

    def run(chunk: list[str]) -> int:
        return delete_many_inside(guard, chunk)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for batch in cands.batches():
            size = max(1, math.ceil(len(batch) / (workers * 4)))
            chunks = [batch[i:i + size] for i in range(0, len(batch), size)]
            deleted += sum(pool.map(run, chunks))
    for d in dirs:
        deleted += remove_empty_dir(guard, d)
    log.info("VACUUM deleted %s files and folders of %s in %.1fs", deleted, root, time.monotonic() - t0)
    return deleted
