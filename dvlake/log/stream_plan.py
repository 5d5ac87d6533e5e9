"""Streaming source planning: which files each micro-batch of a Delta stream reads, from the log alone.

A stream's position is an offset ``(version, index, initial)``, the shape of delta-spark's
``DeltaSourceOffset``: everything up to and including file ``index`` of ``version`` has been read.
``index = -1`` means nothing of ``version`` yet. ``initial`` says ``version`` is the snapshot the stream
started from (its live files, ordered by modification time then path), rather than one commit's
added files (in the order of the commit). After the last file of a version the offset moves to
``(version + 1, -1, False)``, so a restarted query resumes exactly at the next commit.

Commits are judged as delta-spark's source judges them (``validateCommitAndDecideSkipping``):

- ``add`` actions with ``dataChange=true`` are the data; ``dataChange=false`` ones (OPTIMIZE, PURGE,
  auto-compaction) emit nothing;
- a commit with a ``dataChange`` ``remove`` rewrote data. With ``add``s too (UPDATE, MERGE, a DELETE
  with deletion vectors: the file comes back with a DV) it fails the query with
  ``DELTA_SOURCE_TABLE_IGNORE_CHANGES`` unless ``ignoreChanges`` (its adds are emitted again: the
  rewritten files' live rows, duplicates included) or ``skipChangeCommits`` (the commit is skipped);
  with removes only it fails with ``DELTA_SOURCE_IGNORE_DELETE`` unless ``ignoreDeletes`` (or either
  option above) skips it;
- the stream reads with the schema of the version that was the latest when the query (re)started;
  each ``metaData`` action it walks past, and the schema where it resumes, must be readable with it
  (``log/stream_schema.py``: additive changes behind the read schema are fine, a rename or drop
  under column mapping never is, a change after it fails the query until it restarts).

Pure apart from reading the log through ``Storage``; no Spark (the source runs it in a Python worker).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import zoneinfo
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dvlake.errors import (
    DeltaOptionError,
    DeltaSourceIgnoreChangesError,
    DeltaSourceIgnoreDeleteError,
    DifferentTableReadByStreamError,
    DvlakeError,
    MissingChangeDataError,
    TimestampGreaterThanCommitError,
    VersionNotFoundError,
)
from dvlake.log.cdf_plan import VersionChanges, cdf_enabled, plan_version
from dvlake.log.replay import read_commit
from dvlake.log.segment import LogListing, commit_file_name, commit_timestamps, list_log
from dvlake.log.snapshot import Snapshot, to_epoch_ms
from dvlake.log.stream_schema import TableSchema, check_readable
from dvlake.storage.base import Storage

#: delta-spark's setting that lets a startingTimestamp after the last commit start the stream at the next version
#: (a change-feed batch read: read no changes) instead of failing with DELTA_TIMESTAMP_GREATER_THAN_COMMIT.
TIMESTAMP_OUT_OF_RANGE = "spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled"
#: delta-spark's default ``maxFilesPerTrigger`` when neither rate option is given.
DEFAULT_MAX_FILES = 1000
BASE_INDEX = -1


@dataclass(frozen=True)
class SourceOffset:
    """A stream position (see the module docstring); ``table_id`` is the table's metadata id."""

    table_id: str
    version: int
    index: int
    initial: bool

    def key(self) -> tuple[int, int]:
        return self.version, self.index

    def to_json(self) -> dict[str, Any]:
        """The checkpoint form: delta-spark's field names, so the offsets log reads the same."""
        return {"sourceVersion": 1, "reservoirId": self.table_id, "reservoirVersion": self.version,
                "index": self.index, "isStartingVersion": self.initial}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SourceOffset:
        return cls(str(d["reservoirId"]), int(d["reservoirVersion"]), int(d["index"]), bool(d["isStartingVersion"]))


@dataclass(frozen=True)
class StreamOptions:
    """delta-spark's source options, parsed once (keys are case-insensitive)."""

    max_files: int | None = None
    max_bytes: int | None = None
    ignore_deletes: bool = False
    ignore_changes: bool = False
    skip_change_commits: bool = False
    exclude_regex: str | None = None
    starting_version: int | str | None = None  # a version, "latest", or None
    starting_timestamp: Any = None
    read_change_feed: bool = False

    @property
    def files_limit(self) -> int | None:
        """Files per micro-batch: the option, else 1000 unless only a byte limit was given."""
        if self.max_files is not None:
            return self.max_files
        return None if self.max_bytes is not None else DEFAULT_MAX_FILES


def _flag(name: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise DeltaOptionError(f"option {name} must be true or false; got {value!r}")
    return text == "true"


def _positive(name: str, value: Any, parse: Any = int) -> int:
    try:
        number = int(parse(str(value).strip()))
    except (TypeError, ValueError):
        number = 0
    if number <= 0:
        raise DeltaOptionError(f"option {name} must be a positive number; got {value!r}",
                               error_class="DELTA_ILLEGAL_OPTION")
    return number


_BYTE_UNITS = {"b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
               "t": 1 << 40, "tb": 1 << 40}


def _bytes(text: str) -> int:
    """``maxBytesPerTrigger`` as Spark's byte strings: ``1048576``, ``10m``, ``1g``."""
    m = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", text)
    if m is None or m.group(2).lower() not in ("", *_BYTE_UNITS):
        raise ValueError(text)
    return int(m.group(1)) * _BYTE_UNITS.get(m.group(2).lower(), 1)


#: delta-spark source options dvlake does not implement, and why: given (with a value that asks for the behaviour),
#: the query is refused rather than run with a different meaning than the user asked for.
_UNSUPPORTED: dict[str, tuple[str | None, str]] = {
    "schematrackinglocation": (None, "schemaTrackingLocation (a schema log to stream across column renames, drops and "
                               "type changes) is not supported: such a change fails the query; start a new one (new "
                               "checkpoint) with startingVersion at or after the version of the change"),
    "schemalocation": (None, "schemaLocation (delta-spark's alias of schemaTrackingLocation) is not supported"),
    "allowsourcecolumnrenameanddrop": ("true", "allowSourceColumnRenameAndDrop works only with a schemaTrackingLocation, "
                                       "which dvlake does not support"),
    "allowsourcecolumnrename": ("true", "allowSourceColumnRename works only with a schemaTrackingLocation, which dvlake "
                                "does not support"),
    "allowsourcecolumndrop": ("true", "allowSourceColumnDrop works only with a schemaTrackingLocation, which dvlake does "
                              "not support"),
    "allowsourcecolumntypechange": ("true", "allowSourceColumnTypeChange works only with a schemaTrackingLocation, "
                                    "which dvlake does not support"),
    "witheventtimeorder": ("true", "withEventTimeOrder (the initial snapshot split by event time for watermarks) is not "
                           "supported: the initial snapshot is read in modification-time order"),
    "failondataloss": ("false", "failOnDataLoss=false is not supported: a commit that log cleanup removed before the "
                       "query read it always fails the query (DELTA_VERSION_NOT_FOUND), never skips data silently"),
}


def _refuse_unsupported(lower: Mapping[str, Any]) -> None:
    for key, (value, why) in _UNSUPPORTED.items():
        if key in lower and (value is None or str(lower[key]).strip().lower() == value):
            raise DeltaOptionError(f"the Delta streaming source option {key}={lower[key]!r}: {why}",
                                   error_class="DVLAKE_UNSUPPORTED_STREAMING_OPTION")


def parse_options(options: Mapping[str, Any]) -> StreamOptions:
    """The source's options as given to ``readStream`` (any key case).

    Raises:
        DeltaOptionError: a malformed value, both ``startingVersion`` and ``startingTimestamp``, or an option dvlake
            does not implement (``schemaTrackingLocation``, ``withEventTimeOrder``, ``failOnDataLoss=false``, ...).
    """
    lower = {str(k).lower(): v for k, v in options.items() if v is not None}
    starting: int | str | None = None
    if "startingversion" in lower:
        text = str(lower["startingversion"]).strip().lower()
        if text == "latest":
            starting = "latest"
        else:
            try:
                starting = int(text)
            except ValueError:
                starting = -1
            if starting < 0:
                raise DeltaOptionError(f"startingVersion must be a version (>= 0) or 'latest'; got "
                                       f"{lower['startingversion']!r}", error_class="DELTA_ILLEGAL_OPTION")
    if starting is not None and "startingtimestamp" in lower:
        raise DeltaOptionError("give startingVersion or startingTimestamp, not both",
                               error_class="DELTA_STARTING_VERSION_AND_TIMESTAMP_BOTH_SET")
    _refuse_unsupported(lower)
    return StreamOptions(
        max_files=_positive("maxFilesPerTrigger", lower["maxfilespertrigger"]) if "maxfilespertrigger" in lower else None,
        max_bytes=_positive("maxBytesPerTrigger", lower["maxbytespertrigger"], _bytes)
        if "maxbytespertrigger" in lower else None,
        ignore_deletes=_flag("ignoreDeletes", lower.get("ignoredeletes", "false")),
        # ignoreFileDeletion: delta-spark's deprecated name, which it reads as ignoreChanges
        ignore_changes=_flag("ignoreChanges", lower.get("ignorechanges", "false"))
        or _flag("ignoreFileDeletion", lower.get("ignorefiledeletion", "false")),
        skip_change_commits=_flag("skipChangeCommits", lower.get("skipchangecommits", "false")),
        exclude_regex=str(lower["excluderegex"]) if "excluderegex" in lower else None,
        starting_version=starting,
        starting_timestamp=lower.get("startingtimestamp"),
        # readChangeData: delta-spark's older name of readChangeFeed (CDC_READ_OPTION_LEGACY); either one asks for the
        # change stream, and ignoring it would stream the table's rows as if they were its changes
        read_change_feed=_flag("readChangeFeed", lower.get("readchangefeed", "false"))
        or _flag("readChangeData", lower.get("readchangedata", "false")),
    )


def _zone(name: str) -> dt.tzinfo:
    """A Spark session time zone id as a tzinfo: a region (``America/Los_Angeles``), ``UTC``/``Z``, or an offset
    (``+08:00``, ``GMT-5``, ``UTC+01:30``)."""
    text = name.strip()
    m = re.fullmatch(r"(?:GMT|UTC|UT)?\s*([+-])(\d{1,2})(?::?(\d{2}))?", text, re.IGNORECASE)
    if m:
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        return dt.timezone(dt.timedelta(minutes=-minutes if m.group(1) == "-" else minutes))
    if text.upper() in ("UTC", "Z", "GMT", "UT"):
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise DeltaOptionError(f"the session time zone {name!r} is not a time zone dvlake can read a startingTimestamp "
                               "in; set spark.sql.session.timeZone to a region id or an offset") from exc


def session_epoch_ms(value: Any, time_zone: str) -> int:
    """A ``startingTimestamp`` as epoch milliseconds, as Spark casts a string to a timestamp: a value without an
    offset is a wall-clock time in the session time zone (``time_zone``), one with an offset is that instant."""
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return to_epoch_ms(text)  # raises DELTA_TIMESTAMP_INVALID with what to write
        value = parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=_zone(time_zone))
    elif isinstance(value, dt.datetime) and value.tzinfo is None:
        value = value.replace(tzinfo=_zone(time_zone))
    return to_epoch_ms(value)


@dataclass(frozen=True)
class IndexedFile:
    """One position of the stream: an ``add`` to read, a commit's changes (``readChangeFeed``: one position per
    commit, read whole), or neither (a version that emits nothing)."""

    version: int
    index: int
    initial: bool
    add: dict[str, Any] | None
    is_last: bool
    error: DvlakeError | None = None  # a commit the options do not allow: raised when the stream reaches it
    changes: VersionChanges | None = None
    timestamp_ms: int = 0  # the commit's timestamp (readChangeFeed's _commit_timestamp)
    whole_commit: bool = False  # readChangeFeed: the commit's changes, admitted to a batch together or not at all

    @property
    def has_data(self) -> bool:
        return self.add is not None or self.changes is not None

    @property
    def num_files(self) -> int:
        if self.changes is not None:
            c = self.changes
            return len(c.cdc_files) + len(c.inserted) + len(c.deleted) + len(c.dv_changes)
        return 1 if self.add is not None else 0

    @property
    def num_bytes(self) -> int:
        if self.changes is not None:
            c = self.changes
            return sum(int(f.size or 0) for f in c.cdc_files) + sum(f.size for f in c.inserted + c.deleted) + \
                sum(ch.file.size for ch in c.dv_changes)
        return int((self.add or {}).get("size") or 0)

    def offset_after(self, table_id: str) -> SourceOffset:
        """Where the stream stands once this position is read."""
        if self.is_last:
            return SourceOffset(table_id, self.version + 1, BASE_INDEX, False)
        return SourceOffset(table_id, self.version, self.index, self.initial)


class StreamPlanner:
    """Enumerates a table's stream positions after an offset (one per source; re-lists the log per call)."""

    def __init__(self, table_root: str, storage: Storage, options: StreamOptions, schema: dict[str, Any],
                 table_id: str, *, schema_version: int, partition_columns: Sequence[str] = (),
                 mapping_mode: str = "none", time_zone: str = "UTC", timestamp_out_of_range: bool = False) -> None:
        """``schema`` (with ``partition_columns`` and ``mapping_mode``) is what the stream reads every file with: the
        table's at ``schema_version``, the latest when the query (re)started. ``time_zone`` (the session's
        ``spark.sql.session.timeZone``) reads a ``startingTimestamp`` without an offset; ``timestamp_out_of_range``
        (``spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled``) lets one after the last commit start
        the stream at the next version instead of failing, as delta-spark's source."""
        self.root = table_root
        self.time_zone = time_zone
        self.timestamp_out_of_range = timestamp_out_of_range
        self.storage = storage
        self.options = options
        self.table_id = table_id
        self.schema_version = schema_version
        self._read = TableSchema(table_id, schema, tuple(partition_columns), mapping_mode)
        self._start_checked = False
        self._exclude = re.compile(options.exclude_regex) if options.exclude_regex else None
        # the initial snapshot's files in stream order, kept while the stream reads them (one log replay)
        self._snapshot_files: tuple[int, list[dict[str, Any]]] | None = None
        self._cdf_on = False  # readChangeFeed: the change feed is on at the commit being walked
        self._cdf_known: dict[int, bool] = {}  # version -> the feed was on just before it

    # -- where a new stream starts -------------------------------------------------------------------
    def initial_offset(self, latest: Snapshot) -> SourceOffset:
        """A new query's start: the latest snapshot, or the commits from ``startingVersion``/``startingTimestamp``."""
        o = self.options
        if o.starting_version == "latest":
            return SourceOffset(self.table_id, latest.version + 1, BASE_INDEX, False)
        if isinstance(o.starting_version, int):
            if o.starting_version > latest.version:
                raise VersionNotFoundError(
                    f"startingVersion {o.starting_version} of the stream on {self.root} is after the latest version "
                    f"{latest.version}; give a version up to {latest.version}, or 'latest'",
                    error_class="DELTA_VERSION_NOT_FOUND")
            return SourceOffset(self.table_id, o.starting_version, BASE_INDEX, False)
        if o.starting_timestamp is not None:
            return SourceOffset(self.table_id, self._version_from_timestamp(latest), BASE_INDEX, False)
        return SourceOffset(self.table_id, latest.version, BASE_INDEX, True)

    def _version_from_timestamp(self, latest: Snapshot) -> int:
        """``startingTimestamp``'s first version: the first commit at or after it (delta-spark's
        ``getStartingVersionFromTimestamp``), the timestamp read in the session time zone.

        Raises:
            TimestampGreaterThanCommitError: it is after the last commit, unless ``timestamp_out_of_range``.
        """
        text = self.options.starting_timestamp
        ts = session_epoch_ms(text, self.time_zone)
        versions = [v for v in sorted(latest.listing.commits) if v <= latest.version]
        after = [v for v in versions if latest.commit_timestamp(v) >= ts]
        if after:
            return after[0]
        if self.timestamp_out_of_range:
            return latest.version + 1
        last = dt.datetime.fromtimestamp(latest.commit_timestamp(latest.version) / 1000, _zone(self.time_zone))
        raise TimestampGreaterThanCommitError(
            f"the provided timestamp ({text}) is after the latest version available to the table {self.root} "
            f"({last.strftime('%Y-%m-%d %H:%M:%S')} in {self.time_zone}, version {latest.version}); use a timestamp "
            "before or at it, or set spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled=true to start "
            "at the next commit")

    def check_offset(self, offset: SourceOffset) -> None:
        if offset.table_id != self.table_id:
            raise DifferentTableReadByStreamError(
                f"the query's checkpoint was written for Delta table id {offset.table_id}, but the table at {self.root} "
                f"has id {self.table_id} (it was re-created); start the query with a new checkpoint location")

    # -- positions after an offset ---------------------------------------------------------------------
    def positions(self, start: SourceOffset, until: SourceOffset | None = None,
                  max_version: int | None = None) -> Iterator[IndexedFile]:
        """The positions after ``start``, lazily, up to the latest commit (or ``max_version``, or ``until`` inclusive)."""
        self.check_offset(start)
        self._check_start(start)
        if not start.initial and self._snapshot_files is not None and start.version > self._snapshot_files[0]:
            self._snapshot_files = None  # the initial snapshot has been served: its file list is not needed again
        listing = list_log(self.storage, self.root)
        latest = listing.latest_version if max_version is None else min(max_version, listing.latest_version)
        version = start.version
        if start.initial:
            if until is not None and until.key() <= start.key():
                return
            for f in self._snapshot_positions(start):
                if until is not None and f.has_data and (f.version, f.index) > until.key():
                    return
                yield f
            version += 1
        self._cdf_on = self._cdf_before(version) if self.options.read_change_feed and version <= latest else False
        while version <= latest:
            if until is not None and (version > until.version or (version == until.version and until.index == BASE_INDEX)):
                return
            for f in self._commit_positions(version, listing):
                if version == start.version and not start.initial and f.index <= start.index and f.has_data:
                    continue
                if until is not None and f.has_data and (f.version, f.index) > until.key():
                    return
                yield f
            version += 1

    def _check_start(self, start: SourceOffset) -> None:
        """Once per planner: the schema where the stream resumes must be readable with its read schema (a query
        behind a rename or drop would otherwise read the files before it under the new names). Later versions are
        checked as their ``metaData`` actions are walked."""
        if self._start_checked:
            return
        if start.version < self.schema_version:
            try:
                snap = Snapshot.load(self.root, version=start.version, storage=self.storage)
            except VersionNotFoundError:
                # log cleanup left no checkpoint at or before the start (0.json gone, a checkpoint later): the
                # commits from there on are still readable, and delta-spark streams them without rebuilding that
                # version. Without column mapping the metaData actions walked on the way are what matter; with it a
                # rename or drop before the start could go unseen, so refuse as delta-spark does.
                if self._read.mapping_mode != "none":
                    raise
                self._start_checked = True
                return
            data = TableSchema(snap.metadata.id, snap.schema, tuple(snap.partition_columns), snap.column_mapping_mode)
            check_readable(self._read, self.schema_version, data, start.version, self.root, self._starting_options)
        self._start_checked = True

    @property
    def _starting_options(self) -> bool:
        return self.options.starting_version is not None or self.options.starting_timestamp is not None

    def _check_metadata(self, version: int, metadata: dict[str, Any]) -> None:
        check_readable(self._read, self.schema_version, TableSchema.from_action(metadata), version, self.root,
                       self._starting_options)

    def _check_protocol(self, action: dict[str, Any]) -> None:
        """A commit that changes the protocol must still be readable by dvlake (delta-spark's ``protocolRead`` on
        every protocol action the source walks): a raised ``minReaderVersion`` or a reader feature dvlake does not
        implement fails the query there, rather than reading files whose meaning the new feature changed."""
        from dvlake.log.actions import Protocol
        from dvlake.log.features import check_can_read, validate_protocol

        protocol = Protocol.from_json(action)
        validate_protocol(protocol)
        check_can_read(protocol, self.root)

    def _snapshot_positions(self, start: SourceOffset) -> Iterator[IndexedFile]:
        if self._snapshot_files is None or self._snapshot_files[0] != start.version:
            snapshot = Snapshot.load(self.root, version=start.version, storage=self.storage)
            ordered = sorted(snapshot.files.to_pylist(), key=lambda a: (a.get("modificationTime") or 0, a["path"]))
            for a in ordered:
                a["partitionValues"] = dict(a.get("partitionValues") or [])
            self._snapshot_files = (start.version, [a for a in ordered if self._admitted_path(a)])
        rows = self._snapshot_files[1]
        if not rows:
            yield IndexedFile(start.version, BASE_INDEX, True, None, True)
            return
        ts = self._snapshot_timestamp(start.version) if self.options.read_change_feed else 0
        for i, add in enumerate(rows):
            if i > start.index:
                yield IndexedFile(start.version, i, True, add, i == len(rows) - 1, timestamp_ms=ts)

    def _snapshot_timestamp(self, version: int) -> int:
        return Snapshot.load(self.root, version=version, storage=self.storage).commit_timestamp(version)

    def _cdf_before(self, version: int) -> bool:
        """readChangeFeed: whether the change feed was on just before ``version`` (commit 0 sets it itself)."""
        if version <= 0:
            return False
        if version not in self._cdf_known:
            self._cdf_known[version] = cdf_enabled(Snapshot.load(self.root, version=version - 1, storage=self.storage).metadata)
        return self._cdf_known[version]

    def _admitted_path(self, add: Mapping[str, Any]) -> bool:
        return self._exclude is None or self._exclude.search(str(add["path"])) is None

    def _commit_positions(self, version: int, listing: LogListing) -> Iterator[IndexedFile]:
        if version not in listing.commits:
            raise VersionNotFoundError(
                f"the stream on {self.root} needs commit {commit_file_name(version)}, which is gone (log cleanup after "
                "delta.logRetentionDuration removed it before the query read it); restart the query from a new "
                "checkpoint", error_class="DELTA_VERSION_NOT_FOUND")
        lines = read_commit(self.storage, listing.commits[version][0])
        if self.options.read_change_feed:
            yield from self._change_positions(version, lines, listing)
            return
        error = None
        try:
            skip = self._judge(version, lines)
        except DvlakeError as exc:
            error, skip = exc, True
        adds = [] if skip else [ln["add"] for ln in lines if "add" in ln and ln["add"].get("dataChange", True)
                                and self._admitted_path(ln["add"])]
        if not adds:
            yield IndexedFile(version, BASE_INDEX, False, None, True, error)
            return
        for i, add in enumerate(adds):
            yield IndexedFile(version, i, False, add, i == len(adds) - 1)

    def _change_positions(self, version: int, lines: list[dict[str, Any]], listing: LogListing) -> Iterator[IndexedFile]:
        """readChangeFeed: a commit's changes, cut as delta-spark's source admits them.

        A commit recorded by change data files, or whose adds/removes carry deletion vectors, is one position: its
        pre- and post-images (or a DV's flipped rows, which need both sides of an add/remove pair) must land in one
        batch. A commit of plain adds and removes is one position per file, so a rate limit can split it. Files
        ``excludeRegex`` matches (add, remove or change data file, by path) are dropped first.
        """
        try:
            for ln in lines:
                if "protocol" in ln:
                    self._check_protocol(ln["protocol"])
                if "metaData" in ln:
                    self._check_metadata(version, ln["metaData"])
                    from dvlake.log.actions import Metadata

                    self._cdf_on = cdf_enabled(Metadata.from_json(ln["metaData"]))
            if not self._cdf_on:
                raise MissingChangeDataError(
                    f"the change data feed stream on {self.root} reached version {version}, where change data was not "
                    "recorded (delta.enableChangeDataFeed is not true there); restart the query with startingVersion "
                    "after the version that enabled it")
        except DvlakeError as exc:
            yield IndexedFile(version, BASE_INDEX, False, None, True, exc)
            return
        info: dict[str, Any] = next((ln["commitInfo"] for ln in lines if "commitInfo" in ln), {})
        ts = int(info.get("inCommitTimestamp") or commit_timestamps(listing).get(version, 0))
        changes = plan_version(version, ts, [ln for ln in lines if self._admitted_action(ln)])
        if changes.empty:
            yield IndexedFile(version, BASE_INDEX, False, None, True)
            return
        if changes.cdc_files or changes.dv_changes or any(f.dv is not None for f in changes.inserted + changes.deleted):
            yield IndexedFile(version, 0, False, None, True, changes=changes, timestamp_ms=ts, whole_commit=True)
            return
        parts = [VersionChanges(version, ts, inserted=[f]) for f in changes.inserted] + \
            [VersionChanges(version, ts, deleted=[f]) for f in changes.deleted]
        for i, part in enumerate(parts):
            yield IndexedFile(version, i, False, None, i == len(parts) - 1, changes=part, timestamp_ms=ts)

    def _admitted_action(self, line: Mapping[str, Any]) -> bool:
        """readChangeFeed: a commit line kept by ``excludeRegex`` (file actions whose path it matches are dropped)."""
        for kind in ("add", "remove", "cdc"):
            action = line.get(kind)
            if isinstance(action, dict):
                return self._admitted_path(action)
        return True

    def _judge(self, version: int, lines: list[dict[str, Any]]) -> bool:
        """Whether the commit is skipped; raises when the options do not allow what it did."""
        o = self.options
        seen_add = False
        removed: str | None = None
        operation: str | None = None
        for ln in lines:
            if "add" in ln and ln["add"].get("dataChange", True):
                seen_add = True
            elif "remove" in ln and ln["remove"].get("dataChange", True):
                removed = removed or str(ln["remove"].get("path"))
            elif "metaData" in ln:
                self._check_metadata(version, ln["metaData"])
            elif "protocol" in ln:
                self._check_protocol(ln["protocol"])
            elif "commitInfo" in ln:
                info = ln["commitInfo"]
                operation = f"{info.get('operation')} {json.dumps(info.get('operationParameters') or {})}"
        if removed is None:
            return False
        allow_changes = o.ignore_changes or o.skip_change_commits
        if seen_add and not allow_changes:
            raise DeltaSourceIgnoreChangesError(
                f"detected a data update ({operation or removed}) in the source table {self.root} at version {version}. "
                "This is currently not supported. If this is going to happen regularly and you are okay to skip "
                "changes, set the option 'skipChangeCommits' to 'true'. If you would like the data update to be "
                "reflected, please restart this query with a fresh checkpoint directory, or do a full refresh")
        if not seen_add and not (allow_changes or o.ignore_deletes):
            raise DeltaSourceIgnoreDeleteError(
                f"detected deleted data (for example {removed}) from the streaming source {self.root} at version "
                f"{version}. This is currently not supported. If you'd like to ignore deletes, set the option "
                "'ignoreDeletes' to 'true'")
        return o.skip_change_commits or not seen_add

    # -- admission -------------------------------------------------------------------------------------
    def latest_offset(self, start: SourceOffset, max_files: int | None, max_bytes: int | None,
                      max_version: int | None = None) -> SourceOffset:
        """The end of the next micro-batch: as many positions as the limits admit (at least one file).

        As delta-spark's ``AdmissionLimits``: a file is admitted while the limits have room before it (so at least
        one, even a file larger than the byte limit); a whole-commit position (``readChangeFeed``'s change data
        files or DV pairs) is admitted first in a batch, or later only when all of it fits, and a commit that does
        not fit ends the batch (the next one starts with it). A commit the options refuse ends the batch before
        it; it is raised once it is the first thing left to read, so the rows committed before it are delivered.
        """
        files_left = max_files if max_files is not None else 1 << 62
        bytes_left = max_bytes if max_bytes is not None else 1 << 62
        taken = False  # something is in the batch already
        end = start
        for f in self.positions(start, max_version=max_version):
            if f.error is not None:
                if end != start:
                    break
                raise f.error
            if f.has_data:
                if f.whole_commit:
                    admit = not taken or (files_left >= f.num_files and bytes_left >= f.num_bytes)
                else:
                    admit = files_left > 0 and bytes_left > 0
                if not admit:
                    break
                taken = True
                files_left -= f.num_files
                bytes_left -= f.num_bytes
            end = f.offset_after(self.table_id)
        return end

    def files_between(self, start: SourceOffset, end: SourceOffset) -> list[IndexedFile]:
        """The files of the micro-batch ``(start, end]`` (the same positions ``latest_offset`` walked)."""
        if end.key() <= start.key():
            return []
        out = []
        for f in self.positions(start, until=end):
            if f.error is not None:
                raise f.error
            if f.has_data:
                out.append(f)
        return out
