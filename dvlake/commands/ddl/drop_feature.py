"""ALTER TABLE … DROP FEATURE deletionVectors | typeWidening | checkConstraints | vacuumProtocolCheck [TRUNCATE HISTORY], as
delta-spark 4.x.

``typeWidening`` takes the same path as ``deletionVectors`` below with its own pre-downgrade
(``drop_type_widening.py``: unset ``delta.enableTypeWidening``, rewrite the files that hold an older type, remove
``delta.typeChanges``); its history is "in use" while a retained version's schema records type changes.

``checkConstraints`` is a writer feature: readers never need it, so there is no history to protect and
no pre-downgrade work. As delta-spark's ``CheckConstraintsPreDowngradeTableFeatureCommand``, the drop is
refused (DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE, naming them) while the table has CHECK constraints:
dropping a feature changes how a table is stored, never what it means, so the user drops the constraints
first. Without constraints it is the single ``DROP FEATURE`` commit (TRUNCATE HISTORY is refused for it).

The rest of this module is ``deletionVectors``: give a DV table back to readers that predate DVs.

A reader that does not know deletion vectors refuses a table whose protocol lists them, and must
never be handed one that still uses them (it would return deleted rows). So, as delta-spark 4.x:

1. **Pre-downgrade** (``remove_dv_traces``): unset ``delta.enableDeletionVectors`` first, so no writer
   can add a DV any more (a concurrent one conflicts on the metadata change), then REORG … APPLY
   (PURGE) rewrites every file that has one, and runs once more (a no-op when clean) to catch DVs
   committed in between. Finally **DV tombstones**: a path-only ``remove`` (dataChange=false) for each
   on-disk DV file still referenced by a tombstone inside ``delta.deletedFileRetentionDuration``, so that
   a VACUUM by a client that does not know DVs (it only protects tombstone *paths*) keeps the DV files
   that time travel inside the retention still needs (delta-io/delta#4062).
2. **Fast path** (default): three barrier checkpoints, each on an empty commit, so that readers find a
   checkpoint after the last DV; re-validation; one ``DROP FEATURE`` commit whose protocol drops
   ``deletionVectors`` and adds the writer feature ``checkpointProtection``, normalized (the reader
   version falls to 1 when no reader feature is left), with
   ``delta.requireCheckpointProtectionBeforeVersion`` = that commit's version; then a checkpoint of it.
   Log cleanup (``log/cleanup.py``) never truncates the DV-era versions piecemeal, so every version a
   reader can start from says truthfully whether it needs DVs.
3. **TRUNCATE HISTORY** (or ``…fastDropFeature.enabled=false``): the protocol may only drop the feature
   once no retained version uses it. Run 1 cleans the current version, writes an empty commit and a
   checkpoint, and fails with DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD. A later run cleans up
   the log with ``delta.dropFeatureTruncateHistory.retentionDuration`` (24 hours; without TRUNCATE
   HISTORY ``delta.logRetentionDuration``) at minute granularity; if a retained version still uses DVs
   it fails with DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST, else it commits the plain downgrade.

Every step is its own commit, so a failure anywhere leaves the table readable at its last version
(with fewer DVs, never with wrong rows).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pyarrow.compute as pc
from pyspark.sql import SparkSession

from dvlake.commands.ddl.drop_type_widening import files_to_rewrite, metadata_uses, remove_type_widening_traces
from dvlake.commands.ddl.drop_type_widening import traces_left as type_widening_traces
from dvlake.commands.ddl.properties import unset_properties
from dvlake.commands.ddl.protocol import KNOWN_FEATURES, READER_WRITER_FEATURES
from dvlake.commands.maintenance.reorg import purge
from dvlake.config import DV_TOMBSTONE_COUNT_THRESHOLD as DV_TOMBSTONE_COUNT_THRESHOLD
from dvlake.config import ENABLE_DVS, deleted_file_retention_ms, parse_interval_ms, table_bool
from dvlake.config import FAST_DROP as FAST_DROP
from dvlake.config import GENERATE_DV_TOMBSTONES as GENERATE_DV_TOMBSTONES
from dvlake.errors import DeltaAnalysisException, DeltaConcurrentModificationException, DeltaTableFeatureException
from dvlake.log import constraints, features, type_widening
from dvlake.log.actions import Protocol, RemoveFile, now_ms
from dvlake.log.cleanup import CHECKPOINT_PROTECTION, MINUTE_MS, cleanup_expired_logs, log_retention_ms
from dvlake.log.protocol_ops import drop_feature_protocol
from dvlake.log.replay import normalize_path, read_commit
from dvlake.log.segment import list_log
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction, checkpoint

log = logging.getLogger(__name__)

TRUNCATE_HISTORY_RETENTION = "delta.dropFeatureTruncateHistory.retentionDuration"
DEFAULT_TRUNCATE_HISTORY_RETENTION = "interval 24 hours"
CHECKPOINT_PROTECTION_FEATURE = "checkpointProtection"
BARRIER_CHECKPOINTS = 3
MAX_ATTEMPTS = 10

#: A reader-writer feature that only asks VACUUM to check the protocol: nothing in a snapshot or an action uses it
#: (delta-spark's ``validateDropInvariants`` is always true and ``actionUsesFeature`` false), so it has no
#: pre-downgrade work, no traces and no history; only the protocol changes (fast drop: with checkpointProtection).
VACUUM_PROTOCOL_CHECK = "vacuumProtocolCheck"
#: Features delta-spark can remove; the others (legacy writer features, timestampNtz, …) never can.
REMOVABLE_FEATURES = frozenset({
    features.DELETION_VECTORS, features.COLUMN_MAPPING, "checkConstraints", "typeWidening", "typeWidening-preview",
    "v2Checkpoint", "vacuumProtocolCheck", "inCommitTimestamp", "checkpointProtection", "allowColumnDefaults",
    "coordinatedCommits-preview", "catalogOwned-preview", "rowTracking",
})
#: The removable features dvlake knows how to remove (the rest are refused before anything is written).
DROPPABLE_BY_DVLAKE = frozenset({features.DELETION_VECTORS, constraints.FEATURE, features.TYPE_WIDENING,
                                 features.TYPE_WIDENING_PREVIEW, VACUUM_PROTOCOL_CHECK})
#: reader-writer features whose traces are widened types (drop_type_widening.py), not DVs
_TYPE_WIDENING = frozenset({features.TYPE_WIDENING, features.TYPE_WIDENING_PREVIEW})
#: feature → features that require it (delta-spark's ``requiredFeatures``, inverted); those must be dropped first.
DEPENDENT_FEATURES: dict[str, frozenset[str]] = {
    "domainMetadata": frozenset({"rowTracking", "clustering"}),
    features.DELETION_VECTORS: frozenset({"adaptiveMetadata-preview"}),
}


@dataclass(frozen=True)
class DropFeatureOutcome:
    """What a successful DROP FEATURE committed: the version of the ``DROP FEATURE`` commit and the new protocol."""

    version: int
    protocol: Protocol
    truncate_history: bool


# -- checks that need no Spark ------------------------------------------------------------------------


def resolve_feature(protocol: Protocol, feature_name: str, truncate_history: bool) -> str:
    """The canonical feature name to drop, or the DeltaTableFeatureException delta-spark raises for the request."""
    if feature_name.lower().startswith("delta."):
        raise DeltaTableFeatureException(
            f"{feature_name!r} is a table property, not a table feature. DROP FEATURE takes a feature name, e.g. "
            f"'{features.DELETION_VECTORS}'; to stop new deletion vectors only, UNSET TBLPROPERTIES ({ENABLE_DVS}).",
            error_class="DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY")
    by_lower = {f.lower(): f for f in KNOWN_FEATURES}
    name = by_lower.get(feature_name.lower())
    if name is None:
        raise DeltaTableFeatureException(
            f"cannot drop {feature_name!r}: it is not a table feature dvlake knows (known: {sorted(KNOWN_FEATURES)}).",
            error_class="DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE")
    present = features.reader_features(protocol) | features.writer_features(protocol)
    dependents = sorted(DEPENDENT_FEATURES.get(name, frozenset()) & present)
    writer_only = name not in READER_WRITER_FEATURES and name != CHECKPOINT_PROTECTION_FEATURE
    # delta-spark's checks in its order, as (broken, error class, message): the first broken one is raised
    rules = [
        (name not in REMOVABLE_FEATURES, "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE",
         f"the table feature {name!r} cannot be dropped from a table's protocol (it is not removable). Create a new "
         "table without it and copy the data if it must go."),
        (name not in present, "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT",
         f"cannot drop {name!r}: the table's protocol does not have it (it has {sorted(present) or 'no features'})."),
        (name == CHECKPOINT_PROTECTION_FEATURE and not truncate_history,
         "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION",
         f"{name!r} guards the history of an earlier fast DROP FEATURE: it can only be dropped together with the "
         "history it protects, i.e. with TRUNCATE HISTORY."),
        (truncate_history and writer_only, "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED",
         f"{name!r} is a writer-only feature: it is dropped without TRUNCATE HISTORY (only reader-writer features "
         "need the history truncated). Run the command again without TRUNCATE HISTORY."),
        (bool(dependents), "DELTA_FEATURE_DROP_DEPENDENT_FEATURE",
         f"cannot drop {name!r}: the table's features {dependents} require it. Drop those first."),
        (name not in DROPPABLE_BY_DVLAKE, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE",
         f"dropping {name!r} is not supported by dvlake (it drops {sorted(DROPPABLE_BY_DVLAKE)}); drop it with "
         "delta-spark."),
    ]
    for broken, error_class, message in rules:
        if broken:
            raise DeltaTableFeatureException(message, error_class=error_class)
    return name


def live_dv_count(snapshot: Snapshot) -> int:
    """How many live files carry a deletion vector descriptor (any cardinality)."""
    if not snapshot.num_files:
        return 0
    storage_type = pc.struct_field(snapshot.files.column("deletionVector"), "storageType")
    return int(pc.sum(pc.is_valid(storage_type)).as_py() or 0)


def dvs_removed(snapshot: Snapshot) -> bool:
    """delta-spark's ``validateRemoval``: no writer may add DVs (property not on) and no live file has one."""
    return not features.dvs_enabled(snapshot.protocol, snapshot.metadata) and live_dv_count(snapshot) == 0


def check_constraint_names(snapshot: Snapshot) -> list[str]:
    """The CHECK constraints the table has (delta-spark's ``getCheckConstraintNames``: table properties only)."""
    return [check.name for check in constraints.check_constraints(snapshot.metadata)]


def refuse_while_constrained(snapshot: Snapshot) -> None:
    """delta-spark's pre-downgrade for ``checkConstraints``: refuse, rather than drop the user's constraints."""
    names = check_constraint_names(snapshot)
    if names:
        listed = ", ".join(f"`{n}`" for n in names)
        raise DeltaAnalysisException(
            f"Cannot drop the CHECK constraints table feature.\nThe following constraints must be dropped first: {listed}. "
            f"Run ALTER TABLE delta.`{snapshot.table_root}` DROP CONSTRAINT <name> for each, then DROP FEATURE again.",
            error_class="DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE")


def _action_uses_dvs(line: dict[str, Any]) -> bool:
    """delta-spark's ``actionUsesFeature`` on one JSON action: metadata with DVs on, or a file action with a DV."""
    meta = line.get("metaData")
    if meta is not None:
        return table_bool(meta.get("configuration") or {}, ENABLE_DVS)
    for key in ("add", "remove", "cdc"):
        action = line.get(key)
        if action is not None and action.get("deletionVector"):
            return True
    return False


def history_uses_dvs(snapshot: Snapshot, name: str = features.DELETION_VECTORS) -> bool:
    """Whether a version the log can still reconstruct uses DVs, or type widening when ``name`` is it (delta-spark's
    ``historyContainsFeature``).

    The snapshot at the earliest checkpoint is checked without its tombstones (they are irrelevant to
    readers), then every commit file still in the log up to ``snapshot.version``.
    """
    if name == VACUUM_PROTOCOL_CHECK:
        return False  # no action uses it
    listing = list_log(snapshot.storage, snapshot.table_root)
    earliest = listing.checkpoints[0].version if listing.checkpoints else 0
    if earliest <= snapshot.version:
        base = Snapshot.load(snapshot.table_root, version=earliest, storage=snapshot.storage)
        if name in _TYPE_WIDENING:
            if type_widening.type_changes(base.schema):
                return True
        elif table_bool(base.configuration, ENABLE_DVS) or live_dv_count(base) > 0:
            return True
    uses = _action_uses_dvs if name not in _TYPE_WIDENING else \
        (lambda line: "metaData" in line and metadata_uses(line["metaData"]))
    for version in sorted(v for v in listing.commits if v <= snapshot.version):
        if any(uses(line) for line in read_commit(snapshot.storage, listing.commits[version][0])):
            return True
    return False


def _dv_file_path(storage_type: str, path_or_inline_dv: str, descriptor: Any) -> str:
    """The path a DV tombstone names: the URL-encoded table-relative path (``u``) or the absolute URI (``p``)."""
    if storage_type == "u":
        return quote(descriptor.relative_path(), safe="/")
    return path_or_inline_dv


def dv_tombstones(snapshot: Snapshot, now: int) -> list[RemoveFile]:
    """One path-only ``remove`` per on-disk DV file that an unexpired tombstone references and no tombstone names yet."""
    from dvlake.dv.descriptor import DeletionVectorDescriptor

    horizon = now - deleted_file_retention_ms(snapshot.configuration)
    named: set[str] = set()
    wanted: dict[str, str] = {}
    for row in snapshot.tombstones.select(["path", "deletionTimestamp", "deletionVector"]).to_pylist():
        ts = row["deletionTimestamp"]
        if ts is not None and ts <= horizon:
            continue  # expired: VACUUM may delete its files anyway
        dv = row["deletionVector"]
        if not dv or dv.get("storageType") is None:
            named.add(normalize_path(row["path"]))  # a data file or an earlier DV tombstone (they look alike)
        elif dv["storageType"] != "i":
            descriptor = DeletionVectorDescriptor.from_json({k: v for k, v in dv.items() if v is not None})
            path = _dv_file_path(dv["storageType"], dv["pathOrInlineDv"], descriptor)
            wanted.setdefault(normalize_path(path), path)
    return [RemoveFile(path=path, deletion_timestamp=now, data_change=False)
            for key, path in sorted(wanted.items()) if key not in named]


# -- the command ----------------------------------------------------------------------------------------


def _session_bool(spark: SparkSession, key: str, default: bool) -> bool:
    value = spark.conf.get(key, None)
    return default if value is None else str(value).strip().lower() == "true"


def commit_dv_tombstones(spark: SparkSession, root: str) -> int | None:
    """Commit the DV tombstones (operation ``Deletion Vector Tombstones``); None when none is missing."""
    snapshot = Snapshot.load(root)
    tombstones = dv_tombstones(snapshot, now_ms())
    if not tombstones:
        return None
    threshold = int(spark.conf.get(DV_TOMBSTONE_COUNT_THRESHOLD, None) or 10_000)
    metrics = {"dvTombstonesWithinRetentionPeriod": len(tombstones)} if len(tombstones) > threshold else None
    return OptimisticTransaction(root, snapshot).commit(tombstones, "Deletion Vector Tombstones", {}, metrics)


def remove_dv_traces(spark: SparkSession, root: str, generate_tombstones: bool = True) -> bool:
    """The pre-downgrade: unset the property, PURGE (twice), DV tombstones; True when the table still used DVs."""
    traces = not dvs_removed(Snapshot.load(root))
    if traces:
        unset_properties(root, [ENABLE_DVS], if_exists=True)
        purge(spark, root)
    purge(spark, root)  # no commit when nothing is left; catches DVs committed before the unset took effect
    if generate_tombstones:
        commit_dv_tombstones(spark, root)
    return traces


def _empty_commit_and_checkpoint(root: str) -> int:
    version = OptimisticTransaction(root, Snapshot.load(root)).commit([], "Empty Commit")
    try:
        checkpoint(root, version)
    except Exception as exc:  # noqa: BLE001 - any failure to write it means the barrier is missing
        raise DeltaTableFeatureException(
            f"could not write the checkpoint of version {version} of {root} that DROP FEATURE needs before it changes the "
            f"protocol ({exc}). Nothing was dropped; fix the cause and run the command again.",
            error_class="DELTA_FEATURE_DROP_CHECKPOINT_FAILED") from exc
    return version


class _LostRace(Exception):
    """Another commit took the version the DROP FEATURE commit was prepared for."""


class _PinnedTransaction(OptimisticTransaction):
    """A transaction that never rebases: its metadata names its own version, so a lost race means prepare again."""

    def _rebase(self, attempt: int, our_removed: set[str], our_domains: set[str] | None = None) -> int:
        raise _LostRace(attempt)


def _traces_left(snapshot: Snapshot, name: str) -> str | None:
    """What in ``snapshot`` still uses the feature (delta-spark's ``validateDropInvariants`` failing), None when clean."""
    if name == constraints.FEATURE:
        names = check_constraint_names(snapshot)
        return f"added the CHECK constraint(s) {names}" if names else None
    if name == VACUUM_PROTOCOL_CHECK:
        return None
    if name in _TYPE_WIDENING:
        left = type_widening_traces(snapshot)
        if left is None and files_to_rewrite(snapshot):
            left = "wrote files with an older type of a widened column"
        return left
    if not dvs_removed(snapshot):
        return (f"enabled deletion vectors again or added some (version {snapshot.version} has "
                f"{live_dv_count(snapshot)} live file(s) with a DV)")
    return None


def _revalidate(snapshot: Snapshot, name: str) -> None:
    left = _traces_left(snapshot, name)
    if left is not None:
        raise DeltaTableFeatureException(
            f"cannot drop {name!r} from {snapshot.table_root}: a concurrent commit {left}. Nothing was "
            "dropped; run the command again.", error_class="DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL")


def _commit_downgrade(root: str, name: str, truncate_history: bool, protect: bool) -> DropFeatureOutcome:
    """The ``DROP FEATURE`` commit, re-validated on the newest snapshot every time another commit wins the race."""
    for _ in range(MAX_ATTEMPTS):
        snapshot = Snapshot.load(root)
        _revalidate(snapshot, name)
        resolve_feature(snapshot.protocol, name, False)  # a concurrent DROP FEATURE may have won
        protocol = drop_feature_protocol(snapshot.protocol, name, (CHECKPOINT_PROTECTION_FEATURE,) if protect else ())
        txn = _PinnedTransaction(root, snapshot)
        txn.update_protocol(protocol)
        # delta-spark's downgrade commit always carries the metadata (the feature's properties removed: none for
        # these two), so a concurrent writer's commit conflicts with it
        metadata = snapshot.metadata
        if protect:
            metadata = metadata.with_configuration(**{CHECKPOINT_PROTECTION: str(snapshot.version + 1)})
        txn.update_metadata(metadata)
        try:
            version = txn.commit([], "DROP FEATURE", {"featureName": name, "truncateHistory": truncate_history})
        except _LostRace:
            log.info("DROP FEATURE %s on %s lost a commit race; re-validating on the new version", name, root)
            continue
        return DropFeatureOutcome(version, protocol, truncate_history)
    raise DeltaConcurrentModificationException(
        f"DROP FEATURE {name} on {root} lost the commit race {MAX_ATTEMPTS} times to concurrent writers; run it again "
        "when the table is quieter.")


def _truncate_retention_ms(configuration: dict[str, str], truncate_history: bool) -> tuple[int, str]:
    if truncate_history:
        text = configuration.get(TRUNCATE_HISTORY_RETENTION, DEFAULT_TRUNCATE_HISTORY_RETENTION)
        return parse_interval_ms(text), f"{TRUNCATE_HISTORY_RETENTION} = {text}"
    text = configuration.get("delta.logRetentionDuration", "interval 30 days")
    return log_retention_ms(configuration), f"delta.logRetentionDuration = {text}"


def drop_feature(spark: SparkSession, path: str, feature_name: str, truncate_history: bool = False) -> DropFeatureOutcome:
    """ALTER TABLE ``path`` DROP FEATURE ``feature_name`` [TRUNCATE HISTORY]; returns the ``DROP FEATURE`` commit.

    Raises:
        DeltaTableFeatureException: with delta-spark's DELTA_FEATURE_DROP_* error class; on the TRUNCATE HISTORY
            path also as the expected first step (…WAIT_FOR_RETENTION_PERIOD) and while retained history still
            uses the feature (…HISTORICAL_VERSIONS_EXIST).
        DeltaAnalysisException: DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE when dropping ``checkConstraints`` from
            a table that still has CHECK constraints (nothing is committed).
    """
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    name = resolve_feature(snapshot.protocol, feature_name, truncate_history)
    if name == constraints.FEATURE:  # a writer feature: the pre-downgrade check, then the plain downgrade commit
        refuse_while_constrained(snapshot)
        return _commit_downgrade(root, name, truncate_history=False, protect=False)
    fast = not truncate_history and _session_bool(spark, FAST_DROP, True)
    # delta-spark writes DV tombstones on the TRUNCATE HISTORY path too (a later fast drop relies on them)
    if name == VACUUM_PROTOCOL_CHECK:  # nothing to clean up before the protocol changes
        made_changes = False
    elif name in _TYPE_WIDENING:  # unset the property, rewrite files holding older types, drop delta.typeChanges
        made_changes = remove_type_widening_traces(spark, root)
    else:
        made_changes = remove_dv_traces(spark, root, _session_bool(spark, GENERATE_DV_TOMBSTONES,
                                                                   _session_bool(spark, FAST_DROP, True)))
    if fast:
        for _ in range(BARRIER_CHECKPOINTS):
            _empty_commit_and_checkpoint(root)
        outcome = _commit_downgrade(root, name, truncate_history=False, protect=True)
        try:
            checkpoint(root, outcome.version)
        except Exception as exc:  # noqa: BLE001 - the drop is committed; a later checkpoint will do
            log.warning("DROP FEATURE committed version %s of %s but its checkpoint failed: %s", outcome.version, root, exc)
        return outcome

    _empty_commit_and_checkpoint(root)  # a checkpoint free of DVs for the history truncation to cut at
    retention_ms, setting = _truncate_retention_ms(snapshot.configuration, truncate_history)
    if made_changes:
        raise DeltaTableFeatureException(
            f"dropping {name!r} from {root} was partially successful: the current version no longer uses it, but "
            f"older versions still do, and the protocol keeps the feature until they have expired. Run the same "
            f"command again after {setting} has passed.", error_class="DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD")
    current = Snapshot.load(root)
    _revalidate(current, name)
    cleanup_expired_logs(current.storage, root, current.configuration, retention_ms=retention_ms,
                         granularity_ms=MINUTE_MS)
    if history_uses_dvs(current, name):
        raise DeltaTableFeatureException(
            f"cannot drop {name!r} from {root} yet: versions still kept in the log use it. They expire after "
            f"{setting} (counted from when they were committed); run the command again then.",
            error_class="DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST")
    return _commit_downgrade(root, name, truncate_history=True, protect=False)
