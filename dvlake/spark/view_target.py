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
plan once expression ids are set aside). Anything that is not such a read, projected onto some of
the table's columns under their own names, is refused with a typed error; so is a view with a
column the table lacks. After the command, the view is replaced by the same projection of the
new version, so it shows what the command did (as a delta-spark view would).
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from dvlake.errors import DvlakeError, UnsupportedDmlTargetError
from dvlake.storage.base import storage_for
from dvlake.storage.paths import path_key

#: How many versions back a view may have been read and still be recognised as a plain scan of the table.
_VERSIONS_BACK = 10
_EXPR_ID = re.compile(r"#\d+L?")


@dataclass(frozen=True)
class ViewTarget:
    """A temporary view that stands for a Delta table in a DML statement."""

    name: str            #: the view's name as written (``v`` or ``global_temp.v``)
    root: str            #: the Delta table it reads
    columns: list[str]   #: the view's columns (table columns under their own names, maybe fewer)
    table_columns: list[str]

    @property
    def qualifier(self) -> str:
        """The name conditions may qualify columns with when the statement gives no alias (``v.key``)."""
        return self.name.split(".")[-1].strip("`")

    @property
    def is_projection(self) -> bool:
        """Whether the view hides some of the table's columns."""
        return [c.lower() for c in self.columns] != [c.lower() for c in self.table_columns]

    def _probe(self, spark: SparkSession, alias: str | None) -> DataFrame:
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

        probe = self._probe(spark, alias)
        probe.select(*[F.expr(e) for e in expressions]).schema  # noqa: B018 - analysis only (Connect is lazy)

    def refuse_merge(self, spark: SparkSession, alias: str | None, source: DataFrame, spec: object) -> None:
        """MERGE into a view that hides columns: its expressions are resolved against the view first (Spark's
        ``UNRESOLVED_COLUMN`` when one names a hidden column, as delta-spark); one that resolves is still refused,
        since inserting through it would have to fill the hidden columns, which dvlake does not do.

        Raises:
            pyspark.errors.AnalysisException: an expression names a column the view does not show.
            UnsupportedDmlTargetError: otherwise (``DELTA_UNSUPPORTED_SOURCE``).
        """
        from pyspark.sql import functions as F

        texts: list[object] = [getattr(getattr(spec, "condition", None), "text", None)]
        for clause in getattr(spec, "clauses", []):
            texts.append(getattr(clause.condition, "text", None))  # a parsed Condition's text (None: a Column)
            if clause.action == "update":
                texts += [*(clause.assignments or {}).values(), *(clause.assignments or {})]
        probe = self._probe(spark, alias).crossJoin(source)
        probe.select(*[F.expr(t) for t in texts if isinstance(t, str) and t]).schema  # noqa: B018 - analysis only
        raise UnsupportedDmlTargetError(
            f"MERGE destination only supports Delta sources: the view {self.name} shows only the columns {self.columns} "
            f"of the table at {self.root} (columns {self.table_columns}); dvlake merges into such a view's table only "
            "through the table itself", error_class="DELTA_UNSUPPORTED_SOURCE")

    def refresh(self, spark: SparkSession) -> None:
        """Re-point the view at the table's new version (the same columns), as a delta-spark view reads it."""
        from dvlake.spark.scan import read

        frame = _projected(read(spark, self.root), self.columns)
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
        UnsupportedDmlTargetError: the view reads a Delta table but is not a plain scan of it: a filter
            (``DELTA_UNEXPECTED_PARTIAL_SCAN``), a column the table does not have (``DELTA_CANNOT_RESOLVE_COLUMN``;
            ``DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS`` for MERGE, as delta-spark), or anything else (renamed or computed
            columns, joins, unions, another table's rows: ``DELTA_UNSUPPORTED_SOURCE``).
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
    from dvlake.spark.scan import read

    snapshot = Snapshot.load(root)
    table_columns = [f["name"] for f in strip_column_mapping(snapshot.schema)["fields"]]
    by_lower = {c.lower(): c for c in table_columns}
    columns = list(view.columns)
    unknown = [c for c in columns if c.lower() not in by_lower]
    if unknown or len({c.lower() for c in columns}) != len(columns):
        if command == "MERGE":
            raise UnsupportedDmlTargetError(
                f"The schema of your Delta table has changed in an incompatible way since your DataFrame or DeltaTable "
                f"object was created: the view {name} has columns {unknown or columns} that the table at {root} "
                f"(columns {table_columns}) does not have. Redefine the view.",
                error_class="DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS")
        raise UnsupportedDmlTargetError(
            f"Can't resolve column {(unknown or columns)[0]} in the table at {root} (columns {table_columns}): the view "
            f"{name} is not a plain scan of the table, so {command} cannot change it through the view.",
            error_class="DELTA_CANNOT_RESOLVE_COLUMN")
    view_plan = _optimized(view)
    for version in range(snapshot.version, max(-1, snapshot.version - _VERSIONS_BACK), -1):
        try:
            candidate = _projected(read(spark, root, version=version), columns)
        except (DvlakeError, AnalysisException, KeyError):  # an old version without these columns, or cleaned up
            continue
        if sorted(_key(f) for f in candidate.inputFiles()) != files or _optimized(candidate) != view_plan:
            continue
        if version != snapshot.version:  # a time-travelled view, or one read before the table changed
            raise UnsupportedDmlTargetError(
                f"Expect a full scan of the latest version of the Delta source, but found a historical scan of version "
                f"{version}: the view {name} reads version {version} of {root}, whose latest version is "
                f"{snapshot.version}. Re-create the view (a dvlake view keeps the version it was read at) or run "
                f"{command} on the table", error_class="DELTA_FAILED_SCAN_WITH_HISTORICAL_VERSION")
        return ViewTarget(name, root, columns, table_columns)
    if view_plan.count("Filter ") > _optimized(_projected(read(spark, root), columns)).count("Filter "):
        raise UnsupportedDmlTargetError(
            f"Expect a full scan of Delta sources, but found a partial scan. path:{root} ({command} on the view "
            f"{name}, which filters the table's rows; run it on the table with the filter in its condition)",
            error_class="DELTA_UNEXPECTED_PARTIAL_SCAN")
    raise UnsupportedDmlTargetError(
        f"{command} destination only supports Delta sources: the view {name} reads the Delta table at {root} but is "
        f"not a plain scan of it at one of its last {_VERSIONS_BACK} versions (renamed or computed columns, joins, "
        "unions and filters are not supported); run the command on the table itself",
        error_class="DELTA_UNSUPPORTED_SOURCE")


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
