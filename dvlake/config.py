"""Table properties (``delta.*``) and dvlake's session settings, typed.

Session settings reuse delta-spark's configuration keys where one exists, so a Spark session
configured for delta-spark behaves the same under dvlake (e.g.
``spark.databricks.delta.delete.deletionVectors.persistent=false`` switches DELETE to copy-on-write).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dvlake.errors import InvalidArgumentError

CHECKPOINT_INTERVAL = "delta.checkpointInterval"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
LOG_RETENTION = "delta.logRetentionDuration"
ENABLE_DVS = "delta.enableDeletionVectors"
APPEND_ONLY = "delta.appendOnly"
RANDOMIZE_PREFIXES = "delta.randomizeFilePrefixes"
RANDOM_PREFIX_LENGTH = "delta.randomPrefixLength"
DATA_SKIPPING_NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
ISOLATION_LEVEL = "delta.isolationLevel"
#: delta-spark's table isolation levels: Serializable also makes a concurrent blind append into what a
#: command read a conflict; WriteSerializable (the default) lets such an append serialize after it.
ISOLATION_LEVELS = ("Serializable", "WriteSerializable")

# session settings (delta-spark names)
DELETE_DVS_PERSISTENT = "spark.databricks.delta.delete.deletionVectors.persistent"
DV_PACKING_TARGET_SIZE = "spark.databricks.delta.deletionVectors.packing.targetSize"
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
DEFAULT_ENABLE_DVS = "spark.databricks.delta.properties.defaults.enableDeletionVectors"

DEFAULT_DV_PACKING_TARGET = 2 * 1024 * 1024

_UNITS_MS = {
    "millisecond": 1, "milliseconds": 1, "ms": 1,
    "second": 1000, "seconds": 1000, "sec": 1000, "s": 1000,
    "minute": 60_000, "minutes": 60_000, "min": 60_000,
    "hour": 3_600_000, "hours": 3_600_000, "h": 3_600_000,
    "day": 86_400_000, "days": 86_400_000, "d": 86_400_000,
    "week": 604_800_000, "weeks": 604_800_000,
}


def parse_interval_ms(text: str) -> int:
    """Delta's interval strings ('interval 1 week', '7 days', 'interval 168 hours') in milliseconds."""
    s = text.strip().lower()
    if s.startswith("interval"):
        s = s[len("interval"):].strip()
    total = 0
    parts = re.findall(r"(-?\d+)\s*([a-z]+)", s)
    if not parts:
        raise InvalidArgumentError(f"cannot parse the interval {text!r}; write e.g. 'interval 7 days'")
    for number, unit in parts:
        if unit not in _UNITS_MS:
            raise InvalidArgumentError(f"unknown unit {unit!r} in the interval {text!r}")
        total += int(number) * _UNITS_MS[unit]
    return total


def table_bool(conf: Mapping[str, str], key: str, default: bool = False) -> bool:
    return str(conf.get(key, str(default))).strip().lower() == "true"


def table_isolation_level(conf: Mapping[str, str]) -> str:
    """The table's ``delta.isolationLevel`` (WriteSerializable when unset), checked against delta-spark's levels."""
    raw = str(conf.get(ISOLATION_LEVEL, "WriteSerializable")).strip()
    for level in ISOLATION_LEVELS:
        if raw.lower() == level.lower():
            return level
    raise InvalidArgumentError(
        f"Table property {ISOLATION_LEVEL} = {raw!r} is not an isolation level Delta supports; "
        f"expected one of {', '.join(ISOLATION_LEVELS)} (a table holding another value takes writes again once "
        f"ALTER TABLE ... SET TBLPROPERTIES ('{ISOLATION_LEVEL}' = 'WriteSerializable') replaces it).")


def checkpoint_interval(conf: Mapping[str, str]) -> int:
    return int(conf.get(CHECKPOINT_INTERVAL, 10))


def deleted_file_retention_ms(conf: Mapping[str, str]) -> int:
    return parse_interval_ms(conf.get(DELETED_FILE_RETENTION, "interval 1 week"))


def normalize_properties(props: Mapping[str, Any] | None) -> dict[str, str]:
    """Table properties as strings, booleans lower-cased ('true'), as Delta stores them."""
    out: dict[str, str] = {}
    for k, v in (props or {}).items():
        out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
        if out[k].lower() in ("true", "false"):
            out[k] = out[k].lower()
    return out


# --- OPTIMIZE / REORG / auto-compaction (delta-spark names and defaults) ---------------------------
OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
OPTIMIZE_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
OPTIMIZE_MAX_DELETED_ROWS_RATIO = "spark.databricks.delta.optimize.maxDeletedRowsRatio"
OPTIMIZE_MAX_THREADS = "spark.databricks.delta.optimize.maxThreads"
OPTIMIZE_REPARTITION = "spark.databricks.delta.optimize.repartition.enabled"
AUTO_COMPACT = "delta.autoOptimize.autoCompact"
AUTO_COMPACT_MIN_NUM_FILES = "spark.databricks.delta.autoCompact.minNumFiles"
AUTO_COMPACT_MAX_FILE_SIZE = "spark.databricks.delta.autoCompact.maxFileSize"
DEFAULT_OPTIMIZE_FILE_SIZE = 1024 * 1024 * 1024
DEFAULT_MAX_DELETED_ROWS_RATIO = 0.05
DEFAULT_OPTIMIZE_MAX_THREADS = 15
DEFAULT_AUTO_COMPACT_MIN_NUM_FILES = 50
DEFAULT_AUTO_COMPACT_MAX_FILE_SIZE = 128 * 1024 * 1024

# UPDATE and MERGE session settings (delta-spark names)
UPDATE_DVS_PERSISTENT = "spark.databricks.delta.update.deletionVectors.persistent"
MERGE_DVS_PERSISTENT = "spark.databricks.delta.merge.deletionVectors.persistent"
MERGE_INSERT_ONLY_FAST_PATH = "spark.databricks.delta.merge.optimizeInsertOnlyMerge.enabled"
MERGE_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"
#: delta-spark's internal flag (default false): with materializeSource=none, a MERGE (not insert-only) over a
#: nondeterministic source fails instead of reading it twice (commands/dml/merge/source.py)
MERGE_FAIL_IF_SOURCE_CHANGED = "spark.databricks.delta.merge.failIfSourceChanged"
#: delta-spark's internal flag (default true): MERGE repartitions its output by the partition columns before writing
MERGE_REPARTITION_BEFORE_WRITE = "spark.databricks.delta.merge.repartitionBeforeWrite.enabled"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"

# --- row-level changes: where deletion vectors are built (issue 27) ---------------------------------
#: Session setting: a DELETE/UPDATE/MERGE whose changed rows are known to be at most this many builds its
#: DVs on the driver from one bounded Arrow collect of (file, row) pairs (no shuffle, no Python worker); above
#: it, on executors. 0 always uses executors. The bound keeps the driver's memory fixed (16 bytes a row).
DML_DRIVER_MARK_ROWS = "spark.dvlake.dml.driverMarkRows"
DEFAULT_DML_DRIVER_MARK_ROWS = 1_000_000
#: Session setting: MERGE hints a broadcast of its materialized source when it has at most this many rows and
#: an estimated size (rows x the schema's default widths) of at most ``MERGE_BROADCAST_SOURCE_MAX_BYTES``:
#: the target is then read once, never shuffled. 0 never hints; so does ``spark.sql.autoBroadcastJoinThreshold=-1``.
MERGE_BROADCAST_SOURCE_ROWS = "spark.dvlake.merge.broadcastSourceRows"
DEFAULT_MERGE_BROADCAST_SOURCE_ROWS = 1_000_000
MERGE_BROADCAST_SOURCE_MAX_BYTES = 64 * 1024 * 1024

# --- confinement to the table root (issue 8) ---------------------------------------------------
#: Session setting: "true" (default) refuses data and DV paths that resolve outside the table
#: root; "false" allows them (shallow-clone style tables). When set, it wins over the table.
CONFINE_SESSION_KEY = "spark.dvlake.confineToTableRoot"
#: Table property with the same meaning, used when the session does not set the key. A reader of
#: untrusted tables sets the session key to "true" explicitly, which no table can override.
CONFINE_TABLE_PROPERTY = "dvlake.confineToTableRoot"


def confinement_enabled(session_value: str | None, table_conf: Mapping[str, str]) -> bool:
    """Whether paths must stay inside the table root: session setting, else table property, else on."""
    value = session_value if session_value is not None else table_conf.get(CONFINE_TABLE_PROPERTY)
    if value is None:
        return True
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgumentError(
            f"{CONFINE_SESSION_KEY} / {CONFINE_TABLE_PROPERTY} must be true or false; got {value!r}")
    return text == "true"


# --- every other session setting: defined here only (tests/unit/test_settings_home.py refuses a key spelled
# anywhere else); the modules that read one import it from here ---------------------------------------------
#: DROP CONSTRAINT of a missing constraint is no error (delta-spark) (log/constraints.py).
ASSUME_DROP_IF_EXISTS = "spark.databricks.delta.constraints.assumesDropIfExists.enabled"
#: dvlake's PySpark faces are on in this session (``configure_spark`` sets it) (faces.py).
FACES_ENABLED = "spark.dvlake.faces.enabled"
#: aggregates answered from the log (delta-spark; default on) (sqlfront/metadata_query.py).
OPTIMIZE_METADATA_QUERY = "spark.databricks.delta.optimizeMetadataQuery.enabled"
#: ``auto`` (the JVM source where it can run) or ``python`` (spark/stream_jvm.py).
STREAM_ENGINE = "spark.dvlake.stream.engine"
#: delta-spark's switch (default on) for eliding a commit that changes nothing (``commitIfNeeded``) (commands/common.py).
SKIP_EMPTY_COMMITS_CONF = "spark.databricks.delta.skipRecordingEmptyCommits"
#: RESTORE refuses a version whose files VACUUM may have removed (delta-spark) (commands/restore.py).
RESTORE_ENFORCE_RETENTION = "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration"
#: DROP FEATURE's fast path (delta-spark) (commands/drop_feature.py).
FAST_DROP = "spark.databricks.delta.tableFeatures.fastDropFeature.enabled"
#: the fast DROP FEATURE deletionVectors writes DV tombstones (delta-spark) (commands/drop_feature.py).
GENERATE_DV_TOMBSTONES = "spark.databricks.delta.tableFeatures.fastDropFeature.generateDVTombstones.enabled"
#: most DV tombstones the fast DROP FEATURE writes (delta-spark) (commands/drop_feature.py).
DV_TOMBSTONE_COUNT_THRESHOLD = "spark.databricks.delta.tableFeatures.fastDropFeature.dvTombstoneCountThreshold"
#: VACUUM ignores RETAIN (delta-spark) (commands/vacuum.py).
VACUUM_RETENTION_WINDOW_IGNORE = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"
#: VACUUM LITE by default (delta-spark) (commands/vacuum.py).
VACUUM_LITE_DEFAULT = "spark.databricks.delta.vacuum.lite.enabled"
#: VACUUM START/END commits (delta-spark) (commands/vacuum.py).
VACUUM_LOGGING = "spark.databricks.delta.vacuum.logging.enabled"
#: VACUUM's parallel deletes (delta-spark) (commands/vacuum.py).
VACUUM_PARALLELISM = "spark.databricks.delta.vacuum.parallelDelete.parallelism"
#: schema evolution on for writes and MERGE (delta-spark) (commands/write_options.py).
AUTO_MERGE_CONF = "spark.databricks.delta.schema.autoMerge.enabled"
#: which widenings schema evolution applies on a typeWidening table: always (delta-spark 4.1+'s default),
#: same_family_type (4.0's behaviour) or never (delta-spark) (commands/writes/type_evolution.py).
AUTOMATIC_WIDENING_CONF = "spark.databricks.delta.typeWidening.allowAutomaticWidening"
#: commitInfo.userMetadata of the session's commits (delta-spark) (commands/write_options.py).
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
#: replaceWhere checks the written rows match its condition (delta-spark) (commands/write_options.py).
REPLACE_WHERE_CHECK_CONF = "spark.databricks.delta.replaceWhere.constraintCheck.enabled"
#: the read path: ``auto`` (native when the jar for this Spark loads), ``true``, ``false`` (commands/health.py).
NATIVE_SCAN = "spark.dvlake.scan.native"
#: reads of more files than this hand the native scan its listing as a file, not inline in the plan (spark/scan_listing.py).
INLINE_LISTING_MAX_FILES = "spark.dvlake.scan.inlineListingMaxFiles"
#: where those listing files go (a folder every executor can read); default ``<table>/_delta_log/_dvlake/scan``.
LISTING_DIR = "spark.dvlake.scan.listingDir"
#: UPDATE/MERGE casts follow ``spark.sql.ansi.enabled`` (delta-spark) (commands/store_assign.py).
FOLLOW_ANSI_CONF = "spark.databricks.delta.updateAndMergeCastingFollowsAnsiEnabledFlag"
#: UPDATE/MERGE resolve struct assignments by name (delta-spark) (commands/store_assign.py).
BY_NAME_CONF = "spark.databricks.delta.resolveMergeUpdateStructsByName.enabled"
#: Keeps Spark's full error text (plans, Java stacks, PySpark's JSON error records): ``errors.user_text``.
DEBUG_CONF = "spark.dvlake.debug"
#: Prefix of the session's table property defaults (delta-spark's ``…properties.defaults.<property>``).
SESSION_TABLE_DEFAULTS_PREFIX = "spark.databricks.delta.properties.defaults."
#: delta-spark's setting that lets a startingTimestamp after the last commit start the stream at the next version
#: (a change-feed batch read: read no changes) instead of failing with DELTA_TIMESTAMP_GREATER_THAN_COMMIT.
TIMESTAMP_OUT_OF_RANGE = "spark.databricks.delta.changeDataFeed.timestampOutOfRange.enabled"
#: ``Snapshot.load`` of a table's latest version goes through the process's snapshot cache, moved forward by the
#: commits after the cached version (log/snapshot_cache.py): on by default; ``0`` in the environment turns it off.
SNAPSHOT_CACHE_ENV = "DVLAKE_SNAPSHOT_CACHE"
#: The same switch as a session setting (default true; ``false`` turns the cache off for the driver's process),
#: read by the Spark faces when they meet a session (spark/session_switches.py).
SNAPSHOT_CACHE_CONF = "spark.dvlake.snapshotCache.enabled"
#: File rows (live files plus tombstones, over all tables) the snapshot cache keeps at most (default 2,000,000).
SNAPSHOT_CACHE_MAX_FILES_ENV = "DVLAKE_SNAPSHOT_CACHE_MAX_FILES"
