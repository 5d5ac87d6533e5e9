"""DV health: how much each file and partition has deleted, what that costs readers, what to run about it.

Reads only the log (one snapshot replay, plus the recent commit files for the DV history) and the
headers of the DV files (one stat per DV file, its format byte and each DV's 4-byte size field);
never a data file and never a DV body. All per-file work is vectorised over the snapshot's Arrow
file table, so a 100,000-file table is reported in about a second.

Read overhead model (``estimate_read_overhead``). ``bench/read_overhead.py`` (BENCHMARKS.md,
"Read overhead") measures dvlake's scan against a plain Parquet scan of the same files. A file
without a DV reads like plain Parquet (0.94-1.05x). Every row of a file *with* a DV goes through
the DV anti join, so the extra cost scales with that file's physical rows; the deleted ratio
moves it only a little. The measured time ratios at 0.1 %, 1 % and 10 % of rows deleted are
interpolated linearly in log10(ratio) and clamped outside that range:

    extra_row_equivalents(file) = physical_rows * (ratio(deleted_ratio) - 1)     (0 without a DV)
    overhead(table) = sum(extra_row_equivalents) / sum(physical_rows)           (a fraction of a plain scan)

for a full materialisation and for a narrow (2-column) aggregate, plus a fixed ~0.25 s per query
when any DV is present (building the DV frame, the DV decode job, re-planning after the broadcast,
BENCHMARKS.md). Rewriting a file (OPTIMIZE / REORG … APPLY (PURGE)) removes both its deleted rows
and its extra row-equivalents.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from dvlake.commands.common import physical_partition_columns
from dvlake.config import deleted_file_retention_ms
from dvlake.display import human_bytes, percent
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import CorruptLogError
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import join, normalize_table_root

#: (deleted ratio, time ratio vs plain Parquet) of dvlake's scan, BENCHMARKS.md "Read overhead", 8/8 files with DVs.
MEASURED_FULL_SCAN = ((0.001, 1.57), (0.01, 1.55), (0.10, 1.30))
MEASURED_NARROW_AGGREGATE = ((0.001, 2.31), (0.01, 2.51), (0.10, 2.75))
#: Fixed driver/executor cost per query once any file has a DV (BENCHMARKS.md: frame 70-100 ms, decode job ~100 ms, AQE ~80 ms).
FIXED_QUERY_SECONDS = 0.25
#: delta-spark's ``optimize.maxDeletedRowsRatio`` default: files above it are worth rewriting.
DEFAULT_MAX_DELETED_RATIO = 0.05
#: Bytes a packed DV takes in its file besides the bitmap: the u32 size before it and the u32 CRC after it.
DV_RECORD_OVERHEAD = 8
_DV_FILE = re.compile(r"^deletion_vector_[0-9a-fA-F-]{36}\.bin$")
_UNPARTITIONED = "(table)"


def _interpolate(points: tuple[tuple[float, float], ...], ratio: np.ndarray) -> np.ndarray:
    """Time ratio at each deleted ratio: linear in log10(deleted ratio) between the measured points, clamped."""
    xs = np.log10([p[0] for p in points])
    ys = np.array([p[1] for p in points])
    with np.errstate(divide="ignore"):
        x = np.log10(np.clip(ratio, points[0][0], points[-1][0]))
    return np.interp(x, xs, ys)


def estimate_read_overhead(physical_rows: np.ndarray, deleted_rows: np.ndarray, has_dv: np.ndarray,
                           points: tuple[tuple[float, float], ...] = MEASURED_FULL_SCAN) -> np.ndarray:
    """Extra plain-scan row-equivalents each file costs a reader (the model in the module docstring)."""
    rows = np.maximum(physical_rows, 0).astype(np.float64)
    ratio = np.divide(deleted_rows, rows, out=np.zeros_like(rows), where=rows > 0)
    extra = rows * (_interpolate(points, ratio) - 1.0)
    return np.where(has_dv, extra, 0.0)


@dataclass
class Recommendation:
    """One thing to run, with what it reclaims (ranked by ``rows_reclaimed``, then bytes)."""

    action: str  # 'OPTIMIZE' | 'REORG PURGE' | 'VACUUM'
    partition: str
    command: str  # the dvlake CLI command
    sql: str  # the same as SQL (``dvlake sql "…"`` or spark.sql with delta-spark)
    rows_reclaimed: int
    files_rewritten: int
    bytes_rewritten: int
    bytes_reclaimed: int
    reason: str


@dataclass
class Problem:
    """Something wrong found while reading DV headers (a missing DV file, a header that does not match)."""

    dv_file: str
    message: str


@dataclass
class HealthReport:
    """The health of one table version; the DataFrames have one row per file, partition, DV file, version."""

    table: str
    version: int
    partition_columns: list[str]
    summary: dict[str, Any]
    files: pd.DataFrame
    partitions: pd.DataFrame
    dv_files: pd.DataFrame
    versions: pd.DataFrame
    recommendations: list[Recommendation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def to_dict(self, max_files: int | None = None) -> dict[str, Any]:
        """JSON-friendly form (``max_files`` keeps the per-file list short: most-deleted files first)."""
        files = self.files.drop(columns=[c for c in self.files.columns if c.startswith("_")])
        files = files.sort_values(["deleted_rows", "path"], ascending=[False, True])
        if max_files is not None:
            files = files.head(max_files)
        return {
            "table": self.table, "version": self.version, "partition_columns": self.partition_columns,
            "summary": self.summary, "read_overhead_model": MODEL_TEXT,
            "recommendations": [asdict(r) for r in self.recommendations],
            "problems": [asdict(p) for p in self.problems],
            "partitions": records(self.partitions), "dv_files": records(self.dv_files),
            "versions": records(self.versions), "files": records(files),
        }


MODEL_TEXT = (
    "extra row-equivalents per file = physical rows x (measured time ratio at its deleted ratio - 1) for files with a DV; "
    "ratios from BENCHMARKS.md 'Read overhead' (full scan 1.57/1.55/1.30x, 2-column aggregate 2.31/2.51/2.75x at "
    "0.1/1/10 % deleted), interpolated in log10(deleted ratio); plus ~0.25 s fixed per query when any DV exists")


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a frame as JSON-friendly dicts (numpy scalars to Python, NaN to None)."""
    return [{str(k): _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _plain(v: Any) -> Any:
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return None if math.isnan(v) else float(v)
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


# --- the report ---------------------------------------------------------------------------------


def table_health(path: str, version: int | None = None, *, max_deleted_ratio: float = DEFAULT_MAX_DELETED_RATIO,
                 history_versions: int = 200, verify_headers: bool = True,
                 on_step: Callable[[str], None] | None = None) -> HealthReport:
    """The DV health of ``path`` at ``version`` (latest when None).

    ``history_versions`` bounds how many recent commits the DV-count history reads;
    ``verify_headers`` reads each DV's 4-byte size field from its DV file (cheap; off skips it);
    ``on_step`` is told what is being read next (the CLI shows it as progress on a terminal).
    """
    step = on_step or (lambda _msg: None)
    step("replaying the log")
    snapshot = Snapshot.load(normalize_table_root(path), version=version)
    step(f"summarising {snapshot.num_files:,} files")
    files = file_frame(snapshot)
    step("reading DV file headers")
    dv_files, problems = _dv_file_frame(snapshot, files, verify_headers)
    partitions = _partition_frame(files)
    step("reading recent commits for the DV history")
    versions = dv_history(snapshot, history_versions)
    now = _now_ms()
    recs = recommend(snapshot, files, dv_files, max_deleted_ratio, now)
    summary = _summary(snapshot, files, dv_files, partitions, now)
    summary["max_deleted_ratio"] = max_deleted_ratio
    return HealthReport(snapshot.table_root, snapshot.version, snapshot.partition_columns, summary, files, partitions,
                        dv_files, versions, recs, problems)


def _column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if col.num_chunks else pa.array([], type=col.type)


def _partition_keys(snapshot: Snapshot) -> tuple[pa.Array, list[pa.Array]]:
    """``col=value/col2=value2`` of every live file (``(table)`` when unpartitioned), and each column's raw values.

    Computed per column in Arrow. The raw values (null for a null partition) are kept beside the
    display key so predicates never have to re-parse a key whose values contain '/' or '='.
    """
    n = snapshot.num_files
    if not snapshot.partition_columns:
        return pa.array([_UNPARTITIONED] * n, pa.string()), []
    values = _column(snapshot.files, "partitionValues")
    physical = physical_partition_columns(snapshot.schema, snapshot.partition_columns, snapshot.column_mapping_mode)
    parts, raw = [], []
    for col, key in zip(snapshot.partition_columns, physical, strict=True):  # column mapping: keys are physical names
        found = pc.map_lookup(values, pa.scalar(key, pa.string()), "first") if n else pa.array([], pa.string())
        raw.append(found)
        parts.append(pc.binary_join_element_wise(pa.scalar(col + "="), pc.fill_null(found, "__HIVE_DEFAULT_PARTITION__"), ""))
    return (pc.binary_join_element_wise(*parts, "/") if len(parts) > 1 else parts[0]), raw


def file_frame(snapshot: Snapshot) -> pd.DataFrame:
    """One row per live file: rows, deletions, DV descriptor fields and the estimated read overhead."""
    t = snapshot.files
    dv = _column(t, "deletionVector")
    n = t.num_rows
    if n:
        storage = pc.struct_field(dv, "storageType")
        has_dv = pc.fill_null(pc.is_valid(storage), False).to_numpy(zero_copy_only=False) & ~dv.is_null().to_numpy(
            zero_copy_only=False)
        deleted = pc.fill_null(pc.struct_field(dv, "cardinality"), 0).to_numpy(zero_copy_only=False)
        dv_size = pc.fill_null(pc.struct_field(dv, "sizeInBytes"), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        offset = pc.struct_field(dv, "offset").to_numpy(zero_copy_only=False)
        dv_path = pc.struct_field(dv, "pathOrInlineDv").to_numpy(zero_copy_only=False)
        storage_np = storage.to_numpy(zero_copy_only=False)
    else:
        has_dv = np.zeros(0, bool)
        deleted = dv_size = np.zeros(0, np.int64)
        offset = dv_path = storage_np = np.zeros(0, object)
    deleted = np.where(has_dv, deleted, 0).astype(np.int64)
    physical = snapshot.num_records().astype(np.int64)
    keys, raw_values = _partition_keys(snapshot)
    frame = pd.DataFrame({
        "path": _column(t, "path").to_numpy(zero_copy_only=False),
        "partition": keys.to_numpy(zero_copy_only=False),
        "size_bytes": _column(t, "size").to_numpy(zero_copy_only=False).astype(np.int64),
        "physical_rows": physical,
        "deleted_rows": deleted,
        "has_dv": has_dv,
        "dv_storage": np.where(has_dv, pd.Series(storage_np, dtype=object).map(_STORAGE_KIND).to_numpy(), "none"),
        "dv_size_bytes": np.where(has_dv, dv_size, 0),
        "dv_offset": offset,
        "_dv_kind": storage_np,
        "_dv_path": dv_path,
    })
    for i, values in enumerate(raw_values):
        frame[f"_pv{i}"] = values.to_numpy(zero_copy_only=False)
    known = physical >= 0
    frame["deleted_ratio"] = np.divide(deleted, physical, out=np.zeros(n, np.float64), where=known & (physical > 0))
    frame.loc[~known & has_dv, "deleted_ratio"] = np.nan  # no numRecords: delta-spark would rewrite it on OPTIMIZE
    frame["live_rows"] = np.where(known, physical - deleted, -1)
    frame["overhead_rows_full_scan"] = estimate_read_overhead(physical, deleted, has_dv, MEASURED_FULL_SCAN)
    frame["overhead_rows_aggregate"] = estimate_read_overhead(physical, deleted, has_dv, MEASURED_NARROW_AGGREGATE)
    frame["dv_file"] = _dv_locations(snapshot.table_root, frame)
    return frame


_STORAGE_KIND = {"u": "in DV files (u)", "p": "in DV files by absolute path (p)", "i": "inline (i)"}


def _dv_locations(table_root: str, frame: pd.DataFrame) -> np.ndarray:
    """The absolute DV file of each on-disk DV (None for inline or no DV), decoding each distinct path once."""
    out = np.full(len(frame), None, dtype=object)
    on_disk = frame["has_dv"].to_numpy() & frame["_dv_kind"].isin(["u", "p"]).to_numpy()
    if not on_disk.any():
        return out
    kinds = frame["_dv_kind"].to_numpy()[on_disk]
    paths = frame["_dv_path"].to_numpy()[on_disk]
    cache: dict[tuple[str, str], str] = {}
    located = []
    for kind, p in zip(kinds, paths, strict=True):
        key = (kind, p)
        loc = cache.get(key)
        if loc is None:
            loc = DeletionVectorDescriptor(kind, p, 0, 0, 1).absolute_path(table_root)
            cache[key] = loc
        located.append(loc)
    out[on_disk] = located
    return out


def _dv_file_frame(snapshot: Snapshot, files: pd.DataFrame, verify_headers: bool) -> tuple[pd.DataFrame, list[Problem]]:
    """One row per DV file, referenced by a live file or found beside them: DVs packed, live vs stale bytes."""
    problems: list[Problem] = []
    live = files[files["dv_file"].notna()]
    grouped = (live.drop_duplicates(["dv_file", "dv_offset"])
               .assign(record_bytes=lambda d: d["dv_size_bytes"] + DV_RECORD_OVERHEAD)
               .groupby("dv_file", sort=False)
               .agg(live_dvs=("dv_offset", "size"), live_bytes=("record_bytes", "sum"), deleted_rows=("deleted_rows", "sum")))
    referenced = {str(loc): (int(r.live_dvs), int(r.live_bytes) + 1, int(r.deleted_rows))  # +1: the format version byte
                  for loc, r in grouped.iterrows()}
    tombstoned = _tombstone_dv_files(snapshot)
    on_disk = _list_dv_files(snapshot, set(referenced) | set(tombstoned))
    retention = deleted_file_retention_ms(snapshot.configuration)
    rows = []
    for loc in sorted(set(referenced) | set(on_disk)):
        dvs, live_bytes, deleted = referenced.get(loc, (0, 0, 0))
        size, mtime = on_disk.get(loc, (None, None))
        if loc in referenced and size is None:
            problems.append(Problem(loc, f"deletion vector file {loc} is missing but {dvs} live file(s) need it; "
                                         "reads of those files fail (restore the file or the table)"))
        state = "live" if dvs else ("retained by tombstones" if loc in tombstoned else "unreferenced")
        # VACUUM deletes a file no live file uses once both it and its newest tombstone are older than the retention
        vacuum_after = (max(mtime, tombstoned.get(loc, 0)) + retention) if not dvs and mtime is not None else None
        rows.append({"dv_file": loc, "live_dvs": dvs, "deleted_rows": deleted, "size_bytes": size if size is not None else -1,
                     "live_bytes": live_bytes, "stale_bytes": max((size or 0) - live_bytes, 0), "state": state,
                     "vacuum_after_ms": vacuum_after})
    frame = pd.DataFrame(rows, columns=["dv_file", "live_dvs", "deleted_rows", "size_bytes", "live_bytes", "stale_bytes",
                                        "state", "vacuum_after_ms"])
    if verify_headers and len(live):
        problems.extend(_verify_headers(snapshot, live, set(on_disk)))
    return frame, problems


def _tombstone_dv_files(snapshot: Snapshot) -> dict[str, int]:
    """DV files referenced by tombstones (kept for time travel until VACUUM's retention passes), each with the
    newest ``deletionTimestamp`` (ms) of the tombstones that reference it."""
    t = snapshot.tombstones
    if not t.num_rows:
        return {}
    dv = _column(t, "deletionVector")
    kinds = pc.struct_field(dv, "storageType").to_pylist()
    paths = pc.struct_field(dv, "pathOrInlineDv").to_pylist()
    stamps = _column(t, "deletionTimestamp").to_pylist()
    out: dict[str, int] = {}
    located: dict[tuple[str, str], str] = {}
    for kind, p, ts in zip(kinds, paths, stamps, strict=True):
        if kind in ("u", "p") and p:
            loc = located.get((kind, p))
            if loc is None:
                loc = located[(kind, p)] = DeletionVectorDescriptor(kind, p, 0, 0, 1).absolute_path(snapshot.table_root)
            out[loc] = max(out.get(loc, 0), int(ts or 0))
    return out


def _list_dv_files(snapshot: Snapshot, known: set[str]) -> dict[str, tuple[int, int]]:
    """(size, mtime in ms) of the DV files in the table folder and in every folder a known DV file lives in (one
    listing each)."""
    root = snapshot.table_root
    folders = {root} | {loc.rsplit("/", 1)[0] for loc in known}
    out: dict[str, tuple[int, int]] = {}
    for folder in sorted(folders):
        inside = folder == root or folder.startswith(root + "/")
        for info in snapshot.storage.list_dir(folder):
            name = info.path.rsplit("/", 1)[-1]
            loc = join(folder, name)
            if loc in known or (inside and _DV_FILE.match(name)):  # elsewhere ('p' DVs): only the files the log names
                out[loc] = (info.size, info.mtime_ms)
    return out


def _read_at(f: Any, n: int, offset: int) -> bytes:
    f.seek(offset)
    return bytes(f.read(n))


def _verify_headers(snapshot: Snapshot, live: pd.DataFrame, present: set[str]) -> list[Problem]:
    """Check each DV file's format byte and each live DV's stored size field (8 bytes per DV, no bitmap read)."""
    problems = []
    for key, group in live.groupby("dv_file", sort=False):
        loc = str(key)
        if loc not in present:
            continue
        try:
            f = snapshot.storage.open_input(loc)  # through the storage seam, like the DV reader
            try:
                total = f.seek(0, 2)
                if _read_at(f, 1, 0) != b"\x01":
                    problems.append(Problem(loc, f"deletion vector file {loc}: format version byte is not 01"))
                    continue
                bad = 0
                first = ""
                for off, size in zip(group["dv_offset"].to_numpy(), group["dv_size_bytes"].to_numpy(), strict=True):
                    off = 1 if off is None or (isinstance(off, float) and math.isnan(off)) else int(off)
                    head = _read_at(f, 4, off) if off + 8 + size <= total else b""
                    if len(head) != 4 or struct.unpack(">I", head)[0] != size:
                        bad += 1
                        first = first or f"offset {off}: descriptor says {size} bytes, header says " + (
                            str(struct.unpack(">I", head)[0]) if len(head) == 4 else f"nothing (file has {total} bytes)")
                if bad:
                    problems.append(Problem(loc, f"deletion vector file {loc}: {bad} DV header(s) do not match their "
                                                 f"descriptors (first at {first}); reads of those files will fail"))
            finally:
                f.close()
        except OSError as exc:
            problems.append(Problem(loc, f"deletion vector file {loc} cannot be read: {exc}"))
    return problems


def _partition_frame(files: pd.DataFrame) -> pd.DataFrame:
    """Per partition: files, files with DVs, rows, deleted rows and ratio, DV bytes, estimated overhead."""
    known_rows = files["physical_rows"].clip(lower=0)
    g = files.assign(physical_rows=known_rows, dv_files_n=files["dv_file"]).groupby("partition", sort=True)
    out = g.agg(files=("path", "size"), files_with_dv=("has_dv", "sum"), size_bytes=("size_bytes", "sum"),
                physical_rows=("physical_rows", "sum"), deleted_rows=("deleted_rows", "sum"),
                dv_bytes=("dv_size_bytes", "sum"), dv_files=("dv_files_n", "nunique"),
                overhead_rows_full_scan=("overhead_rows_full_scan", "sum"),
                overhead_rows_aggregate=("overhead_rows_aggregate", "sum"),
                max_file_deleted_ratio=("deleted_ratio", "max")).reset_index()
    rows = out["physical_rows"].to_numpy(np.float64)
    out["deleted_ratio"] = np.divide(out["deleted_rows"].to_numpy(np.float64), rows, out=np.zeros(len(out)), where=rows > 0)
    out["files_with_dv"] = out["files_with_dv"].astype(np.int64)
    out["max_file_deleted_ratio"] = out["max_file_deleted_ratio"].fillna(0.0)
    return out.sort_values(["deleted_rows", "partition"], ascending=[False, True]).reset_index(drop=True)


# --- history of DV counts ------------------------------------------------------------------------


def dv_history(snapshot: Snapshot, max_versions: int = 200) -> pd.DataFrame:
    """Live DVs and DV-deleted rows at each of the last ``max_versions`` versions.

    Walks the commit files backwards from the snapshot (whose counts are known): the state before
    commit v is the state after it minus its adds with DVs plus its removes with DVs. Only commit
    JSON is read, never another checkpoint.
    """
    cards = snapshot.dv_cardinalities()
    count, deleted = int((cards > 0).sum()), int(cards.sum())
    rows = [(snapshot.version, count, deleted)]
    v = snapshot.version
    while v > 0 and len(rows) < max_versions and v in snapshot.listing.commits and (v - 1) in snapshot.listing.commits:
        added_n, added_rows, removed_n, removed_rows = _dv_changes(snapshot, v)
        count, deleted = count - added_n + removed_n, deleted - added_rows + removed_rows
        v -= 1
        rows.append((v, max(count, 0), max(deleted, 0)))
    rows.reverse()
    return pd.DataFrame(rows, columns=["version", "live_dvs", "deleted_rows"])


def _dv_changes(snapshot: Snapshot, version: int) -> tuple[int, int, int, int]:
    """(adds with a DV, their DV rows, removes with a DV, their DV rows) of one commit.

    Only lines that mention ``"deletionVector"`` are parsed (most adds have none).
    """
    out = [0, 0, 0, 0]
    for raw in _dv_lines(snapshot, version):
        try:
            line = orjson.loads(raw)
        except ValueError as exc:
            raise CorruptLogError(f"commit {version} of {snapshot.table_root} has a line that is not JSON: {exc}") from exc
        for i, key in ((0, "add"), (2, "remove")):
            dv = (line.get(key) or {}).get("deletionVector")
            if dv:
                out[i] += 1
                out[i + 1] += int(dv.get("cardinality", 0))
    return out[0], out[1], out[2], out[3]


def _dv_lines(snapshot: Snapshot, version: int) -> Iterator[bytes]:
    """The raw lines of one commit that mention a DV."""
    data = snapshot.storage.read_bytes(snapshot.listing.commits[version][0])
    if b'"deletionVector"' not in data:  # most commits of a table without DVs yet: no line to look at
        return
    for raw in data.splitlines():
        if b'"deletionVector"' in raw:
            yield raw


# --- recommendations ---------------------------------------------------------------------------------


def _quote_ident(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else "`" + name.replace("`", "``") + "`"


def partition_predicate(snapshot: Snapshot, values: list[str | None]) -> str | None:
    """The SQL predicate selecting one partition (``day = '2024-01-01' AND k = 3``), None when unpartitioned.

    ``values`` are the partition's raw ``partitionValues`` strings in partition-column order (None or '' for null).
    """
    if not snapshot.partition_columns:
        return None
    types = {f["name"].lower(): f["type"] for f in snapshot.schema["fields"]}
    clauses = []
    for col, value in zip(snapshot.partition_columns, values, strict=True):
        ident = _quote_ident(col)
        t = types.get(col.lower())
        if value is None or value == "":
            clauses.append(f"{ident} IS NULL")
        elif t in ("byte", "short", "integer", "long", "float", "double", "boolean") or (
                isinstance(t, str) and t.startswith("decimal")):
            clauses.append(f"{ident} = {value}")
        else:
            clauses.append(f"{ident} = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'")
    return " AND ".join(clauses)


def _shell_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$", "\\$") + '"'


def vacuumable(dv_files: pd.DataFrame, now_ms: int) -> pd.Series:
    """Which DV files VACUUM (at its default retention) would delete at ``now_ms``: no live file uses them, and
    they and their newest tombstone are older than ``delta.deletedFileRetentionDuration``."""
    after = pd.to_numeric(dv_files["vacuum_after_ms"], errors="coerce")
    return (dv_files["live_dvs"] == 0) & after.notna() & (after <= now_ms)


def recommend(snapshot: Snapshot, files: pd.DataFrame, dv_files: pd.DataFrame,
              max_deleted_ratio: float = DEFAULT_MAX_DELETED_RATIO, now_ms: int | None = None) -> list[Recommendation]:
    """What to run, ranked by rows reclaimed.

    A partition is worth rewriting when one of its files has more than ``max_deleted_ratio`` of its
    rows deleted (delta-spark's ``optimize.maxDeletedRowsRatio``) or has a DV without numRecords.
    Two or more such files: ``OPTIMIZE … WHERE`` (compacts them together). A lone one:
    ``REORG … APPLY (PURGE)``, because OPTIMIZE drops single-file bins and would leave it as it is.
    DV files no live file references: ``VACUUM``, only for those already older than the retention (VACUUM
    would not delete the others yet, so there is nothing to run for them now).
    """
    root = snapshot.table_root
    ident = f"delta.`{root}`"
    ratio = files["deleted_ratio"]
    worth = files["has_dv"] & (ratio.isna() | (ratio > max_deleted_ratio))
    out: list[Recommendation] = []
    n_cols = len(snapshot.partition_columns)
    for partition, group in files[worth].groupby("partition", sort=False):
        first = group.iloc[0]
        pred = partition_predicate(snapshot, [first[f"_pv{i}"] for i in range(n_cols)])
        where_cli = f" --where {_shell_quote(pred)}" if pred else ""
        where_sql = f" WHERE {pred}" if pred else ""
        rows = int(group["deleted_rows"].sum())
        n = len(group)
        worst = group["deleted_ratio"].max()
        worst_text = "unknown" if pd.isna(worst) else percent(worst, 1)
        if n >= 2:
            out.append(Recommendation(
                "OPTIMIZE", str(partition), f"dvlake optimize {_shell_quote(root)}{where_cli}", f"OPTIMIZE {ident}{where_sql}",
                rows, n, int(group["size_bytes"].sum()), 0,
                f"{n} files above {max_deleted_ratio:.0%} deleted (worst {worst_text}); OPTIMIZE rewrites them without the "
                "deleted rows"))
        else:
            out.append(Recommendation(
                "REORG PURGE", str(partition), f"dvlake purge {_shell_quote(root)}{where_cli}",
                f"REORG TABLE {ident}{where_sql} APPLY (PURGE)", rows, n, int(group["size_bytes"].sum()), 0,
                f"1 file {worst_text} deleted; OPTIMIZE skips a lone file, REORG … APPLY (PURGE) rewrites it"))
    stale = dv_files[vacuumable(dv_files, now_ms if now_ms is not None else _now_ms())]
    if len(stale):
        out.append(Recommendation(
            "VACUUM", "", f"dvlake vacuum {_shell_quote(root)}", f"VACUUM {ident}", 0, 0, 0,
            int(stale["size_bytes"].clip(lower=0).sum()),
            f"{len(stale)} DV file(s) no live file references, older than the retention "
            "(delta.deletedFileRetentionDuration): VACUUM deletes them"))
    out.sort(key=lambda r: (-r.rows_reclaimed, -r.bytes_reclaimed, r.partition))
    return out


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _summary(snapshot: Snapshot, files: pd.DataFrame, dv_files: pd.DataFrame, partitions: pd.DataFrame,
             now_ms: int) -> dict[str, Any]:
    rows = int(files["physical_rows"].clip(lower=0).sum())
    deleted = int(files["deleted_rows"].sum())
    with_dv = int(files["has_dv"].sum())
    storage_counts = files.loc[files["has_dv"], "dv_storage"].value_counts().to_dict()
    return {
        "version": snapshot.version,
        "files": len(files),
        "files_with_dv": with_dv,
        "files_without_num_records": int((files["physical_rows"] < 0).sum()),
        "partitions": len(partitions),
        "partitions_with_dv": int((partitions["files_with_dv"] > 0).sum()),
        "physical_rows": rows,
        "deleted_rows": deleted,
        "deleted_ratio": deleted / rows if rows else 0.0,
        "dv_storage": {str(k): int(v) for k, v in storage_counts.items()},
        "dv_bytes": int(files["dv_size_bytes"].sum()),
        "dv_files": int((dv_files["live_dvs"] > 0).sum()) if len(dv_files) else 0,
        "dv_files_unreferenced": int((dv_files["live_dvs"] == 0).sum()) if len(dv_files) else 0,
        "dv_files_vacuumable": int(vacuumable(dv_files, now_ms).sum()) if len(dv_files) else 0,
        "dv_files_vacuumable_from_ms": _first_vacuum_time(dv_files, now_ms),
        "dv_file_bytes": int(dv_files["size_bytes"].clip(lower=0).sum()) if len(dv_files) else 0,
        "dv_live_bytes": int(dv_files["live_bytes"].sum()) if len(dv_files) else 0,
        "dv_stale_bytes": int(dv_files["stale_bytes"].sum()) if len(dv_files) else 0,
        "max_dvs_per_dv_file": int(dv_files["live_dvs"].max()) if len(dv_files) else 0,
        "est_full_scan_overhead": float(files["overhead_rows_full_scan"].sum() / rows) if rows else 0.0,
        "est_aggregate_overhead": float(files["overhead_rows_aggregate"].sum() / rows) if rows else 0.0,
        "est_fixed_query_seconds": FIXED_QUERY_SECONDS if with_dv else 0.0,
    }


def _first_vacuum_time(dv_files: pd.DataFrame, now_ms: int) -> int | None:
    """When the next stale DV file not yet deletable becomes deletable by VACUUM (ms), None when none waits."""
    if not len(dv_files):
        return None
    after = pd.to_numeric(dv_files["vacuum_after_ms"], errors="coerce")
    waiting = after[(dv_files["live_dvs"] == 0) & (after > now_ms)]
    return int(waiting.min()) if len(waiting) else None


__all__ = ["HealthReport", "Recommendation", "Problem", "table_health", "estimate_read_overhead", "dv_history",
           "recommend", "partition_predicate", "human_bytes", "MODEL_TEXT"]
