"""Snapshot: one version of a table — protocol, metadata, live files, tombstones.

The entry point for reads, time travel and transactions. ``Snapshot.load`` lists the log once,
replays it, and checks that dvlake may read the table's protocol.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvlake.errors import (
    CorruptLogError,
    DeltaAnalysisException,
    InvalidArgumentError,
    TimestampGreaterThanCommitError,
    VersionNotFoundError,
)
from dvlake.log import features, snapshot_cache, type_widening
from dvlake.log.actions import AddFile, DomainMetadata, Metadata, Protocol, RemoveFile, Txn
from dvlake.log.arrow import take_rows
from dvlake.log.partition_index import PartitionCodes, partition_codes
from dvlake.log.replay import LogState, read_commit, replay
from dvlake.log.schema import column_mapping_mode
from dvlake.log.segment import LogListing, commit_timestamps, earliest_version, list_log
from dvlake.log.stats import num_records_array
from dvlake.storage.base import Storage, storage_for
from dvlake.storage.paths import normalize_table_root

ICT_ENABLED = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"


@dataclass
class Snapshot:
    """The state of a table at one version."""

    table_root: str
    storage: Storage
    listing: LogListing
    state: LogState
    _timestamps: dict[int, int] | None = field(default=None, repr=False)

    # -- loading -------------------------------------------------------------------------------
    @classmethod
    def load(cls, table_root: str, version: int | None = None, timestamp: Any = None,
             storage: Storage | None = None) -> Snapshot:
        """Load the latest version, or time travel by ``version`` or ``timestamp`` (not both).

        The latest version comes from the process's snapshot cache (``snapshot_cache``, on unless turned off): the
        log is listed, and only the commits after the cached version are read."""
        root = normalize_table_root(table_root)
        version = _check_version_arg(version)
        storage = storage or storage_for(root)
        if version is None and timestamp is None and snapshot_cache.enabled() and storage.cache_identity() is not None:
            return cls.checked(root, storage, *snapshot_cache.SHARED.latest(root, storage))
        listing = list_log(storage, root)
        if version is not None and timestamp is not None:
            raise DeltaAnalysisException("time travel takes either a version or a timestamp, not both",
                                         error_class="DELTA_ONEOF_IN_TIMETRAVEL")
        if timestamp is not None:
            version = version_at_timestamp(storage, root, listing, timestamp)
        return cls.checked(root, storage, listing, replay(storage, root, listing, version))

    @classmethod
    def checked(cls, root: str, storage: Storage, listing: LogListing, state: LogState) -> Snapshot:
        """A snapshot of a replayed ``state``, once its schema is sound and dvlake may read its protocol."""
        _check_schema(state.metadata, root)
        features.validate_protocol(state.protocol)
        features.check_can_read(state.protocol, root)
        _check_type_changes(state, root)
        return cls(root, storage, listing, state)

    # -- state ---------------------------------------------------------------------------------
    @property
    def version(self) -> int:
        return self.state.version

    @property
    def protocol(self) -> Protocol:
        return self.state.protocol

    @property
    def metadata(self) -> Metadata:
        return self.state.metadata

    @property
    def files(self) -> pa.Table:
        """Live files: one row per add, columns as the ``add`` action's fields."""
        return self.state.files

    @property
    def tombstones(self) -> pa.Table:
        return self.state.tombstones

    @property
    def txns(self) -> dict[str, Txn]:
        return self.state.txns

    @property
    def domains(self) -> dict[str, DomainMetadata]:
        return self.state.domains

    @property
    def schema(self) -> dict[str, Any]:
        return self.metadata.schema

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def column_mapping_mode(self) -> str:
        return column_mapping_mode(self.metadata)

    @property
    def num_files(self) -> int:
        return self.files.num_rows

    @property
    def configuration(self) -> dict[str, str]:
        return self.metadata.configuration

    def partition_codes(self, keys: tuple[str, ...]) -> PartitionCodes:
        """The live files' partition values under the physical ``keys`` as codes into their distinct tuples,
        computed once per state and moved forward by the snapshot cache's replays (``log/partition_index.py``)."""
        known = self.state.derived.codes_for(self.files)
        if known is None or known.keys != keys:
            known = partition_codes(self.files.column("partitionValues"), keys)
            self.state.derived.codes_of, self.state.derived.partition_codes = self.files, known
        return known

    def add_files(self) -> list[AddFile]:
        """Live files as action objects (for commands that touch a modest number of files)."""
        return [AddFile.from_json(_clean(r)) for r in self.files.to_pylist()]

    def add_files_at(self, indexes: np.ndarray | list[int]) -> list[AddFile]:
        """The add actions of the live files at ``indexes`` (rows of ``files``), in that order.

        Only those rows leave Arrow: a command that pruned a large table to a few files builds a few objects, not
        one per live file (``add_files()[i]`` for each would cost the whole table's conversion)."""
        if len(indexes) == 0:
            return []
        rows = take_rows(self.files, indexes).to_pylist()
        return [AddFile.from_json(_clean(r)) for r in rows]

    def tombstone_files(self) -> list[RemoveFile]:
        return [RemoveFile.from_json(_clean(r)) for r in self.tombstones.to_pylist()]

    def num_records(self, indexes: np.ndarray | None = None) -> np.ndarray:
        """Physical row count of each live file (-1 where stats lack numRecords), or of the files at ``indexes``
        only (their stats alone are parsed)."""
        stats = self.files.column("stats")
        if indexes is not None:
            stats = take_rows(stats, indexes)
        return num_records_array(stats)

    def dv_cardinalities(self) -> np.ndarray:
        """Rows deleted by each live file's DV (0 without one)."""
        col = self.files.column("deletionVector")
        card = pc.struct_field(col, "cardinality") if self.num_files else pa.array([], pa.int64())
        return pc.fill_null(card, 0).to_numpy() if self.num_files else np.zeros(0, dtype=np.int64)

    def dv_count(self) -> int:
        """How many live files carry a DV."""
        return int((self.dv_cardinalities() > 0).sum()) if self.num_files else 0

    # -- time ----------------------------------------------------------------------------------
    def commit_timestamp(self, version: int | None = None) -> int:
        """Timestamp (ms) of a commit: the in-commit timestamp when enabled, else the file's mtime."""
        version = self.version if version is None else version
        ict = in_commit_timestamp(self.storage, self.listing, self.metadata, version)
        if ict is not None:
            return ict
        if self._timestamps is None:
            self._timestamps = commit_timestamps(self.listing)
        return self._timestamps.get(version, 0)

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """commitInfo of each version, newest first (as DESCRIBE HISTORY lists them)."""
        out: list[dict[str, Any]] = []
        for v in sorted((v for v in self.listing.commits if v <= self.version), reverse=True):
            if limit is not None and len(out) >= limit:
                break
            info: dict[str, Any] = next((ln["commitInfo"] for ln in read_commit(self.storage, self.listing.commits[v][0])
                         if "commitInfo" in ln), {})
            out.append({**info, "version": v, "timestamp": info.get("inCommitTimestamp") or self.commit_timestamp(v)})
        return out


def _check_schema(metadata: Metadata, root: str) -> None:
    """The metaData's schemaString must be a JSON struct type (a damaged one is a typed error, not a JSONDecodeError)."""
    try:
        schema = metadata.schema
        ok = isinstance(schema, dict) and isinstance(schema.get("fields"), list)
    except (ValueError, TypeError):
        ok = False
    if not ok:
        raise CorruptLogError(f"the metaData action of {root} has a schemaString that is not a JSON struct type; the "
                              "log is damaged")


def _check_version_arg(version: Any) -> int | None:
    """A version given as an int or a string of digits (as Spark's ``versionAsOf`` option passes it)."""
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, (int, str)):
        raise InvalidArgumentError(f"version must be an integer; got {version!r} ({type(version).__name__})")
    if isinstance(version, str):
        if not version.strip().lstrip("-").isdigit():
            raise InvalidArgumentError(f"version must be an integer; got the string {version!r}")
        version = int(version.strip())
    if version < 0:
        raise VersionNotFoundError(f"version {version} is negative; versions start at 0")
    return version


def _clean(row: dict[str, Any]) -> dict[str, Any]:
    """An Arrow row back to action JSON: maps to dicts, no nulls, no null DV struct."""
    out = {}
    for k, v in row.items():
        if v is None:
            continue
        if k in ("partitionValues", "tags") and isinstance(v, list):
            v = dict(v)
        if k == "deletionVector":
            if v.get("storageType") is None:
                continue
            v = {dk: dv for dk, dv in v.items() if dv is not None and dk != "maxRowIndex"}
        out[k] = v
    out.setdefault("partitionValues", {})
    return out


def in_commit_timestamp(storage: Storage, listing: LogListing, metadata: Metadata, version: int) -> int | None:
    """The in-commit timestamp of ``version`` when the feature covers it, else None."""
    if metadata.configuration.get(ICT_ENABLED, "false").lower() != "true":
        return None
    since = int(metadata.configuration.get(ICT_ENABLEMENT_VERSION, 0))
    if version < since or version not in listing.commits:
        return None
    for line in read_commit(storage, listing.commits[version][0]):
        if "commitInfo" in line:
            return line["commitInfo"].get("inCommitTimestamp")
    return None


def to_epoch_ms(timestamp: Any) -> int:
    """Accept datetime, date, epoch ms (int) or an ISO string (naive = UTC)."""
    if isinstance(timestamp, (int, float)) and not isinstance(timestamp, bool):
        return int(timestamp)
    if isinstance(timestamp, str):
        try:
            timestamp = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
        except ValueError as exc:
            raise InvalidArgumentError(f"cannot parse the timestamp {timestamp!r}; write e.g. '2024-06-01T00:00:00Z'",
                                       error_class="DELTA_TIMESTAMP_INVALID") from exc
    if isinstance(timestamp, dt.date) and not isinstance(timestamp, dt.datetime):
        timestamp = dt.datetime(timestamp.year, timestamp.month, timestamp.day)
    if isinstance(timestamp, dt.datetime):
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.UTC)
        return int(timestamp.timestamp() * 1000)
    raise InvalidArgumentError(
        f"cannot interpret {timestamp!r} as a timestamp: give a datetime, a date, epoch milliseconds or an ISO-8601 "
        "string such as '2024-06-01T00:00:00Z'", error_class="DELTA_TIMESTAMP_INVALID")


def version_at_timestamp(storage: Storage, table_root: str, listing: LogListing, timestamp: Any) -> int:
    """The latest version committed at or before ``timestamp`` (delta-spark's TIMESTAMP AS OF)."""
    ts = to_epoch_ms(timestamp)
    latest_meta = replay(storage, table_root, listing, None).metadata
    stamps = commit_timestamps(listing)
    versions = sorted(stamps)
    for v in versions:
        ict = in_commit_timestamp(storage, listing, latest_meta, v)
        if ict is not None:
            stamps[v] = ict
    first = earliest_version(listing)
    if versions and ts > stamps[versions[-1]]:
        latest_at = dt.datetime.fromtimestamp(stamps[versions[-1]] / 1000, dt.UTC)
        raise TimestampGreaterThanCommitError(
            f"the timestamp {timestamp} is after the latest commit of {table_root} "
            f"(version {versions[-1]}, committed {latest_at}); use a timestamp at or before it")
    candidates = [v for v in versions if v >= first and stamps[v] <= ts]
    if not candidates:
        earliest = dt.datetime.fromtimestamp(stamps[first] / 1000, dt.UTC) if first in stamps else "?"
        raise VersionNotFoundError(
            f"the timestamp {timestamp} is before the earliest version {first} of {table_root} (committed {earliest}); "
            f"use a later timestamp")
    return max(candidates)


def _check_type_changes(state: LogState, root: str) -> None:
    """PROTOCOL.md's reader rule for type widening: refuse a recorded type change this reader cannot convert."""
    if not type_widening.is_supported(features.reader_features(state.protocol)):
        return
    if type_widening.TYPE_CHANGES_KEY not in state.metadata.schema_string:
        return
    bad = type_widening.unsupported_changes(state.metadata.schema)
    if bad:
        raise DeltaAnalysisException(
            f"the schema of {root} records type changes that are not widenings dvlake can read: {'; '.join(bad)}. A writer "
            "outside the typeWidening feature's rules changed them; read the table with that writer's engine.",
            error_class="DELTA_UNSUPPORTED_TYPE_CHANGE_IN_SCHEMA")
