"""delta-spark's session faces on dvlake: ``format("delta")`` reads and writes, catalog names and ``spark.sql``.

``configure_spark(builder_or_session)`` is the one call a delta-spark user swaps in for
``configure_spark_with_delta_pip``. After it, on that session:

* ``spark.read.format("delta").load(p)`` (and ``load(p, format="delta")``, ``versionAsOf``,
  ``timestampAsOf``, ``readChangeFeed``) returns exactly ``dvlake.read``'s DataFrame: the same
  native Parquet scan with DVs applied, not a Python row source;
* ``df.write.format("delta")…save(p)`` / ``saveAsTable(name)`` commit through
  ``dvlake.commands.writes.write`` with delta-spark's writer options (``commands/write_options.py``);
* ``spark.read.table(name)`` / ``spark.table(name)`` / ``insertInto(name)`` act on names dvlake
  registered (``dvlake.spark.catalog``);
* ``spark.sql(stmt)`` goes through ``dvlake.sql``, which runs Delta statements and hands every
  other statement to Spark's own ``sql`` (a parameterized call, ``sql(q, args)``, goes to Spark directly).

Why hooks: PySpark's Python data source API (``spark.dataSource.register``) runs a Python reader
in Python workers, so it cannot give the native scan; its tables lose their location in the
session catalog and ``delta.`p``` direct queries are refused for Python sources
(UNSUPPORTED_DATASOURCE_FOR_DIRECT_QUERY). So ``configure_spark`` wraps a few methods of
``DataFrameReader``, ``DataFrameWriter`` and ``SparkSession`` (classic and Spark Connect). The
wrappers only record what the user set and call the original; they act only when the format is
``delta`` (or the name is a registered Delta table, or the call is ``spark.sql``) AND the session
has ``spark.dvlake.faces.enabled=true``, which ``configure_spark`` sets. Everything else reaches
PySpark's own code unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

from dvlake import api
from dvlake.commands.writes import options as write_options
from dvlake.commands.writes import stream_sink
from dvlake.commands.writes import write as write_cmd
from dvlake.compat import pyspark_hooks as hooks
from dvlake.config import FACES_ENABLED as ENABLED_CONF
from dvlake.errors import (
    DeltaOptionError,
    InvalidArgumentError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from dvlake.log.schema import strip_column_mapping
from dvlake.log.snapshot import Snapshot
from dvlake.spark.catalog import (
    default_table_location,
    location_for_create,
    path_of_identifier,
    refresh_registration,
    register_table,
    registered_location,
    table_name_parts,
)
from dvlake.spark.object_stores import configure_object_stores
from dvlake.spark.session_switches import apply_session_switches
from dvlake.spark.stream_support import open_delta_stream
from dvlake.sql import sql as dvlake_sql

#: delta-spark's set-up settings: their classes do not exist without delta-spark, so
#: ``configure_spark`` drops them from a builder (the session would fail to start its catalog).
_DELTA_SPARK_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}

_generation = [0]  # bumped by configure/disable: cached per-session answers are re-read after a change


# -- the one call ------------------------------------------------------------------------------------
def configure_spark(builder_or_session: Any) -> Any:
    """Turn on delta-spark's faces for a session: ``format("delta")`` reads and writes, catalog names, ``spark.sql``.

    Args:
        builder_or_session: a ``SparkSession.Builder`` (classic or ``.remote(...)`` Spark Connect), or a session.

    Returns:
        The same builder (call ``getOrCreate()`` on it) or the same session.

    Example:
        >>> spark = dvlake.configure_spark(SparkSession.builder.appName("app")).getOrCreate()
        >>> spark.read.format("delta").option("versionAsOf", 3).load("/data/events")
    """
    install()
    _generation[0] += 1
    if hasattr(builder_or_session, "getOrCreate"):
        options = getattr(builder_or_session, "_options", None)
        if isinstance(options, dict):
            for key, value in _DELTA_SPARK_SETTINGS.items():
                if str(options.get(key, "")).strip() == value:
                    del options[key]
        return builder_or_session.config(ENABLED_CONF, "true")
    builder_or_session.conf.set(ENABLED_CONF, "true")
    return builder_or_session


def configure_spark_with_delta_pip(spark_session_builder: Any, extra_packages: Sequence[str] | None = None) -> Any:
    """delta-spark's set-up helper, for dvlake: returns the builder with the faces on (no jars are needed).

    ``extra_packages`` are Maven coordinates for ``spark.jars.packages``, as in delta-spark; the delta-spark
    settings ``spark.sql.extensions`` / ``spark.sql.catalog.spark_catalog`` pointing at delta-spark's classes
    are dropped, so a delta-spark set-up runs unchanged.
    """
    builder = configure_spark(spark_session_builder)
    if extra_packages:
        builder = builder.config("spark.jars.packages", ",".join(extra_packages))
    return builder


def disable(spark: Any) -> None:
    """Turn the faces off for ``spark`` (the hooks stay installed and pass everything through)."""
    _generation[0] += 1
    spark.conf.set(ENABLED_CONF, "false")


def uninstall() -> int:
    """Take every PySpark hook back out of this process (all sessions); returns how many methods were restored.

    ``format("delta")``, catalog names and ``spark.sql`` then behave as plain PySpark's again; a later
    ``configure_spark`` installs the hooks anew.
    """
    _generation[0] += 1
    return hooks.uninstall()


def enabled(spark: Any) -> bool:
    """Whether ``spark`` has the faces on (one settings lookup per session until the next configure/disable)."""
    cached = getattr(spark, "_dvlake_faces", None)
    if cached is not None and cached[0] == _generation[0]:
        return bool(cached[1])
    try:
        value = str(spark.conf.get(ENABLED_CONF, "false")).strip().lower() == "true"
    except Exception:  # a stopped session or a server that refuses the lookup: the faces stay off
        value = False
    if value:
        configure_object_stores(spark)  # once per session: spark.hadoop.fs.* for dvlake's own reads and commits
        apply_session_switches(spark)  # spark.dvlake.snapshotCache.enabled, once per session and configure/disable
    with contextlib.suppress(AttributeError, TypeError):
        spark._dvlake_faces = (_generation[0], value)
    return value


# -- installing the hooks ------------------------------------------------------------------------------
def install() -> None:
    """Wrap the reader, writer and session methods once per process (classic, and Connect when importable).

    All or nothing: if one method's signature no longer matches what its wrapper forwards
    (``PySparkIncompatibleError``), the methods already wrapped are restored before the error propagates.
    """
    if hooks.installed():
        return
    try:
        _install_all()
    except BaseException:
        hooks.uninstall()
        raise


def _install_all() -> None:
    from pyspark.sql import readwriter
    from pyspark.sql import session as classic_session

    _wrap_reader(readwriter.DataFrameReader, lambda r: r._spark)
    _wrap_writer(readwriter.DataFrameWriter, lambda w: w._df)
    _wrap_writer_v2(readwriter.DataFrameWriterV2, lambda w: w._df)
    _wrap_session(classic_session.SparkSession)
    from pyspark.sql.streaming import readwriter as stream_readwriter

    _wrap_stream_reader(stream_readwriter.DataStreamReader, lambda r: r._spark)
    _wrap_stream_writer(stream_readwriter.DataStreamWriter, lambda w: w._spark)
    try:
        from pyspark.sql.connect import readwriter as connect_readwriter
        from pyspark.sql.connect import session as connect_session
        from pyspark.sql.connect.streaming import readwriter as connect_stream_readwriter
    except ImportError:  # the Connect client's dependencies (grpcio, ...) are not installed
        return
    _wrap_reader(connect_readwriter.DataFrameReader, lambda r: r._client)
    _wrap_writer(connect_readwriter.DataFrameWriter, _connect_writer_frame)
    _wrap_writer_v2(connect_readwriter.DataFrameWriterV2, _connect_writer_frame)
    _wrap_session(connect_session.SparkSession)
    _wrap_stream_reader(connect_stream_readwriter.DataStreamReader, lambda r: r._client)
    _wrap_stream_writer(connect_stream_readwriter.DataStreamWriter, lambda w: w._session)


def _connect_writer_frame(writer: Any) -> Any:
    from pyspark.sql.connect.dataframe import DataFrame

    return DataFrame(writer._df, writer._spark)


def _state(obj: Any) -> dict[str, Any]:
    state = obj.__dict__.get("_dvlake")
    if state is None:
        state = {"format": None, "options": {}, "mode": None, "partition_by": None, "schema": None}
        obj.__dict__["_dvlake"] = state
    return state


def _is_delta(fmt: Any) -> bool:
    return isinstance(fmt, str) and fmt.strip().lower() == "delta"


def _recording(cls: type, name: str, record: Callable[..., None]) -> None:
    original = getattr(cls, name)

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        record(_state(self), *args, **kwargs)
        return original(self, *args, **kwargs)

    hooks.patch(cls, name, wrapper)


def _set(key: str) -> Callable[..., None]:
    def record(state: dict[str, Any], value: Any = None, *_: Any, **__: Any) -> None:
        if value is not None:
            state[key] = value
    return record


def _set_sink(name: str) -> Callable[..., None]:
    def record(state: dict[str, Any], *_: Any, **__: Any) -> None:
        if not hooks.is_inside_dvlake():  # the Delta sink's own foreachBatch call keeps the format it runs for
            state["format"] = name
    return record


def _record_option(state: dict[str, Any], key: str, value: Any = None) -> None:
    if value is not None:
        state["options"][str(key)] = value


def _record_options(state: dict[str, Any], **options: Any) -> None:
    for key, value in options.items():
        _record_option(state, key, value)


def _record_partition_by(state: dict[str, Any], *cols: Any) -> None:
    state["partition_by"] = _columns(cols)


def _columns(cols: Any) -> list[str]:
    if cols is None:
        return []
    if isinstance(cols, str):
        return [cols]
    out: list[str] = []
    for c in cols:
        out.extend([c] if isinstance(c, str) else list(c))
    return out


def _wrap_reader(cls: type, session_of: Callable[[Any], Any]) -> None:
    _recording(cls, "format", _set("format"))
    _recording(cls, "schema", _set("schema"))
    _recording(cls, "option", _record_option)
    _recording(cls, "options", _record_options)
    load, table = cls.load, cls.table  # type: ignore[attr-defined]

    @functools.wraps(load)
    def load_wrapper(self: Any, path: Any = None, format: str | None = None, schema: Any = None,  # noqa: A002
                     **options: Any) -> Any:
        state = _state(self)
        spark = session_of(self)
        if _is_delta(format or state["format"]) and enabled(spark):
            with hooks.inside_dvlake():
                return read_delta(spark, path, {**state["options"], **options}, schema or state["schema"])
        return load(self, path, format, schema, **options)

    @functools.wraps(table)
    def table_wrapper(self: Any, tableName: str) -> Any:
        spark = session_of(self)
        if enabled(spark):
            with hooks.inside_dvlake():
                frame = table_delta(spark, tableName, dict(_state(self)["options"]))
                if frame is not None:
                    return frame
        return table(self, tableName)

    hooks.patch(cls, "load", load_wrapper)
    hooks.patch(cls, "table", table_wrapper)


def _wrap_writer(cls: type, frame_of: Callable[[Any], Any]) -> None:
    _recording(cls, "format", _set("format"))
    _recording(cls, "mode", _set("mode"))
    _recording(cls, "option", _record_option)
    _recording(cls, "options", _record_options)
    _recording(cls, "partitionBy", _record_partition_by)
    save, save_as_table, insert_into = cls.save, cls.saveAsTable, cls.insertInto  # type: ignore[attr-defined]

    def settings(self: Any, format: str | None, mode: str | None, partitionBy: Any,  # noqa: A002
                 options: dict[str, Any]) -> tuple[bool, str, list[str], dict[str, Any]]:
        state = _state(self)
        is_delta = _is_delta(format or state["format"])
        parts = _columns(partitionBy) if partitionBy is not None else list(state["partition_by"] or [])
        return is_delta, str(mode or state["mode"] or "error"), parts, {**state["options"], **options}

    @functools.wraps(save)
    def save_wrapper(self: Any, path: str | None = None, format: str | None = None, mode: str | None = None,  # noqa: A002
                     partitionBy: Any = None, **options: Any) -> None:
        is_delta, m, parts, opts = settings(self, format, mode, partitionBy, options)
        df = frame_of(self)
        if is_delta and enabled(df.sparkSession):
            with hooks.inside_dvlake():
                write_delta(df, path or opts.pop("path", None), m, parts, opts)
            return None
        return save(self, path, format, mode, partitionBy, **options)

    @functools.wraps(save_as_table)
    def save_as_table_wrapper(self: Any, name: str, format: str | None = None, mode: str | None = None,  # noqa: A002
                              partitionBy: Any = None, **options: Any) -> None:
        is_delta, m, parts, opts = settings(self, format, mode, partitionBy, options)
        df = frame_of(self)
        if is_delta and enabled(df.sparkSession):
            with hooks.inside_dvlake():
                save_as_delta_table(df, name, m, parts, opts)
            return None
        return save_as_table(self, name, format, mode, partitionBy, **options)

    @functools.wraps(insert_into)
    def insert_into_wrapper(self: Any, tableName: str, overwrite: bool | None = None) -> None:
        df = frame_of(self)
        spark = df.sparkSession
        if enabled(spark):
            with hooks.inside_dvlake():
                state = _state(self)
                if insert_into_delta(df, tableName, overwrite, state["mode"], dict(state["options"])):
                    return None
        return insert_into(self, tableName, overwrite)

    hooks.patch(cls, "save", save_wrapper)
    hooks.patch(cls, "saveAsTable", save_as_table_wrapper)
    hooks.patch(cls, "insertInto", insert_into_wrapper)


def _column_name(c: Any) -> str:
    """A partition column given as a name or a plain column reference (``col("day")``)."""
    if isinstance(c, str):
        return c
    m = re.fullmatch(r"Column<'(.+)'>", str(c))
    if m is None:
        raise InvalidArgumentError(f"dvlake partitions by column names; got {c!r} (transforms such as days() are not supported)")
    return m.group(1)


def _wrap_writer_v2(cls: type, frame_of: Callable[[Any], Any]) -> None:
    """``df.writeTo(name).using("delta")…create()/createOrReplace()/replace()/append()/overwrite(c)/overwritePartitions()``."""
    init = cls.__init__  # type: ignore[misc]

    @functools.wraps(init)
    def init_wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        table = kwargs.get("table", next((a for a in reversed(args) if isinstance(a, str)), None))
        _state(self)["table"] = table

    hooks.patch(cls, "__init__", init_wrapper)
    _recording(cls, "using", _set("format"))
    _recording(cls, "option", _record_option)
    _recording(cls, "options", _record_options)

    def record_property(state: dict[str, Any], key: str, value: Any = None) -> None:
        state.setdefault("properties", {})[str(key)] = value

    def record_partitions(state: dict[str, Any], *cols: Any) -> None:
        state["partition_by"] = [_column_name(c) for c in cols]

    _recording(cls, "tableProperty", record_property)
    _recording(cls, "partitionedBy", record_partitions)

    def run(self: Any, action: str, condition: Any = None) -> bool:
        with hooks.inside_dvlake():
            return _run_writer_v2(_state(self), frame_of(self), action, condition)

    def wrap(name: str) -> None:
        original = getattr(cls, name)

        if name == "overwrite":
            @functools.wraps(original)
            def overwrite_wrapper(self: Any, condition: Any) -> None:
                if not run(self, name, condition):
                    original(self, condition)
            hooks.patch(cls, name, overwrite_wrapper)
            return

        @functools.wraps(original)
        def wrapper(self: Any) -> None:
            if not run(self, name):
                original(self)
        hooks.patch(cls, name, wrapper)

    for method in ("create", "createOrReplace", "replace", "append", "overwrite", "overwritePartitions"):
        wrap(method)


def _writer_v2_target(state: dict[str, Any], df: Any) -> tuple[bool, str | None]:
    """(whether the ``writeTo`` write is dvlake's, the target's registered location or None for a new table)."""
    if not enabled(df.sparkSession):
        return False, None
    location = _registered(df.sparkSession, state["table"])
    return _is_delta(state["format"]) or location is not None, location


def _run_writer_v2(state: dict[str, Any], df: Any, action: str, condition: Any) -> bool:
    """Carry out one ``DataFrameWriterV2`` action on a Delta table; False when the target is not dvlake's.

    Raises:
        TableAlreadyExistsError: ``create()`` of a name that is already a Delta table.
        InvalidArgumentError: ``replace()``/``append()``/``overwrite*()`` of a name that is not a Delta table.
    """
    ours, location = _writer_v2_target(state, df)
    if not ours:
        return False
    name = state["table"]
    opts = {**state["options"], **(state.get("properties") or {})}
    parts = list(state["partition_by"] or [])
    if action in ("create", "createOrReplace", "replace"):
        if action == "create" and location is not None:
            raise TableAlreadyExistsError(f"table {name} already exists (a Delta table at {location})",
                                          error_class="DELTA_TABLE_ALREADY_EXISTS")
        if action == "replace" and location is None:
            raise InvalidArgumentError(f"cannot replace {name}: it is not a Delta table in the session catalog")
        save_as_delta_table(df, name, "error" if action == "create" else "overwrite", parts,
                            {**opts, "overwriteSchema": "true"} if action != "create" else opts)
        return True
    if location is None:
        raise InvalidArgumentError(f"{name} is not a Delta table in the session catalog: create it first")
    if action == "append":
        write_delta(df, location, "append", [], opts)
    elif action == "overwrite":
        write_delta(df, location, "overwrite", [], {**opts, "replaceWhere": condition})  # a Column or SQL text
    else:  # overwritePartitions
        write_delta(df, location, "overwrite", [], {**opts, "partitionOverwriteMode": "dynamic"})
    _refresh(df.sparkSession, name)  # mergeSchema / autoMerge: the catalog's columns follow
    return True


def _wrap_stream_reader(cls: type, session_of: Callable[[Any], Any]) -> None:
    """``spark.readStream.format("delta")…load(path)`` / ``.table(name)``: ``dvlake.read_stream``."""
    _recording(cls, "format", _set("format"))
    _recording(cls, "schema", _set("schema"))
    _recording(cls, "option", _record_option)
    _recording(cls, "options", _record_options)
    load, table = cls.load, cls.table  # type: ignore[attr-defined]

    @functools.wraps(load)
    def load_wrapper(self: Any, path: Any = None, format: str | None = None, schema: Any = None,  # noqa: A002
                     **options: Any) -> Any:
        state = _state(self)
        spark = session_of(self)
        if _is_delta(format or state["format"]) and enabled(spark):
            with hooks.inside_dvlake():
                return read_delta_stream(spark, path, {**state["options"], **options}, schema or state["schema"])
        return load(self, path, format, schema, **options)

    @functools.wraps(table)
    def table_wrapper(self: Any, tableName: str) -> Any:
        spark = session_of(self)
        if enabled(spark):
            with hooks.inside_dvlake():
                location = _registered(spark, tableName)
                if location is not None:
                    state = _state(self)
                    return read_delta_stream(spark, location, dict(state["options"]), state["schema"])
        return table(self, tableName)

    hooks.patch(cls, "load", load_wrapper)
    hooks.patch(cls, "table", table_wrapper)


def read_delta_stream(spark: Any, path: Any, options: dict[str, Any], schema: Any) -> Any:
    """``spark.readStream.format("delta")…load(path)``: ``dvlake.read_stream``.

    Raises:
        DeltaOptionError: a user schema (the stream takes the table's), or no path.
    """

    if schema is not None and schema != "":
        raise DeltaOptionError("Delta does not support specifying the schema at read time: drop .schema(...)",
                               error_class="DELTA_UNSUPPORTED_SCHEMA_DURING_READ")
    path = path if path is not None else {str(k).lower(): v for k, v in options.items()}.get("path")
    if not path:
        raise InvalidArgumentError("spark.readStream.format('delta').load() needs the table path: load('<path>')")
    return open_delta_stream(spark, str(path), options)


def _wrap_stream_writer(cls: type, session_of: Callable[[Any], Any]) -> None:
    """``df.writeStream.format("delta")…start(path)`` / ``.toTable(name)``: dvlake's sink under ``foreachBatch``."""
    _recording(cls, "format", _set("format"))
    # foreachBatch/foreach make the query a function sink whatever format() said before (Spark keeps the last of the
    # three), so start() hands it to Spark instead of opening a Delta sink
    _recording(cls, "foreachBatch", _set_sink("foreachBatch"))
    _recording(cls, "foreach", _set_sink("foreach"))
    _recording(cls, "outputMode", _set("mode"))
    _recording(cls, "queryName", _set("query_name"))
    _recording(cls, "option", _record_option)
    _recording(cls, "options", _record_options)
    start, to_table, partition_by = cls.start, cls.toTable, cls.partitionBy  # type: ignore[attr-defined]

    @functools.wraps(partition_by)
    def partition_by_wrapper(self: Any, *cols: Any) -> Any:
        # kept here, not handed to Spark yet: Spark's foreachBatch (the Delta sink) refuses partitioning, so
        # start/toTable pass it on only for other formats
        _record_partition_by(_state(self), *cols)
        return self

    hooks.patch(cls, "partitionBy", partition_by_wrapper)

    def recorded_parts(self: Any, partitionBy: Any) -> Any:
        return partitionBy if partitionBy is not None else (_state(self)["partition_by"] or None)

    def delta_start(self: Any, path: str | None, name: str | None, outputMode: str | None, partitionBy: Any,
                    queryName: str | None, options: dict[str, Any]) -> Any:
        if options:
            self.options(**options)
        if outputMode is not None:
            self.outputMode(outputMode)
        if queryName is not None:
            self.queryName(queryName)
        state = _state(self)
        parts = _columns(partitionBy) if partitionBy is not None else list(state["partition_by"] or [])
        return start_delta_sink(self, session_of(self), path, name, state["mode"], parts, dict(state["options"]),
                                start, state.get("query_name"))

    @functools.wraps(start)
    def start_wrapper(self: Any, path: str | None = None, format: str | None = None,  # noqa: A002
                      outputMode: str | None = None, partitionBy: Any = None, queryName: str | None = None,
                      **options: Any) -> Any:
        spark = session_of(self)
        if _is_delta(format or _state(self)["format"]) and enabled(spark):
            with hooks.inside_dvlake():
                return delta_start(self, path, None, outputMode, partitionBy, queryName, options)
        return start(self, path, format, outputMode, recorded_parts(self, partitionBy), queryName, **options)

    @functools.wraps(to_table)
    def to_table_wrapper(self: Any, tableName: str, format: str | None = None,  # noqa: A002
                         outputMode: str | None = None, partitionBy: Any = None, queryName: str | None = None,
                         **options: Any) -> Any:
        spark = session_of(self)
        if enabled(spark):
            fmt = format or _state(self)["format"]
            with hooks.inside_dvlake():
                if _is_delta(fmt) or (fmt is None and _registered(spark, tableName) is not None):
                    return delta_start(self, None, tableName, outputMode, partitionBy, queryName, options)
        return to_table(self, tableName, format, outputMode, recorded_parts(self, partitionBy), queryName, **options)

    hooks.patch(cls, "start", start_wrapper)
    hooks.patch(cls, "toTable", to_table_wrapper)


def start_delta_sink(writer: Any, spark: Any, path: str | None, name: str | None, mode: str | None,
                     partition_by: list[str], options: dict[str, Any], original_start: Callable[..., Any],
                     query_name: str | None = None) -> Any:
    """Start ``writer`` as a Delta sink: ``foreachBatch`` with one txn-stamped dvlake commit per micro-batch.

    Raises:
        UnsupportedOutputModeError: the ``update`` output mode.
        InvalidArgumentError: no path (``start(path)``) and no table name; over Spark Connect, no checkpoint location.
    """

    output_mode = stream_sink.check_output_mode(mode)
    opts = dict(options)
    location = None if name is not None else path or opts.pop("path", None)
    on_commit: Callable[[Any], None] | None = None
    if name is not None:
        # checked (a name Spark refuses, a name taken by a non-Delta table) before the query starts writing
        location = path_of_identifier(name) or location_for_create(spark, name)
        if location is None:  # a new table: created by the first batch, then registered under the name
            given = opts.pop("path", None)
            target = str(given or default_table_location(spark, name))
            location = target

            registered: list[bool] = []

            def register(batch: Any) -> None:
                if not registered:  # once per run: the first batch created the table
                    register_table(batch.sparkSession, name, target, if_not_exists=True, managed=given is None)
                    registered.append(True)

            on_commit = register
    if not location:
        raise InvalidArgumentError("df.writeStream.format('delta').start() needs the table path: start('<path>')")
    conf = _conf_reader(spark)
    checkpoint = stream_sink.checkpoint_location(opts, conf, query_name)
    remote = _is_connect(spark)
    if remote and checkpoint is None:
        # the batches run in a Python process on the server: they can learn the query's id (the txn app id that makes
        # a replayed batch recognisable) only from the checkpoint Spark writes, so its location must be known here
        raise InvalidArgumentError(
            "over Spark Connect, df.writeStream.format('delta') needs option('checkpointLocation', <folder>) (or "
            "spark.sql.streaming.checkpointLocation with a queryName): each micro-batch reads the query's id from "
            "the checkpoint to commit exactly once")
    parsed = write_options.parse(opts, conf)
    query_id = stream_sink.QueryId(checkpoint, remote=remote)
    fn = stream_sink.batch_writer(str(location), output_mode, partition_by, parsed, api.session_defaults(spark),
                                  query_id, on_commit)
    writer.foreachBatch(fn)
    query = original_start(writer)
    query_id.set(str(query.id))
    return query


def _conf_reader(spark: Any) -> Callable[[str], Any]:
    def get(key: str) -> Any:
        return spark.conf.get(key, None)
    return get


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _wrap_session(cls: type) -> None:
    sql, table = cls.sql, cls.table  # type: ignore[attr-defined]

    @functools.wraps(sql)
    def sql_wrapper(self: Any, sqlQuery: str, args: Any = None, **kwargs: Any) -> Any:
        if args is None and not kwargs and not hooks.is_inside_dvlake() and enabled(self):

            with hooks.inside_dvlake():
                return dvlake_sql(self, sqlQuery)
        return sql(self, sqlQuery, args, **kwargs)

    @functools.wraps(table)
    def table_wrapper(self: Any, tableName: str) -> Any:
        if enabled(self):
            with hooks.inside_dvlake():
                frame = table_delta(self, tableName, {})
                if frame is not None:
                    return frame
        return table(self, tableName)

    hooks.patch(cls, "sql", sql_wrapper)  # dvlake's own statements reach the original (native_sql)
    hooks.patch(cls, "table", table_wrapper)
    if "newSession" in cls.__dict__:
        new_session = cls.newSession  # type: ignore[attr-defined]

        @functools.wraps(new_session)
        def new_session_wrapper(self: Any) -> Any:
            # a new session starts from the context's settings, not this session's: configure_spark(session) set the
            # switch at run time, so the child would lose format("delta") (DATA_SOURCE_NOT_FOUND) without it
            child = new_session(self)
            if enabled(self):
                child.conf.set(ENABLED_CONF, "true")
            return child

        hooks.patch(cls, "newSession", new_session_wrapper)


# -- what the hooks do for Delta -----------------------------------------------------------------------
_AT_VERSION = re.compile(r"^(?P<path>.+)@v(?P<version>\d+)$")
_AT_TIMESTAMP = re.compile(r"^(?P<path>.+)@(?P<ts>\d{17})$")


def _registered(spark: Any, name: str) -> str | None:

    return path_of_identifier(name) or registered_location(spark, name)


#: ``spark.read.format("delta").option(ROW_TRACKING_OPTION, "true")``: ``dvlake.read(…, row_tracking=True)``
ROW_TRACKING_OPTION = "dvlake.rowTracking"


def read_delta(spark: Any, path: Any, options: dict[str, Any], schema: Any) -> Any:
    """``spark.read.format("delta")…load(path)``: ``dvlake.read`` (or ``read_changes`` with ``readChangeFeed``).

    Raises:
        DeltaOptionError: a user schema (Delta takes the schema from the log), several paths, or both
            ``versionAsOf`` and ``timestampAsOf``.
    """

    opts = {str(k).lower(): v for k, v in options.items() if v is not None}
    if schema is not None and schema != "":
        raise DeltaOptionError("Delta does not support specifying the schema at read time: drop .schema(...)",
                               error_class="DELTA_UNSUPPORTED_SCHEMA_DURING_READ")
    if isinstance(path, (list, tuple)):
        if len(path) != 1:
            raise DeltaOptionError(f"a Delta read takes exactly one table path; got {list(path)}",
                                   error_class="DELTA_MULTIPLE_PATHS_NOT_SUPPORTED")
        path = path[0]
    path = path if path is not None else opts.get("path")
    if not path:
        raise InvalidArgumentError("spark.read.format('delta').load() needs the table path: load('<path>')")
    path, version, timestamp = _time_travel(str(path), opts)
    # readChangeData is delta-spark's older name of readChangeFeed (DeltaOptions: CDC_READ_OPTION_LEGACY); either asks
    # for the change feed, and ignoring it would return the table's rows as if they were its changes
    if any(str(opts.get(key, "false")).strip().lower() == "true" for key in ("readchangefeed", "readchangedata")):
        return _read_changes(api, spark, path, opts)
    # dvlake's own option: the ``_metadata`` struct with row ids (a real column, so it is asked for, not implied)
    tracked = str(opts.get(ROW_TRACKING_OPTION.lower(), "false")).strip().lower() == "true"
    return api.read(spark, path, version=version, timestamp=timestamp, row_tracking=tracked)


def _time_travel(path: str, opts: dict[str, Any]) -> tuple[str, int | None, Any]:
    version: int | None = None
    timestamp = opts.get("timestampasof")
    if opts.get("versionasof") is not None:
        try:
            version = int(str(opts["versionasof"]))
        except ValueError:
            raise DeltaOptionError(f"versionAsOf must be a whole number; got {opts['versionasof']!r}",
                                   error_class="DELTA_ILLEGAL_OPTION") from None

    m = _AT_VERSION.match(path) or _AT_TIMESTAMP.match(path)
    if m is not None:  # delta-spark's "path@v12" / "path@yyyyMMddHHmmssSSS", unless the folder is really named so
        try:
            Snapshot.load(path)
        except (TableNotFoundError, NotADirectoryError):
            path = m.group("path")
            if "version" in m.groupdict() and m.group("version") is not None:
                version = int(m.group("version"))
            else:
                ts = m.group("ts")
                timestamp = f"{ts[0:4]}-{ts[4:6]}-{ts[6:8]}T{ts[8:10]}:{ts[10:12]}:{ts[12:14]}.{ts[14:17]}"
    if version is not None and timestamp is not None:
        raise DeltaOptionError("cannot time travel by both version and timestamp: give versionAsOf or timestampAsOf",
                               error_class="DELTA_UNSUPPORTED_TIME_TRAVEL_MULTIPLE_FORMATS")
    return path, version, timestamp


def _read_changes(api: Any, spark: Any, path: str, opts: dict[str, Any]) -> Any:
    read_changes = getattr(api, "read_changes", None)
    if read_changes is None:
        raise UnsupportedFeatureError("readChangeFeed needs dvlake.api.read_changes (the change data feed reader), "
                                      "which this build of dvlake does not have")

    def number(key: str) -> int | None:
        return int(str(opts[key])) if opts.get(key) is not None else None

    return read_changes(spark, path, startingVersion=number("startingversion"), endingVersion=number("endingversion"),
                        startingTimestamp=opts.get("startingtimestamp"), endingTimestamp=opts.get("endingtimestamp"))


def write_delta(df: Any, path: str | None, mode: str, partition_by: list[str], options: dict[str, Any], *,
                as_select: bool = False) -> int | None:
    """``df.write.format("delta")…save(path)``: one Delta commit with delta-spark's writer options (``as_select``: the
    write creates a table by name, recorded as ``CREATE TABLE AS SELECT`` when it creates it)."""

    if not path:
        raise InvalidArgumentError("df.write.format('delta').save() needs the table path: save('<path>')")
    spark = df.sparkSession
    parsed = write_options.parse(options, lambda key: spark.conf.get(key, None))
    mode = "error" if mode.strip().lower() == "default" else mode
    return write_cmd.write(df, path, mode, partition_by or None, None, session_defaults=api.session_defaults(spark),
                           options=parsed, as_select=as_select)


def insert_into_delta(df: Any, name: str, overwrite: bool | None, mode: str | None, options: dict[str, Any]) -> bool:
    """``insertInto(name)`` when ``name`` is a registered Delta table (by position, as Spark matches columns).

    Returns False, writing nothing, when ``name`` is not a Delta table dvlake knows (Spark's own insert applies).
    """
    location = _registered(df.sparkSession, name)
    if location is None:
        return False
    m = ("overwrite" if overwrite else "append") if overwrite is not None else str(mode or "append")
    write_delta(_by_position(df, location), location, "append" if m.lower() in ("error", "errorifexists") else m, [],
                options)
    _refresh(df.sparkSession, name)
    return True


def table_delta(spark: Any, name: str, options: dict[str, Any]) -> Any:
    """The registered Delta table ``name`` read as ``dvlake.read`` reads it, None when dvlake does not know it."""
    location = _registered(spark, name)
    return None if location is None else read_delta(spark, location, options, None)


def _refresh(spark: Any, name: str) -> None:

    refresh_registration(spark, name)


def save_as_delta_table(df: Any, name: str, mode: str, partition_by: list[str], options: dict[str, Any]) -> None:
    """``saveAsTable(name)``: write at the registered location, the ``path`` option, or the warehouse; then register."""

    spark = df.sparkSession
    opts = dict(options)
    key = mode.strip().lower()
    if path_of_identifier(name) is None:
        table_name_parts(name)  # a name Spark refuses writes nothing, whatever the mode
    if path_of_identifier(name) is None and key == "ignore" and spark.catalog.tableExists(name):
        return  # mode ignore: whatever the name is, nothing is written (as Spark does)
    # a name taken by something that is not a Delta table is refused before anything is written
    location = path_of_identifier(name) or location_for_create(spark, name)
    if location is not None:
        if key in ("error", "errorifexists", "default"):
            raise TableAlreadyExistsError(f"table {name} already exists (a Delta table at {location}); "
                                          "use mode('append') or mode('overwrite')", error_class="DELTA_TABLE_ALREADY_EXISTS")
        if key == "ignore":
            return
        write_delta(df, location, mode, partition_by, opts, as_select=True)
        _refresh(spark, name)  # mergeSchema / overwriteSchema: the catalog's columns follow
        return
    given = opts.pop("path", None)
    location = given or default_table_location(spark, name)
    write_delta(df, location, mode, partition_by, opts, as_select=True)
    register_table(spark, name, location, if_not_exists=True, managed=given is None)


def _by_position(df: Any, location: str) -> Any:
    """insertInto matches columns by position, as Spark does: rename the data's columns to the table's."""

    names = [f["name"] for f in strip_column_mapping(Snapshot.load(location).schema)["fields"]]
    if len(names) != len(df.columns):
        raise InvalidArgumentError(f"insertInto: the data has {len(df.columns)} columns, the table at {location} has "
                                   f"{len(names)} ({names}); insertInto matches columns by position")
    return df.toDF(*names)
