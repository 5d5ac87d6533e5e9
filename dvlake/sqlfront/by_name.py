"""Statements Spark would answer from the registration view of a Delta table's name: SHOW CREATE TABLE, EXPLAIN,
CACHE / UNCACHE TABLE and ANALYZE TABLE, answered for the Delta table as delta-spark answers them.

A catalog name dvlake registered is a view whose body raises (plain Spark cannot apply DVs), so Spark itself would
print that view's DDL, explain or cache a plan that fails, or refuse ANALYZE as a view. Here:

- SHOW CREATE TABLE prints the Delta DDL as Spark's v2 SHOW CREATE TABLE prints delta-spark's table: columns,
  ``USING delta``, PARTITIONED BY, COMMENT, LOCATION (paths and external tables; a managed table has none) and
  TBLPROPERTIES (the table's configuration with its protocol versions and ``delta.feature.*``, sorted by key).
- EXPLAIN [mode] <query> explains the query with its Delta tables read by dvlake's DV-applying scan.
- CACHE [LAZY] TABLE <table> caches dvlake's read of the table's current version (Spark's cache then answers the
  same plan); CACHE TABLE v AS <query> caches a temporary view of the query; UNCACHE TABLE drops what CACHE cached.
- ANALYZE TABLE is refused as delta-spark 4.x refuses it: Delta tables are v2 tables to Spark
  (NOT_SUPPORTED_COMMAND_FOR_V2_TABLE); the log's per-file statistics are what Delta skips data with.

Each returns None when the statement does not name a Delta table: Spark runs it unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dvlake.errors import DeltaAnalysisException, DeltaSqlError
from dvlake.log.sql_dialect import quote_identifier
from dvlake.log.type_sql import escaped, field_ddl
from dvlake.sqlfront.parse import Cursor, TableRef, parse_statement, sql_error
from dvlake.sqlfront.passthrough import passthrough
from dvlake.sqlfront.refs import _splice, catalog_function, maybe_catalog_location, reads_delta_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_EXPLAIN_MODES = ("EXTENDED", "FORMATTED", "CODEGEN", "COST")

# what CACHE TABLE cached per (session, table root): UNCACHE unpersists that very frame, even when the table has a
# newer version since (whose read is another plan, which Spark's cache would not find)
_cached: dict[tuple[int, str], DataFrame] = {}
_lock = threading.Lock()


def _ref(cur: Cursor) -> TableRef | None:
    try:
        return cur.table()
    except DeltaSqlError:
        return None


def _delta_table(spark: SparkSession, cur: Cursor) -> tuple[TableRef, str] | None:
    """The table reference at the cursor and its root, or None when it is not a Delta table (Spark's business)."""
    ref = _ref(cur)
    root = None if ref is None else _root(spark, ref, cur)
    return None if ref is None or root is None else (ref, root)


def _root(spark: SparkSession, ref: TableRef, cur: Cursor) -> str | None:
    if ref.version is not None or ref.timestamp is not None:
        raise sql_error(cur.text, ref.offset, "this statement works on the current table: remove the @ suffix")
    if ref.path is not None:
        return ref.path
    assert ref.name is not None
    return maybe_catalog_location(spark, ref.name)


# --- SHOW CREATE TABLE -------------------------------------------------------------------------------------------

def _lines(items: list[str]) -> str:
    return "(\n  " + ",\n  ".join(items) + ")\n"


def _properties(snapshot: Any) -> dict[str, str]:
    """delta-spark's table properties: the configuration, the protocol versions and, with table features, each
    feature as ``delta.feature.<name> = supported``."""
    protocol = snapshot.protocol
    props = {k: v for k, v in snapshot.metadata.configuration.items() if k != "path"}
    props["delta.minReaderVersion"] = str(protocol.min_reader_version)
    props["delta.minWriterVersion"] = str(protocol.min_writer_version)
    for name in set(protocol.reader_features or ()) | set(protocol.writer_features or ()):
        props[f"delta.feature.{name}"] = "supported"
    return props


def _display_name(spark: SparkSession, ref: TableRef) -> str:
    if ref.path is not None:
        return f"delta.`{ref.path}`"
    assert ref.name is not None
    parts = [p.strip().strip("`") for p in ref.name.split(".")]
    if len(parts) == 1:
        parts = [spark.catalog.currentDatabase(), *parts]
    if len(parts) == 2:
        parts = ["spark_catalog", *parts]
    return ".".join(parts)


def show_create_table(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """SHOW CREATE TABLE <table> [AS SERDE]: the Delta DDL in one ``createtab_stmt`` row."""
    from dvlake.commands.writes.write import load

    form = "SHOW CREATE TABLE delta.`<path>` | name"
    cur.expect("SHOW", "CREATE", "TABLE", form=form)
    target = _delta_table(spark, cur)
    if target is None:
        return None
    ref, root = target
    if cur.accept("AS", "SERDE"):
        raise DeltaAnalysisException(f"SHOW CREATE TABLE AS SERDE is for Hive tables; {_display_name(spark, ref)} is a "
                                     "Delta table: use SHOW CREATE TABLE without AS SERDE",
                                     error_class="UNSUPPORTED_SHOW_CREATE_TABLE.WITH_UNSUPPORTED_FEATURE")
    cur.expect_end(form)
    snapshot = load(root)
    text = f"CREATE TABLE {_display_name(spark, ref)} (\n  "
    text += ",\n  ".join(field_ddl(f) for f in snapshot.schema["fields"]) + ")\nUSING delta\n"
    if snapshot.metadata.partition_columns:
        text += "PARTITIONED BY (" + ", ".join(quote_identifier(c) for c in snapshot.metadata.partition_columns) + ")\n"
    if snapshot.metadata.description:
        text += f"COMMENT '{escaped(snapshot.metadata.description)}'\n"
    is_managed = catalog_function("is_managed")
    managed = ref.name is not None and is_managed is not None and bool(is_managed(spark, ref.name))
    if not managed:
        location = root if "://" in root else f"file:{root}"
        text += f"LOCATION '{escaped(location)}'\n"
    props = sorted(_properties(snapshot).items())
    if props:
        text += "TBLPROPERTIES " + _lines([f"'{escaped(k)}' = '{escaped(v)}'" for k, v in props])
    return spark.createDataFrame([(text,)], "createtab_stmt string")


# --- EXPLAIN -----------------------------------------------------------------------------------------------------

def explain(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """EXPLAIN [EXTENDED | FORMATTED | CODEGEN | COST] <query>: Spark's explanation of the query as dvlake runs it
    (its Delta tables read by the DV-applying scan). None when the query reads no Delta table."""
    cur.expect("EXPLAIN")
    for mode in _EXPLAIN_MODES:
        if cur.accept(mode):
            break
    start = cur.offset()
    body = cur.text[start:]
    try:
        tree = parse_statement(body)
    except DeltaSqlError:
        return None  # Spark reports its own syntax errors
    if not reads_delta_tables(spark, tree):
        return None
    if not isinstance(tree, exp.Query):
        raise sql_error(cur.text, start, "dvlake explains queries on Delta tables; EXPLAIN of this statement is not "
                                         "supported (run the statement itself, or EXPLAIN the query it reads)")
    spliced, frames = _splice(spark, tree, body, whole=True, placeholder=lambda key: "{" + key + "}")
    prefix = cur.text[:start].replace("{", "{{").replace("}", "}}")
    return passthrough(spark, prefix + spliced, None, **frames)


# --- CACHE / UNCACHE TABLE ---------------------------------------------------------------------------------------

def cache(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """CACHE [LAZY] TABLE <table> [OPTIONS (…)] | CACHE [LAZY] TABLE <view> [OPTIONS (…)] [AS] <query>."""
    from dvlake.api import read

    form = "CACHE [LAZY] TABLE delta.`<path>` | name [OPTIONS (…)] [[AS] <query>]"
    cur.expect("CACHE", form=form)
    lazy = cur.accept("LAZY")
    cur.expect("TABLE", form=form)
    ref = _ref(cur)
    if ref is None:
        return None
    if cur.accept("OPTIONS"):
        cur.paren_list()  # storage level options: Spark's default level is what dvlake uses
    if not cur.done():
        return _cache_query(spark, cur, ref, lazy)
    root = _root(spark, ref, cur)
    if root is None:
        return None
    frame = read(spark, root).cache()
    with _lock:
        old = _cached.pop((id(spark), root), None)
        _cached[(id(spark), root)] = frame
    if old is not None:
        old.unpersist()
    if not lazy:
        frame.count()  # Spark's CACHE TABLE fills the cache now
    return spark.createDataFrame([], "result string")


def _cache_query(spark: SparkSession, cur: Cursor, ref: TableRef, lazy: bool) -> DataFrame | None:
    """CACHE TABLE v AS <query> whose query reads Delta tables: the query as a temporary view v, cached."""
    from dvlake.sqlfront.refs import run_query

    cur.accept("AS")
    start = cur.offset()
    body = cur.text[start:]
    try:
        tree = parse_statement(body)
    except DeltaSqlError:
        return None
    if not reads_delta_tables(spark, tree):
        return None
    if ref.path is not None or ref.name is None or "." in ref.name:
        raise sql_error(cur.text, ref.offset, "CACHE TABLE … AS <query> names a temporary view: give a one-part name")
    run_query(spark, tree, body, whole=True).createTempView(ref.name.strip("`"))
    spark.catalog.cacheTable(ref.name)
    if not lazy:
        spark.table(ref.name).count()
    return spark.createDataFrame([], "result string")


def uncache(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """UNCACHE TABLE [IF EXISTS] <table>: drops what CACHE TABLE cached for a Delta table (nothing cached: no-op)."""
    form = "UNCACHE TABLE [IF EXISTS] delta.`<path>` | name"
    cur.expect("UNCACHE", "TABLE", form=form)
    cur.accept("IF", "EXISTS")
    target = _delta_table(spark, cur)
    if target is None:
        return None
    root = target[1]
    cur.expect_end(form)
    with _lock:
        frame = _cached.pop((id(spark), root), None)
    if frame is not None:
        frame.unpersist()
    return spark.createDataFrame([], "result string")


# --- ANALYZE TABLE -----------------------------------------------------------------------------------------------

def analyze(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """ANALYZE TABLE <Delta table> …: refused with delta-spark's (Spark's v2 table) error class."""
    cur.expect("ANALYZE", "TABLE")
    target = _delta_table(spark, cur)
    if target is None:
        return None
    ref = target[0]
    raise DeltaAnalysisException(f"ANALYZE TABLE is not supported for v2 tables ({_display_name(spark, ref)} is a Delta "
                                 "table, which Spark sees as one, as with delta-spark): Delta keeps per-file statistics "
                                 "in its log at every write and skips files with them",
                                 error_class="NOT_SUPPORTED_COMMAND_FOR_V2_TABLE")


# first word → reader; each returns None for statements that name no Delta table (Spark runs them)
READERS: dict[str, Callable[[SparkSession, Cursor], DataFrame | None]] = {
    "EXPLAIN": explain, "CACHE": cache, "UNCACHE": uncache, "ANALYZE": analyze,
}
