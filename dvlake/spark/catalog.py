"""Delta tables by catalog name: the session catalog maps a name to a Delta table's location.

Spark without delta-spark has no ``delta`` data source, so the catalog cannot hold a Delta table
the way delta-spark registers one. dvlake registers a name as a *view* in the session catalog
(``spark_catalog``: the in-memory catalog, or a Hive metastore when the session has Hive support)
whose table properties carry the location (``dvlake.location``) and whose body fails with an
error that says how to read the table (plain Spark cannot apply deletion vectors, so a view that
read the Parquet files directly would return deleted rows). dvlake's readers, ``DeltaTable.forName``
and ``dvlake.sql`` resolve the name to the location and read it through the DV-applying scan.

Tables delta-spark registered in a shared Hive metastore (provider ``delta`` with a location)
resolve as well: ``table_location`` reads the location from ``DESCRIBE TABLE EXTENDED``.
"""

from __future__ import annotations

import posixpath
import re

from pyspark.sql import SparkSession

from dvlake.errors import InvalidTableNameError, NotADeltaTableNameError, TableAlreadyExistsError
from dvlake.spark.layout import logical_struct
from dvlake.spark.native_sql import native_sql
from dvlake.storage.paths import normalize_table_root

#: The view property holding the Delta table's root.
LOCATION_PROPERTY = "dvlake.location"
#: The view property marking a dvlake registration (value: the provider, ``delta``).
PROVIDER_PROPERTY = "dvlake.provider"
#: The view property marking a managed table (its files live under the database and go with DROP TABLE).
MANAGED_PROPERTY = "dvlake.managed"

#: One part of a name Spark's session catalog accepts for a table or database (its ``validateName``: ASCII letters,
#: digits and ``_``), bare or back-quoted, with blanks around it.
_PART = r"\s*(?:`[A-Za-z0-9_]+`|[A-Za-z0-9_]+)\s*"
#: ``table``, ``db.table`` or ``catalog.db.table`` made of such parts: a name that does not match is refused whole.
_VALID_NAME = re.compile(rf"{_PART}(?:\.{_PART}){{0,2}}")

_PATH_NAME = re.compile(r"^\s*delta\s*\.\s*`(?P<path>(?:[^`]|``)+)`\s*$", re.I)


def path_of_identifier(name: str) -> str | None:
    """The path of a ``delta.`<path>``` identifier, or None for a catalog name."""
    m = _PATH_NAME.match(name)
    return m.group("path").replace("``", "`") if m else None


def _quoted(name: str) -> str:
    """``db.t`` → ```db`.`t```; already back-quoted parts are kept."""
    parts = re.findall(r"`(?:[^`]|``)+`|[^.]+", name.strip())
    return ".".join(p if p.startswith("`") else f"`{p.strip()}`" for p in parts)


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def registered_location(spark: SparkSession, name: str) -> str | None:
    """The Delta location registered for ``name``, or None when ``name`` is not a Delta table in the catalog
    (also when it does not exist)."""
    from pyspark.errors import AnalysisException

    try:
        if not spark.catalog.tableExists(name):  # asked first: Spark logs every failed statement at ERROR level
            return None
        props = {str(r[0]): str(r[1]) for r in native_sql(spark, f"SHOW TBLPROPERTIES {_quoted(name)}").collect()}
        if LOCATION_PROPERTY in props:
            return props[LOCATION_PROPERTY]
        rows = native_sql(spark, f"DESCRIBE TABLE EXTENDED {_quoted(name)}").collect()
    except AnalysisException:
        return None
    info = {str(r[0]).strip(): str(r[1] or "").strip() for r in rows}
    if info.get("Provider", "").lower() == "delta" and info.get("Location"):
        return info["Location"]  # registered by delta-spark (e.g. in a shared Hive metastore)
    return None


def table_location(spark: SparkSession, name: str) -> str:
    """The Delta table location behind a session-catalog name (or the path of ``delta.`<path>```).

    Raises:
        NotADeltaTableNameError: ``name`` is not a Delta table with a location in the session catalog.
    """
    path = path_of_identifier(name)
    if path is not None:
        return path
    location = registered_location(spark, name)
    if location is None:
        raise NotADeltaTableNameError(
            f"{name} is not a Delta table with a location in the session catalog; register it with "
            f"CREATE TABLE {name} USING delta LOCATION '<path>' (through dvlake) or use delta.`<path>` instead")
    return location


def table_name_parts(name: str) -> list[str]:
    """The parts of a catalog name a table may be created under, back-quotes removed (``db.`t``` → ``["db", "t"]``).

    Checked before anything is written, by every create-by-name path (through :func:`location_for_create`): a managed
    table's folder is derived from the last part, so a part with a separator, ``.``/``..``, a percent escape (a
    ``file:`` location is percent-decoded later) or anything else Spark's catalog would refuse must never reach a path.

    Raises:
        InvalidTableNameError: a part is empty or holds anything but ASCII letters, digits and ``_`` (Spark's rule,
            ``INVALID_SCHEMA_OR_RELATION_NAME``); or more than three parts.
    """
    if not _VALID_NAME.fullmatch(name):
        raise InvalidTableNameError(
            f"{name!r} is not a valid table name: each part of a name may hold only ASCII letters, digits and _ (Spark's "
            "catalog refuses anything else); nothing was written. Choose another name, or write by path (delta.`<path>`)")
    return [p.strip().strip("`") for p in name.split(".")]


def location_for_create(spark: SparkSession, name: str) -> str | None:
    """The Delta location already registered under ``name``, or None when the catalog has no ``name``: what a
    create by name (CREATE TABLE, CTAS, ``saveAsTable``, ``writeTo``, the table builder) may use.

    Called before any data is written, so a refused create leaves no files behind (a managed Parquet table's
    directory is exactly where a new managed Delta table of that name would go).

    Raises:
        InvalidTableNameError: a name Spark's catalog refuses (:func:`table_name_parts`).
        TableAlreadyExistsError: ``name`` is taken by something that is not a Delta table (a Parquet or Hive
            table, a view), with Spark's error class ``TABLE_OR_VIEW_ALREADY_EXISTS``.
    """
    table_name_parts(name)
    location = registered_location(spark, name)
    if location is None and spark.catalog.tableExists(name):
        raise TableAlreadyExistsError(
            f"{name} already exists in the session catalog and is not a Delta table; dvlake does not write a Delta "
            "table over it (nothing was written): drop it first or choose another name",
            error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
    return location


def register_table(spark: SparkSession, name: str, path: str, if_not_exists: bool = False, *,
                   managed: bool = False) -> None:
    """Register the Delta table at ``path`` (existing or about to be created) under ``name`` in the session catalog.

    The catalog entry's columns are the table's current columns (none but a marker when the table does
    not exist yet). When ``name`` exists and ``if_not_exists`` is True (CREATE OR REPLACE, createOrReplace,
    a second saveAsTable) the entry's columns are brought up to date instead (:func:`refresh_registration`),
    since the table behind the name may have a new schema.

    Raises:
        TableAlreadyExistsError: ``name`` exists and ``if_not_exists`` is False.
    """
    root = normalize_table_root(path)
    if spark.catalog.tableExists(name):
        if if_not_exists:
            refresh_registration(spark, name)
            return
        raise TableAlreadyExistsError(f"a table or view named {name} already exists in the session catalog",
                                      error_class="DELTA_TABLE_ALREADY_EXISTS")
    message = (f"{name} is a Delta table (with deletion vectors) at {root}: plain Spark cannot read it. "
               f"Call dvlake.configure_spark(spark) and use spark.sql/spark.read.table/DeltaTable.forName, or dvlake.sql")
    raise_expr = f"raise_error({_sql_string(message)})"
    # Every column and the one row are guarded by raise_error, which the optimizer cannot fold: no query
    # shape (count(*), joins, EXISTS, a view over the name) can learn the registration's contents (one
    # row of nulls) and answer from them; it gets the error or an answer that does not depend on them.
    columns = _columns(root) or [("dvlake_delta_table", "string")]
    select = ", ".join(f"CAST({raise_expr} AS {t}) AS `{c}`" for c, t in columns)
    props = f"{_sql_string(LOCATION_PROPERTY)} = {_sql_string(root)}, {_sql_string(PROVIDER_PROPERTY)} = 'delta'"
    if managed:
        props += f", {_sql_string(MANAGED_PROPERTY)} = 'true'"
    exists = " IF NOT EXISTS" if if_not_exists else ""
    native_sql(spark, f"CREATE VIEW{exists} {_quoted(name)} TBLPROPERTIES ({props}) AS SELECT {select} "
                      f"FROM (SELECT 1 AS dvlake_row) WHERE {raise_expr} IS NULL")


def is_managed(spark: SparkSession, name: str) -> bool:
    """Whether dvlake registered ``name`` as a managed table (created without a location: DROP TABLE deletes it)."""
    props = {str(r[0]): str(r[1]) for r in native_sql(spark, f"SHOW TBLPROPERTIES {_quoted(name)}").collect()}
    return props.get(MANAGED_PROPERTY) == "true"


def refresh_registration(spark: SparkSession, name: str) -> None:
    """Re-create dvlake's catalog entry for ``name`` with the table's current columns, so DESCRIBE and listColumns
    through plain Spark (or another client of the metastore) stay true.

    The one place that keeps a name's columns in step with its table: every change made through a name that can
    change the schema calls it (ALTER TABLE … ADD COLUMNS, CREATE OR REPLACE, mergeSchema / autoMerge writes, MERGE
    with schema evolution, RESTORE, ``DeltaTable.forName(…)`` merges and restores, the table builder's
    createOrReplace). Cheap when nothing changed (the entry is compared first). Names dvlake did not register
    (delta-spark's, Spark's own tables) are left alone."""
    if path_of_identifier(name) is not None:
        return
    props = {str(r[0]): str(r[1]) for r in native_sql(spark, f"SHOW TBLPROPERTIES {_quoted(name)}").collect()}
    root = props.get(LOCATION_PROPERTY)
    if root is None:
        return
    current = [(str(r[0]), str(r[1])) for r in native_sql(spark, f"DESCRIBE TABLE {_quoted(name)}").collect()
               if r[0] and not str(r[0]).startswith("#")]
    wanted = [(c.replace("``", "`"), t) for c, t in _columns(root)]
    if [(c.lower(), t.lower()) for c, t in current] == [(c.lower(), t.lower()) for c, t in wanted]:
        return
    managed = props.get(MANAGED_PROPERTY) == "true"
    native_sql(spark, f"DROP VIEW IF EXISTS {_quoted(name)}")
    register_table(spark, name, root, managed=managed)


def unregister_table(spark: SparkSession, name: str) -> None:
    """Drop dvlake's catalog entry for ``name`` (the data stays)."""
    native_sql(spark, f"DROP VIEW IF EXISTS {_quoted(name)}")


def default_table_location(spark: SparkSession, name: str) -> str:
    """Where Spark would place a managed table ``name``: ``<database location>/<table>`` (table name lower-cased).

    The one function that derives a managed table's folder from a name: the name is checked first
    (:func:`table_name_parts`), and the result must be a direct child of the database's location.

    Raises:
        InvalidTableNameError: a name Spark's catalog refuses, or a location that is not inside the database's.
    """
    parts = table_name_parts(name)
    database = parts[-2] if len(parts) >= 2 else spark.catalog.currentDatabase()
    root = str(spark.catalog.getDatabase(database).locationUri).rstrip("/")
    location = root + "/" + parts[-1].lower()
    if posixpath.dirname(normalize_table_root(location)) != normalize_table_root(root):  # cannot happen after the check
        raise InvalidTableNameError(f"{name!r} would place a managed table at {location}, outside its database's "
                                    f"location {root}; nothing was written")
    return location


def _columns(root: str) -> list[tuple[str, str]]:
    from dvlake.errors import TableNotFoundError
    from dvlake.log.snapshot import Snapshot

    try:
        snapshot = Snapshot.load(root)
    except TableNotFoundError:
        return []
    logical = logical_struct(snapshot.schema)
    return [(f.name.replace("`", "``"), f.dataType.simpleString()) for f in logical.fields]
