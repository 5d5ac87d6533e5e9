"""The Delta streaming source on classic sessions: a JVM stream source reading each micro-batch natively.

Why: the Python data source (``stream_source.py``) decodes Parquet with pyarrow in Python workers and hands Arrow
batches to the JVM, which copies them into Spark rows — about half the rows/s of a batch ``dvlake.read``. Here the
source Spark runs is dvlake's JVM class (``jvm/.../DeltaStreamProvider``); it asks this module, through Py4J
callbacks into the Python driver, where batches end (``stream_driver``, the same planning as the Python source)
and for each batch's frame, which is the batch read's own native DV scan (``dv_scan.scan_files``) or, for
``readChangeFeed``, the change-feed read (``cdf_read``). Deleted row indexes stay on executors, as in a batch read.

Only classic sessions with dvlake's jar have this engine: over Spark Connect the driver's Python process is not
the client's, and ``spark.dvlake.stream.engine=python`` (or ``spark.dvlake.scan.native=false``) chooses the
Python source everywhere.
"""

from __future__ import annotations

import json
import threading
import uuid
import weakref
from typing import Any

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.config import STREAM_ENGINE as ENGINE_SETTING
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.log.cdf_plan import VersionChanges, data_file
from dvlake.log.stream_plan import IndexedFile, SourceOffset
from dvlake.spark import native
from dvlake.spark.cdf_read import layout_changes_frame
from dvlake.spark.dv_scan import ScanFile, scan_files
from dvlake.spark.layout import TableLayout
from dvlake.spark.stream_driver import StreamDriver, marked, offset_json
from dvlake.spark.task_errors import install as install_typed_errors
from dvlake.spark.task_errors import remember_table
from dvlake.storage.confine import check_local_files, data_file_location

#: The JVM provider ``readStream`` is pointed at; the option naming the session's planner factory; the option holding
#: this stream's spec (layout and user options as JSON), which the factory turns into a planner at each query start.
PROVIDER = "io.dvlake.spark.DeltaStreamProvider"
PLANNER_OPTION = "dvlake.stream.planner"
SPEC_OPTION = "dvlake.stream.spec"

_callback_lock = threading.Lock()
#: One planner factory per SparkSession, registered in the JVM's ``StreamPlanners`` under its key.
_factories: weakref.WeakKeyDictionary[SparkSession, str] = weakref.WeakKeyDictionary()


def usable(spark: SparkSession) -> bool:
    """Whether this session runs the JVM source: classic, the engine not forced to Python, the native scan on."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return False
    if str(spark.conf.get(ENGINE_SETTING, "auto") or "auto").strip().lower() == "python":
        return False
    return native.enabled(spark)


def open_jvm_stream(spark: SparkSession, layout: dict[str, Any], schema: Any, options: dict[str, str]) -> DataFrame:
    """A streaming DataFrame over the JVM source: its spec travels in the plan, the session's factory plans it.

    Why a spec in the plan and one factory per session, not a factory per ``readStream``: a streaming DataFrame and
    every frame derived from it can be started (and restarted) for as long as the user holds any of them, and the JVM
    cannot tell when that ends; a per-stream factory in a static map would hold its session and planner for the
    driver's life. The spec (a few KB of JSON) is all a planner needs, so the registry stays one entry per session.
    """
    spec = json.dumps({"layout": layout, "options": options})
    return (spark.readStream.format(PROVIDER).schema(schema).options(**options)
            .option(PLANNER_OPTION, session_factory_key(spark)).option(SPEC_OPTION, spec).load())


def session_factory_key(spark: SparkSession) -> str:
    """The key of ``spark``'s planner factory in the JVM registry, registering it on first use."""
    with _callback_lock:
        key = _factories.get(spark)
        if key is None:
            sc = spark.sparkContext
            ensure_callback_server_started(sc._gateway)
            key = uuid.uuid4().hex
            assert sc._jvm is not None
            sc._jvm.io.dvlake.spark.StreamPlanners.register(key, PlannerFactory(spark))
            _factories[spark] = key
        return key


def registered_factories(spark: SparkSession) -> int:
    """How many planner factories the JVM registry holds (one per session that opened a stream); for tests."""
    assert spark.sparkContext._jvm is not None
    return int(spark.sparkContext._jvm.io.dvlake.spark.StreamPlanners.size())


class PlannerFactory:
    """``io.dvlake.spark.StreamPlannerFactory``: a fresh planner for each start of a query over a stream's spec."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def create(self, metadata_path: str, spec_json: str) -> JvmPlanner:
        spec = _loads(spec_json)
        return JvmPlanner(self.spark, dict(spec["layout"]), {str(k): str(v) for k, v in spec["options"].items()})

    class Java:
        implements = ["io.dvlake.spark.StreamPlannerFactory"]


class JvmPlanner:
    """``io.dvlake.spark.StreamPlanner``: one running query's offsets and batch frames (see the module docstring)."""

    def __init__(self, spark: SparkSession, layout: dict[str, Any], options: dict[str, str]) -> None:
        self.spark = spark
        self.driver = StreamDriver(layout, options)

    def _start(self, start_json: str | None) -> SourceOffset | None:
        return SourceOffset.from_json(_loads(start_json)) if start_json is not None else None

    def initialOffset(self) -> str:  # noqa: N802 - the Java interface's name
        return marked(lambda: offset_json(self.driver.initial_offset()))

    def defaultLimit(self) -> str:  # noqa: N802
        files, size = self.driver.default_limit()
        if files is not None:
            return f"files:{files}"
        return f"bytes:{size}" if size is not None else "all"

    def latestOffset(self, start_json: str | None, all_available: bool) -> str | None:  # noqa: N802
        def run() -> str | None:
            start = self._start(start_json) or self.driver.initial_offset()
            end = self.driver.latest_offset(start, bool(all_available))
            if start_json is None and end == start:
                return None  # nothing to read yet: no batch
            return offset_json(end)

        return marked(run)

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        marked(self.driver.prepare_available_now)

    def batch(self, start_json: str | None, end_json: str) -> Any:
        def run() -> Any:
            end = SourceOffset.from_json(_loads(end_json))
            files = self.driver.files_between(self.driver.batch_start(self._start(start_json), end), end)
            return batch_frame(self.spark, self.driver, files)._jdf

        return marked(run)

    def stop(self) -> None:
        return None

    class Java:
        implements = ["io.dvlake.spark.StreamPlanner"]


def _loads(text: str) -> dict[str, Any]:
    return dict(json.loads(text))


def batch_frame(spark: SparkSession, driver: StreamDriver, files: list[IndexedFile]) -> DataFrame:
    """The rows of a micro-batch's positions in the stream's schema: the added files' live rows (DVs applied by the
    batch scan), or with ``readChangeFeed`` the commits' change rows."""
    layout = driver.layout
    root, confine = driver.root, bool(layout["confine"])
    table = TableLayout.from_schema(layout["deltaSchema"], layout["partitionColumns"], layout["mode"])
    schema = StructType.fromJson(layout["sparkSchema"])
    if driver.options.read_change_feed:
        frame = layout_changes_frame(spark, table, root, _as_changes(files), confine)
    else:
        rounds = _rounds([f.add for f in files if f.add is not None])
        frame = _added_rows(spark, table, root, confine, rounds[0] if rounds else [])
        for more in rounds[1:]:
            frame = frame.unionByName(_added_rows(spark, table, root, confine, more))
    return frame.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in schema.fields])


def _as_changes(files: list[IndexedFile]) -> list[VersionChanges]:
    """The change feed of a batch's positions: commits as planned, the initial snapshot's files as inserts at the
    snapshot's version (as delta-spark's change-feed stream starts)."""
    out: list[VersionChanges] = []
    snapshot: VersionChanges | None = None  # the one made here for the snapshot's adds (planned ones stay as they are)
    for f in files:
        if f.changes is not None:
            out.append(f.changes)
        elif f.add is not None:
            if snapshot is None or snapshot.version != f.version:
                snapshot = VersionChanges(f.version, f.timestamp_ms)
                out.append(snapshot)
            snapshot.inserted.append(data_file(f.add))
    return out


def _rounds(adds: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The batch's adds cut so that no data file appears twice in one scan.

    Why: with ``ignoreChanges`` one batch can hold the same file re-added by several commits (two DV DELETEs), each
    with the DV its commit recorded. One scan keys DVs by file, so the later DV would hide rows the earlier commit's
    add still had (delta-spark emits both adds' rows). The n-th add of a path goes to the n-th scan.
    """
    rounds: list[list[dict[str, Any]]] = []
    seen: dict[str, int] = {}
    for a in adds:
        n = seen.get(str(a["path"]), 0)
        seen[str(a["path"])] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(a)
    return rounds


def _added_rows(spark: SparkSession, table: TableLayout, root: str, confine: bool, adds: list[dict[str, Any]]) -> DataFrame:
    install_typed_errors()
    remember_table(root)
    files = []
    for a in adds:
        dv = a.get("deletionVector")
        files.append(ScanFile(path=data_file_location(root, str(a["path"]), confine), size=int(a.get("size") or 0),
                              num_records=None,
                              dv=DeletionVectorDescriptor.from_json(dv) if dv and dv.get("storageType") else None,
                              partition_values=table.typed_partitions(dict(a.get("partitionValues") or {}))))
    check_local_files(root, [f.path for f in files], confine)
    df = scan_files(spark, files, table.data_schema, table.partition_schema, root, confine=confine)
    return table.to_logical(df, [])
