"""Delta's conflict rules between this transaction and commits that won the race.

Mirrors delta-spark's ConflictChecker under WriteSerializable (its default): a winner's
protocol or metadata change always conflicts; its data-changing appends conflict when they
fall in what we read (blind appends do not, except under Serializable); its removes conflict
with files we read or also remove — and a DV replacement *is* a remove of (path, old DV), so two
writers that both rewrite the DV of one file collide here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dvlake.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    MetadataChangedException,
    ProtocolChangedException,
)
from dvlake.log.replay import normalize_path
from dvlake.log.row_tracking import DOMAIN as ROW_TRACKING_DOMAIN

#: A read predicate: given an add action's JSON dict, could this file hold rows we read?
FilePredicate = Callable[[dict[str, Any]], bool]

RERUN = "Re-run the operation: it will start from the new table version."


@dataclass
class ReadSet:
    """What a transaction read, to judge whether a concurrent commit invalidates it."""

    whole_table: bool = False
    predicates: list[FilePredicate] = field(default_factory=list)
    paths: set[str] = field(default_factory=set)
    app_ids: set[str] = field(default_factory=set)

    def covers(self, add: dict[str, Any]) -> bool:
        return self.whole_table or any(p(add) for p in self.predicates)


@dataclass
class WinningCommit:
    """The parts of a concurrent commit that matter for conflicts."""

    version: int
    actions: list[dict[str, Any]]

    def of(self, key: str) -> list[dict[str, Any]]:
        return [a[key] for a in self.actions if a.get(key) is not None]

    @property
    def is_blind_append(self) -> bool:
        infos = self.of("commitInfo")
        return bool(infos and infos[0].get("isBlindAppend"))

    @property
    def operation(self) -> str:
        infos = self.of("commitInfo")
        return str(infos[0].get("operation", "?")) if infos else "?"


def check_conflicts(winner: WinningCommit, read: ReadSet, our_removed_paths: set[str], isolation: str,
                    our_changes_metadata: bool, our_domains: set[str] | None = None) -> None:
    """Raise the delta-spark-named exception if ``winner`` invalidates this transaction.

    ``our_domains``: the metadata domains this transaction sets; the winner setting one of them is a
    conflict, except row tracking's high-water mark, which the retry recomputes above the winner's.
    """
    where = f"version {winner.version} ({winner.operation})"
    if winner.of("protocol"):
        raise ProtocolChangedException(
            f"The protocol of the table was changed by a concurrent commit at {where}. {RERUN}")
    if winner.of("metaData"):
        raise MetadataChangedException(
            f"The metadata of the table (schema, properties or partitioning) was changed by a concurrent commit at "
            f"{where}. {RERUN}")
    winner_removed = {normalize_path(rm["path"]) for rm in winner.of("remove")}
    for rm in winner.of("remove"):
        path = normalize_path(rm["path"])
        if path in our_removed_paths:
            raise ConcurrentDeleteDeleteException(
                f"This transaction and a concurrent commit at {where} both removed (or replaced the deletion vector "
                f"of) {rm['path']}. {RERUN}")
    for rm in winner.of("remove"):
        if normalize_path(rm["path"]) in read.paths:
            raise ConcurrentDeleteReadException(
                f"This transaction read {rm['path']}, which a concurrent commit at {where} removed or whose deletion "
                f"vector it replaced. {RERUN}")
    if read.whole_table and any(rm.get("dataChange", True) and normalize_path(rm["path"]) not in
                                {normalize_path(a["path"]) for a in winner.of("add")} for rm in winner.of("remove")):
        raise ConcurrentDeleteReadException(
            f"This transaction read the whole table and a concurrent commit at {where} removed data. {RERUN}")
    check_appends = isolation == "Serializable" or not winner.is_blind_append or our_changes_metadata
    if check_appends and (read.whole_table or read.predicates):
        for add in winner.of("add"):
            # an add of a path the same commit removes is a DV replacement: it only hides rows, never adds them
            if add.get("dataChange", True) and normalize_path(add["path"]) not in winner_removed and read.covers(add):
                raise ConcurrentAppendException(
                    f"Files were added to the data this operation read by a concurrent commit at {where}, "
                    f"e.g. {add['path']}. {RERUN}")
    for dm in winner.of("domainMetadata"):
        if dm.get("domain") in (our_domains or set()) and dm.get("domain") != ROW_TRACKING_DOMAIN:
            raise ConcurrentTransactionException(
                f"A conflicting metadata domain {dm['domain']} was set by a concurrent commit at {where}. {RERUN}")
    for txn in winner.of("txn"):
        if txn["appId"] in read.app_ids:
            raise ConcurrentTransactionException(
                f"A concurrent commit at {where} committed for application id {txn['appId']!r}, which this "
                f"transaction also uses. Check whether that application's batch was already written, then retry.")
