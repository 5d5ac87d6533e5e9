"""Optimistic transactions: stage actions against a snapshot, commit atomically, rebase on conflict.

A commit is the creation of ``_delta_log/<version>.json``; the storage layer makes that
create-if-absent, so of two writers racing for one version exactly one wins. The loser reads
the winning commits, applies Delta's conflict rules (``conflicts.py``), and either retries at
the next version or raises the delta-spark-named exception. A failure before the create leaves
the table exactly as it was (at most orphan data files, which VACUUM removes).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from dvlake._version import __version__
from dvlake.config import (
    APPEND_ONLY,
    checkpoint_interval,
    deleted_file_retention_ms,
    table_bool,
    table_isolation_level,
)
from dvlake.errors import (
    CorruptLogError,
    DeletionVectorsNotAllowedError,
    DeltaProtocolError,
    InvalidArgumentError,
    RowTrackingError,
)
from dvlake.log import features, row_tracking
from dvlake.log.actions import (
    Action,
    AddCDCFile,
    AddFile,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
    now_ms,
    serialize_actions,
)
from dvlake.log.checkpoint import build_checkpoint_table, write_checkpoint
from dvlake.log.replay import file_key, normalize_path, read_commit
from dvlake.log.segment import commit_file_name, list_log, log_path
from dvlake.log.snapshot import ICT_ENABLED, Snapshot
from dvlake.log.stats import parse_stats
from dvlake.storage.base import Storage, storage_for
from dvlake.storage.paths import join, normalize_table_root
from dvlake.txn.conflicts import FilePredicate, ReadSet, WinningCommit, check_conflicts

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 1000
ENGINE_INFO = f"dvlake/{__version__}"


class OptimisticTransaction:
    """One write to one table, started from a snapshot (or from nothing, to create a table)."""

    def __init__(self, table_root: str, snapshot: Snapshot | None, storage: Storage | None = None,
                 isolation_level: str | None = None, engine_info: str | None = None) -> None:
        self.table_root = normalize_table_root(table_root)
        self.storage = storage or (snapshot.storage if snapshot else storage_for(self.table_root))
        self.snapshot = snapshot
        self.read_version = snapshot.version if snapshot else -1
        #: the command's own level (OPTIMIZE: SnapshotIsolation); else the table's delta.isolationLevel at commit
        self.isolation_override = isolation_level
        self.engine_info = engine_info or ENGINE_INFO
        self.read_set = ReadSet()
        self.new_metadata: Metadata | None = None
        self.new_protocol: Protocol | None = None
        self.committed_version: int | None = None
        #: delta-spark's checkAddFileWithDeletionVectorStatsAreNotTightBounds: false for RESTORE and CLONE,
        #: which re-add files exactly as an older version had them.
        self.require_loose_dv_stats = True
        #: row tracking's high-water mark the next attempt assigns above (the read snapshot's, raised by winners)
        self._row_id_mark = row_tracking.MISSING_HIGH_WATER_MARK
        #: path -> (baseRowId, defaultRowCommitVersion) a winning backfill gave a file this transaction re-commits
        self._backfilled: dict[str, tuple[int | None, int | None]] = {}

    # -- what the transaction read ---------------------------------------------------------------
    @property
    def metadata(self) -> Metadata:
        if self.new_metadata is not None:
            return self.new_metadata
        if self.snapshot is None:
            raise InvalidArgumentError("a new table needs metadata: call update_metadata() first")
        return self.snapshot.metadata

    @property
    def protocol(self) -> Protocol:
        if self.new_protocol is not None:
            return self.new_protocol
        if self.snapshot is None:
            raise InvalidArgumentError("a new table needs a protocol: call update_protocol() first")
        return self.snapshot.protocol

    def read_whole_table(self) -> None:
        """This transaction's result depends on every file (e.g. a DELETE scanning all data)."""
        self.read_set.whole_table = True

    def read_predicate(self, predicate: FilePredicate) -> None:
        """This transaction's result depends on the files ``predicate`` accepts (a partition filter)."""
        self.read_set.predicates.append(predicate)

    def read_files(self, adds: Iterable[AddFile | dict[str, Any]]) -> None:
        """These exact files were read; a concurrent remove of any of them is a conflict."""
        for a in adds:
            self.read_set.paths.add(normalize_path(a.path if isinstance(a, AddFile) else a["path"]))

    def read_app_txn(self, app_id: str) -> int | None:
        """The last version committed by ``app_id`` (idempotent writes); registers the read."""
        self.read_set.app_ids.add(app_id)
        if self.snapshot and app_id in self.snapshot.txns:
            return self.snapshot.txns[app_id].version
        return None

    def isolation_level(self) -> str:
        """The level this commit runs under: the command's own, else ``delta.isolationLevel`` of the metadata it
        commits (so an ALTER that fixes an unknown value can commit, and one that sets an unknown value cannot)."""
        if self.isolation_override is not None:
            return self.isolation_override
        metadata = self.new_metadata or (self.snapshot.metadata if self.snapshot else None)
        return table_isolation_level(metadata.configuration if metadata else {})

    def update_metadata(self, metadata: Metadata) -> None:
        self.new_metadata = metadata

    def update_protocol(self, protocol: Protocol) -> None:
        self.new_protocol = protocol

    # -- commit ----------------------------------------------------------------------------------
    def commit(self, actions: Sequence[Action], operation: str, parameters: dict[str, Any] | None = None,
               metrics: dict[str, Any] | None = None, *, tags: dict[str, str] | None = None,
               user_metadata: str | None = None) -> int:
        """Write the commit; returns the version it landed at (``user_metadata``: commitInfo.userMetadata)."""
        if self.committed_version is not None:
            raise InvalidArgumentError("this transaction has already committed")
        actions = list(actions)
        if self.new_metadata is not None:  # a row-tracking table's hidden column names are set once, then kept
            self.new_metadata = row_tracking.with_column_names(
                self.protocol, self.snapshot.metadata if self.snapshot else None, self.new_metadata)
        self._validate(actions)
        head: list[Action] = []
        if self.new_protocol is not None and (self.snapshot is None or self.new_protocol != self.snapshot.protocol):
            head.append(self.new_protocol)
        if self.new_metadata is not None:
            head.append(self.new_metadata)
        assigns_row_ids = row_tracking.assigns(self.protocol, self.metadata)
        self._row_id_mark = (row_tracking.high_water_mark(self.snapshot.domains)
                             if self.snapshot is not None and assigns_row_ids else row_tracking.MISSING_HIGH_WATER_MARK)
        our_domains = {a.domain for a in actions if isinstance(a, DomainMetadata)}
        is_blind_append = (all(isinstance(a, (AddFile, AddCDCFile, Txn)) for a in actions)
                           and not self.read_set.whole_table and not self.read_set.predicates
                           and not self.read_set.paths and (self.new_metadata is None or self.snapshot is None))
        # a table's first commit only adds, whatever metadata it sets: delta-spark calls it a blind append (no file
        # action but adds, no read) and so do its streaming sink's first batch and its CREATE TABLE
        info: dict[str, Any] = {
            "timestamp": now_ms(),
            "operation": operation,
            "operationParameters": {k: _param(v) for k, v in (parameters or {}).items()},
        }
        if self.read_version >= 0:
            info["readVersion"] = self.read_version
        info.update({
            "isolationLevel": self.isolation_level(),
            "isBlindAppend": is_blind_append,
            "operationMetrics": {k: str(v) for k, v in (metrics or {}).items()},
            **({"userMetadata": user_metadata} if user_metadata is not None else {}),
            "engineInfo": self.engine_info,
            "txnId": str(uuid.uuid4()),
        })
        tags = dict(tags or {})
        if (operation in row_tracking.PRESERVING_OPERATIONS and self.snapshot is not None
                and row_tracking.is_enabled(self.snapshot.protocol, self.snapshot.metadata)):
            tags.setdefault(row_tracking.PRESERVED_TAG, "true")  # the command kept ids in the materialized columns
        if tags:
            info["tags"] = tags
        our_removed = {normalize_path(a.path) for a in actions if isinstance(a, RemoveFile)}
        attempt = self.read_version + 1
        for _ in range(MAX_ATTEMPTS):
            commit_info = dict(info)
            ict = self._in_commit_timestamp(attempt)
            if ict is not None:
                commit_info = {"inCommitTimestamp": ict, **commit_info}
            staged = head + self._with_row_ids(actions, attempt, assigns_row_ids)
            data = serialize_actions([CommitInfo(commit_info), *staged])
            path = join(log_path(self.table_root), commit_file_name(attempt))
            try:
                self.storage.write_if_absent(path, data)
            except FileExistsError:
                attempt = self._rebase(attempt, our_removed, our_domains)
                continue
            self.committed_version = attempt
            self._post_commit(attempt)
            return attempt
        raise DeltaProtocolError(f"gave up committing to {self.table_root} after {MAX_ATTEMPTS} attempts")

    def _with_row_ids(self, actions: list[Action], version: int, assigns_row_ids: bool) -> list[Action]:
        """The actions as committed at ``version``: row ids assigned above the current mark (row tracking).

        Redone from the unassigned actions on every attempt, so a retry gets ids above every winner's
        mark and its own version as ``defaultRowCommitVersion``.
        """
        if assigns_row_ids:
            if self._backfilled:
                actions = row_tracking.with_backfilled_ids(actions, self._backfilled)
            return row_tracking.assign(actions, self._row_id_mark, version, self.table_root)[0]
        if row_tracking.is_supported(self.protocol):  # supported but suspended
            return row_tracking.strip(actions)
        return actions

    def _rebase(self, attempt: int, our_removed: set[str], our_domains: set[str] | None = None) -> int:
        """Check every commit that won since our read version; return the next version to try."""
        listing = list_log(self.storage, self.table_root)
        latest = max(listing.commits)
        unlisted = [v for v in range(attempt, max(latest, attempt) + 1) if v not in listing.commits]
        if unlisted:  # the create said "exists" but the listing has no such commit: never retry it blindly
            path = join(log_path(self.table_root), commit_file_name(unlisted[0]))
            raise CorruptLogError(
                f"cannot commit to {self.table_root}: {path} exists but is not a readable commit in the log listing "
                "(a missing or unreadable commit in the middle of the log). Restore the file from a backup.")
        for v in range(attempt, latest + 1):
            winner = WinningCommit(v, read_commit(self.storage, listing.commits[v][0]))
            if self.snapshot is None:
                from dvlake.errors import TableAlreadyExistsError

                raise TableAlreadyExistsError(f"a table was created concurrently at {self.table_root}")
            check_conflicts(winner, self.read_set, our_removed, self.isolation_level(), self.new_metadata is not None,
                            our_domains or set())
            winner_mark = row_tracking.high_water_mark_in(winner.actions)
            if winner_mark is not None:  # our fresh ids go above the winner's
                self._row_id_mark = max(self._row_id_mark, winner_mark)
            self._backfilled.update(row_tracking.backfilled_ids(winner.operation, winner.actions))
            log.info("rebased over concurrent commit %s (%s)", v, winner.operation)
        return latest + 1

    def _in_commit_timestamp(self, version: int) -> int | None:
        if not table_bool(self.metadata.configuration, ICT_ENABLED):
            return None
        now = now_ms()
        if version > 0 and self.snapshot is not None:
            try:
                prev = self.snapshot.commit_timestamp(min(version - 1, self.snapshot.version))
                now = max(now, prev + 1)
            except Exception:  # noqa: BLE001 - the previous ICT is only a lower bound
                pass
        return now

    def _validate(self, actions: list[Action]) -> None:
        """Checks delta-spark makes before any commit (protocol, DVs, duplicates, append-only)."""
        protocol, metadata = self.protocol, self.metadata
        features.validate_protocol(protocol)
        features.check_can_write(protocol, metadata, self.table_root)
        if self.new_metadata is not None:
            from dvlake.log.symlink_manifest import check_manifest_property

            check_manifest_property(metadata, protocol, self.snapshot.dv_count() if self.snapshot else 0)
        from dvlake.uniform import compat

        if self.new_metadata is not None and self.snapshot is not None:
            compat.check_not_disabled(self.snapshot.metadata, metadata, self.table_root)
        if compat.relevant(metadata):
            if self.new_metadata is not None:
                live_dvs = self.snapshot.dv_count() if self.snapshot and features.dvs_supported(self.snapshot.protocol) else 0
                compat.check_metadata(metadata, features.writer_features(protocol), live_dvs, self.table_root)
            compat.check_actions(metadata, actions, self.table_root)
        self._check_row_tracking(actions, protocol, metadata)
        if metadata.format_provider != "parquet" and any(isinstance(a, AddFile) and a.deletion_vector for a in actions):
            raise DeltaProtocolError("deletion vectors are only allowed in Parquet tables")
        seen_adds: set[str] = set()
        seen_removes: set[str] = set()
        for a in actions:
            if isinstance(a, AddFile):
                key = file_key(a.path, a.deletion_vector.to_json() if a.deletion_vector else None)
                if key in seen_adds:
                    raise DeltaProtocolError(f"the commit adds {a.path} with the same deletion vector twice")
                seen_adds.add(key)
                if a.deletion_vector is not None and a.deletion_vector.cardinality > 0:
                    self._check_dv_add(a, protocol, metadata)
            elif isinstance(a, RemoveFile):
                key = file_key(a.path, a.deletion_vector.to_json() if a.deletion_vector else None)
                if key in seen_removes:
                    raise DeltaProtocolError(f"the commit removes {a.path} with the same deletion vector twice")
                seen_removes.add(key)
        if table_bool(metadata.configuration, APPEND_ONLY) and any(
                isinstance(a, RemoveFile) and a.data_change for a in actions):
            raise InvalidArgumentError(
                f"{self.table_root} is append-only (delta.appendOnly=true): deletes and updates are not allowed. "
                "Unset the property to allow them.")

    def _check_row_tracking(self, actions: list[Action], protocol: Protocol, metadata: Metadata) -> None:
        """Enabling row tracking promises ids on every live file: the files must have them by this commit."""
        row_tracking.is_suspended(metadata)  # raises on enabled + suspended
        if not row_tracking.is_enabled(protocol, metadata):
            return
        row_tracking.materialized_columns_or_raise(metadata, self.table_root)
        snap = self.snapshot
        if snap is None or row_tracking.is_enabled(snap.protocol, snap.metadata) or not snap.num_files:
            return
        import pyarrow.compute as pc

        files = snap.files
        lacking = pc.or_(pc.is_null(files.column("baseRowId")), pc.is_null(files.column("defaultRowCommitVersion")))
        paths = set(files.filter(lacking).column("path").to_pylist())
        paths -= {a.path for a in actions if isinstance(a, (AddFile, RemoveFile))}
        if paths:
            raise RowTrackingError(
                f"cannot set {row_tracking.ENABLE_KEY}=true on {self.table_root}: {len(paths)} live file(s) have no "
                f"baseRowId/defaultRowCommitVersion (e.g. {sorted(paths)[0]}). Enable it with ALTER TABLE … SET "
                "TBLPROPERTIES, which first re-commits those files with ids (the backfill).",
                error_class="DVLAKE_ROW_TRACKING_BACKFILL_REQUIRED")

    def _check_dv_add(self, add: AddFile, protocol: Protocol, metadata: Metadata) -> None:
        if not features.dvs_enabled(protocol, metadata):
            raise DeletionVectorsNotAllowedError(
                f"cannot add a deletion vector to {add.path}: deletion vectors "
                "are not enabled on this table. Set delta.enableDeletionVectors = true first.")
        stats = parse_stats(add.stats)
        if not stats or stats.get("numRecords") is None:
            raise DeltaProtocolError(f"{add.path} gets a deletion vector but its stats lack numRecords")
        if stats.get("tightBounds") is not False and self.require_loose_dv_stats:
            raise DeltaProtocolError(f"{add.path} gets a deletion vector but its stats do not say tightBounds: false")

    def _post_commit(self, version: int) -> None:
        """Write a checkpoint every ``delta.checkpointInterval`` commits; never fail the commit over it."""
        self._auto_manifest(version)
        self._uniform(version)
        interval = checkpoint_interval(self.metadata.configuration)
        if interval <= 0 or version == 0 or version % interval != 0:
            return
        try:
            checkpoint(self.table_root, version, self.storage)
        except Exception as exc:  # noqa: BLE001 - a checkpoint is an optimisation; the commit stands
            log.warning("commit %s succeeded but writing its checkpoint failed: %s", version, exc)
            return
        self._cleanup_logs()

    def _cleanup_logs(self) -> None:
        """After a checkpoint: remove log files older than delta.logRetentionDuration (never needed ones)."""
        from dvlake.log.cleanup import ENABLE_CLEANUP, cleanup_expired_logs

        if not table_bool(self.metadata.configuration, ENABLE_CLEANUP, True):
            return
        try:
            cleanup_expired_logs(self.storage, self.table_root, self.metadata.configuration)
        except Exception as exc:  # noqa: BLE001 - cleanup is housekeeping; the commit stands
            log.warning("log cleanup of %s failed: %s", self.table_root, exc)

    def _uniform(self, version: int) -> None:
        """UniForm (``delta.universalFormat.enabledFormats`` has iceberg): Iceberg metadata for this version.

        Conversion failures are logged inside ``after_commit``: the Delta commit has landed and stands.
        """
        from dvlake.uniform.convert import after_commit, iceberg_enabled

        if iceberg_enabled(self.metadata.configuration):
            after_commit(self.table_root, version, self.storage, self.metadata)

    def _auto_manifest(self, version: int) -> None:
        """Auto manifests (``delta.compatibility.symlinkFormatManifest.enabled``): rewritten after every commit."""
        from dvlake.log.symlink_manifest import AUTO_MANIFEST, write_manifests

        if table_bool(self.metadata.configuration, AUTO_MANIFEST):
            write_manifests(Snapshot.load(self.table_root, version=version, storage=self.storage))


def checkpoint(table_root: str, version: int | None = None, storage: Storage | None = None) -> str:
    """Write a classic checkpoint of ``version`` (default: latest) with unexpired tombstones."""
    snap = Snapshot.load(table_root, version=version, storage=storage)
    import pyarrow.compute as pc

    tombstones = snap.tombstones
    if tombstones.num_rows:
        horizon = now_ms() - deleted_file_retention_ms(snap.configuration)
        tombstones = tombstones.filter(pc.fill_null(pc.greater(tombstones.column("deletionTimestamp"), horizon), True))
    table = build_checkpoint_table(snap.protocol, snap.metadata, snap.files, tombstones, list(snap.txns.values()),
                                   list(snap.domains.values()))
    return write_checkpoint(snap.storage, snap.table_root, snap.version, table, snap.num_files)


def _param(value: Any) -> str:
    """operationParameters values are strings in delta-spark's commitInfo (JSON for lists)."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


