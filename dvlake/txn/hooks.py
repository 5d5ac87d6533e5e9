"""The one ordered list of work that follows a successful commit.

After a commit lands, the table may need more files that are not part of it: the symlink manifest, UniForm's
Iceberg metadata, a checkpoint (then log cleanup), and after a DML command auto-compaction. Each is a hook here,
run in list order by ``OptimisticTransaction`` right after its commit, which has landed and stands whatever a
hook does. The Spark-free ones are registered below; a layer above registers its own through
``register`` (auto-compaction needs Spark: ``commands/auto_compact.py``), so nothing here imports upwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc

from dvlake.config import checkpoint_interval, deleted_file_retention_ms, table_bool
from dvlake.log import snapshot_cache
from dvlake.log.actions import Metadata, now_ms
from dvlake.log.checkpoint import build_checkpoint_table, classic_checkpoint_path, write_checkpoint
from dvlake.log.cleanup import ENABLE_CLEANUP, cleanup_expired_logs
from dvlake.log.snapshot import Snapshot
from dvlake.log.symlink_manifest import AUTO_MANIFEST, write_manifests
from dvlake.storage.base import Storage
from dvlake.uniform.convert import after_commit, iceberg_enabled

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AfterCommit:
    """What a hook learns of the commit: where, which version, the metadata it committed, the operation, and the
    context the committing command handed its transaction (``OptimisticTransaction.hook_context``, e.g. the
    Spark session of a DML command)."""

    table_root: str
    version: int
    storage: Storage
    metadata: Metadata
    operation: str
    context: dict[str, Any] = field(default_factory=dict)


Hook = Callable[[AfterCommit], None]

#: (name, hook) in the order they run.
_HOOKS: list[tuple[str, Hook]] = []


def register(name: str, hook: Hook) -> None:
    """Append ``hook`` to the list (a name registered again keeps its place: re-importing a module is harmless)."""
    for i, (existing, _) in enumerate(_HOOKS):
        if existing == name:
            _HOOKS[i] = (name, hook)
            return
    _HOOKS.append((name, hook))


def names() -> list[str]:
    """The hooks' names, in the order they run."""
    return [name for name, _ in _HOOKS]


def run(event: AfterCommit) -> None:
    """Run every hook in order. Each decides what its failure means: a checkpoint, log cleanup, UniForm and
    auto-compaction log theirs and let the commit stand; an auto manifest that cannot be written raises (as
    delta-spark's post-commit hook does), after the commit has landed."""
    for _, hook in list(_HOOKS):
        hook(event)


def _manifest(event: AfterCommit) -> None:
    """Auto manifests (``delta.compatibility.symlinkFormatManifest.enabled``): rewritten after every commit."""
    if table_bool(event.metadata.configuration, AUTO_MANIFEST):
        write_manifests(_snapshot_at(event.table_root, event.version, event.storage))


def _uniform(event: AfterCommit) -> None:
    """UniForm (``delta.universalFormat.enabledFormats`` has iceberg): Iceberg metadata for this version (its
    failures are logged inside ``after_commit``)."""
    if iceberg_enabled(event.metadata.configuration):
        after_commit(event.table_root, event.version, event.storage, event.metadata)


def _checkpoint(event: AfterCommit) -> None:
    """A checkpoint every ``delta.checkpointInterval`` commits, then log cleanup (only after a checkpoint, which
    the older log files are then no longer needed for)."""
    conf = event.metadata.configuration
    interval = checkpoint_interval(conf)
    if interval <= 0 or event.version == 0 or event.version % interval != 0:
        return
    try:
        checkpoint(event.table_root, event.version, event.storage)
    except Exception as exc:  # noqa: BLE001 - a checkpoint is an optimisation; the commit stands
        log.warning("commit %s succeeded but writing its checkpoint failed: %s", event.version, exc)
        return
    if not table_bool(conf, ENABLE_CLEANUP, True):
        return
    try:
        cleanup_expired_logs(event.storage, event.table_root, conf)
    except Exception as exc:  # noqa: BLE001 - cleanup is housekeeping; the commit stands
        log.warning("log cleanup of %s failed: %s", event.table_root, exc)


def checkpoint(table_root: str, version: int | None = None, storage: Storage | None = None) -> str:
    """Write a classic checkpoint of ``version`` (default: latest) with unexpired tombstones."""
    snap = _snapshot_at(table_root, version, storage)
    tombstones = snap.tombstones
    if tombstones.num_rows:
        horizon = now_ms() - deleted_file_retention_ms(snap.configuration)
        tombstones = tombstones.filter(pc.fill_null(pc.greater(tombstones.column("deletionTimestamp"), horizon), True))
    table = build_checkpoint_table(snap.protocol, snap.metadata, snap.files, tombstones, list(snap.txns.values()),
                                   list(snap.domains.values()))
    if write_checkpoint(snap.storage, snap.table_root, snap.version, table, snap.num_files):
        # the cached state now stands as read from this checkpoint: the next load need not read it back
        snapshot_cache.SHARED.adopt_checkpoint(snap.table_root, snap.storage, snap.state, tombstones)
    return classic_checkpoint_path(snap.table_root, snap.version)


def _snapshot_at(table_root: str, version: int | None, storage: Storage | None) -> Snapshot:
    """The snapshot of ``version``: the cached latest when it is that version (a post-commit checkpoint of the
    commit just made: no replay of the whole log), else a replay to it."""
    if version is not None and snapshot_cache.enabled():
        latest = Snapshot.load(table_root, storage=storage)
        if latest.version == version:
            return latest
    return Snapshot.load(table_root, version=version, storage=storage)


register("manifest", _manifest)
register("uniform", _uniform)
register("checkpoint", _checkpoint)
