"""The one template of DELETE, UPDATE and MERGE: check → plan → read set → path → empty-commit rule → commit.

Each command only says what differs: ``prepare(snapshot)`` plans on one snapshot (conditions checked, files
chosen, the path taken) without touching a transaction, and ``execute(prepared, txn)`` does the Spark work of that
path and returns the actions and metrics. Everything around them is written here once, so no command can forget a
step: the write check before any planning, the files it read registered on the transaction (a concurrent remove
of one is a conflict), delta-spark's ``commitIfNeeded`` rule for a command that changed nothing, the commit, and
the retry on conflict plus post-commit work of ``dml.run_row_level``.

The shape follows the prepare/execute split of delta-rs's operations (a plan built from a snapshot, then executed
against it) in our own terms.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pyspark.sql import SparkSession

from dvlake.commands.common import SKIP_EMPTY_COMMITS_CONF, records_empty_commits
from dvlake.commands.dml.shared import Committed, run_row_level, use_dvs
from dvlake.commands.maintenance import auto_compact
from dvlake.log import features
from dvlake.log.actions import Action, AddFile, Metadata
from dvlake.log.condition import Condition
from dvlake.log.snapshot import Snapshot
from dvlake.spark.scan import ScanPlan
from dvlake.txn.transaction import OptimisticTransaction

#: The paths a row-level command takes (``Prepared.path``).
NOTHING = "nothing"                # no candidate file: nothing to read, nothing to change
PARTITION_ONLY = "partition-only"  # whole files chosen from metadata alone (no condition, or partition columns only)
WITH_DVS = "deletion-vectors"      # rows marked in deletion vectors, new rows written beside
COPY_ON_WRITE = "copy-on-write"    # touched files rewritten whole
INSERT_ONLY = "insert-only"        # MERGE with NOT MATCHED clauses only: no target file touched

D = TypeVar("D")


@dataclass(frozen=True)
class Prepared(Generic[D]):
    """What one attempt planned on ``snapshot``, before any row is read.

    ``candidates`` are the files the command may read or change (registered as read by the template);
    ``detail`` is the command's own plan (a bound condition, resolved assignments, a ``PreparedMerge``)."""

    snapshot: Snapshot
    plan: ScanPlan
    candidates: list[AddFile]
    path: str
    detail: D
    #: the metadata the commit writes (MERGE's schema evolution), None to keep the snapshot's
    new_metadata: Metadata | None = None
    #: ``operationParameters`` of the commit
    parameters: dict[str, Any] = field(default_factory=dict)
    #: whether the command's result depends on every file of the snapshot, not only the candidates (a DELETE whose
    #: condition holds a subquery that may read the target): all of them are then registered as read
    reads_every_file: bool = False


@dataclass
class Outcome:
    """What ``execute`` did: the actions to commit and the operationMetrics (completed by the template)."""

    actions: Sequence[Action]
    metrics: dict[str, Any]


class RowLevelCommand(Protocol[D]):
    """One row-level command: its name in the log, its plan and its execution."""

    spark: SparkSession
    operation: str
    #: whether a command elided for changing nothing still returns its metrics (MERGE) or ``{}`` (DELETE, UPDATE)
    reports_elided: bool

    def prepare(self, snapshot: Snapshot) -> Prepared[D]:
        """Check the command against ``snapshot`` and plan it (no data read, no transaction state)."""
        ...

    def execute(self, prepared: Prepared[D], txn: OptimisticTransaction) -> Outcome:
        """Do the Spark work of ``prepared.path``; return what to commit (nothing is committed here)."""
        ...

    def empty_metrics(self, outcome: Outcome) -> dict[str, Any]:
        """The metrics an empty commit records (when the session asks for empty commits to be recorded)."""
        ...


def choose_path(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, condition: Condition | None,
                dvs_session_key: str) -> str:
    """DELETE's and UPDATE's choice (delta-spark's): whole files where the condition decides per file from partition
    values alone, deletion vectors where the table and the command's session switch allow them, else copy-on-write."""
    if not plan.files:
        return NOTHING
    if condition is None or condition.references_only(set(snapshot.partition_columns)):
        return PARTITION_ONLY
    return WITH_DVS if use_dvs(spark, snapshot, dvs_session_key) else COPY_ON_WRITE


def candidates_of(snapshot: Snapshot, plan: ScanPlan) -> list[AddFile]:
    """The snapshot's add actions the plan reads, in the plan's order (built for those files only)."""
    return snapshot.add_files_at(plan.rows_indexes)


def begin(prepared: Prepared[Any], spark: SparkSession | None = None) -> OptimisticTransaction:
    """The transaction of one attempt, with what the command read registered: the candidate files (a concurrent
    remove or DV replacement of one conflicts) and the whole table (a concurrent append the condition could
    match conflicts), or every file when the result depends on them all, and the evolved metadata if any.
    ``spark`` goes to the post-commit hooks (auto-compaction)."""
    snapshot = prepared.snapshot
    txn = OptimisticTransaction(snapshot.table_root, snapshot)
    if spark is not None:
        txn.hook_context[auto_compact.SESSION] = spark
    txn.read_whole_table()
    txn.read_files(snapshot.add_files() if prepared.reads_every_file else prepared.candidates)
    if prepared.new_metadata is not None:
        txn.update_metadata(prepared.new_metadata)
    return txn


def attempt(command: RowLevelCommand[Any], snapshot: Snapshot) -> Committed:
    """One attempt at ``snapshot`` (raises the concurrency exceptions instead of retrying)."""
    started = time.monotonic()
    features.check_can_write(snapshot.protocol, snapshot.metadata, snapshot.table_root)
    prepared = command.prepare(snapshot)
    txn = begin(prepared, command.spark)
    outcome = command.execute(prepared, txn)
    metrics = outcome.metrics
    if not outcome.actions and prepared.new_metadata is None:
        if not records_empty_commits(command.spark.conf.get(SKIP_EMPTY_COMMITS_CONF, None)):
            # delta-spark's commitIfNeeded elides a command that changed nothing
            if not command.reports_elided:
                return Committed(None, {})
            metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
            return Committed(None, metrics)
        metrics = command.empty_metrics(outcome)
    metrics["executionTimeMs"] = int((time.monotonic() - started) * 1000)
    return Committed(txn.commit(list(outcome.actions), command.operation, prepared.parameters, metrics), metrics)


def run(command: RowLevelCommand[Any], root: str) -> dict[str, Any]:
    """Run ``command`` on the latest snapshot of ``root``: retried on conflict, post-commit work once after."""
    return run_row_level(command.spark, root, command.operation, lambda snapshot: attempt(command, snapshot))
