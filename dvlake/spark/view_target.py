"""DELETE, UPDATE and MERGE whose target is a temporary view over a Delta table.

delta-spark strips a temporary view from a DML target when the view is a plain scan of one Delta
table, possibly with a projection of its own columns and subquery aliases (``DeltaViewHelper``,
``DeltaFullTable``); the command then changes the table. A view with a filter is refused
(``DELTA_UNEXPECTED_PARTIAL_SCAN``): running the command on the whole table would touch rows the
view does not show. A view over an old version is refused too (``DELTA_FAILED_SCAN_WITH_HISTORICAL_VERSION``). A dvlake
view keeps the files and deletion vectors it was read with, so a view read before the table last
changed is such a view too, and is refused: the command would change rows the view does not show.

How dvlake knows: a dvlake view is a DataFrame built by :func:`dvlake.spark.scan.read`. It is
compared with a fresh read of the table it reads files of (same files, and the same optimized
plan once expression ids are set aside), or with that read projected as the view projects it
(``view_projection``: renamed, reordered, dropped or computed columns). Anything else (joins,
unions, aggregates, filters) is refused with a typed error; so is a view whose computed columns
the command would have to write back (UPDATE, MERGE, DELETE without deletion vectors: delta-spark
fails the same way). The SQL front end runs a statement through a renaming view on the table, each
view column replaced by what it shows (``sqlfront/view_statements``). After the command, the view
is replaced by the same projection of the new version, so it shows what the command did (as a
delta-spark view would).
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from dvlake.errors import DvlakeError, UnsupportedDmlTargetError
from dvlake.spark.view_projection import ShownColumn, guess_projection, project, quoted
from dvlake.storage.base import storage_for
from dvlake.storage.paths import path_key

#: How many versions back a view may have been read and still be recognised as a plain scan of the table.
_VERSIONS_BACK = 10
_EXPR_ID = re.compile(r"#\d+L?")
#: plan nodes that make a view more than one table's rows (its filters may then be a join's inferred ones)
_JOINED = re.compile(r"^[\s:+|-]*(Join|Aggregate|Union|Intersect|Except|Window|Expand|Generate)\b", re.MULTILINE)


@dataclass(frozen=True)
class ViewTarget:
    """A temporary view that stands for a Delta table in a DML statement."""

    name: str            #: the view's name as written (``v`` or ``global_temp.v``)
    root: str            #: the Delta table it reads
    columns: list[str]   #: the view's columns
    table_columns: list[str]
    #: what each view column shows of the table, in the view's order
    shown: tuple[ShownColumn, ...] = ()

    @property
    def computed(self) -> list[ShownColumn]:
        """The view's columns that are no table column (``SELECT key, value, 1``)."""
        return [c for c in self.shown if c.plain is None]

    @property
    def renames(self) -> bool:
        """Whether a view column shows another table column than the one it is named after, or a computed value: the
        statement must then be read through the view's projection, not by the names it writes."""
        by_lower = {c.lower(): c for c in self.table_columns}
        return any(c.plain is None or c.plain != by_lower.get(c.name.lower()) for c in self.shown)

    def refuse_computed(self, command: str) -> None:
        """Refuse a command that would write the view's computed columns back (see ``_refuse_computed_columns``).

        Raises:
            UnsupportedDmlTargetError: always.
        """
        _refuse_computed_columns(self.name, self.root, command, [c.name for c in self.computed], self.table_columns)

    @property
    def qualifier(self) -> str:
        """The name conditions may qualify columns with when the statement gives no alias (``v.key``)."""
        return self.name.split(".")[-1].strip("`")

    @property
    def is_projection(self) -> bool:
        """Whether the view hides some of the table's columns."""
        return [c.lower() for c in self.columns] != [c.lower() for c in self.table_columns]

    def probe(self, spark: SparkSession, alias: str | None) -> DataFrame:
        """No rows, the view's columns: what the statement's expressions may name (as delta-spark resolves them
        against the view before stripping it)."""
        probe = spark.createDataFrame([], spark.table(self.name).schema)
        return probe.alias(alias or self.qualifier)

    def check_resolves(self, spark: SparkSession, alias: str | None, expressions: list[str]) -> None:
        """Resolve a DELETE/UPDATE's condition, SET names and values against the view's columns: a view that hides
        some of the table's columns hides them from the statement too (Spark's ``UNRESOLVED_COLUMN``).

        Raises:
            pyspark.errors.AnalysisException: an expression names a column the view does not show.
        """
        if not self.is_projection:
            return
        from pyspark.sql import functions as F

        probe = self.probe(spark, alias)
        probe.select(*[F.expr(e) for e in expressions]).schema  # noqa: B018 - analysis only (Connect is lazy)

    def refresh(self, spark: SparkSession) -> None:
        """Re-point the view at the table's new version (the same columns), as a delta-spark view reads it."""
        from dvlake.spark.scan import read

        frame = read(spark, self.root)
        frame = project(frame, list(self.shown)) if self.renames else _projected(frame, self.columns)
        if self.name.lower().startswith("global_temp."):
            frame.createOrReplaceGlobalTempView(self.qualifier)
        else:
            frame.createOrReplaceTempView(self.qualifier)


def is_temp_view(spark: SparkSession, name: str) -> bool:
    """Whether ``name`` is a temporary (or global temporary) view of the session."""
    try:
        return bool(spark.catalog.getTable(name).isTemporary)
    except AnalysisException:
        return False


def view_target(spark: SparkSession, name: str, command: str) -> ViewTarget | None:
    """The Delta table behind the temporary view ``name``, or None when ``name`` is no temporary view or reads no
    Delta table (the caller reports that as it reports any other non-Delta name).

    Raises:
        UnsupportedDmlTargetError: the view reads a Delta table but is not a projection of a full scan of it: a
            filter (``DELTA_UNEXPECTED_PARTIAL_SCAN``), an old version (``DELTA_FAILED_SCAN_WITH_HISTORICAL_VERSION``),
            a computed column UPDATE or MERGE would write back (``DELTA_CANNOT_RESOLVE_COLUMN``;
            ``DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS`` for MERGE, as delta-spark), or anything else (joins, unions,
            another table's rows: ``DELTA_UNSUPPORTED_SOURCE``).
    """
    if not is_temp_view(spark, name):
        return None
    view = spark.table(name)
    files = sorted(_key(f) for f in view.inputFiles())
    root = _table_root(files)
    if root is None:
        return None
    from dvlake.log.schema import strip_column_mapping
    from dvlake.log.snapshot import Snapshot

    snapshot = Snapshot.load(root)
    table_columns = [f["name"] for f in strip_column_mapping(snapshot.schema)["fields"]]
    columns = list(view.columns)
    view_plan = _optimized(view)
    shapes = _shapes(view_plan, columns, table_columns)
    for version in range(snapshot.version, max(-1, snapshot.version - _VERSIONS_BACK), -1):
        shown = _matching_shape(spark, root, version, shapes, files, view_plan)
        if shown is None:
            continue
        if version != snapshot.version:  # a time-travelled view, or one read before the table changed
            raise UnsupportedDmlTargetError(
                f"Expect a full scan of the latest version of the Delta source, but found a historical scan of version "
                f"{version}: the view {name} reads version {version} of {root}, whose latest version is "
                f"{snapshot.version}. Re-create the view (a dvlake view keeps the version it was read at) or run "
                f"{command} on the table", error_class="DELTA_FAILED_SCAN_WITH_HISTORICAL_VERSION")
        target = ViewTarget(name, root, columns, table_columns, tuple(shown))
        if target.computed and command != "DELETE":
            target.refuse_computed(command)
        return target
    _refuse_unknown_columns(name, root, command, columns, table_columns)
    if not _JOINED.search(view_plan) and (view_plan.count("Filter ")
                                          > _optimized(_projected(read_latest(spark, root), columns)).count("Filter ")):
        raise UnsupportedDmlTargetError(
            f"Expect a full scan of Delta sources, but found a partial scan. path:{root} ({command} on the view "
            f"{name}, which filters the table's rows; run it on the table with the filter in its condition)",
            error_class="DELTA_UNEXPECTED_PARTIAL_SCAN")
    raise UnsupportedDmlTargetError(
        f"{command} destination only supports Delta sources: the view {name} reads the Delta table at {root} but is "
        f"not a projection of it at one of its last {_VERSIONS_BACK} versions (joins, unions, aggregates and filters "
        "are not supported); run the command on the table itself",
        error_class="DELTA_UNSUPPORTED_SOURCE")


def read_latest(spark: SparkSession, root: str) -> DataFrame:
    """A fresh read of the table (its latest version)."""
    from dvlake.spark.scan import read

    return read(spark, root)


def _shapes(view_plan: str, columns: list[str], table_columns: list[str]) -> list[list[ShownColumn]]:
    """The projections the view may be: the table's own columns under their names (when every view column is one),
    then what the view's plan shows (renamed, reordered or computed columns)."""
    by_lower = {c.lower(): c for c in table_columns}
    shapes: list[list[ShownColumn]] = []
    if all(c.lower() in by_lower for c in columns) and len({c.lower() for c in columns}) == len(columns):
        shapes.append([ShownColumn(c, by_lower[c.lower()], quoted(by_lower[c.lower()])) for c in columns])
    guessed = guess_projection(view_plan, columns, table_columns)
    if guessed is not None and guessed not in shapes:
        shapes.append(guessed)
    return shapes


def _matching_shape(spark: SparkSession, root: str, version: int, shapes: list[list[ShownColumn]], files: list[str],
                    view_plan: str) -> list[ShownColumn] | None:
    """The first shape that, applied to a read of ``version``, reads the view's files with the view's plan."""
    from dvlake.spark.scan import read

    for shown in shapes:
        try:
            frame = read(spark, root, version=version)
            candidate = (_projected(frame, [c.name for c in shown]) if all(c.plain == c.name for c in shown)
                         else project(frame, shown))
            if sorted(_key(f) for f in candidate.inputFiles()) == files and _optimized(candidate) == view_plan:
                return shown
        except (DvlakeError, AnalysisException, KeyError):  # an old version without these columns, or cleaned up
            continue
    return None


def _refuse_unknown_columns(name: str, root: str, command: str, columns: list[str], table_columns: list[str]) -> None:
    """A view with a column the table lacks that is no projection of the table either: delta-spark's classes."""
    by_lower = {c.lower() for c in table_columns}
    unknown = [c for c in columns if c.lower() not in by_lower]
    if unknown or len({c.lower() for c in columns}) != len(columns):
        _refuse_computed_columns(name, root, command, unknown or columns, table_columns)


def _refuse_computed_columns(name: str, root: str, command: str, columns: list[str], table_columns: list[str]) -> None:
    """UPDATE or MERGE through a view with computed columns (DELETE too, without deletion vectors): delta-spark writes
    the view's columns back and fails on the one the table lacks."""
    if command == "MERGE":
        raise UnsupportedDmlTargetError(
            f"The schema of your Delta table has changed in an incompatible way since your DataFrame or DeltaTable "
            f"object was created: the view {name} has columns {columns} that the table at {root} "
            f"(columns {table_columns}) does not have. Redefine the view.",
            error_class="DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS")
    raise UnsupportedDmlTargetError(
        f"Can't resolve column {columns[0]} in the table at {root} (columns {table_columns}): the view "
        f"{name} computes it, so {command} cannot write it back through the view.",
        error_class="DELTA_CANNOT_RESOLVE_COLUMN")


def _projected(frame: DataFrame, columns: list[str]) -> DataFrame:
    by_lower = {c.lower(): c for c in frame.columns}
    picked = [by_lower[c.lower()] for c in columns]
    return frame if picked == list(frame.columns) else frame.select(*[f"`{c}`" for c in picked])


def _optimized(frame: DataFrame) -> str:
    """The frame's optimized logical plan as text, expression ids blanked (two reads of one table differ only there).
    ``explain`` is the one plan view both classic sessions and Spark Connect give without JVM handles."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        frame.explain(extended=True)
    text = out.getvalue()
    start = text.find("== Optimized Logical Plan ==")
    end = text.find("== Physical Plan ==")
    return _EXPR_ID.sub("#", text[start:end] if start >= 0 else text)


def _key(location: str) -> str:
    return path_key(location)


def _table_root(files: list[str]) -> str | None:
    """The Delta table the files belong to: the nearest folder above the first one that has a ``_delta_log``."""
    if not files:
        return None
    from dvlake.storage.paths import normalize_table_root

    parts = files[0].rstrip("/").split("/")[:-1]
    while len(parts) > 1:
        folder = "/".join(parts)
        with contextlib.suppress(Exception):
            if storage_for(folder).exists(folder + "/_delta_log"):
                return normalize_table_root(folder)
        parts.pop()
    return None
