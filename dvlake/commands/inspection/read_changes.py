"""Reading a table's Change Data Feed: a version (or timestamp) range → the rows that changed.

The driver resolves the range, reads the range's commits and plans each version's contribution
(``log/cdf_plan.py``: change data files, whole files, DV changes); every data file and DV is read
on executors (``spark/cdf_read.py``). Both bounds are inclusive, as in delta-spark; an end past
the latest version is the latest version.

Errors are delta-spark's: no start (``DELTA_NO_START_FOR_CDC_READ``), a version and a timestamp
for one bound (``DELTA_MULTIPLE_CDC_BOUNDARY``), end before start (``DELTA_INVALID_CDC_RANGE``),
a start after the latest version (``DELTA_CDC_START_VERSION_AFTER_LATEST``), versions where the
change feed was off (``DELTA_MISSING_CHANGE_DATA``), and files VACUUM removed
(``DELTA_CHANGE_DATA_FILE_NOT_FOUND``).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from dvlake.config import CONFINE_SESSION_KEY, TIMESTAMP_OUT_OF_RANGE, confinement_enabled
from dvlake.errors import (
    CdcStartVersionAfterLatestError,
    ChangeDataFileNotFoundError,
    InvalidArgumentError,
    InvalidCdcRangeError,
    MultipleCdcBoundaryError,
    NoStartForCdcReadError,
    VersionNotFoundError,
)
from dvlake.log.cdf_plan import VersionChanges, check_enabled, check_range, plan_version
from dvlake.log.replay import read_commit
from dvlake.log.segment import commit_file_name, earliest_version
from dvlake.log.snapshot import Snapshot
from dvlake.log.stream_plan import session_epoch_ms
from dvlake.spark.cdf_read import changes_frame
from dvlake.storage.confine import data_file_location
from dvlake.storage.paths import normalize_table_root


def read_changes(spark: SparkSession, path: str, startingVersion: int | None = None, endingVersion: int | None = None,
                 startingTimestamp: Any = None, endingTimestamp: Any = None) -> DataFrame:
    """The change rows of the table at ``path`` between two versions or timestamps (inclusive)."""
    root = normalize_table_root(path)
    if startingVersion is not None and startingTimestamp is not None:
        raise MultipleCdcBoundaryError(f"change data feed of {root}: give startingVersion or startingTimestamp, not both")
    if endingVersion is not None and endingTimestamp is not None:
        raise MultipleCdcBoundaryError(f"change data feed of {root}: give endingVersion or endingTimestamp, not both")
    if startingVersion is None and startingTimestamp is None:
        raise NoStartForCdcReadError(
            f"change data feed of {root}: no starting point; give startingVersion (e.g. 0) or startingTimestamp")
    latest = Snapshot.load(root)
    # timestamps without an offset are wall-clock times in the session time zone, as Spark casts them
    zone = str(spark.conf.get("spark.sql.session.timeZone", "UTC") or "UTC")
    if startingTimestamp is not None:
        allow = str(spark.conf.get(TIMESTAMP_OUT_OF_RANGE, "false") or "false").strip().lower() == "true"
        found = _version_at_or_after(latest, startingTimestamp, root, zone, allow)
        if found is None:  # after the last commit, and the session allows it: no changes (delta-spark's empty result)
            confine = confinement_enabled(spark.conf.get(CONFINE_SESSION_KEY, None), latest.configuration)
            return changes_frame(spark, latest, [], confine)
        start = found
    else:
        start = _as_version(startingVersion, "startingVersion")
    end: int | None
    if endingTimestamp is not None:
        end = _version_at_or_before(latest, endingTimestamp, root, zone)
    else:
        end = None if endingVersion is None else _as_version(endingVersion, "endingVersion")
    end = check_range(start, end, latest.version, root)
    return changes_between(spark, latest, start, end)


def changes_between(spark: SparkSession, latest: Snapshot, start: int, end: int) -> DataFrame:
    """The change rows of versions ``start``..``end`` (already checked to be a range within the history)."""
    root = latest.table_root
    listing = latest.listing
    missing = [v for v in range(start, end + 1) if v not in listing.commits]
    if missing or start < earliest_version(listing):
        raise VersionNotFoundError(
            f"cannot read the change data feed of {root} from version {start}: the commit file "
            f"{commit_file_name(missing[0] if missing else start)} is gone (log cleanup after "
            "delta.logRetentionDuration removed it); start at a later version")
    commits = [(v, read_commit(latest.storage, listing.commits[v][0])) for v in range(start, end + 1)]
    at_start = latest if start == latest.version else Snapshot.load(root, version=start, storage=latest.storage)
    check_enabled(at_start.metadata, commits, start, end, root)
    plans = [plan_version(v, latest.commit_timestamp(v), lines) for v, lines in commits]
    at_end = latest if end == latest.version else at_start if end == start else \
        Snapshot.load(root, version=end, storage=latest.storage)
    _check_no_rename_or_drop(at_start, commits, at_end, start, end)
    confine = confinement_enabled(spark.conf.get(CONFINE_SESSION_KEY, None), at_end.configuration)
    _check_files_exist(latest, plans, confine)
    return changes_frame(spark, at_end, [p for p in plans if not p.empty], confine)


def _check_no_rename_or_drop(at_start: Snapshot, commits: list[tuple[int, Any]], at_end: Snapshot, start: int,
                             end: int) -> None:
    """The range is read with the end version's schema: a column renamed or dropped under column mapping within it
    (or before it, from the start version's schema) would give older rows the new names, so the read is refused as
    delta-spark refuses it."""
    from dvlake.errors import CdfIncompatibleSchemaChangeError
    from dvlake.log.stream_schema import TableSchema, column_mapping_change

    end_schema = TableSchema.from_action(at_end.metadata.to_json())
    seen = [(start, at_start.metadata.to_json())]
    seen += [(v, ln["metaData"]) for v, lines in commits for ln in lines if isinstance(ln.get("metaData"), dict)]
    for version, action in seen:
        change = column_mapping_change(end_schema, TableSchema.from_action(action))
        if change is not None:
            raise CdfIncompatibleSchemaChangeError(
                f"cannot read the change data feed of {at_end.table_root} for versions {start} to {end} with the schema "
                f"of version {end}: {change} after version {version}, so the older change rows would be read under "
                f"other column names. Read the versions before the change and those from it on separately")


def _check_files_exist(snapshot: Snapshot, plans: list[VersionChanges], confine: bool) -> None:
    """Every file the range reads must still exist: name the first one VACUUM removed, and its version."""
    wanted: list[tuple[int, str]] = []
    for p in plans:
        paths = [c.path for c in p.cdc_files] + [f.path for f in p.inserted + p.deleted]
        paths += [ch.file.path for ch in p.dv_changes]
        wanted += [(p.version, data_file_location(snapshot.table_root, path, confine)) for path in paths]
    if not wanted:
        return
    infos = snapshot.storage.stat_many([loc for _, loc in wanted])
    for (version, location), info in zip(wanted, infos, strict=True):
        if info is None:
            raise ChangeDataFileNotFoundError(
                f"the change data feed of {snapshot.table_root} at version {version} needs {location}, which no longer "
                "exists (VACUUM removes data and change data files once they are older than "
                "delta.deletedFileRetentionDuration). Read a later range of versions.")


def _as_version(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidArgumentError(f"{name} must be a version number (an int), got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise InvalidArgumentError(f"{name} must be a version number (an int), got {value!r}") from exc


def _stamps(snapshot: Snapshot) -> list[tuple[int, int]]:
    return [(v, snapshot.commit_timestamp(v)) for v in sorted(snapshot.listing.commits) if v <= snapshot.version]


def _version_at_or_after(snapshot: Snapshot, timestamp: Any, root: str, zone: str = "UTC",
                         out_of_range: bool = False) -> int | None:
    """delta-spark's starting version for a timestamp: the first commit at or after it; None when it is after the last
    commit and ``spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled`` allows that."""
    ts = session_epoch_ms(timestamp, zone)
    for v, stamp in _stamps(snapshot):
        if stamp >= ts:
            return v
    if out_of_range:
        return None
    raise CdcStartVersionAfterLatestError(
        f"change data feed of {root}: startingTimestamp {timestamp} is after the latest commit (version "
        f"{snapshot.version}); give an earlier timestamp", error_class="DELTA_TIMESTAMP_GREATER_THAN_COMMIT")


def _version_at_or_before(snapshot: Snapshot, timestamp: Any, root: str, zone: str = "UTC") -> int:
    """delta-spark's ending version for a timestamp: the last commit at or before it."""
    ts = session_epoch_ms(timestamp, zone)
    before = [v for v, stamp in _stamps(snapshot) if stamp <= ts]
    if not before:
        raise InvalidCdcRangeError(
            f"change data feed of {root}: endingTimestamp {timestamp} is before the first commit; give a later one")
    return before[-1]
