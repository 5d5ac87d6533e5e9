"""Delta tables inside queries: ``delta.`<path>``` (with time travel), catalog names, ``table_changes``.

A query that reads Delta tables is rewritten: each Delta table reference becomes a placeholder
that PySpark's own DataFrame parameters fill (``spark.sql("… {t0} …", t0=df)``), with ``df`` the
table read by dvlake's scan at the asked version. PySpark binds such parameters itself, as
collision-proof temporary views it drops again on classic sessions and as plan references on
Spark Connect, so no name of ours ever lands in the user's catalog.
"""

from __future__ import annotations

import contextlib
import importlib
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Token

from dvlake.sqlfront.parse import (
    DIALECT,
    TableRef,
    grown_span,
    split_time_suffix,
    sql_error,
    tokenize,
    written,
    written_span,
)
from dvlake.sqlfront.passthrough import passthrough

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def offset_of(node: exp.Expr) -> int:
    """The earliest character offset sqlglot recorded within the node (its identifiers, literals), 0 when unknown."""
    starts = [int(n.meta["start"]) for n in node.walk() if n.meta and n.meta.get("start") is not None]
    return min(starts, default=0)


def table_ref(node: exp.Table) -> TableRef | None:
    """The Delta path a Table node names (``delta.`/p```, case-insensitive, no catalog), else None."""
    db = node.args.get("db")
    if (db is not None and not node.args.get("catalog") and isinstance(node.this, exp.Identifier)
            and db.name.lower() == "delta" and not db.args.get("quoted")):
        path, version, ts = split_time_suffix(node.this.name)
        return TableRef(path, None, version, ts, offset_of(node))
    return None


def name_of(node: exp.Table) -> str:
    """A Table node's dotted catalog name as Spark SQL (without alias or time travel)."""
    bare = exp.Table(this=node.this, db=node.args.get("db"), catalog=node.args.get("catalog"))
    return bare.sql(DIALECT)


def catalog_function(name: str) -> Callable[..., Any] | None:
    """``dvlake.spark.catalog.<name>``, or None in a build without catalog support (imported by name, lazily)."""
    try:
        module = importlib.import_module("dvlake.spark.catalog")
    except ImportError:
        return None
    return getattr(module, name, None)


def catalog_location(spark: SparkSession, name: str, text: str, offset: int) -> str:
    """The location of a catalog table; a typed error pointing at the name when it cannot be resolved."""
    table_location = catalog_function("table_location")
    if table_location is None:
        raise sql_error(text, offset, f"table names are not supported here yet; name the table by path: delta.`<path>` "
                                      f"instead of {name}")
    return str(table_location(spark, name))


def maybe_catalog_location(spark: SparkSession, name: str) -> str | None:
    """The location of a catalog table that is a Delta table dvlake can open, else None (no error)."""
    table_location = catalog_function("table_location")
    if table_location is None:
        return None
    try:
        return str(table_location(spark, name))
    except Exception:  # noqa: BLE001 - not a Delta table of the catalog: Spark handles the statement
        return None


def refresh_catalog_columns(spark: SparkSession, node: exp.Expr | TableRef) -> None:
    """After a statement changed a table through a catalog name: the name's catalog columns follow the table's schema
    (``dvlake.spark.catalog.refresh_registration``, the one place that keeps them in step). Paths have no entry."""
    if isinstance(node, TableRef):
        name = node.name
    elif isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier) and table_ref(node) is None:
        name = name_of(node)
    else:
        name = None
    refresh = catalog_function("refresh_registration")
    if name is not None and refresh is not None:
        refresh(spark, name)


def resolve(spark: SparkSession, ref: TableRef, text: str) -> str:
    """The table root of a reference (paths as they are, names through the catalog)."""
    if ref.path is not None:
        return ref.path
    assert ref.name is not None
    return catalog_location(spark, ref.name, text, ref.offset)


def literal_value(spark: SparkSession, node: exp.Expr) -> Any:
    """A literal's Python value; any other expression is evaluated by Spark (e.g. ``current_timestamp() - INTERVAL 1 DAY``)."""
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else (int(node.this) if node.this.lstrip("-").isdigit() else float(node.this))
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return -literal_value(spark, node.this)
    return passthrough(spark, f"SELECT {node.sql(DIALECT)} AS v").first()[0]  # type: ignore[index]


def _time_travel(spark: SparkSession, node: exp.Table, ref: TableRef, text: str) -> tuple[int | None, Any]:
    version, timestamp = ref.version, ref.timestamp
    travel = node.args.get("version")
    if travel is not None:
        if version is not None or timestamp is not None:
            raise sql_error(text, offset_of(node), "give the version either as @v<n> in the path or as VERSION AS OF, not both")
        kind = str(travel.this).upper()
        value = literal_value(spark, travel.expression)
        if kind == "VERSION":
            try:
                version = int(value)
            except (TypeError, ValueError):
                raise sql_error(text, offset_of(travel.expression),
                                f"VERSION AS OF needs a whole number, got {value!r}") from None
        else:
            timestamp = value
    return version, timestamp


def _changes_frame(spark: SparkSession, fn: exp.Anonymous, text: str) -> DataFrame:
    """``table_changes('delta.`/p`' | 'name', start[, end])`` → ``dvlake.api.read_changes``."""
    args = [literal_value(spark, a) for a in fn.expressions]
    where = offset_of(fn)
    if len(args) not in (2, 3) or not isinstance(args[0], str):
        raise sql_error(text, where, "table_changes takes ('delta.`<path>`' or 'table name', start[, end])")
    from dvlake.sqlfront.parse import Cursor

    ref = Cursor(args[0]).table()
    path = resolve(spark, ref, text)
    try:
        from dvlake.api import read_changes  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        raise sql_error(text, where, "table_changes needs the change data feed reader (dvlake.api.read_changes), "
                                     "which this dvlake build does not have") from None
    options: dict[str, Any] = {}
    for key, value in zip(("starting", "ending"), args[1:], strict=False):
        if isinstance(value, int):
            options[f"{key}Version"] = value
        else:
            options[f"{key}Timestamp"] = str(value)
    return read_changes(spark, path, **options)


def delta_frame(spark: SparkSession, node: exp.Table, text: str) -> DataFrame | None:
    """The DataFrame a Table node stands for when it is a Delta table (path, time-travelled name,
    ``table_changes``); None for everything Spark reads by itself."""
    from dvlake.api import read

    if isinstance(node.this, exp.Anonymous) and node.this.name.lower() == "table_changes":
        return _changes_frame(spark, node.this, text)
    ref = table_ref(node)
    if ref is None:
        if not isinstance(node.this, exp.Identifier):
            return None
        name = name_of(node)
        if node.args.get("version") is None:  # a plain name: dvlake reads it when it is a Delta table of the catalog
            if _is_cte_name(node) or maybe_catalog_location(spark, name) is None:
                return None
        ref = TableRef(None, name, offset=offset_of(node))
    version, timestamp = _time_travel(spark, node, ref, text)
    return read(spark, resolve(spark, ref, text), version=version, timestamp=timestamp)


def _is_cte_name(node: exp.Table) -> bool:
    """Whether an unqualified table name is a CTE of its query (which shadows any catalog table)."""
    if node.args.get("db") is not None:
        return False
    name = node.name.lower()
    scope: exp.Expr | None = node
    while scope is not None:
        with_ = scope.args.get("with_") or scope.args.get("with")
        if isinstance(with_, exp.With) and any(c.alias_or_name.lower() == name for c in with_.expressions):
            return True
        scope = scope.parent
    return False


def reads_catalog_delta_tables(spark: SparkSession, tree: exp.Expr) -> bool:
    """Whether the query names a Delta table of the catalog (one dvlake registered, or delta-spark's)."""
    for node in tree.find_all(exp.Table):
        if isinstance(node.this, exp.Identifier) and table_ref(node) is None and not _is_cte_name(node):
            if maybe_catalog_location(spark, name_of(node)) is not None:
                return True
    return False


def has_delta_tables(tree: exp.Expr) -> bool:
    """Whether the tree reads a Delta table (a path, a time-travelled name or ``table_changes``)."""
    for node in tree.find_all(exp.Table):
        if table_ref(node) is not None or node.args.get("version") is not None:
            return True
        if isinstance(node.this, exp.Anonymous) and node.this.name.lower() == "table_changes":
            return True
    return False


def run_query(spark: SparkSession, tree: exp.Expr, text: str, args: Any = None, *, whole: bool = False,
              **kwargs: Any) -> DataFrame:
    """Run a query whose Delta tables dvlake reads; ``tree`` is the statement itself when ``whole``
    (then a query without Delta tables runs as the user wrote it), else a part of ``text``."""
    if kwargs:
        raise sql_error(text, 0, "DataFrame or value parameters (spark.sql(query, **kwargs)) cannot be combined with "
                                 "Delta tables in one statement; read the Delta table with dvlake.read and pass it as one")
    spliced, frames = _splice(spark, tree, text, whole=whole, placeholder=lambda key: "{" + key + "}")
    return passthrough(spark, spliced, args, **frames) if frames else passthrough(spark, spliced, args)


def _splice(spark: SparkSession, tree: exp.Expr, text: str, *, whole: bool,
            placeholder: Callable[[str], str] | None,
            nodes: dict[str, exp.Table] | None = None) -> tuple[str, dict[str, DataFrame]]:
    """The user's own text of ``tree`` (all of ``text`` when ``whole``) with each Delta table reference it reads
    (path, catalog name, ``table_changes``, with its time travel) replaced by a collision-proof key, and the
    DataFrames (read by dvlake's scan) those keys stand for.

    Only the references' characters change: sqlglot's regenerated Spark text means something else (``""`` inside
    a double-quoted literal, ``::`` casts, comments, escapes), so every other character stays the user's. With a
    ``placeholder`` (``spark.sql``'s ``{key}`` DataFrame parameters) the user's own braces are doubled for its
    formatter; without one the key is a name (a temporary view) and the text is left as it is. ``nodes``, when
    given, receives the table reference each key replaced.
    """
    tokens = tokenize(text)
    frames: dict[str, DataFrame] = {}
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in ``text``
    qualified: dict[tuple[str, str], str] = {}
    stem = "dvlake_" + uuid.uuid4().hex[:12]
    for node in tree.find_all(exp.Table):
        frame = delta_frame(spark, node, text)
        if frame is None:
            continue
        key = f"{stem}_{len(frames)}"
        frames[key] = frame
        if nodes is not None:
            nodes[key] = node
        replacement = placeholder(key) if placeholder is not None else key
        if node.args.get("alias") is None and table_ref(node) is None and isinstance(node.this, exp.Identifier):
            replacement += f" AS {node.this.sql(DIALECT)}"  # ``events.id`` still names its columns
            if node.args.get("db") is not None:  # ``db.events.id`` too
                qualified[(node.args["db"].name.lower(), node.name.lower())] = node.name
        start, end = _reference_span(text, tokens, node)
        edits.append((start, end, replacement))
    if not frames:  # no Delta table: the user's text as it is
        return (text if whole else written(text, tree)), {}
    span = (0, len(text)) if whole else written_span(text, tree, tokens)
    if span is None:
        raise sql_error(text, 0, "cannot find the text of the query in the statement; write it more plainly", parse=True)
    low, high = span
    for column in tree.find_all(exp.Column):
        db, table = column.args.get("db"), column.args.get("table")
        if db is not None and table is not None and (db.name.lower(), table.name.lower()) in qualified:
            edits.append(_qualifier_span(text, column))
    return _spliced(text, low, high, sorted(edits), escape=placeholder is not None), frames


def _reference_span(text: str, tokens: list[Token], node: exp.Table) -> tuple[int, int]:
    """The characters of a table reference with its time travel, without its alias: the shortest run of tokens
    that reads back as the same table."""
    bare = exp.Table(**{k: v.copy() for k, v in node.args.items() if k in ("this", "db", "catalog", "version") and v})

    def same(piece: str) -> bool:
        query = sqlglot.parse_one(f"SELECT * FROM {piece}", read=DIALECT)
        source = query.args.get("from_") or query.args.get("from")
        return isinstance(query, exp.Select) and source is not None and not query.args.get("joins") and source.this == bare

    span = grown_span(text, bare, same, tokens)
    if span is None:
        raise sql_error(text, 0, f"cannot find the text of the table {name_of(node)!r} in the statement; write it more plainly",
                        parse=True)
    return span


def _qualifier_span(text: str, column: exp.Column) -> tuple[int, int, str]:
    """The ``db.`` (or ``catalog.db.``) of a column ``db.events.id`` as an edit that removes it: the table's
    reference now carries the alias ``events``, which is all Spark needs to resolve the column."""
    parts = [p for p in (column.args.get("catalog"), column.args.get("db")) if p is not None]
    starts = [p.meta.get("start") for p in parts]
    table_start = column.args["table"].meta.get("start")
    if table_start is None or any(s is None for s in starts):
        raise sql_error(text, 0, f"cannot find the text of the column {column.sql(DIALECT)!r} in the statement; "
                                 "qualify it with the table's alias", parse=True)
    return min(int(s) for s in starts), int(table_start), ""


def _spliced(text: str, low: int, high: int, edits: list[tuple[int, int, str]], *, escape: bool) -> str:
    """``text[low:high]`` with the edits applied; the user's braces doubled when ``escape``. Edits that overlap or
    fall outside the slice mean the positions are not what they seem: a typed error, never a guess."""
    out: list[str] = []
    at = low
    for start, end, replacement in edits:
        if start < at or end > high:
            raise sql_error(text, start, "cannot find the text of a table reference in the statement unambiguously; "
                                         "write it more plainly", parse=True)
        kept = text[at:start]
        out.append(kept.replace("{", "{{").replace("}", "}}") if escape else kept)
        out.append(replacement)
        at = end
    kept = text[at:high]
    out.append(kept.replace("{", "{{").replace("}", "}}") if escape else kept)
    return "".join(out)


def delta_tables_as_frames(spark: SparkSession, tree: exp.Expr, text: str) -> tuple[str, dict[str, DataFrame],
                                                                                 dict[str, exp.Table]]:
    """The user's text of ``tree`` with each Delta table it reads as a ``{key}`` placeholder (``spark.sql``'s
    DataFrame arguments; the user's braces doubled), the frames, and the reference each key replaced."""
    nodes: dict[str, exp.Table] = {}
    spliced, frames = _splice(spark, tree, text, whole=False, placeholder=lambda key: "{" + key + "}", nodes=nodes)
    return spliced, frames, nodes


@contextlib.contextmanager
def delta_tables_as_views(spark: SparkSession, trees: list[exp.Expr], text: str) -> Iterator[list[str]]:
    """Spark SQL texts of ``trees`` whose Delta tables dvlake reads, for a command that takes expression text (the
    values of UPDATE … SET b = (SELECT … FROM name)): unlike a query, such text has no way to carry DataFrame
    arguments, so each table is a temporary view under a collision-proof name while the command runs, dropped after.
    The texts are the user's own, with only the table references replaced (as in :func:`run_query`)."""
    views: list[str] = []
    try:
        texts = []
        for tree in trees:
            spliced, frames = _splice(spark, tree, text, whole=False, placeholder=None)
            for key, frame in frames.items():
                frame.createOrReplaceTempView(key)
                views.append(key)
            texts.append(spliced)
        yield texts
    finally:
        for view in views:
            spark.catalog.dropTempView(view)


def reads_delta_tables(spark: SparkSession, tree: exp.Expr) -> bool:
    """Whether ``tree`` reads any Delta table: a path, a time-travelled name, ``table_changes`` or a catalog name."""
    return tree.find(exp.Table) is not None and (has_delta_tables(tree) or reads_catalog_delta_tables(spark, tree))
