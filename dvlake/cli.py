"""The ``dvlake`` command line: look at a Delta table's log and DVs, and run table maintenance.

Each subcommand is a thin shell over what the Python API uses. ``history``, ``detail``, ``files``,
``dv``, ``health`` and ``vacuum`` read the log and list files only (no Spark: seconds, not a Spark
start); ``sql``, ``optimize``, ``purge`` and ``restore`` start a local Spark session, after the checks
that need none (is PATH a Delta table), with Spark's own output in a log file named on failure
(``dvlake.terminal.spark_start``). ``--conf key=value`` passes settings to that session (and to vacuum).

Exit codes: 0 ok, 1 error (dvlake's message on stderr, the traceback only with ``--debug``),
2 usage error. ``--json`` prints machine-readable output (unchanged by the human summaries);
progress appears only on a terminal.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from dvlake._version import __version__
from dvlake.config import DEBUG_CONF
from dvlake.display import human_bytes, percent
from dvlake.errors import DvlakeError, InvalidArgumentError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from rich.console import Console

    from dvlake.log.snapshot import Snapshot

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
#: Terminals narrower than this get tables with long cells as blocks of lines instead.
NARROW = 100


class CommandNotAvailableError(DvlakeError):
    """The command's implementation (an API method or SQL statement) is not part of this build of dvlake."""

    error_class = "DVLAKE_COMMAND_NOT_AVAILABLE"


def _env_debug() -> bool:
    return os.environ.get("DVLAKE_DEBUG", "") not in ("", "0")


class _State:
    """What the group's options set for the command that runs (reset on every invocation)."""

    debug = _env_debug()
    conf: dict[str, str] = {}
    spark_log: str | None = None
    own_process = False  # started as the console script: the log-only commands may keep pandas out (terminal.light)


F = TypeVar("F", bound=Callable[..., Any])


def _log_only(command: F) -> F:
    """Mark a command that reads the log and lists files only: in a process of its own it runs without pandas,
    which pyarrow would otherwise import on its first conversion (``dvlake.terminal.light``)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not _State.own_process:
            return command(*args, **kwargs)
        from dvlake.terminal.light import without_pandas

        with without_pandas():
            return command(*args, **kwargs)

    return cast(F, run)


# --- output --------------------------------------------------------------------------------------


def _is_tty() -> bool:
    return sys.stderr.isatty()


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else 1000  # pipes: each row on one line
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def _json_default(v: Any) -> Any:
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    if hasattr(v, "asDict"):  # pyspark Row
        return v.asDict(recursive=True)
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return str(v)


def _print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, default=_json_default, indent=2, ensure_ascii=False))


@contextmanager
def _progress(message: str) -> Iterator[Callable[[str], None]]:
    """A spinner naming dvlake's current step on a terminal; silent otherwise. Yields the update function.

    The spinner writes to its own copy of the terminal's stream, so it keeps showing while the Spark
    start points file descriptor 2 at the log file.
    """
    if not _is_tty():
        yield lambda _msg: None
        return
    from rich.console import Console

    with os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1) as terminal:
        console = Console(file=terminal, highlight=False)
        with console.status(message + "…") as status:
            yield lambda msg: status.update(msg + "…")


def _table(title: str | None, columns: list[str], rows: list[list[Any]], *, right: set[str] | None = None,
           header: bool = True, keep: set[str] | None = None) -> Any:
    """A rich table. On a narrow terminal cells wrap at spaces; a word longer than its column is folded, except in
    the ``keep`` columns (short values: versions, times, names, partitions), which are never broken and get their
    full width first."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False, header_style="bold", show_header=header)
    for c in columns:
        kept = c in (keep or set())
        table.add_column(c, justify="right" if c in (right or set()) else "left", overflow="fold", no_wrap=kept)
    for r in rows:
        table.add_row(*("" if v is None else (f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))
                        for v in r))
    return table


def _fmt_ts(v: Any) -> str:
    return v.strftime("%Y-%m-%d %H:%M:%S") if isinstance(v, dt.datetime) else str(v or "")


# --- shared options ------------------------------------------------------------------------------

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables (for scripts).")
version_option = click.option("--version", "-v", "version", type=click.IntRange(min=0), default=None,
                              help="Read this table version instead of the latest (time travel).")
path_argument = click.argument("path", metavar="PATH")


def _load(path: str, version: int | None = None) -> Snapshot:
    from dvlake.log.snapshot import Snapshot
    from dvlake.storage.paths import normalize_table_root

    return Snapshot.load(normalize_table_root(path), version=version)


# --- the group -----------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, "-V", "--version", prog_name="dvlake", message="%(prog)s %(version)s")
@click.option("--debug", is_flag=True,
              help="On an error, show the full traceback and Spark's own messages (Java stack, plans, Spark's log output).")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE",
              help="A Spark setting for the session (repeatable), e.g. "
                   "--conf spark.databricks.delta.retentionDurationCheck.enabled=false.")
def cli(debug: bool, confs: tuple[str, ...]) -> None:
    """dvlake: Delta Lake tables with deletion vectors (DVs).

    Look at a table's log and its DVs and clean up old files without starting Spark (history, detail,
    files, dv, health, vacuum), and run SQL and table maintenance on local Spark (sql, optimize, purge,
    restore); Spark's own output goes to a log file, named if the command fails.
    PATH is a table root: a local folder or a URI such as s3://bucket/table.

    \b
    Exit codes: 0 ok, 1 error, 2 usage error.
    Examples:
      dvlake history /data/events --limit 5
      dvlake health /data/events --plot health.png
      dvlake sql "DELETE FROM delta.`/data/events` WHERE user_id = 3"
      dvlake --conf spark.databricks.delta.retentionDurationCheck.enabled=false vacuum /data/events --retain-hours 0
    """
    conf: dict[str, str] = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--conf")
        conf[key.strip()] = value.strip()
    _State.conf = conf
    _State.debug = debug or _env_debug() or conf.get(DEBUG_CONF, "").strip().lower() == "true"
    from dvlake import errors

    errors.set_debug(_State.debug)


# --- log readers (no Spark) ------------------------------------------------------------------------


_HISTORY_METRICS = ("numDeletionVectorsAdded", "numDeletionVectorsRemoved", "numDeletedRows", "numOutputRows",
                    "numAddedFiles", "numRemovedFiles", "numFiles", "numCopiedRows")


@cli.command()
@path_argument
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None, help="Show only the newest N commits.")
@json_option
@_log_only
def history(path: str, limit: int | None, as_json: bool) -> None:
    """Commits of the table, newest first (DESCRIBE HISTORY): operation, parameters, DV metrics.

    The JSON form has every DESCRIBE HISTORY column; the table shows the operation parameters
    and the main row, file and deletion-vector metrics.
    """
    from dvlake.commands.inspection.describe import history_rows

    rows = history_rows(_load(path), limit)
    if as_json:
        _print_json(rows)
        return
    out = []
    for r in rows:
        params = ", ".join(f"{k}={v}" for k, v in r["operationParameters"].items())
        metrics = r["operationMetrics"]
        shown = ", ".join(f"{k}={metrics[k]}" for k in _HISTORY_METRICS if k in metrics)
        out.append([r["version"], _fmt_ts(r["timestamp"]), r["operation"] or "", params, shown])
    console = _console()
    if console.width >= NARROW:
        console.print(_table(None, ["version", "timestamp (UTC)", "operation", "parameters", "metrics"], out,
                             right={"version"}, keep={"version", "timestamp (UTC)", "operation"}))
        return
    # a narrow terminal: one block per commit, lines wrapped between words (a table would cut its words into pieces)
    import textwrap

    from rich.text import Text

    for version, when, operation, params, shown in out:
        console.print(Text.assemble((f"version {version:,}", "bold"), f"  {when} UTC  ", (operation, "bold")))
        for label, text in (("parameters", params), ("metrics", shown)):
            if text:
                console.print(textwrap.fill(f"{label}: {text}", width=console.width, initial_indent="  ",
                                            subsequent_indent="    ", break_on_hyphens=False),
                              markup=False, highlight=False, soft_wrap=True)


@cli.command()
@path_argument
@version_option
@json_option
@_log_only
def detail(path: str, version: int | None, as_json: bool) -> None:
    """Table detail (DESCRIBE DETAIL): location, size, partitioning, properties, protocol, DV statistics."""
    from dvlake.commands.inspection.describe import detail_row

    row = detail_row(_load(path, version))
    if as_json:
        _print_json(row)
        return
    rows = []
    for k, v in row.items():
        if isinstance(v, dict):
            v = ", ".join(f"{kk}={vv}" for kk, vv in v.items()) or "{}"
        elif isinstance(v, list):
            v = ", ".join(map(str, v)) or "[]"
        elif isinstance(v, dt.datetime):
            v = _fmt_ts(v)
        rows.append([k, v])
    _console().print(_table(None, ["field", "value"], rows, keep={"field"}))


@cli.command()
@path_argument
@version_option
@click.option("--with-dvs", is_flag=True,
              help="Only files that carry a DV, with the DV's storage, file, offset, size and cardinality.")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None, help="Show at most N files.")
@json_option
@_log_only
def files(path: str, version: int | None, with_dvs: bool, limit: int | None, as_json: bool) -> None:
    """Live data files of the table: partition, size, physical rows, rows deleted by their DV.

    Rows are sorted by path. With --with-dvs only files that have a DV are listed, with where
    the DV is stored (inline, or a DV file and the offset inside it).
    """
    import numpy as np

    from dvlake.commands.inspection.health_files import file_columns, rows

    columns = file_columns(_load(path, version))
    order = np.argsort(columns["path"], kind="stable")
    if with_dvs:
        order = order[columns["has_dv"][order]]
    if limit is not None:
        order = order[:limit]
    cols = ["path", "partition", "size_bytes", "physical_rows", "deleted_rows", "deleted_ratio"]
    if with_dvs:
        cols += ["dv_storage", "dv_file", "dv_offset", "dv_size_bytes"]
    found = rows(columns, cols, order)
    if as_json:
        _print_json(found)
        return
    for d in found:
        d["deleted_ratio"] = percent(float("nan") if d["deleted_ratio"] is None else d["deleted_ratio"])
        if with_dvs:
            d["dv_file"] = os.path.basename(d["dv_file"]) if d["dv_file"] else "(inline)"
    labels = {"size_bytes": "bytes", "physical_rows": "rows", "deleted_rows": "deleted", "deleted_ratio": "deleted %",
              "dv_storage": "DV storage", "dv_file": "DV file", "dv_offset": "offset", "dv_size_bytes": "DV bytes"}
    from dvlake.terminal.listing import listing_lines

    lines = listing_lines([labels.get(c, c) for c in cols], [list(d.values()) for d in found],
                          right={"bytes", "rows", "deleted", "deleted %", "offset", "DV bytes"})
    click.echo("\n".join(lines))
    if _is_tty():
        _console(stderr=True).print(f"{len(found):,} file(s)")


def _find_file(snapshot: Snapshot, file: str) -> dict[str, Any]:
    """The live add whose path (as logged, URL-decoded, absolute, or by its file name) is ``file``."""
    from urllib.parse import unquote

    from dvlake.storage.paths import absolute_file_location

    paths = snapshot.files.column("path").to_pylist()
    wanted = file.rstrip("/")
    exact = [i for i, p in enumerate(paths) if wanted in (p, unquote(p), absolute_file_location(snapshot.table_root, p))]
    matches = exact or [i for i, p in enumerate(paths) if unquote(p).rsplit("/", 1)[-1] == wanted.rsplit("/", 1)[-1]]
    if not matches:
        raise InvalidArgumentError(
            f"no live file {file!r} in {snapshot.table_root} at version {snapshot.version}; "
            f"`dvlake files {snapshot.table_root}` lists the {snapshot.num_files} live files")
    if len(matches) > 1:
        names = ", ".join(paths[i] for i in matches[:5])
        raise InvalidArgumentError(f"{file!r} matches {len(matches)} live files ({names}); give the path as logged")
    return snapshot.files.slice(matches[0], 1).to_pylist()[0]


def _row_ranges(rows: Any, limit: int | None) -> tuple[list[tuple[int, int]], int]:
    """Inclusive runs of consecutive row indexes (the first ``limit``) and how many runs there are."""
    import numpy as np

    if len(rows) == 0:
        return [], 0
    breaks = np.flatnonzero(np.diff(rows.astype(np.int64)) != 1)
    starts = np.concatenate(([0], breaks + 1))
    ends = np.concatenate((breaks, [len(rows) - 1]))
    n = len(starts)
    k = n if limit is None else min(n, limit)
    return [(int(rows[starts[i]]), int(rows[ends[i]])) for i in range(k)], n


@cli.command("dv")
@path_argument
@click.argument("file", metavar="FILE")
@version_option
@click.option("--max-ranges", type=click.IntRange(min=0), default=20, show_default=True,
              help="Show at most this many row ranges (0: all).")
@json_option
@_log_only
def dv_command(path: str, file: str, version: int | None, max_ranges: int, as_json: bool) -> None:
    """Decode one data file's DV: deleted rows, row ranges, storage, DV file, offset, checksum.

    FILE is the data file's path as logged (see `dvlake files`), its absolute path, or just its
    file name. The DV is read and checked like a reader does (format byte, size field, CRC-32,
    roaring magic, cardinality); a mismatch is an error (exit 1).
    """
    import struct

    from dvlake.dv.descriptor import DeletionVectorDescriptor
    from dvlake.dv.roaring import to_numpy
    from dvlake.dv.store import load_bitmap

    snapshot = _load(path, version)
    add = _find_file(snapshot, file)
    raw = add.get("deletionVector") or {}
    out: dict[str, Any] = {"table": snapshot.table_root, "version": snapshot.version, "file": add["path"]}
    if not raw or raw.get("storageType") is None:
        out.update({"has_dv": False, "cardinality": 0})
        if as_json:
            _print_json(out)
        else:
            _console().print(f"{add['path']} has no deletion vector at version {snapshot.version}: no row is deleted.")
        return
    desc = DeletionVectorDescriptor.from_json({k: v for k, v in raw.items() if v is not None})
    bitmap = load_bitmap(desc, snapshot.table_root)  # raises on any check that fails
    rows = to_numpy(bitmap)
    ranges, n_ranges = _row_ranges(rows, max_ranges or None)
    from dvlake.log.stats import num_records_of

    physical = num_records_of(add.get("stats"))
    out.update({"has_dv": True, "cardinality": desc.cardinality, "physical_rows": physical,
                "storage_type": desc.storage_type, "size_in_bytes": desc.size_in_bytes, "offset": desc.offset,
                "dv_file": None, "crc32": None, "checksum_verified": False, "row_ranges": ranges,
                "row_ranges_total": n_ranges, "first_row": int(rows[0]) if len(rows) else None,
                "last_row": int(rows[-1]) if len(rows) else None})
    if desc.is_on_disk:
        location = desc.absolute_path(snapshot.table_root)
        offset = desc.offset if desc.offset is not None else 1
        (crc,) = struct.unpack(">I", snapshot.storage.read_range(location, offset + 4 + desc.size_in_bytes, 4))
        out.update({"dv_file": location, "crc32": f"{crc:08x}", "checksum_verified": True})
    if as_json:
        _print_json(out)
        return
    storage = {"u": "DV file, table-relative (u)", "p": "DV file, absolute path (p)", "i": "inline in the log (i)"}
    lines = [
        ("file", add["path"]), ("version", str(snapshot.version)),
        ("deleted rows",
         f"{desc.cardinality:,}" + (f" of {physical:,} ({percent(desc.cardinality / physical)})" if physical else "")),
        ("storage", storage[desc.storage_type]),
    ]
    if desc.is_on_disk:
        lines += [("DV file", out["dv_file"]), ("offset", f"{out['offset']}"), ("size", f"{desc.size_in_bytes:,} bytes"),
                  ("checksum", f"CRC-32 {out['crc32']} verified")]
    else:
        lines += [("size", f"{desc.size_in_bytes:,} bytes (no checksum for inline DVs)")]
    shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)
    more = n_ranges - len(ranges)
    lines.append(("row ranges", f"{n_ranges:,}: {shown}" + (f", … ({more:,} more; --max-ranges 0 shows all)" if more else "")))
    console = _console()
    for k, v in lines:
        console.print(f"[bold]{k:>13}[/bold]  {v}", soft_wrap=True)


# --- health --------------------------------------------------------------------------------------


@cli.command()
@path_argument
@version_option
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the pictures (deleted ratio per file, deleted rows per partition, DVs over versions) as PNG.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write a self-contained HTML report (tables and the pictures).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="Partitions and recommendations to list.")
@click.option("--max-deleted-ratio", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="Files with more of their rows deleted are worth rewriting (delta-spark's optimize.maxDeletedRowsRatio).")
@click.option("--max-read-overhead", type=click.FloatRange(min=0), default=0.25, show_default=True,
              help="Partitions whose files with DVs add more than this to a full scan (estimated, 0.25 = +25%) are "
                   "worth purging even when no file is above --max-deleted-ratio.")
@click.option("--history", "history_versions", type=click.IntRange(min=1), default=200, show_default=True,
              help="How many recent versions the DV history covers.")
@json_option
def health(path: str, version: int | None, plot_path: str | None, html_path: str | None, top: int,
           max_deleted_ratio: float, max_read_overhead: float, history_versions: int, as_json: bool) -> None:
    """DV health: deleted rows per file and partition, DV storage, stale DV bytes, read overhead, what to run.

    Reads only the log and the DV files' headers (never a data file or a DV body), so it is fast
    on large tables. The read overhead is an estimate from the read benchmark (BENCHMARKS.md,
    "Read overhead on Delta tables") for the read path a query would take: the native scan when
    its jar is built for the installed Spark, else the pure-Python path
    (--conf spark.dvlake.scan.native=false|true picks one). A file with a DV costs its rows x
    (time ratio at its deleted ratio - 1) extra plain-scan rows. Recommendations give the exact
    command to run now, ranked by rows reclaimed: OPTIMIZE ... WHERE for partitions with several
    files above --max-deleted-ratio, REORG ... APPLY (PURGE) for a lone such file (OPTIMIZE skips
    single-file bins) or for a partition whose DVs cost readers more than --max-read-overhead,
    VACUUM for DV files it would delete now. Exit 1 when a DV file is missing or a DV header does
    not match its descriptor.
    """
    from dvlake.commands.inspection.health import NATIVE_SETTING, table_health

    with _progress("reading the log") as update:
        report = table_health(path, version, max_deleted_ratio=max_deleted_ratio, max_read_overhead=max_read_overhead,
                              read_path=_State.conf.get(NATIVE_SETTING), history_versions=history_versions,
                              on_step=update)
        if plot_path or html_path:
            update("drawing pictures")
            from dvlake.commands.inspection import health_report

            if plot_path:
                health_report.write_png(report, plot_path)
            if html_path:
                health_report.write_html(report, html_path)
    if as_json:
        _print_json(report.to_dict(max_files=1000))
    else:
        _print_health(report, top)
        if plot_path:
            click.echo(f"pictures written to {plot_path}")
        if html_path:
            click.echo(f"HTML report written to {html_path}")
    if report.problems:
        for p in report.problems:
            click.echo(f"error: {p.message}", err=True)
        sys.exit(EXIT_ERROR)


def _overhead_text(s: dict[str, Any]) -> str:
    """The summary's read overhead line: both estimates, the fixed cost where measured, and the read path assumed."""
    text = f"est. +{s['est_full_scan_overhead']:.0%} full scan, +{s['est_aggregate_overhead']:.0%} 2-column aggregate"
    if s["est_fixed_query_seconds"]:
        text += f", +{s['est_fixed_query_seconds']:.2f} s per query"
    path = "native scan" if s["read_path"] == "native" else "pure-Python read path"
    return f"{text} ({path}: {s['read_path_reason']})"


def _print_health(report: Any, top: int) -> None:
    console = _console()
    s = report.summary
    storage = ", ".join(f"{v:,} {k}" for k, v in s["dv_storage"].items()) or "none"
    console.print(f"[bold]DV health of {report.table} at version {report.version}[/bold]", soft_wrap=True)
    summary = [
        ["files", f"{s['files']:,} ({s['files_with_dv']:,} with a DV) in {s['partitions']:,} partition(s), "
                  f"{s['partitions_with_dv']:,} with DVs"],
        ["rows deleted", f"{s['deleted_rows']:,} of {s['physical_rows']:,} physical rows ({percent(s['deleted_ratio'])})"],
        ["DVs stored", f"{storage}; {human_bytes(s['dv_bytes'])} of bitmaps"],
        ["DV files", f"{s['dv_files']:,} in use (at most {s['max_dvs_per_dv_file']:,} DVs packed in one), "
                     f"{s['dv_files_unreferenced']:,} no longer referenced"],
        ["DV file bytes", f"{human_bytes(s['dv_file_bytes'])}: {human_bytes(s['dv_live_bytes'])} live, "
                          f"{human_bytes(s['dv_stale_bytes'])} stale"],
        ["read overhead", _overhead_text(s)],
    ]
    console.print(_table(None, ["", ""], summary, header=False))
    listed = (report.partitions["deleted_rows"] > 0) | (report.partitions["action"] != "")
    parts = report.partitions[listed].head(top)
    if len(parts) and report.partition_columns:
        actions = {"OPTIMIZE": "OPTIMIZE", "REORG PURGE": "PURGE"}
        rows = [[r.partition, int(r.files), int(r.files_with_dv), int(r.physical_rows), int(r.deleted_rows),
                 percent(r.deleted_ratio, 1), percent(r.max_file_deleted_ratio, 1), int(r.dv_files),
                 f"+{r.est_full_scan_overhead:.0%}" if r.files_with_dv else "", actions.get(r.action, "")]
                for r in parts.itertuples()]  # DV bytes per partition: in --json and --html
        n_more = int(listed.sum()) - len(parts)
        console.print(_table(f"Partitions with the most deleted rows{f' ({n_more:,} more with --top)' if n_more > 0 else ''}",
                             ["partition", "files", "with DV", "rows", "deleted", "deleted %", "worst file", "DV files",
                              "est. read cost", "to run"], rows,
                             right={"files", "with DV", "rows", "deleted", "deleted %", "worst file", "DV files",
                                    "est. read cost"}, keep={"partition", "to run"}))
    recs = report.recommendations[:top]
    waiting = s["dv_files_unreferenced"] - s["dv_files_vacuumable"]
    later = ""
    if waiting > 0 and s.get("dv_files_vacuumable_from_ms"):
        when = dt.datetime.fromtimestamp(s["dv_files_vacuumable_from_ms"] / 1000, dt.UTC)
        later = (f"Later: {waiting:,} DV file(s) no live file uses are kept for time travel until the retention "
                 f"(delta.deletedFileRetentionDuration) passes; VACUUM can delete the first from {_fmt_ts(when)} UTC.")
    if not recs:
        console.print(f"Recommendations: nothing to do now (no file above {percent(s['max_deleted_ratio'], 0)} deleted, "
                      f"no partition whose DVs add more than {s['max_read_overhead']:.0%} to a full scan, "
                      "no DV file VACUUM would delete).", soft_wrap=True)
        if later:
            console.print(later, soft_wrap=True)
        return
    more = len(report.recommendations) - len(recs)
    console.print(f"[bold]Recommendations, ranked by rows reclaimed[/bold]{f' ({more:,} more with --top)' if more > 0 else ''}")
    for i, r in enumerate(recs, 1):
        n_rows = f"{r.rows_reclaimed:,} row" + ("s" if r.rows_reclaimed != 1 else "")
        gain = n_rows if r.rows_reclaimed else human_bytes(r.bytes_reclaimed)
        where = f" {r.partition}" if r.partition and r.partition != "(table)" else ""
        console.print(f"{i:>2}. {r.action}{where}: reclaims {gain}. {r.reason}.", soft_wrap=True)
        console.print(f"    {r.command}", soft_wrap=True, markup=False)
    if later:
        console.print(later, soft_wrap=True)


@cli.group()
def uniform() -> None:
    """UniForm: Iceberg metadata (format version 3, DVs as Puffin blobs) under PATH/metadata/."""


@uniform.command("sync")
@path_argument
@click.option("--version", "-v", "version", type=click.IntRange(min=0), default=None,
              help="Convert up to this Delta version instead of the latest.")
@click.option("--full", is_flag=True, help="Start a fresh Iceberg history at the target version instead of continuing.")
@json_option
def uniform_sync(path: str, version: int | None, full: bool, as_json: bool) -> None:
    """Publish Iceberg metadata for every Delta version not converted yet (no Spark).

    Tables with delta.universalFormat.enabledFormats = 'iceberg' convert after every commit; this
    command catches up after a failed conversion, or publishes any column-mapped table on demand
    (deletion vectors included). Iceberg readers open PATH/metadata/v<version>.metadata.json.
    """
    from dvlake.storage.paths import normalize_table_root
    from dvlake.uniform.convert import metadata_location, sync

    root = normalize_table_root(path)
    converted = sync(root, version=version, full=full)
    location = metadata_location(root, converted)
    if as_json:
        _print_json({"deltaVersion": converted, "metadataLocation": location})
        return
    _console().print(f"Iceberg metadata of Delta version {converted}: {location}", soft_wrap=True, markup=False)


# --- Spark-backed commands ---------------------------------------------------------------------------


def _spark() -> SparkSession:
    """A local Spark session with the --conf settings; Spark's own output goes to a log file (not with --debug)."""
    from dvlake.terminal.spark_start import new_log_file, start

    _State.spark_log = None if _State.debug else new_log_file()
    with _progress("starting Spark"):
        return start("dvlake-cli", _State.conf, log_path=_State.spark_log)


def _sql_module() -> Any:
    return importlib.import_module("dvlake.sql")  # the package attribute `dvlake.sql` is the function


def _require_api(method: str, command: str) -> Any:
    """DeltaTable when it has ``method`` (typed Any: the maintenance methods land on other branches)."""
    from dvlake.api import DeltaTable

    if not hasattr(DeltaTable, method):
        raise CommandNotAvailableError(
            f"`dvlake {command}` is not available in this build of dvlake (DeltaTable.{method} is not implemented yet); "
            "upgrade dvlake")
    return DeltaTable


#: A nested value (struct, map, array) longer than this is shortened in a table; --json prints it whole.
MAX_CELL = 100


def _cell(v: Any) -> tuple[Any, bool]:
    """A result value as a table shows it, and whether it was shortened."""
    if isinstance(v, (int, float, str)) or v is None:
        return v, False
    text = json.dumps(v, default=_json_default, ensure_ascii=False)
    return (text[:MAX_CELL - 1] + "…", True) if len(text) > MAX_CELL else (text, False)


def _collect(df: DataFrame, limit: int | None) -> tuple[list[str], list[dict[str, Any]], bool]:
    """The columns, the first ``limit`` rows as plain dicts, and whether there were more."""
    rows = df.limit(limit + 1).collect() if limit is not None else df.collect()
    truncated = limit is not None and len(rows) > limit
    return list(df.columns), [r.asDict(recursive=True) for r in rows[:limit]], truncated


def _print_rows(cols: list[str], dicts: list[dict[str, Any]], truncated: bool, as_json: bool, limit: int | None = None,
                title: str | None = None) -> None:
    """Rows as a table (nested values as JSON text, long ones shortened) or as JSON."""
    if as_json:
        _print_json(dicts)
        return
    cells, shortened = [], False
    for d in dicts:
        row = []
        for c in cols:
            value, cut = _cell(d[c])
            row.append(value)
            shortened = shortened or cut
        cells.append(row)
    _console().print(_table(title, cols, cells))
    if truncated:
        click.echo(f"(first {limit} rows; --limit changes it)", err=True)
    if shortened:
        click.echo("(long values shortened; --json prints them whole)", err=True)


def _show(df: DataFrame | None, as_json: bool, limit: int | None = None, title: str | None = None) -> None:
    """Print a result DataFrame as a table (or JSON); nested values as JSON text."""
    if df is None:
        if as_json:
            _print_json([])
        return
    cols, dicts, truncated = _collect(df, limit)
    _print_rows(cols, dicts, truncated, as_json, limit, title)


def _metrics_row(df: DataFrame) -> dict[str, Any]:
    """The one row of an OPTIMIZE/REORG/RESTORE result as plain Python values."""
    rows = df.collect()
    return rows[0].asDict(recursive=True) if rows else {}


@cli.command("sql")
@click.argument("statement", metavar="STATEMENT")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Show at most this many result rows.")
@json_option
def sql_command(statement: str, limit: int, as_json: bool) -> None:
    """Run one SQL statement on local Spark through dvlake.sql.

    Delta statements on path identifiers (delta.`/path`) run through dvlake's commands:
    queries, DELETE, UPDATE, MERGE, INSERT, CREATE TABLE, DESCRIBE HISTORY/DETAIL, ALTER TABLE,
    OPTIMIZE, REORG, VACUUM, RESTORE. Anything else goes to spark.sql. A delta.`/path` that holds
    no table is reported before Spark starts. Quote the statement for the shell:
    dvlake sql "DELETE FROM delta.\\`/data/t\\` WHERE id = 3".
    """
    from dvlake.terminal.preflight import check_statement_tables
    from dvlake.terminal.summaries import is_dry_run, sql_line, statement_kind

    check_statement_tables(statement)
    kind = None if as_json else statement_kind(statement)
    spark = _spark()
    with _progress("running the statement"):
        df = _sql_module().sql(spark, statement)
        if df is not None and kind is not None:
            cols, dicts, truncated = _collect(df, None if kind == "VACUUM" else limit)  # VACUUM counts every path
    if df is None or kind is None:
        _show(df, as_json, limit)
        return
    line = sql_line(statement, kind, cols, dicts)
    if line is None:
        _print_rows(cols, dicts[:limit], truncated or len(dicts) > limit, False, limit)
        return
    if kind == "VACUUM" and dicts and is_dry_run(statement):
        _print_rows(cols, dicts[:limit], len(dicts) > limit, False, limit)
    click.echo(line)


@cli.command()
@path_argument
@click.option("--where", "where", default=None, help="Partition predicate: compact only these partitions.")
@click.option("--zorder-by", "zorder_by", default=None, help="Comma-separated columns to Z-order the files by.")
@json_option
def optimize(path: str, where: str | None, zorder_by: str | None, as_json: bool) -> None:
    """Compact small files and files with many deleted rows (OPTIMIZE [WHERE ...] [ZORDER BY ...]).

    Runs DeltaTable.forPath(spark, PATH).optimize().where(WHERE).executeCompaction() (or
    .executeZOrderBy(...)) and prints what changed in one line ("3 files → 1, 510 deleted rows
    dropped"); --json prints delta-spark's metrics. A lone file in a partition is left as it is
    (as in delta-spark); `dvlake purge` rewrites it.
    """
    from dvlake.terminal.preflight import load_table
    from dvlake.terminal.summaries import optimize_line

    load_table(path)
    delta_table = _require_api("optimize", "optimize")
    spark = _spark()
    with _progress("OPTIMIZE: rewriting files"):
        builder = delta_table.forPath(spark, path).optimize()
        if where:
            builder = builder.where(where)
        if zorder_by:
            cols = [c.strip() for c in zorder_by.split(",") if c.strip()]
            df = builder.executeZOrderBy(*cols)
        else:
            df = builder.executeCompaction()
        if as_json:
            _show(df, True)
            return
        row = _metrics_row(df)
    click.echo(optimize_line(row.get("metrics") or {}, where=where))


@cli.command()
@path_argument
@click.option("--where", "where", default=None, help="Partition predicate: purge only these partitions.")
@json_option
def purge(path: str, where: str | None, as_json: bool) -> None:
    """Rewrite every file that has a DV without its deleted rows (REORG TABLE ... APPLY (PURGE)).

    Runs DeltaTable.forPath(spark, PATH).reorgPurge(WHERE) (`REORG TABLE delta.`PATH` [WHERE ...]
    APPLY (PURGE)` in SQL) and prints what changed in one line; --json prints the metrics. Files
    without DVs are untouched; a second run finds nothing to do.
    """
    from dvlake.terminal.preflight import load_table
    from dvlake.terminal.summaries import optimize_line

    load_table(path)
    delta_table = _require_api("reorgPurge", "purge")
    spark = _spark()
    with _progress("PURGE: rewriting the files with deletion vectors"):
        df = delta_table.forPath(spark, path).reorgPurge(where)
        if as_json:
            _show(df, True)
            return
        row = _metrics_row(df)
    click.echo(optimize_line(row.get("metrics") or {}, purge=True, where=where))


@cli.command()
@path_argument
@click.option("--dry-run", is_flag=True, help="Only list the files that would be deleted.")
@click.option("--retain-hours", type=click.FloatRange(min=0), default=None,
              help="Keep files removed less than this many hours ago (default: the table's "
                   "delta.deletedFileRetentionDuration, 168 h). Below that, VACUUM refuses unless "
                   "--conf spark.databricks.delta.retentionDurationCheck.enabled=false.")
@json_option
@_log_only
def vacuum(path: str, dry_run: bool, retain_hours: float | None, as_json: bool) -> None:
    """Delete files (data and DV files) the table no longer references and that are older than the retention.

    The same VACUUM as DeltaTable.vacuum(retentionHours) and `VACUUM delta.`PATH` [RETAIN n HOURS]
    [DRY RUN]`, with the --conf settings as the session's; it needs no Spark. --dry-run lists the
    files it would delete (--json: [{"path": ...}], as VACUUM ... DRY RUN returns).
    """
    import time

    from dvlake.commands.maintenance.vacuum import vacuum as run_vacuum
    from dvlake.terminal.summaries import vacuum_line

    with _progress("VACUUM: listing files"):
        result = run_vacuum(_State.conf, path, retain_hours, None, dry_run)
    if as_json:
        _print_json([{"path": p} for p in result.paths] if dry_run else [])
        return
    if dry_run and result.paths:
        _console().print(_table(None, ["path"], [[p] for p in result.paths]))
    click.echo(vacuum_line(result, int(time.time() * 1000)))


@cli.command()
@click.option("--build", is_flag=True, help="Compile the native scan's jar for the installed PySpark now (once).")
@json_option
def doctor(build: bool, as_json: bool) -> None:
    """What this install runs on: PySpark and Java versions, the native scan's jar and the read path a session takes.

    Needs no Spark. The native scan (deletion vectors applied inside Spark's Parquet reader) comes from a jar for the
    installed PySpark minor: packaged with dvlake, or compiled once into a per-user cache when a JDK's javac is here
    (--build does it now instead of at the first read). Without either, reads take the slower pure-Python path.
    """
    from dvlake.commands.inspection.doctor import compile_now, diagnose
    from dvlake.config import NATIVE_SCAN

    findings = diagnose(_State.conf.get(NATIVE_SCAN))
    if build:
        built = compile_now()
        findings = [built if f.item == built.item else f for f in findings]
    if as_json:
        _print_json([{"item": f.item, "value": f.value, "note": f.note} for f in findings])
        return
    _console().print(_table(None, ["item", "value", "note"], [[f.item, f.value, f.note] for f in findings]))


@cli.command()
@path_argument
@click.option("--version", "-v", "to_version", type=click.IntRange(min=0), default=None, help="Restore to this version.")
@click.option("--timestamp", "-t", "to_timestamp", default=None,
              help="Restore to the version current at this time (ISO 8601, e.g. 2024-06-01T12:00:00Z).")
@json_option
def restore(path: str, to_version: int | None, to_timestamp: str | None, as_json: bool) -> None:
    """Restore the table to an earlier version (RESTORE TABLE ... TO VERSION|TIMESTAMP AS OF).

    Give exactly one of --version and --timestamp. Runs DeltaTable.restoreToVersion(v) or
    restoreToTimestamp(ts) and prints what changed in one line; --json prints delta-spark's
    metrics (files restored and removed, table size after).
    """
    from dvlake.terminal.preflight import load_table
    from dvlake.terminal.summaries import restore_line

    if (to_version is None) == (to_timestamp is None):
        raise click.UsageError("give exactly one of --version and --timestamp")
    load_table(path)
    method = "restoreToVersion" if to_version is not None else "restoreToTimestamp"
    delta_table = _require_api(method, "restore")
    spark = _spark()
    with _progress("RESTORE: committing the earlier version's files"):
        table = delta_table.forPath(spark, path)
        df = table.restoreToVersion(to_version) if to_version is not None else table.restoreToTimestamp(to_timestamp)
        if as_json:
            _show(df, True)
            return
        row = _metrics_row(df)
    click.echo(restore_line(row, f"version {to_version}" if to_version is not None else str(to_timestamp)))


# --- entry point ---------------------------------------------------------------------------------


def _error_class(exc: BaseException) -> str | None:
    value = getattr(exc, "error_class", None)
    if value:
        return str(value)
    for getter in ("getCondition", "getErrorClass"):  # PySpark 4 / 3.x names of Spark's error class
        method = getattr(exc, getter, None)
        if callable(method):
            try:
                found = method()
            except Exception:  # noqa: BLE001 - a Py4J error whose gateway is gone cannot answer
                return None
            return str(found) if found else None
    return None


def _error_message(exc: BaseException) -> str:
    """dvlake's message as is; another error's message with its type and Spark's error class, without the
    plan text and Java stack Spark attaches (they appear with --debug)."""
    from dvlake.errors import user_text, with_error_class

    error_class = _error_class(exc)
    text = str(exc).strip() or type(exc).__name__
    if not _State.debug:
        text = user_text(text)
    if not isinstance(exc, DvlakeError):
        text = f"{type(exc).__name__}: {text}"
    if error_class and error_class not in text:
        text = with_error_class(text, error_class)
    return text


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the CLI and turn its outcome into an exit code."""
    _State.debug, _State.conf, _State.spark_log = _env_debug(), {}, None
    _State.own_process = argv is None
    try:
        code = cli.main(args=argv, prog_name="dvlake", standalone_mode=False)
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:  # usage errors exit 2, others 1
        exc.show()
        code = exc.exit_code
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        code = EXIT_ERROR
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = 130
    except Exception as exc:  # noqa: BLE001 - every failure becomes a message and exit 1
        if _State.debug:
            traceback.print_exc()
        click.echo(f"error: {_error_message(exc)}", err=True)
        if not _State.debug and not isinstance(exc, DvlakeError):
            click.echo("(run with --debug for the traceback)", err=True)
        code = EXIT_ERROR
    code = code if isinstance(code, int) else EXIT_OK
    from dvlake import errors

    errors.reset_debug()
    if _State.spark_log:
        if code == EXIT_OK:
            from dvlake.terminal.spark_start import discard

            discard(_State.spark_log)
        elif code != EXIT_USAGE:
            click.echo(f"(Spark's own log of this run: {_State.spark_log})", err=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
