"""The driver half of the Delta streaming source, shared by its two engines.

Both engines ask the same questions of the Delta log — where a new query starts, where the next micro-batch ends
under the rate limits, which positions a batch covers — and answer them with ``log/stream_plan.py``. The engines
differ only in how a batch's files are read: the JVM source (``stream_jvm.py``, classic sessions with dvlake's jar)
reads them with the native DV scan; the Python data source (``stream_source.py``, Spark Connect and the fallback)
with pyarrow in Python workers. Offsets cross both as delta-spark's offset JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from dvlake.errors import DifferentTableReadByStreamError, DvlakeError
from dvlake.log.replay import replay
from dvlake.log.segment import list_log
from dvlake.log.snapshot import Snapshot
from dvlake.log.stream_plan import BASE_INDEX, IndexedFile, SourceOffset, StreamOptions, StreamPlanner, parse_options
from dvlake.spark.task_errors import encode
from dvlake.storage.base import Storage, storage_for

T = TypeVar("T")


def marked(fn: Callable[[], T]) -> T:
    """Run ``fn``; a dvlake error leaves with its class in the text, so the user's side can rebuild it."""
    try:
        return fn()
    except DvlakeError as exc:
        if "[DVLAKE_TASK_ERROR " in str(exc):
            raise
        raise DvlakeError(encode(exc)) from exc


class StreamDriver:
    """One query's planning: a ``StreamPlanner`` over the table, built lazily from the layout ``open_stream`` made.

    ``layout``: the dict ``stream_source.open_stream`` builds (root, table id, Delta schema and its version,
    partition columns, column-mapping mode, confinement, the Spark schema).
    """

    def __init__(self, layout: dict[str, Any], options: dict[str, str]) -> None:
        self.layout = layout
        self.root: str = layout["root"]
        self.options: StreamOptions = parse_options(options)
        self._planner: StreamPlanner | None = None
        self.max_version: int | None = None  # Trigger.AvailableNow: the latest version when the query started
        self._initial: SourceOffset | None = None

    def planner(self) -> StreamPlanner:
        """The query's planner, made at its first question; the table at the path must still be the one the streaming
        DataFrame was made for (``check_same_table``)."""
        if self._planner is None:
            layout = self.layout
            self.check_same_table(storage_for(self.root))
            self._planner = StreamPlanner(self.root, storage_for(self.root), self.options, layout["deltaSchema"],
                                          layout["tableId"], schema_version=int(layout["schemaVersion"]),
                                          partition_columns=layout["partitionColumns"], mapping_mode=layout["mode"],
                                          time_zone=str(layout.get("sessionTimeZone") or "UTC"),
                                          timestamp_out_of_range=bool(layout.get("timestampOutOfRange")))
        return self._planner

    def check_same_table(self, storage: Storage) -> None:
        """Refuse a table deleted and re-created at the path since the streaming DataFrame was made.

        Why: a restarted query over the same DataFrame keeps its layout (table id, schema), so the checkpoint's offsets
        and the layout agree while the files now belong to another table. delta-spark's source reads the id afresh at
        each start and compares it with the offsets' (DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE); here the fresh
        id is compared with the layout's, whose id the offsets carry. Read without the protocol check, so that a
        protocol change is reported where the stream reaches it.

        Raises:
            DifferentTableReadByStreamError: the table's id is not the layout's.
        """
        current = replay(storage, self.root, list_log(storage, self.root), None).metadata.id
        if current != self.layout["tableId"]:
            raise DifferentTableReadByStreamError(
                f"the Delta table at {self.root} has id {current}, but this stream was made for the table with id "
                f"{self.layout['tableId']} (it was deleted and re-created since); load the stream again and start it "
                "with a new checkpoint location")

    def initial_offset(self) -> SourceOffset:
        """Where a query without a committed batch starts (``startingVersion``/``startingTimestamp`` or the snapshot);
        computed once per query start."""
        if self._initial is None:
            planner = self.planner()
            self._initial = planner.initial_offset(Snapshot.load(self.root, storage=planner.storage))
        return self._initial

    def batch_start(self, start: SourceOffset | None, end: SourceOffset) -> SourceOffset:
        """The start of the batch ``(start, end]`` Spark asks for.

        When the query restarts before its first batch was committed, Spark gives no start (the JVM source) or this
        process's fresh initial offset (the Python source), and the table may have moved on since the batch was
        planned. As delta-spark derives it: with ``startingVersion``/``startingTimestamp`` the batch starts there;
        otherwise at the beginning of the initial snapshot the logged ``end`` belongs to (``end``'s version, or the
        one before when ``end`` is past that snapshot), unless the fresh start already lies before ``end``. A newer
        snapshot would make the replayed batch empty and lose its rows.
        """
        if start is not None and start != self._initial:
            return start  # a committed offset
        starting = self.options.starting_version is not None or self.options.starting_timestamp is not None
        logged = SourceOffset(end.table_id, end.version if end.initial else end.version - 1, BASE_INDEX, True)
        if start is None and not starting:
            # a fresh initial offset would be this very snapshot start whenever it lies before ``end``; deriving it
            # spares loading the latest snapshot, which a restarted query (Spark re-plans its last batch with no
            # start) must not need: a protocol change after ``end`` is reported where the stream reaches it
            return logged
        begin = start if start is not None else self.initial_offset()
        if starting or begin.key() < end.key():
            return begin
        return logged

    def default_limit(self) -> tuple[int | None, int | None]:
        """(files, bytes) per micro-batch from the options (``maxFilesPerTrigger`` defaults to 1000)."""
        return self.options.files_limit, self.options.max_bytes

    def prepare_available_now(self) -> None:
        self.max_version = list_log(self.planner().storage, self.root).latest_version

    def latest_offset(self, start: SourceOffset, all_available: bool) -> SourceOffset:
        """The next batch's end after ``start``: every position when ``all_available``, else both rate options
        apply, as delta-spark's composite limit."""
        files, size = (None, None) if all_available else (self.options.files_limit, self.options.max_bytes)
        return self.planner().latest_offset(start, files, size, self.max_version)

    def files_between(self, start: SourceOffset, end: SourceOffset) -> list[IndexedFile]:
        return self.planner().files_between(start, end)


def offset_json(offset: SourceOffset) -> str:
    """An offset as the checkpoint text (sorted keys: the same offset is always the same text)."""
    return json.dumps(offset.to_json(), sort_keys=True)
