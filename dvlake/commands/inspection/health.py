"""DV health: how much each file and partition has deleted, what that costs readers, what to run about it.

Reads only the log (one snapshot replay, plus the recent commit files for the DV history) and the
headers of the DV files (one stat per DV file, its format byte and each DV's 4-byte size field);
never a data file and never a DV body. All per-file work is vectorised over the snapshot's Arrow
file table (``health_files``), so a 100,000-file table is reported in about a second.

Read overhead model (``estimate_read_overhead``). ``bench/read_tables.py`` (BENCHMARKS.md, "Read
overhead on Delta tables") measures each read path on a table before and after a DV DELETE of
0.1 %, 1 % and 10 % of the rows of every file. A file without a DV reads like plain Parquet. Every
row of a file *with* a DV goes through the DV test, so the extra cost scales with that file's
physical rows; the deleted ratio moves it only a little. The estimate uses the path a read would
take: the native scan (DVs applied in Spark's Parquet reader) when its jar is built for the
installed Spark and ``spark.dvlake.scan.native`` is not ``false``, else the pure-Python path
(Spark's reader and an anti join). The measured time ratios are first made non-decreasing in the
deleted ratio (a least-squares non-decreasing fit, pool-adjacent-violators: run-to-run noise must
not make a file with more deleted rows look cheaper to read), then interpolated linearly in
log10(deleted ratio) and clamped outside the measured range:

    extra_row_equivalents(file) = physical_rows * (ratio(deleted_ratio) - 1)     (0 without a DV)
    overhead(partition or table) = sum(extra_row_equivalents) / sum(physical_rows)

for a full materialisation and for a narrow (2-column) aggregate; on the pure-Python path plus a
fixed ~0.25 s per query when any DV is present (building the DV frame, the DV decode job,
re-planning after the broadcast: BENCHMARKS.md "Read overhead"). Rewriting a file (OPTIMIZE /
REORG … APPLY (PURGE)) removes both its deleted rows and its extra row-equivalents.
"""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow.compute as pc

from dvlake import native_jar
from dvlake.commands.inspection.health_files import column, file_columns, plain
from dvlake.config import NATIVE_SCAN as NATIVE_SETTING
from dvlake.config import deleted_file_retention_ms
from dvlake.display import count, human_bytes, percent
from dvlake.dv.descriptor import DeletionVectorDescriptor, is_dv_file_name
from dvlake.dv.store import has_format_version, stored_size
from dvlake.errors import CorruptLogError, InvalidArgumentError
from dvlake.log.snapshot import Snapshot
from dvlake.log.sql_dialect import quote_identifier
from dvlake.storage.paths import join, normalize_table_root

#: delta-spark's ``optimize.maxDeletedRowsRatio`` default: files above it are worth rewriting.
DEFAULT_MAX_DELETED_RATIO = 0.05
#: A partition whose files with DVs cost readers more than this (estimated extra fraction of a full scan of the
#: partition) is worth purging even when none of its files is above the deleted ratio.
DEFAULT_MAX_READ_OVERHEAD = 0.25
#: Bytes a packed DV takes in its file besides the bitmap: the u32 size before it and the u32 CRC after it.
DV_RECORD_OVERHEAD = 8


@dataclass(frozen=True)
class ReadPath:
    """One read path's measured cost of files with DVs: (deleted ratio, time ratio vs the same files without DVs)."""

    name: str  # 'native' | 'python'
    label: str
    full_scan: tuple[tuple[float, float], ...]
    narrow_aggregate: tuple[tuple[float, float], ...]
    fixed_query_seconds: float | None  # measured fixed cost per query once any file has a DV (None: not measured)


#: BENCHMARKS.md "Read overhead on Delta tables" (bench/read_tables.py, 2026-11-25): wall ratios, 8/8 files with DVs.
NATIVE = ReadPath("native", "native scan", ((0.001, 1.45), (0.01, 1.06), (0.10, 1.17)),
                  ((0.001, 1.17), (0.01, 1.22), (0.10, 1.23)), None)
PYTHON = ReadPath("python", "pure-Python path", ((0.001, 1.40), (0.01, 1.49), (0.10, 1.53)),
                  ((0.001, 2.43), (0.01, 2.79), (0.10, 2.92)), 0.25)
READ_PATHS = {p.name: p for p in (NATIVE, PYTHON)}


def read_path_for(setting: str | None = None) -> tuple[ReadPath, str]:
    """The read path a query in a session with ``spark.dvlake.scan.native`` = ``setting`` would take, and why.

    ``auto`` (the default) means the native scan when its jar is built for the installed PySpark; this is
    decided without starting Spark, so a jar that is present but fails to load in a session is not seen.
    """
    value = (setting or "auto").strip().lower()
    if value == "false":
        return PYTHON, f"{NATIVE_SETTING}=false"
    if value == "true":
        return NATIVE, f"{NATIVE_SETTING}=true"
    if value != "auto":
        raise InvalidArgumentError(f"{NATIVE_SETTING} must be auto, true or false, got {setting!r}")
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return PYTHON, "PySpark is not installed here"
    choice = native_jar.find_jar(version, build=False)
    if choice.path is not None:
        return NATIVE, f"{choice.why} ({choice.path})"
    if choice.origin == "first use":
        return NATIVE, f"its jar for Spark {version} is {choice.why}"
    return PYTHON, choice.why


def _non_decreasing(values: list[float]) -> list[float]:
    """The least-squares non-decreasing fit of ``values`` (pool adjacent violators, equal weights)."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, n2), (m1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * n1 + m2 * n2) / (n1 + n2), n1 + n2])
    return [m for m, n in blocks for _ in range(int(n))]


def _interpolate(points: tuple[tuple[float, float], ...], ratio: np.ndarray) -> np.ndarray:
    """Time ratio at each deleted ratio: the non-decreasing fit of the measured points, linear in log10(deleted
    ratio) between them, clamped outside."""
    xs = np.log10([p[0] for p in points])
    ys = np.array(_non_decreasing([p[1] for p in points]))
    with np.errstate(divide="ignore"):
        x = np.log10(np.clip(ratio, points[0][0], points[-1][0]))
    return np.interp(x, xs, ys)


def estimate_read_overhead(physical_rows: np.ndarray, deleted_rows: np.ndarray, has_dv: np.ndarray,
                           points: tuple[tuple[float, float], ...] = NATIVE.full_scan) -> np.ndarray:
    """Extra plain-scan row-equivalents each file costs a reader (the model in the module docstring)."""
    rows = np.maximum(physical_rows, 0).astype(np.float64)
    ratio = np.divide(deleted_rows, rows, out=np.zeros_like(rows), where=rows > 0)
    extra = rows * np.maximum(_interpolate(points, ratio) - 1.0, 0.0)
    return np.where(has_dv, extra, 0.0)


def model_text(path: ReadPath) -> str:
    """The model in one sentence, with the numbers it uses (the JSON and HTML reports carry it)."""
    fit_full = ", ".join(f"{y:.2f}" for y in _non_decreasing([p[1] for p in path.full_scan]))
    fit_agg = ", ".join(f"{y:.2f}" for y in _non_decreasing([p[1] for p in path.narrow_aggregate]))
    fixed = f"; plus ~{path.fixed_query_seconds:.2f} s fixed per query when any DV exists" if path.fixed_query_seconds else ""
    return (f"{path.label}: extra row-equivalents per file with a DV = physical rows x (time ratio at its deleted ratio "
            f"- 1); time ratios from BENCHMARKS.md 'Read overhead on Delta tables' made non-decreasing (full scan "
            f"{fit_full}x, 2-column aggregate {fit_agg}x at 0.1/1/10 % deleted), interpolated in log10(deleted ratio), "
            f"clamped outside{fixed}")


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
    read_path: ReadPath = NATIVE

    @property
    def model_text(self) -> str:
        """The read overhead model with the numbers of the read path the estimate assumes."""
        return model_text(self.read_path)

    def to_dict(self, max_files: int | None = None) -> dict[str, Any]:
        """JSON-friendly form (``max_files`` keeps the per-file list short: most-deleted files first)."""
        files = self.files.drop(columns=[c for c in self.files.columns if c.startswith("_")])
        files = files.sort_values(["deleted_rows", "path"], ascending=[False, True])
        if max_files is not None:
            files = files.head(max_files)
        return {
            "table": self.table, "version": self.version, "partition_columns": self.partition_columns,
            "summary": self.summary, "read_overhead_model": self.model_text,
            "recommendations": [asdict(r) for r in self.recommendations],
            "problems": [asdict(p) for p in self.problems],
            "partitions": records(self.partitions), "dv_files": records(self.dv_files),
            "versions": records(self.versions), "files": records(files),
        }


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows of a frame as JSON-friendly dicts (numpy scalars to Python, NaN to None)."""
    return [{str(k): plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


# --- the report ---------------------------------------------------------------------------------


def table_health(path: str, version: int | None = None, *, max_deleted_ratio: float = DEFAULT_MAX_DELETED_RATIO,
                 max_read_overhead: float = DEFAULT_MAX_READ_OVERHEAD, read_path: str | None = None,
                 history_versions: int = 200, verify_headers: bool = True,
                 on_step: Callable[[str], None] | None = None) -> HealthReport:
    """The DV health of ``path`` at ``version`` (latest when None).

    ``read_path`` is the value of ``spark.dvlake.scan.native`` the readers' sessions have (``auto``,
    ``true``, ``false``; None: auto), which picks the measured costs of the estimate; ``max_read_overhead``
    is the estimated extra cost of a full scan of a partition above which purging it is recommended even
    when no file is above ``max_deleted_ratio``. ``history_versions`` bounds how many recent commits the
    DV-count history reads; ``verify_headers`` reads each DV's 4-byte size field from its DV file (cheap;
    off skips it); ``on_step`` is told what is being read next (the CLI shows it as progress on a terminal).
    """
    model, why = read_path_for(read_path)
    step = on_step or (lambda _msg: None)
    step("replaying the log")
    snapshot = Snapshot.load(normalize_table_root(path), version=version)
    step(f"summarising {snapshot.num_files:,} files")
    files = file_frame(snapshot, model)
    step("reading DV file headers")
    dv_files, problems = _dv_file_frame(snapshot, files, verify_headers)
    step("reading recent commits for the DV history")
    versions = dv_history(snapshot, history_versions)
    now = _now_ms()
    recs = recommend(snapshot, files, dv_files, max_deleted_ratio, now, max_read_overhead=max_read_overhead,
                     read_path=model)
    files["action"] = file_actions(files, recs)
    partitions = _partition_frame(files)
    summary = _summary(snapshot, files, dv_files, partitions, now, model)
    summary.update(max_deleted_ratio=max_deleted_ratio, max_read_overhead=max_read_overhead, read_path=model.name,
                   read_path_reason=why)
    return HealthReport(snapshot.table_root, snapshot.version, snapshot.partition_columns, summary, files, partitions,
                        dv_files, versions, recs, problems, model)


def file_frame(snapshot: Snapshot, read_path: ReadPath = NATIVE) -> pd.DataFrame:
    """One row per live file (``health_files.file_columns``) with the estimated read overhead on ``read_path``."""
    frame = pd.DataFrame(file_columns(snapshot))
    physical = frame["physical_rows"].to_numpy()
    deleted = frame["deleted_rows"].to_numpy()
    has_dv = frame["has_dv"].to_numpy()
    frame["overhead_rows_full_scan"] = estimate_read_overhead(physical, deleted, has_dv, read_path.full_scan)
    frame["overhead_rows_aggregate"] = estimate_read_overhead(physical, deleted, has_dv, read_path.narrow_aggregate)
    return frame


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
    dv = column(t, "deletionVector")
    kinds = pc.struct_field(dv, "storageType").to_pylist()
    paths = pc.struct_field(dv, "pathOrInlineDv").to_pylist()
    stamps = column(t, "deletionTimestamp").to_pylist()
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
            if loc in known or (inside and is_dv_file_name(name)):  # elsewhere ('p' DVs): only the files the log names
                out[loc] = (info.size, info.mtime_ms)
    return out


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
                if not has_format_version(f):
                    problems.append(Problem(loc, f"deletion vector file {loc}: format version byte is not 01"))
                    continue
                bad = 0
                first = ""
                for off, size in zip(group["dv_offset"].to_numpy(), group["dv_size_bytes"].to_numpy(), strict=True):
                    off = 1 if off is None or (isinstance(off, float) and math.isnan(off)) else int(off)
                    found = stored_size(f, off, int(size), total)
                    if found != size:
                        bad += 1
                        first = first or f"offset {off}: descriptor says {size} bytes, header says " + (
                            str(found) if found is not None else f"nothing (file has {total} bytes)")
                if bad:
                    problems.append(Problem(loc, f"deletion vector file {loc}: {bad} DV header(s) do not match their "
                                                 f"descriptors (first at {first}); reads of those files will fail"))
            finally:
                f.close()
        except OSError as exc:
            problems.append(Problem(loc, f"deletion vector file {loc} cannot be read: {exc}"))
    return problems


def _partition_frame(files: pd.DataFrame) -> pd.DataFrame:
    """Per partition: files, files with DVs, rows, deleted rows and ratio, DV bytes, estimated overhead (rows and
    fraction of a full scan), and the recommended action ('' when none)."""
    known_rows = files["physical_rows"].clip(lower=0)
    g = files.assign(physical_rows=known_rows, dv_files_n=files["dv_file"]).groupby("partition", sort=True)
    out = g.agg(files=("path", "size"), files_with_dv=("has_dv", "sum"), size_bytes=("size_bytes", "sum"),
                physical_rows=("physical_rows", "sum"), deleted_rows=("deleted_rows", "sum"),
                dv_bytes=("dv_size_bytes", "sum"), dv_files=("dv_files_n", "nunique"),
                overhead_rows_full_scan=("overhead_rows_full_scan", "sum"),
                overhead_rows_aggregate=("overhead_rows_aggregate", "sum"),
                max_file_deleted_ratio=("deleted_ratio", "max"), action=("action", "max")).reset_index()
    rows = out["physical_rows"].to_numpy(np.float64)
    out["deleted_ratio"] = np.divide(out["deleted_rows"].to_numpy(np.float64), rows, out=np.zeros(len(out)), where=rows > 0)
    out["est_full_scan_overhead"] = np.divide(out["overhead_rows_full_scan"].to_numpy(np.float64), rows,
                                              out=np.zeros(len(out)), where=rows > 0)
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


def partition_predicate(snapshot: Snapshot, values: list[str | None]) -> str | None:
    """The SQL predicate selecting one partition (``day = '2024-01-01' AND k = 3``), None when unpartitioned.

    ``values`` are the partition's raw ``partitionValues`` strings in partition-column order (None or '' for null).
    """
    if not snapshot.partition_columns:
        return None
    types = {f["name"].lower(): f["type"] for f in snapshot.schema["fields"]}
    clauses = []
    for col, value in zip(snapshot.partition_columns, values, strict=True):
        ident = quote_identifier(col)
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


def _worth_rewriting(files: pd.DataFrame, max_deleted_ratio: float) -> pd.Series:
    """Files with a DV above ``max_deleted_ratio`` deleted, or without numRecords (delta-spark rewrites those)."""
    ratio = files["deleted_ratio"]
    return files["has_dv"] & (ratio.isna() | (ratio > max_deleted_ratio))


def _partition_read_overhead(files: pd.DataFrame) -> pd.Series:
    """Estimated extra fraction of a full scan of each partition with a DV (by partition key)."""
    rows = files["physical_rows"].clip(lower=0).groupby(files["partition"]).sum()
    extra = files.loc[files["has_dv"]].groupby("partition")["overhead_rows_full_scan"].sum()
    total = rows.reindex(extra.index).to_numpy(np.float64)
    return pd.Series(np.divide(extra.to_numpy(np.float64), total, out=np.zeros(len(extra)), where=total > 0),
                     index=extra.index)


def recommend(snapshot: Snapshot, files: pd.DataFrame, dv_files: pd.DataFrame,
              max_deleted_ratio: float = DEFAULT_MAX_DELETED_RATIO, now_ms: int | None = None, *,
              max_read_overhead: float = DEFAULT_MAX_READ_OVERHEAD, read_path: ReadPath = NATIVE) -> list[Recommendation]:
    """What to run now, ranked by rows reclaimed.

    A partition is worth rewriting when one of its files has more than ``max_deleted_ratio`` of its
    rows deleted (delta-spark's ``optimize.maxDeletedRowsRatio``) or has a DV without numRecords.
    Two or more such files: ``OPTIMIZE … WHERE`` (compacts them together). A lone one:
    ``REORG … APPLY (PURGE)``, because OPTIMIZE drops single-file bins and would leave it as it is.
    A partition with none, whose files with DVs cost readers more than ``max_read_overhead`` of a full
    scan (``files``' ``overhead_rows_full_scan``, estimated on ``read_path``): ``REORG … APPLY (PURGE)``,
    which rewrites exactly its files with DVs (OPTIMIZE would leave files below the deleted ratio as they
    are). DV files no live file references: ``VACUUM``, only for those already older than the retention
    (VACUUM would not delete the others yet, so there is nothing to run for them now).
    """
    root = snapshot.table_root
    ident = f"delta.`{root}`"
    worth = _worth_rewriting(files, max_deleted_ratio)
    with_dv = files[files["has_dv"]]
    n_cols = len(snapshot.partition_columns)
    out: list[Recommendation] = []

    def where(group: pd.DataFrame) -> tuple[str, str]:
        first = group.iloc[0]
        pred = partition_predicate(snapshot, [first[f"_pv{i}"] for i in range(n_cols)])
        return (f" --where {_shell_quote(pred)}" if pred else ""), (f" WHERE {pred}" if pred else "")

    def purge(partition: str, group: pd.DataFrame, reason: str) -> Recommendation:
        where_cli, where_sql = where(group)
        return Recommendation("REORG PURGE", partition, f"dvlake purge {_shell_quote(root)}{where_cli}",
                              f"REORG TABLE {ident}{where_sql} APPLY (PURGE)", int(group["deleted_rows"].sum()),
                              len(group), int(group["size_bytes"].sum()), 0, reason)

    hot_partitions: set[str] = set()
    for partition, group in files[worth].groupby("partition", sort=False):
        hot_partitions.add(str(partition))
        n = len(group)
        worst = group["deleted_ratio"].max()
        worst_text = "unknown" if pd.isna(worst) else percent(worst, 1)
        if n >= 2:
            where_cli, where_sql = where(group)
            out.append(Recommendation(
                "OPTIMIZE", str(partition), f"dvlake optimize {_shell_quote(root)}{where_cli}", f"OPTIMIZE {ident}{where_sql}",
                int(group["deleted_rows"].sum()), n, int(group["size_bytes"].sum()), 0,
                f"{n} files above {max_deleted_ratio:.0%} deleted (worst {worst_text}); OPTIMIZE rewrites them without the "
                "deleted rows"))
        else:
            rewritten = with_dv[with_dv["partition"] == partition]
            others = len(rewritten) - 1
            out.append(purge(str(partition), rewritten,
                             f"1 file {worst_text} deleted; OPTIMIZE skips a lone file, REORG … APPLY (PURGE) rewrites it"
                             + (f" and the partition's {count(others, 'other file')} with a DV" if others else "")))
    cost = _partition_read_overhead(files)
    for key, overhead in cost[cost > max_read_overhead].items():
        partition = str(key)
        if partition in hot_partitions:
            continue
        group = with_dv[with_dv["partition"] == partition]
        n = len(group)
        out.append(purge(
            str(partition), group,
            f"Readers pay est. +{overhead:.0%} per full scan (on the {read_path.label}) for {count(n, 'file')} with a DV, "
            f"though none has more than {percent(float(group['deleted_ratio'].max()), 1)} deleted; REORG … APPLY (PURGE) "
            "rewrites them without DVs, worth it when the partition is read more often than it is deleted from"))
    stale = dv_files[vacuumable(dv_files, now_ms if now_ms is not None else _now_ms())]
    if len(stale):
        out.append(Recommendation(
            "VACUUM", "", f"dvlake vacuum {_shell_quote(root)}", f"VACUUM {ident}", 0, 0, 0,
            int(stale["size_bytes"].clip(lower=0).sum()),
            f"{len(stale)} DV file(s) no live file references, older than the retention "
            "(delta.deletedFileRetentionDuration): VACUUM deletes them"))
    out.sort(key=lambda r: (-r.rows_reclaimed, -r.bytes_reclaimed, r.partition))
    return out


def file_actions(files: pd.DataFrame, recommendations: list[Recommendation],
                 max_deleted_ratio: float = DEFAULT_MAX_DELETED_RATIO) -> np.ndarray:
    """What each file gets from the recommendations: 'OPTIMIZE' (its partition's OPTIMIZE rewrites it),
    'REORG PURGE' (its partition's PURGE rewrites it: every file with a DV there) or ''."""
    out = np.full(len(files), "", dtype=object)
    partition = files["partition"].to_numpy()
    worth = _worth_rewriting(files, max_deleted_ratio).to_numpy()
    has_dv = files["has_dv"].to_numpy()
    for r in recommendations:
        if r.action == "OPTIMIZE":
            out[(partition == r.partition) & worth] = r.action
        elif r.action == "REORG PURGE":
            out[(partition == r.partition) & has_dv] = r.action
    return out


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _summary(snapshot: Snapshot, files: pd.DataFrame, dv_files: pd.DataFrame, partitions: pd.DataFrame,
             now_ms: int, read_path: ReadPath) -> dict[str, Any]:
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
        "est_fixed_query_seconds": (read_path.fixed_query_seconds or 0.0) if with_dv else 0.0,
    }


def _first_vacuum_time(dv_files: pd.DataFrame, now_ms: int) -> int | None:
    """When the next stale DV file not yet deletable becomes deletable by VACUUM (ms), None when none waits."""
    if not len(dv_files):
        return None
    after = pd.to_numeric(dv_files["vacuum_after_ms"], errors="coerce")
    waiting = after[(dv_files["live_dvs"] == 0) & (after > now_ms)]
    return int(waiting.min()) if len(waiting) else None


__all__ = ["HealthReport", "Recommendation", "Problem", "table_health", "estimate_read_overhead", "dv_history",
           "recommend", "file_actions", "partition_predicate", "human_bytes", "read_path_for", "model_text", "ReadPath",
           "NATIVE", "PYTHON"]
