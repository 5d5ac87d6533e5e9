"""Row tracking: the rules for row ids and row commit versions that live in the log (no Spark here).

Every row of a row-tracking table has a *row id* and a *row commit version*. Neither is stored per row
unless it has to be:

- a file's rows get consecutive default ids starting at the add's ``baseRowId`` (id = baseRowId +
  physical row index), and the default commit version is the add's ``defaultRowCommitVersion``;
- a row copied into a new file (OPTIMIZE, copy-on-write DML, an UPDATE's new row) keeps its old id
  by writing it into a hidden *materialized* column of the new file, whose name the table's
  configuration holds; NULL there means "use the default".

Writers assign ``baseRowId`` to every add that lacks one, above the table's high-water mark, which
the ``delta.rowTracking`` metadata domain records as ``{"rowIdHighWaterMark": n}`` (the highest id
ever handed out; -1 before any). The assignment is redone on every commit attempt from the
unassigned actions, so a retry after a lost race lands above the winner's mark and at its own
version. *Supported* (feature in ``writerFeatures``) obliges writers to assign; *enabled*
(``delta.enableRowTracking=true``) additionally promises every live file has ids, so readers may rely
on them and writers preserve them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from dvlake.errors import RowTrackingError
from dvlake.log.actions import Action, AddFile, DomainMetadata, Metadata, Protocol, RemoveFile
from dvlake.log.stats import num_records_of

FEATURE = "rowTracking"
#: the feature needs domain metadata (the high-water mark is a domain)
REQUIRED_FEATURES = ("domainMetadata",)
ENABLE_KEY = "delta.enableRowTracking"
SUSPENDED_KEY = "delta.rowTrackingSuspended"
ROW_ID_COLUMN_KEY = "delta.rowTracking.materializedRowIdColumnName"
COMMIT_VERSION_COLUMN_KEY = "delta.rowTracking.materializedRowCommitVersionColumnName"
#: prefixes of the generated materialized column names (delta-spark's, so both engines' names look alike)
ROW_ID_COLUMN_PREFIX = "_row-id-col-"
COMMIT_VERSION_COLUMN_PREFIX = "_row-commit-version-col-"
DOMAIN = "delta.rowTracking"
HIGH_WATER_MARK_KEY = "rowIdHighWaterMark"
#: the mark of a table that never assigned an id: the first id handed out is 0
MISSING_HIGH_WATER_MARK = -1
#: commitInfo tag telling readers whether every copied/updated row kept its stable id and version
PRESERVED_TAG = "delta.rowTracking.preserved"
#: commands that copy or update rows and preserve their ids and versions when row tracking is enabled: their
#: commits carry PRESERVED_TAG=true, as delta-spark's DELETE, UPDATE, MERGE and OPTIMIZE (PURGE is one) commits do
PRESERVING_OPERATIONS = frozenset({"DELETE", "UPDATE", "MERGE", "OPTIMIZE", "REORG"})
#: delta-spark's operation name for the commits that give existing files ids when row tracking is enabled
BACKFILL_OPERATION = "ROW TRACKING BACKFILL"


def _true(configuration: dict[str, str], key: str) -> bool:
    return str(configuration.get(key, "false")).strip().lower() == "true"


def is_supported(protocol: Protocol) -> bool:
    """Writers must assign ids: the feature is in ``writerFeatures`` (there is no legacy version implying it)."""
    return protocol.min_writer_version >= 7 and FEATURE in (protocol.writer_features or ())


def is_suspended(metadata: Metadata) -> bool:
    """``delta.rowTrackingSuspended=true``: writers assign nothing; refused together with enablement."""
    suspended = _true(metadata.configuration, SUSPENDED_KEY)
    if suspended and _true(metadata.configuration, ENABLE_KEY):
        raise RowTrackingError(
            f"{ENABLE_KEY} and {SUSPENDED_KEY} are both true; a table cannot suspend row tracking while it is enabled. "
            f"Unset one of them.", error_class="DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION")
    return suspended


def assigns(protocol: Protocol, metadata: Metadata) -> bool:
    """This commit must assign ``baseRowId``/``defaultRowCommitVersion`` (supported and not suspended)."""
    return is_supported(protocol) and not is_suspended(metadata)


def is_enabled(protocol: Protocol, metadata: Metadata) -> bool:
    """Readers may rely on ids and writers must preserve them; enabled without support is a broken table."""
    enabled = _true(metadata.configuration, ENABLE_KEY)
    if enabled and not is_supported(protocol):
        raise RowTrackingError(
            f"the table property {ENABLE_KEY} is true but the protocol does not support the table feature {FEATURE!r} "
            f"(writerFeatures: {sorted(protocol.writer_features or ())}). Add it with "
            f"ALTER TABLE … SET TBLPROPERTIES ('delta.feature.{FEATURE}' = 'supported') before enabling.")
    return enabled


def materialized_columns(metadata: Metadata) -> tuple[str, str] | None:
    """(row id column, row commit version column) physical names, None when not assigned."""
    conf = metadata.configuration
    rid, rcv = conf.get(ROW_ID_COLUMN_KEY), conf.get(COMMIT_VERSION_COLUMN_KEY)
    return (rid, rcv) if rid and rcv else None


def materialized_columns_or_raise(metadata: Metadata, table: str = "") -> tuple[str, str]:
    names = materialized_columns(metadata)
    if names is None:
        raise RowTrackingError(
            f"row tracking is enabled on {table} but its metadata lacks {ROW_ID_COLUMN_KEY} / "
            f"{COMMIT_VERSION_COLUMN_KEY}: the table is inconsistent; rewrite the property with the writer that "
            "created it", error_class="DELTA_MATERIALIZED_ROW_TRACKING_COLUMN_NAME_MISSING")
    return names


def with_column_names(protocol: Protocol, old: Metadata | None, new: Metadata) -> Metadata:
    """``new`` with the materialized column names a row-tracking table must carry.

    A name once given stays the table's for good (taken from ``old``, else kept from ``new``, else
    generated once: prefix + a random UUID, so it cannot collide with a user's column); a table
    without the feature keeps whatever it has. Raises when a name equals a column of the schema
    (logical or column-mapping physical name), which would make a user column the hidden one.
    """
    if not is_supported(protocol):
        return new
    conf = dict(new.configuration)
    old_conf = old.configuration if old is not None else {}
    for key, prefix in ((ROW_ID_COLUMN_KEY, ROW_ID_COLUMN_PREFIX), (COMMIT_VERSION_COLUMN_KEY, COMMIT_VERSION_COLUMN_PREFIX)):
        conf[key] = old_conf.get(key) or conf.get(key) or prefix + str(uuid.uuid4())
    names = {f.lower() for f in _top_level_names(new.schema_string)}
    for key in (ROW_ID_COLUMN_KEY, COMMIT_VERSION_COLUMN_KEY):
        if conf[key].lower() in names:
            raise RowTrackingError(
                f"cannot use the column name {conf[key]!r} ({key}): a column of the table has that name. Rename the "
                "column; the name is reserved for row tracking's hidden column.",
                error_class="DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED")
    if conf == new.configuration:
        return new
    return replace(new, configuration=conf)


def _top_level_names(schema_string: str) -> list[str]:
    out: list[str] = []
    for f in json.loads(schema_string).get("fields", []):
        out.append(f["name"])
        physical = (f.get("metadata") or {}).get("delta.columnMapping.physicalName")
        if physical:
            out.append(physical)
    return out


# --- the high-water mark domain ------------------------------------------------------------------


def high_water_mark_of(domain: DomainMetadata | None) -> int:
    """The mark a ``delta.rowTracking`` domain records (-1 when there is none or it was removed)."""
    if domain is None or domain.removed:
        return MISSING_HIGH_WATER_MARK
    try:
        value = json.loads(domain.configuration or "{}")[HIGH_WATER_MARK_KEY]
        return int(value)
    except (ValueError, KeyError, TypeError) as exc:
        raise RowTrackingError(
            f"the {DOMAIN} domain's configuration {domain.configuration!r} has no integer {HIGH_WATER_MARK_KEY}",
            error_class="DVLAKE_ROW_TRACKING_ILLEGAL_STATE") from exc


def high_water_mark(domains: dict[str, DomainMetadata]) -> int:
    """The snapshot's mark (its replayed domains)."""
    return high_water_mark_of(domains.get(DOMAIN))


def high_water_mark_in(actions: Sequence[dict[str, Any]]) -> int | None:
    """The mark a commit's JSON actions set, None when the commit does not touch the domain."""
    for a in actions:
        dm = a.get("domainMetadata")
        if dm and dm.get("domain") == DOMAIN:
            return high_water_mark_of(DomainMetadata.from_json(dm))
    return None


def domain_action(mark: int) -> DomainMetadata:
    return DomainMetadata(DOMAIN, json.dumps({HIGH_WATER_MARK_KEY: mark}, separators=(",", ":")))


# --- assignment ------------------------------------------------------------------------------------


def assign(actions: Sequence[Action], mark: int, version: int, table: str = "") -> tuple[list[Action], int]:
    """Give every add without ids fresh ones; returns the actions (plus the raised mark's domain) and the new mark.

    An add lacking ``baseRowId`` gets ``mark + 1 + the physical rows of the adds assigned before it``
    (``numRecords`` of its stats: deleted rows still occupy positions); an add lacking
    ``defaultRowCommitVersion`` gets ``version``. Adds that carry values keep them: they re-commit a
    file whose rows already have ids (a new DV, RESTORE, a backfill that won a race). A
    ``delta.rowTracking`` domain among ``actions`` is refused: only this function moves the mark.
    """
    out: list[Action] = []
    next_mark = mark
    for a in actions:
        if isinstance(a, DomainMetadata) and a.domain == DOMAIN:
            raise RowTrackingError(f"a commit may not set the {DOMAIN} domain itself: row ids are assigned at commit",
                                   error_class="DVLAKE_ROW_TRACKING_ILLEGAL_STATE")
        if isinstance(a, AddFile) and (a.base_row_id is None or a.default_row_commit_version is None):
            base = a.base_row_id
            if base is None:
                rows = num_records_of(a.stats)
                if rows is None:
                    raise RowTrackingError(
                        f"cannot assign row ids to {a.path} in {table}: its stats lack numRecords, which row tracking "
                        "needs to know how many ids the file takes. Write the file with statistics "
                        "(delta.dataSkippingNumIndexedCols must not turn them off) or recompute them.",
                        error_class="DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS")
                base = next_mark + 1
                next_mark += rows
            commit_version = a.default_row_commit_version if a.default_row_commit_version is not None else version
            a = replace(a, base_row_id=base, default_row_commit_version=commit_version)
        out.append(a)
    if next_mark != mark:
        out.append(domain_action(next_mark))
    return out, next_mark


def backfilled_ids(operation: str, actions: Sequence[dict[str, Any]]) -> dict[str, tuple[int | None, int | None]]:
    """path → (baseRowId, defaultRowCommitVersion) of the files a winning backfill commit re-added (else empty)."""
    if operation != BACKFILL_OPERATION:
        return {}
    return {a["add"]["path"]: (a["add"].get("baseRowId"), a["add"].get("defaultRowCommitVersion"))
            for a in actions if a.get("add")}


def with_backfilled_ids(actions: Sequence[Action], backfilled: dict[str, tuple[int | None, int | None]]) -> list[Action]:
    """Our re-commits (and removes) of files a concurrent backfill gave ids carry those ids, not fresh ones: a
    re-committed file keeps the ids of its last committed add (PROTOCOL.md, writer requirements)."""
    out: list[Action] = []
    for a in actions:
        if isinstance(a, (AddFile, RemoveFile)) and a.path in backfilled and a.base_row_id is None:
            base, version = backfilled[a.path]
            a = replace(a, base_row_id=base, default_row_commit_version=version)
        out.append(a)
    return out


def strip(actions: Sequence[Action]) -> list[Action]:
    """Suspended row tracking: adds carry no ids (delta-spark drops them rather than propagate stale ones)."""
    out: list[Action] = []
    for a in actions:
        if isinstance(a, DomainMetadata) and a.domain == DOMAIN:
            raise RowTrackingError(f"a commit may not set the {DOMAIN} domain while row tracking is suspended",
                                   error_class="DVLAKE_ROW_TRACKING_ILLEGAL_STATE")
        if isinstance(a, AddFile) and (a.base_row_id is not None or a.default_row_commit_version is not None):
            a = replace(a, base_row_id=None, default_row_commit_version=None)
        out.append(a)
    return out
