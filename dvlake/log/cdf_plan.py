"""Change Data Feed planning: what each commit of a version range contributes to the change feed.

Pure: the caller reads the commits; nothing here touches storage or Spark. The rules are
delta-spark's ``CDCReader.changesToDF`` (and the protocol's "Change Data Files" section):

- a commit with any ``cdc`` action contributes its change data files only (its add/remove are
  ignored: the writer already put every change of the commit into them);
- otherwise its ``add``/``remove`` actions with ``dataChange=true`` are paired by path:
  - a lone ``add``: the file's rows, minus the add's DV, are ``insert``;
  - a lone ``remove``: the file's rows, minus the remove's DV (rows deleted earlier are not
    deleted again), are ``delete``;
  - ``remove`` + ``add`` of the same path: a DV change. Rows in the new DV and not the old are
    ``delete``, rows in the old DV and not the new are ``insert`` (RESTORE). Treating the pair as
    "everything deleted and everything inserted" is the bug delta-io/delta#1701 fixed;
- ``dataChange=false`` actions (OPTIMIZE, REORG) contribute nothing.

A range may only be read where the change feed was on: the metadata in force at every version
of the range must have ``delta.enableChangeDataFeed=true`` (``DELTA_MISSING_CHANGE_DATA``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import CdcStartVersionAfterLatestError, InvalidCdcRangeError, MissingChangeDataError
from dvlake.log.actions import AddCDCFile, Metadata
from dvlake.log.replay import normalize_path
from dvlake.log.stats import num_records_of

ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"

INSERT, DELETE = "insert", "delete"
UPDATE_PREIMAGE, UPDATE_POSTIMAGE = "update_preimage", "update_postimage"
CHANGE_TYPE_COL, COMMIT_VERSION_COL, COMMIT_TIMESTAMP_COL = "_change_type", "_commit_version", "_commit_timestamp"
CDC_COLUMNS = (CHANGE_TYPE_COL, COMMIT_VERSION_COL, COMMIT_TIMESTAMP_COL)


def cdf_enabled(metadata: Metadata) -> bool:
    """``delta.enableChangeDataFeed`` is true in this metadata."""
    return str(metadata.configuration.get(ENABLE_CHANGE_DATA_FEED, "false")).lower() == "true"


@dataclass(frozen=True)
class DataFile:
    """A data file as one side of a change: its relative path, partition values and a DV (or none)."""

    path: str                              # as in the log (URL-encoded, relative or absolute)
    partition_values: dict[str, str | None]
    size: int
    num_records: int | None
    dv: DeletionVectorDescriptor | None


@dataclass(frozen=True)
class DvChange:
    """``remove`` + ``add`` of one path in one commit: only the rows whose DV bit flipped changed."""

    file: DataFile                          # the add (its ``dv`` is the new DV)
    old_dv: DeletionVectorDescriptor | None  # the remove's DV

    @property
    def new_dv(self) -> DeletionVectorDescriptor | None:
        return self.file.dv

    @property
    def unchanged(self) -> bool:
        """Both sides name the same DV (or none): nothing flipped, the file need not be opened."""
        old, new = self.old_dv, self.new_dv
        return (old.unique_id if old else None) == (new.unique_id if new else None)


@dataclass
class VersionChanges:
    """What one commit contributes to the change feed."""

    version: int
    timestamp_ms: int
    cdc_files: list[AddCDCFile] = field(default_factory=list)
    inserted: list[DataFile] = field(default_factory=list)   # lone adds: live rows are inserts
    deleted: list[DataFile] = field(default_factory=list)    # lone removes: live rows are deletes
    dv_changes: list[DvChange] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.cdc_files or self.inserted or self.deleted or self.dv_changes)


def data_file(action: dict[str, Any]) -> DataFile:
    dv = action.get("deletionVector")
    return DataFile(path=action["path"], partition_values=dict(action.get("partitionValues") or {}),
                    size=int(action.get("size") or 0), num_records=num_records_of(action.get("stats")),
                    dv=DeletionVectorDescriptor.from_json(dv) if dv else None)


def plan_version(version: int, timestamp_ms: int, lines: Sequence[dict[str, Any]]) -> VersionChanges:
    """The change-feed contribution of one commit, from its parsed JSON lines."""
    out = VersionChanges(version, timestamp_ms)
    cdc = [AddCDCFile.from_json(ln["cdc"]) for ln in lines if isinstance(ln.get("cdc"), dict)]
    if cdc:
        out.cdc_files = cdc
        return out
    adds: dict[str, dict[str, Any]] = {}
    removes: dict[str, dict[str, Any]] = {}
    for ln in lines:
        for kind, into in (("add", adds), ("remove", removes)):
            action = ln.get(kind)
            if isinstance(action, dict) and action.get("dataChange", True) is not False:
                into[normalize_path(action["path"])] = action
    for key, add in adds.items():
        if key in removes:
            remove = removes[key]
            change = DvChange(data_file(add), data_file(remove).dv)
            if not change.unchanged:
                out.dv_changes.append(change)
        else:
            out.inserted.append(data_file(add))
    out.deleted = [data_file(r) for key, r in removes.items() if key not in adds]
    return out


def check_range(start: int, end: int | None, latest: int, table: str) -> int:
    """The effective end version of ``[start, end]`` (clamped to the latest), or the range error delta-spark raises."""
    if start < 0 or (end is not None and end < 0):
        raise InvalidCdcRangeError(
            f"change data feed of {table}: versions must be >= 0, got startingVersion={start}, endingVersion={end}",
            error_class="DELTA_CDC_READ_NULL_RANGE_BOUNDARY")
    if end is not None and end < start:
        raise InvalidCdcRangeError(
            f"change data feed of {table}: endingVersion {end} is before startingVersion {start}; "
            "the range is inclusive at both ends, so give an end at or after the start")
    if start > latest:
        raise CdcStartVersionAfterLatestError(
            f"change data feed of {table}: startingVersion {start} is after the latest version {latest}; "
            f"start at or before {latest}")
    return latest if end is None else min(end, latest)


def check_enabled(metadata_at_start: Metadata, versions: Sequence[tuple[int, Sequence[dict[str, Any]]]],
                  start: int, end: int, table: str) -> None:
    """Refuse the range when the change feed was off at any of its versions (``DELTA_MISSING_CHANGE_DATA``).

    ``metadata_at_start`` is the metadata in force at ``start`` (including a metaData action of
    ``start`` itself); later metaData actions in ``versions`` replace it.
    """
    metadata = metadata_at_start
    for version, lines in versions:
        for ln in lines:
            if isinstance(ln.get("metaData"), dict):
                metadata = Metadata.from_json(ln["metaData"])
        if not cdf_enabled(metadata):
            raise MissingChangeDataError(
                f"cannot read the change data feed of {table} for versions {start} to {end}: change data was not "
                f"recorded at version {version} (delta.enableChangeDataFeed is not true there). Read a range where "
                "the table had delta.enableChangeDataFeed=true; enable it with ALTER TABLE … SET TBLPROPERTIES "
                "('delta.enableChangeDataFeed' = 'true') to record changes from then on.")
