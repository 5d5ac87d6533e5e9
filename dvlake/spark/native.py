"""The native scan: deletion vectors applied inside Spark's Parquet reader by dvlake's JVM module (``dvlake/jvm/``).

``dvlake.native_jar`` finds the jar for the session's Spark minor (packaged, cached, or compiled on first use when a
JDK is here). A session gets the jar at first use (``ADD JAR`` on classic sessions, ``addArtifacts`` over Spark
Connect). Planning stays here: each read lists its files and their DV descriptors in the format's
``dvlake.scan.files`` option, or for a large read in a listing file the ``dvlake.scan.listing`` option names
(``scan_listing``), with the listing's protocol version beside it; the reader drops the deleted rows per batch.

``spark.dvlake.scan.native``: ``auto`` (default: native when a jar for this Spark is there or can be built, and
loads), ``true`` (native or a clear error), ``false`` (the pure-Python path: Spark's reader plus an anti join).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import logging
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql.types import StructField, StructType

from dvlake import native_jar
from dvlake.config import NATIVE_SCAN as SETTING
from dvlake.errors import UnsupportedEnvironmentError
from dvlake.spark import scan_listing
from dvlake.spark.scan_listing import ListingRef
from dvlake.storage.confine import dv_file_location
from dvlake.storage.paths import path_key

log = logging.getLogger(__name__)

FORMAT = "io.dvlake.spark.DvlakeParquetFileFormat"
FILES_OPTION = "dvlake.scan.files"

_lock = threading.Lock()
_ready: dict[int, bool] = {}   # id(session) -> usable in every thread (jar on the class path, or Connect)
_why: dict[int, str] = {}      # id(session) -> why it is not
_threads = threading.local()   # a classic session's ADD JAR reaches only the JVM thread that ran it
_choices: dict[str, native_jar.JarChoice] = {}  # Spark version -> the jar found (or why none)


def jar_for(spark_version: str) -> Path | None:
    """The jar for ``spark_version``'s minor (packaged, cached, or compiled now), or None (``native_jar`` says why)."""
    return _choice(spark_version).path


def _choice(spark_version: str) -> native_jar.JarChoice:
    """``native_jar.find_jar`` once per Spark version and process (it may compile; a failure is not retried)."""
    with _lock:
        known = _choices.get(spark_version)
    if known is None or (known.path is not None and not known.path.is_file()):
        known = native_jar.find_jar(spark_version)
        with _lock:
            _choices[spark_version] = known
    return known


def enabled(spark: SparkSession) -> bool:
    """Whether reads use the native scan in this session (loading the jar into it the first time)."""
    setting = str(spark.conf.get(SETTING, "auto") or "auto").strip().lower()
    if setting == "false":
        return False
    key = id(spark)
    with _lock:
        known = _ready.get(key)
    if known is None and not _is_connect(spark) and _on_class_path(spark):
        known = True  # spark.jars put it on the driver's class path: every thread sees it
        with _lock:
            _ready[key] = True
    if known is None:
        # Connect artifacts belong to the session; a classic ADD JAR reaches the class loader of the JVM thread that
        # ran it (Py4J pins one JVM thread to each Python thread), so each Python thread loads it once
        loaded: dict[int, tuple[bool, str]] = getattr(_threads, "loaded", None) or {}
        _threads.loaded = loaded
        if key not in loaded:
            loaded[key] = _load(spark)
            if not loaded[key][0]:
                log.warning("dvlake: native scan unavailable (%s); reading with the pure-Python path", loaded[key][1])
        ok, why = loaded[key]
        if _is_connect(spark) or not ok:
            with _lock:
                _ready[key], _why[key] = ok, why
        known = ok
    if not known and setting == "true":
        raise UnsupportedEnvironmentError(f"{SETTING}=true but the native scan cannot be used: {_why.get(key)}. "
                                          "`dvlake doctor` says which jar a session would load and why; or set the "
                                          "setting to auto or false")
    return known


def _on_class_path(spark: SparkSession) -> bool:
    jars = str(spark.conf.get("spark.jars", "") or "")
    jar = jar_for(spark.version)
    return jar is not None and jar.name in jars


def _is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _load(spark: SparkSession) -> tuple[bool, str]:
    # a Connect server started with the jar (--jars) resolves the format already: no artifact needed, and none is
    # tried (a server may refuse artifacts, and the client need not have the jar at all)
    if _is_connect(spark) and _resolves(spark) is None:
        return True, ""
    choice = _choice(spark.version)
    jar = choice.path
    if jar is None:
        return False, choice.why
    try:
        if _is_connect(spark):
            spark.addArtifacts(str(jar))
        else:
            from dvlake.spark.native_sql import native_sql

            native_sql(spark, f"ADD JAR '{jar}'")
    except Exception as exc:  # noqa: BLE001 - any failure means: use the pure-Python path
        return False, _why_failed(exc)
    failed = _resolves(spark)
    return (True, "") if failed is None else (False, failed)


def _resolves(spark: SparkSession) -> str | None:
    """None when the session resolves the format (analysing an empty read through it), else why not."""
    try:
        reader(spark, "id long", "").load([]).schema  # noqa: B018 - resolves it
    except Exception as exc:  # noqa: BLE001 - any failure means: not usable
        return _why_failed(exc)
    return None


def _why_failed(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def listing(files: Sequence[Any], table_root: str, confine: bool) -> str:
    """The ``dvlake.scan.files`` option: one line per file, its DV where it has one (see the Java format)."""
    return "\n".join(listing_lines(files, table_root, confine))


def shared_listing(spark: SparkSession, files: Sequence[Any], table_root: str, confine: bool) -> ListingRef | None:
    """For a read of more files than the session's inline bound: all of their lines in one listing file that every
    native scan of the read names (``scan_listing``); None: each scan keeps its lines inline."""
    if not files or len(files) <= scan_listing.inline_max(spark):
        return None
    return scan_listing.write(spark, table_root, listing_lines(files, table_root, confine))


def listing_lines(files: Sequence[Any], table_root: str, confine: bool) -> list[str]:
    """The listing's lines, one per file (``path \t kind \t where \t offset \t size \t cardinality \t partitions``)."""
    lines = []
    for f in files:
        path = quote(path_key(f.path), safe="")
        parts = partition_field(f.partition_values)
        dv = f.dv
        if dv is None:
            lines.append(f"{path}\t-\t\t0\t0\t0\t{parts}")
        elif dv.is_inline:
            data = base64.b64encode(dv.inline_bitmap_bytes()).decode("ascii")
            lines.append(f"{path}\ti\t{data}\t0\t{dv.size_in_bytes}\t{dv.cardinality}\t{parts}")
        else:
            where = dv_file_location(table_root, dv.storage_type, dv.path_or_inline_dv, dv.absolute_path(table_root),
                                     confine)
            lines.append(f"{path}\tf\t{quote(where, safe='')}\t{dv.offset or 0}\t{dv.size_in_bytes}\t{dv.cardinality}"
                         f"\t{parts}")
    return lines


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICRO = dt.timedelta(microseconds=1)


def partition_field(values: Sequence[Any]) -> str:
    """A file's typed partition values (``ScanFile.partition_values``, already parsed from the log's strings by
    ``log.partitions``) as the listing's last field: ``-`` for null, else ``=`` and the URL-quoted canonical text the
    Java side (``PlannedFile``) turns into Spark's value without any rule of its own, comma-separated."""
    return ",".join("-" if v is None else "=" + quote(canonical_text(v), safe="") for v in values)


def canonical_text(value: Any) -> str:
    """One typed partition value in the spelling ``PlannedFile.convert`` reads: exact, one spelling per value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return ("Infinity" if value > 0 else "-Infinity") if math.isinf(value) else repr(value)
    if isinstance(value, dt.datetime):  # before date: a datetime is a date
        if value.tzinfo is None:  # timestamp_ntz: the wall clock, counted from the epoch's
            return str((value - _EPOCH.replace(tzinfo=None)) // _MICRO)
        return str((value - _EPOCH) // _MICRO)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"no listing spelling for a partition value of type {type(value).__name__}")


def reader(spark: SparkSession, schema: StructType | str, files_listing: str | ListingRef,
           partition_columns: Sequence[str] = ()) -> DataFrameReader:
    """The native format's reader for a ``listing`` (inline text, or a written listing file's reference): the one
    place its options are set (the listing and its protocol version, which the Java format checks, and the columns
    of ``schema`` it fills from each file's listed partition values)."""
    option = (native_jar.LISTING_OPTION, files_listing.option()) if isinstance(files_listing, ListingRef) \
        else (FILES_OPTION, files_listing)
    out = (spark.read.format(FORMAT).schema(schema).option(*option)
           .option(native_jar.PROTOCOL_OPTION, str(native_jar.SCAN_PROTOCOL)))
    if partition_columns:
        out = out.option(native_jar.PARTITIONS_OPTION, ",".join(quote(n, safe="") for n in partition_columns))
    return out


def read(spark: SparkSession, files: Sequence[Any], data_schema: StructType, table_root: str, confine: bool,
         shared: ListingRef | None = None, partition_schema: StructType | None = None) -> DataFrame:
    """``files`` read by the native format: their data columns, deleted rows dropped. ``shared``: the read's listing
    file (``shared_listing``), which names these files among others; without it their lines ride inline.

    With ``partition_schema`` the partition columns follow the data columns, filled by the reader from each file's
    listed values (the log's ``partitionValues``): all files are one relation, whose ``_metadata`` a query can read,
    whatever the number of partitions."""
    files_listing: str | ListingRef = shared if shared is not None else listing(files, table_root, confine)
    parts = list(partition_schema.fields) if partition_schema is not None else []
    schema = StructType([*data_schema.fields, *(StructField(f.name, f.dataType, True, f.metadata) for f in parts)])
    return reader(spark, schema, files_listing, [f.name for f in parts]).load([f.path for f in files])
