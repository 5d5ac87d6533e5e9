"""The Delta streaming source: ``open_stream``, and its Python engine (PySpark's Python streaming data source).

``open_stream`` builds the stream's layout and picks the engine. On classic sessions with dvlake's jar the source
is the JVM one (``stream_jvm.py``: Spark's native Parquet reader with the DV filter, about the rows/s of a batch
read); over Spark Connect, or with ``spark.dvlake.stream.engine=python``, it is the ``DataSourceStreamReader``
here. Both plan through ``stream_driver.StreamDriver`` (``log/stream_plan.py``).

This engine's driver half (``initialOffset``/``latestOffset``/``partitions``) runs in the Python worker Spark starts
for the query and reads only the log. Its executor half (``read``) reads each planned Parquet file with pyarrow in a
Python worker, drops the rows the add's deletion vector marks (the DV is loaded there: deleted row indexes never
reach the driver), and hands Arrow batches to Spark. The cost against a batch read is that decode: pyarrow in Python
workers plus the Arrow hand-over to the JVM, instead of Spark's vectorized reader and the native DV scan.

Errors raised by either half carry dvlake's marker (``task_errors.encode``), so the user's
``awaitTermination()`` raises the dvlake class (``DELTA_SOURCE_TABLE_IGNORE_CHANGES`` …).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        ReadMaxFiles,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # PySpark < 4.2: no admission control, so no Python engine; the JVM engine (classic) still streams

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stands in where PySpark lacks the mixin, so this module still imports for the JVM engine; the Python
        engine is never started on such a PySpark (``stream_support.open_delta_stream`` checks first)."""
from pyspark.sql.types import StructType

from dvlake.config import TIMESTAMP_OUT_OF_RANGE
from dvlake.errors import DeletionVectorIntegrityError, DvlakeError
from dvlake.log.cdf_plan import CHANGE_TYPE_COL
from dvlake.log.partitions import parse_partition_value
from dvlake.log.stream_plan import IndexedFile, SourceOffset, parse_options
from dvlake.spark.stream_driver import StreamDriver, marked
from dvlake.spark.stream_tasks import plan_tasks, slice_row_groups
from dvlake.spark.task_errors import encode

#: The name the source is registered under (``readStream.format("delta")`` reaches it through the faces).
SOURCE_NAME = "dvlake_delta_stream"
#: Options dvlake passes from ``read_stream`` to the source (the rest are the user's).
LAYOUT_OPTION = "dvlake.layout"
#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 65536

class FilesPartition(InputPartition):
    """One read task: its files, each a dict with ``kind`` (``file``: live rows of a data file, ``cdc``: a change
    data file, ``dv``: the rows whose DV bit flipped), ``location``, ``dv``/``old_dv`` (descriptor JSON or None),
    ``pv`` (partition values by physical key), ``size``, for the change feed ``change``, ``version``, ``ts``, and
    for a share of a large file ``slice`` (``[i, n]``: the row groups of its i-th of n byte ranges, ``stream_tasks``)."""

    def __init__(self, files: list[dict[str, Any]]) -> None:
        super().__init__(None)
        self.files = files


class DeltaStreamDataSource(DataSource):
    """Registered as ``dvlake_delta_stream``; ``dvlake.read_stream`` fills in its options and schema."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return StructType.fromJson(json.loads(self.options[LAYOUT_OPTION])["sparkSchema"])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return DeltaStreamReader(dict(self.options), schema)


class DeltaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets from the Delta log (driver side, ``stream_driver``), files read with their DVs applied (executor side)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.schema = schema
        layout = json.loads(options[LAYOUT_OPTION])
        self.root: str = layout["root"]
        self.layout = layout
        self.driver = StreamDriver(layout, options)

    # -- driver half ---------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        return marked(lambda: self.driver.initial_offset().to_json())

    def getDefaultReadLimit(self) -> ReadLimit:
        files, size = self.driver.default_limit()
        if files is not None:
            return ReadMaxFiles(files)
        return ReadMaxBytes(size) if size is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        marked(self.driver.prepare_available_now)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        # the engine's limit is either all available or the default one (``getDefaultReadLimit``)
        return marked(lambda: self.driver.latest_offset(SourceOffset.from_json(start),
                                                        isinstance(limit, ReadAllAvailable)).to_json())

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        def run() -> list[InputPartition]:
            from dvlake.storage.confine import check_local_files

            last = SourceOffset.from_json(end)
            first = self.driver.batch_start(SourceOffset.from_json(start), last)
            entries = [e for f in self.driver.files_between(first, last)
                       for e in self._entries(f)]
            check_local_files(self.root, [e["location"] for e in entries], bool(self.layout["confine"]))
            return [FilesPartition(files) for files in plan_tasks(entries, int(self.layout.get("parallelism") or 2))]

        return marked(run)

    def _entries(self, f: IndexedFile) -> list[dict[str, Any]]:
        from dvlake.log.cdf_plan import DELETE, INSERT
        from dvlake.storage.confine import data_file_location

        confine = bool(self.layout["confine"])

        def entry(kind: str, path: str, dv: Any, pv: Any, size: Any, change: str | None, old_dv: Any = None) -> dict:
            return {"kind": kind, "location": data_file_location(self.root, path, confine), "dv": _dv_text(dv),
                    "old_dv": _dv_text(old_dv), "pv": dict(pv or {}), "size": int(size or 0), "change": change,
                    "version": f.version, "ts": f.timestamp_ms}

        if f.add is not None:
            a = f.add
            return [entry("file", str(a["path"]), a.get("deletionVector"), a.get("partitionValues"), a.get("size"),
                          INSERT)]
        c = f.changes
        assert c is not None
        return ([entry("cdc", x.path, None, x.partition_values, x.size, None) for x in c.cdc_files]
                + [entry("file", d.path, d.dv, d.partition_values, d.size, INSERT) for d in c.inserted]
                + [entry("file", d.path, d.dv, d.partition_values, d.size, DELETE) for d in c.deleted]
                + [entry("dv", ch.file.path, ch.new_dv, ch.file.partition_values, ch.file.size, None, ch.old_dv)
                   for ch in c.dv_changes])

    # -- executor half -------------------------------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilesPartition)
        reader = FileReader(self.root, self.layout, self.schema)
        try:
            for e in partition.files:
                yield from reader.rows(e)
        except DvlakeError as exc:
            if "[DVLAKE_TASK_ERROR " in str(exc):
                raise
            raise DvlakeError(encode(exc)) from exc


def _dv_text(dv: Any) -> str | None:
    """A DV descriptor (log JSON dict or descriptor object) as JSON text; None without one."""
    if dv is None:
        return None
    d = dv if isinstance(dv, dict) else dv.to_json()
    return json.dumps(d) if d.get("storageType") else None


class FileReader:
    """Reads one table's data files as the stream's logical rows: DV applied, column mapping undone."""

    def __init__(self, root: str, layout: dict[str, Any], schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from dvlake.storage.base import storage_for

        self.root = root
        self.confine = bool(layout["confine"])
        self.storage = storage_for(root)
        self.target = to_arrow_schema(schema, timezone="UTC")
        self.mode: str = layout["mode"]
        self.fields: list[dict[str, Any]] = layout["deltaSchema"]["fields"]
        self.partitions: dict[str, str] = {p.lower(): p for p in layout["partitionColumns"]}
        self.change_feed = len(self.target) > len(self.fields)

    def rows(self, e: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        """The stream rows of one planned file (see ``FilesPartition``)."""
        kind = e["kind"]
        if kind == "dv":
            yield from self._flipped_rows(e)
            return
        extra = [CHANGE_TYPE_COL] if kind == "cdc" else []
        for batch in self._live(e["location"], e["dv"], extra, e.get("slice"), int(e["size"])):
            change = None
            if self.change_feed:
                change = (batch.column(CHANGE_TYPE_COL) if kind == "cdc"
                          else pa.repeat(pa.scalar(e["change"], pa.string()), batch.num_rows))
            yield self._logical(batch, e["pv"], change, e)

    def _live(self, location: str, dv_json: str | None, extra: list[str], part: list[int] | None,
              size: int) -> Iterator[pa.RecordBatch]:
        """The file's physical batches (data columns it has, plus ``extra``), the DV's rows dropped; with ``part``
        (``[i, n]``) only the row groups of the file's i-th of n byte ranges (``size`` bytes in all)."""
        import pyarrow.parquet as pq

        from dvlake.log.schema import physical_name

        deleted = self._deleted(dv_json)
        f = self.storage.open_input(location)
        try:
            pf = pq.ParquetFile(f)
            total = pf.metadata.num_rows
            if deleted.size and int(deleted[-1]) >= total:
                raise DeletionVectorIntegrityError(
                    f"a deletion vector of {location} names row {int(deleted[-1])}, but the file has {total} rows",
                    error_class="DELTA_DELETION_VECTOR_INVALID_ROW_INDEX")
            present = set(pf.schema_arrow.names)
            data = [physical_name(fd, self.mode) for fd in self.fields if fd["name"].lower() not in self.partitions]
            columns = [c for c in data if c in present] + [c for c in extra if c in present]
            groups: list[tuple[int | None, int]] = [(None, 0)]  # (row group or the whole file, its first row)
            if part is not None:
                groups = list(slice_row_groups(pf.metadata, size, part[0], part[1]))
            for group, offset in groups:
                batches = pf.iter_batches(batch_size=BATCH_ROWS, columns=columns, use_threads=True,
                                          row_groups=None if group is None else [group])
                for batch in batches:
                    n = batch.num_rows
                    lo, hi = np.searchsorted(deleted, [offset, offset + n])
                    if hi > lo:
                        keep = np.ones(n, dtype=bool)
                        keep[(deleted[lo:hi] - offset).astype(np.int64)] = False
                        batch = batch.filter(pa.array(keep))
                    offset += n
                    if batch.num_rows:
                        yield batch
        finally:
            f.close()

    def _flipped_rows(self, e: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        """A DV change: rows in the new DV only are ``delete``, in the old one only ``insert``; read by row index."""
        from dvlake.log.cdf_plan import DELETE, INSERT
        from dvlake.log.schema import physical_name
        from dvlake.spark.cdf_read import read_rows

        old, new = self._deleted(e["old_dv"]), self._deleted(e["dv"])
        deleted, inserted = np.setdiff1d(new, old), np.setdiff1d(old, new)
        if deleted.size == 0 and inserted.size == 0:
            return
        rows = np.concatenate([deleted, inserted]).astype(np.int64)
        is_delete = np.concatenate([np.ones(deleted.size, bool), np.zeros(inserted.size, bool)])
        order = np.argsort(rows, kind="stable")
        rows, is_delete = rows[order], is_delete[order]
        data = [physical_name(fd, self.mode) for fd in self.fields if fd["name"].lower() not in self.partitions]
        table = read_rows(self.storage, e["location"], rows, data)
        start = 0
        for batch in table.combine_chunks().to_batches():
            n = batch.num_rows
            change = pa.array(np.where(is_delete[start:start + n], DELETE, INSERT).tolist(), pa.string())
            start += n
            yield self._logical(batch, e["pv"], change, e)

    def _deleted(self, dv_json: str | None) -> np.ndarray:
        if dv_json is None:
            return np.zeros(0, dtype=np.uint64)
        from dvlake.dv.descriptor import DeletionVectorDescriptor
        from dvlake.dv.roaring import to_numpy
        from dvlake.dv.store import load_bitmap

        bitmap = load_bitmap(DeletionVectorDescriptor.from_json(json.loads(dv_json)), self.root, self.storage,
                             confine=self.confine)
        return to_numpy(bitmap)

    def _logical(self, batch: pa.RecordBatch, pv: dict[str, str | None], change: pa.Array | None,
                 e: dict[str, Any]) -> pa.RecordBatch:
        from dvlake.log.schema import physical_name

        n = batch.num_rows
        arrays: list[pa.Array] = []
        for i, fd in enumerate(self.fields):
            target = self.target.field(i).type
            key = physical_name(fd, self.mode)
            if fd["name"].lower() in self.partitions:
                value = parse_partition_value(pv.get(key), fd["type"])
                arrays.append(pa.repeat(pa.scalar(value, type=target), n) if value is not None else pa.nulls(n, target))
                continue
            index = batch.schema.get_field_index(key)
            if index < 0:  # a column added after this file was written
                arrays.append(pa.nulls(n, target))
                continue
            arrays.append(relabel(batch.column(index), fd["type"], self.mode, target))
        if self.change_feed and change is not None:  # _change_type, _commit_version, _commit_timestamp
            arrays.append(change.cast(pa.string()))
            arrays.append(pa.array(np.full(n, e["version"], np.int64)))
            micros = pa.array(np.full(n, int(e["ts"]) * 1000, np.int64))
            arrays.append(micros.cast(self.target.field(len(arrays)).type))
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)


def relabel(array: pa.Array, delta_type: Any, mode: str, target: pa.DataType) -> pa.Array:
    """A Parquet column in the stream's logical type: nested fields found by physical name (absent ones
    are null), renamed to logical names, then cast (timestamp units, widened numbers) to ``target``."""
    from dvlake.log.schema import physical_name

    if isinstance(delta_type, dict) and delta_type.get("type") == "struct" and pa.types.is_struct(array.type):
        children = []
        for j, fd in enumerate(delta_type["fields"]):
            child_target = target.field(j).type
            key = physical_name(fd, mode)
            k = array.type.get_field_index(key)
            children.append(relabel(array.field(k), fd["type"], mode, child_target) if k >= 0
                            else pa.nulls(len(array), child_target))
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    if isinstance(delta_type, dict) and delta_type.get("type") == "array" and pa.types.is_list(array.type) \
            and pa.types.is_list(target):
        values = relabel(array.values, delta_type["elementType"], mode, target.value_type)
        return pa.ListArray.from_arrays(array.offsets, values, type=target, mask=array.is_null())
    return array.cast(target, safe=False)


def parallelism(spark: Any) -> int:
    """How many read tasks run at once in this session, which the source's tasks are balanced over (Spark's
    ``leafNodeDefaultParallelism``, as its file scans): that setting or ``spark.default.parallelism`` when set,
    else the cores of a ``local[N]`` master, else executors x cores when both are configured; 2 when nothing says.

    Read from settings only, the same way on classic sessions and over Spark Connect (which has no handle on
    the driver's scheduler); a wrong guess changes how evenly tasks are cut, never which rows are read.
    """
    for key in ("spark.sql.leafNodeDefaultParallelism", "spark.default.parallelism"):
        value = _conf(spark, key)
        if value and value.strip().isdigit() and int(value) > 0:
            return int(value)
    master = (_conf(spark, "spark.master") or "").strip()
    match = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master)
    if match:
        return (os.cpu_count() or 2) if match.group(1) == "*" else max(1, int(match.group(1)))
    if master == "local":
        return 1
    executors, cores = _conf(spark, "spark.executor.instances"), _conf(spark, "spark.executor.cores")
    if executors and cores and executors.strip().isdigit() and cores.strip().isdigit():
        return max(1, int(executors) * int(cores))
    return 2


def _conf(spark: Any, key: str) -> str | None:
    try:
        value = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - a key the session refuses to show counts as unset
        return None
    return None if value is None else str(value)


_registered: set[int] = set()
_register_lock = threading.Lock()


def _register(spark: Any) -> None:
    """Register the source with the session once (Spark Connect ships the class to the server)."""
    with _register_lock:
        if id(spark) in _registered:
            return
        spark.dataSource.register(DeltaStreamDataSource)
        _registered.add(id(spark))


def open_stream(spark: Any, path: str, options: dict[str, Any]) -> Any:
    """``readStream`` of the Delta table at ``path``: a streaming DataFrame of its rows, in the schema of its latest
    version (as delta-spark's source: a restarted query takes the schema of the latest version then; files written
    under other schemas are read with it when ``log/stream_schema.py`` says they can be).

    Raises:
        TableNotFoundError: no Delta table at ``path``.
        DeltaOptionError: a malformed option (checked here, before the query starts).
        UnsupportedFeatureError: a table feature dvlake cannot read.
    """
    from pyspark.sql.types import StructField

    from dvlake.config import CONFINE_SESSION_KEY, confinement_enabled
    from dvlake.log.snapshot import Snapshot
    from dvlake.spark.layout import all_nullable, logical_struct
    from dvlake.spark.task_errors import install as install_typed_errors
    from dvlake.storage.paths import normalize_table_root

    root = normalize_table_root(path)
    parsed = parse_options(options)
    snapshot = Snapshot.load(root)
    logical = logical_struct(snapshot.schema)
    fields = [StructField(f.name, all_nullable(f.dataType), True, f.metadata) for f in logical.fields]
    if parsed.read_change_feed:
        from dvlake.spark.cdf_read import CDC_FIELDS

        fields += CDC_FIELDS
    schema = StructType(fields)
    confine = confinement_enabled(spark.conf.get(CONFINE_SESSION_KEY, None), snapshot.configuration)
    layout = {"root": root, "tableId": snapshot.metadata.id, "deltaSchema": snapshot.schema, "schemaVersion": snapshot.version,
              "mode": snapshot.column_mapping_mode, "partitionColumns": snapshot.partition_columns,
              "confine": confine, "sparkSchema": json.loads(schema.json()), "parallelism": parallelism(spark),
              # how startingTimestamp is read (delta-spark's source reads both from the session)
              "sessionTimeZone": _conf(spark, "spark.sql.session.timeZone") or "UTC",
              "timestampOutOfRange": (_conf(spark, TIMESTAMP_OUT_OF_RANGE) or "false").strip().lower() == "true"}
    install_typed_errors()
    user = {str(k): str(v) for k, v in options.items() if v is not None and str(k).lower() != "path"}
    from dvlake.spark import stream_jvm

    if stream_jvm.usable(spark):
        return stream_jvm.open_jvm_stream(spark, layout, schema, user)
    _register(spark)
    return (spark.readStream.format(SOURCE_NAME).schema(schema).options(**user)
            .option(LAYOUT_OPTION, json.dumps(layout)).load())
