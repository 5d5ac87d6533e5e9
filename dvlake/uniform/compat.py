"""IcebergCompatV2/V3 and ``delta.universalFormat.enabledFormats``: the table-property rules delta-spark enforces.

Both versions need column mapping ``name``/``id``, ``numRecords`` stats on every added file and
types in Iceberg's allowlist; only one version may be enabled. V2 forbids deletion vectors
(disabled and purged). V3 allows them (Iceberg v3 reads them as ``deletion-vector-v1`` Puffin
blobs) and needs row tracking supported and enabled instead: Delta's row ids and commit versions
are Iceberg v3's row lineage. As in delta-spark, once V3 is on it cannot be turned off again.
Enabling Iceberg in ``enabledFormats`` needs one IcebergCompat version, as in delta-spark
(``DELTA_UNIVERSAL_FORMAT_VIOLATION.ICEBERG_COMPAT_REQUIRED``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from dvlake.errors import IcebergCompatViolationError, UniversalFormatViolationError
from dvlake.log import row_tracking
from dvlake.log.actions import Action, AddFile, Metadata
from dvlake.log.schema import column_mapping_mode
from dvlake.log.stats import parse_stats

ENABLED_FORMATS = "delta.universalFormat.enabledFormats"
COMPAT_KEYS = {1: "delta.enableIcebergCompatV1", 2: "delta.enableIcebergCompatV2", 3: "delta.enableIcebergCompatV3"}
V2_FEATURE = "icebergCompatV2"
V3_FEATURE = "icebergCompatV3"
#: Iceberg v3's reserved field ids of the row-lineage metadata columns (spec "Reserved Field IDs"): the Parquet field
#: ids IcebergCompatV3 puts on Delta's materialized row-id / row-commit-version columns, so Iceberg readers find them
ICEBERG_ROW_ID_FIELD_ID = 2147483540
ICEBERG_LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID = 2147483539
_V2_PRIMITIVES = {"byte", "short", "integer", "long", "float", "double", "string", "binary", "boolean", "timestamp",
                  "timestamp_ntz", "date"}
_DECIMAL = re.compile(r"^decimal\(\d+,\s*\d+\)$")
_VIOLATION = "DELTA_ICEBERG_COMPAT_VIOLATION"


def enabled_compat_versions(configuration: dict[str, str]) -> list[int]:
    return [v for v, key in COMPAT_KEYS.items() if configuration.get(key, "false").lower() == "true"]


def is_v3(configuration: dict[str, str]) -> bool:
    """IcebergCompatV3 is enabled: row lineage is Delta's (field ids on materialized columns, ``baseRowId``)."""
    return 3 in enabled_compat_versions(configuration)


def formats(configuration: dict[str, str]) -> set[str]:
    return {f.strip().lower() for f in configuration.get(ENABLED_FORMATS, "").split(",") if f.strip()}


def relevant(metadata: Metadata) -> bool:
    """Whether any UniForm/IcebergCompat property is set (the checks below cost nothing otherwise)."""
    conf = metadata.configuration
    return bool(enabled_compat_versions(conf) or formats(conf))


def check_metadata(metadata: Metadata, protocol_writer_features: set[str], live_dvs: int, table: str) -> None:
    """The rules on a new or changed metadata (CREATE, ALTER SET TBLPROPERTIES, overwrite with a new schema)."""
    conf = metadata.configuration
    versions = enabled_compat_versions(conf)
    unknown = formats(conf) - {"iceberg", "hudi"}
    if unknown:
        raise UniversalFormatViolationError(
            f"{table}: {ENABLED_FORMATS} names unknown format(s) {sorted(unknown)}; the known ones are iceberg and hudi")
    if "hudi" in formats(conf):
        raise UniversalFormatViolationError(f"{table}: Universal Format (hudi) is not implemented by dvlake; only iceberg is")
    if len(versions) > 1:
        raise IcebergCompatViolationError(
            f"The validation of IcebergCompatV{max(versions)} has failed. Only one IcebergCompat version can be enabled, "
            "please explicitly disable all other IcebergCompat versions that are not needed.",
            f"{_VIOLATION}.VERSION_MUTUAL_EXCLUSIVE")
    if "iceberg" in formats(conf) and not versions:
        raise UniversalFormatViolationError(
            f"The validation of Universal Format (iceberg) has failed: Requires IcebergCompat to be explicitly enabled in "
            f"order for Universal Format (Iceberg) to be enabled ({table}). Set 'delta.enableIcebergCompatV2' = 'true' "
            "(or 'delta.enableIcebergCompatV3' = 'true' for a table with deletion vectors).",
            "DELTA_UNIVERSAL_FORMAT_VIOLATION.ICEBERG_COMPAT_REQUIRED")
    if not versions:
        return
    version = versions[0]
    if version == 1:
        raise IcebergCompatViolationError(
            f"The validation of IcebergCompatV1 has failed. IcebergCompatVersion = 1 is not supported by dvlake ({table}); "
            "use 'delta.enableIcebergCompatV2' = 'true' (or V3 for a table with deletion vectors).",
            f"{_VIOLATION}.COMPAT_VERSION_NOT_SUPPORTED")
    mode = column_mapping_mode(metadata)
    if mode not in ("name", "id"):
        raise IcebergCompatViolationError(
            f"The validation of IcebergCompatV{version} has failed. IcebergCompatV{version} requires table property "
            f"'delta.columnMapping.mode' to be set to 'name'. Current value: '{mode}' ({table}).",
            f"{_VIOLATION}.WRONG_REQUIRED_TABLE_PROPERTY")
    feature = V2_FEATURE if version == 2 else V3_FEATURE
    required = [feature] + ([row_tracking.FEATURE] if version == 3 else [])
    for name in required:
        if name not in protocol_writer_features:
            raise IcebergCompatViolationError(
                f"The validation of IcebergCompatV{version} has failed. IcebergCompatV{version} requires feature {name} "
                f"to be supported and enabled ({table}).", f"{_VIOLATION}.MISSING_REQUIRED_TABLE_FEATURE")
    if version == 3:
        enabled = str(conf.get(row_tracking.ENABLE_KEY, "false")).strip().lower()
        if enabled != "true":
            raise IcebergCompatViolationError(
                f"The validation of IcebergCompatV3 has failed. IcebergCompatV3 requires table property "
                f"'{row_tracking.ENABLE_KEY}' to be set to 'true'. Current value: '{enabled}' ({table}). Row tracking's "
                "ids are Iceberg v3's row lineage.", f"{_VIOLATION}.WRONG_REQUIRED_TABLE_PROPERTY")
        _check_types(metadata, table, version)
        return
    if conf.get("delta.enableDeletionVectors", "false").lower() == "true":
        raise IcebergCompatViolationError(
            "The validation of IcebergCompatV2 has failed. IcebergCompatV2 requires Deletion Vectors to be disabled on "
            f"the table first ({table}). Then run REORG PURGE command to purge the Deletion Vectors on the table. "
            "(IcebergCompatV3 allows them.)", f"{_VIOLATION}.DELETION_VECTORS_SHOULD_BE_DISABLED")
    if live_dvs:
        raise IcebergCompatViolationError(
            "The validation of IcebergCompatV2 has failed. IcebergCompatV2 requires Deletion Vectors to be completely "
            f"purged from the table ({table} has {live_dvs} file(s) with one). Please run the REORG TABLE APPLY (PURGE) "
            "command.", f"{_VIOLATION}.DELETION_VECTORS_NOT_PURGED")
    _check_types(metadata, table, version)


def check_not_disabled(previous: Metadata | None, metadata: Metadata, table: str) -> None:
    """Once IcebergCompatV3 is on it stays on (delta-spark's CheckCannotDisableCompat): Iceberg readers of the
    table rely on its row lineage, which a commit without V3's rules would break."""
    if previous is not None and is_v3(previous.configuration) and not is_v3(metadata.configuration):
        raise IcebergCompatViolationError(
            f"IcebergCompat cannot be disabled: {table} has IcebergCompatV3 enabled ('delta.enableIcebergCompatV3' = "
            "'true'), and delta-spark does not allow turning it off again. Keep the property; to stop publishing "
            f"Iceberg metadata, the table must be copied into a new table without it.",
            "DVLAKE_ICEBERG_COMPAT_CANNOT_BE_DISABLED")


def _check_types(metadata: Metadata, table: str, version: int = 2) -> None:
    partition = {c.lower() for c in metadata.partition_columns}

    def visit(t: Any, where: str, is_partition: bool) -> None:
        if isinstance(t, str):
            if t in _V2_PRIMITIVES or _DECIMAL.match(t):
                return
            kind = "UNSUPPORTED_PARTITION_DATA_TYPE" if is_partition else "UNSUPPORTED_DATA_TYPE"
            raise IcebergCompatViolationError(
                f"The validation of IcebergCompatV{version} has failed. IcebergCompatV{version} does not support the data "
                f"type {t} "
                f"(column {where} of {table}).", f"{_VIOLATION}.{kind}")
        if is_partition:
            raise IcebergCompatViolationError(
                f"The validation of IcebergCompatV{version} has failed. IcebergCompatV{version} does not support the "
                f"data type {t.get('type')} for partition columns (column {where} of {table}).",
                f"{_VIOLATION}.UNSUPPORTED_PARTITION_DATA_TYPE")
        kind = t.get("type")
        if kind == "struct":
            for f in t["fields"]:
                visit(f["type"], f"{where}.{f['name']}", False)
        elif kind in ("array", "map"):
            # delta-spark allows them (it writes Parquet field ids for list elements and map keys/values from
            # delta.columnMapping.nested.ids); dvlake writes ids on struct fields only, so Iceberg readers could
            # not resolve the element/key/value columns and every conversion would fail after the commit landed.
            raise IcebergCompatViolationError(
                f"The validation of IcebergCompatV{version} has failed. IcebergCompatV{version} as implemented by "
                f"dvlake does not support the data type {kind} (column {where} of {table}): dvlake does not write the "
                "nested field ids (delta.columnMapping.nested.ids) Iceberg readers need for array elements and map keys/values. "
                "Store the column as a struct or a JSON string, or keep the table Delta-only.",
                f"{_VIOLATION}.UNSUPPORTED_DATA_TYPE")

    for f in metadata.schema.get("fields", []):
        visit(f["type"], f["name"], f["name"].lower() in partition)


def check_actions(metadata: Metadata, actions: Iterable[Action], table: str) -> None:
    """Per-commit rule of an IcebergCompatV2/V3 table: every added file has numRecords stats (CheckAddFileHasStats)."""
    versions = [v for v in enabled_compat_versions(metadata.configuration) if v in (2, 3)]
    if not versions:
        return
    for a in actions:
        if isinstance(a, AddFile):
            stats = parse_stats(a.stats)
            if not stats or stats.get("numRecords") is None:
                raise IcebergCompatViolationError(
                    f"The validation of IcebergCompatV{versions[0]} has failed. IcebergCompatV{versions[0]} requires every "
                    f"added file to have "
                    f"numRecords statistics; {a.path} of {table} has none.", _VIOLATION)


def writer_features_for(configuration: dict[str, str]) -> set[str]:
    """Writer features a new or altered table gets from its IcebergCompat property (delta-spark adds them with
    their required features: column mapping for both, row tracking and its domain metadata for V3)."""
    versions = enabled_compat_versions(configuration)
    out = {V2_FEATURE} if 2 in versions else set()
    if 3 in versions:
        out |= {V3_FEATURE, row_tracking.FEATURE, *row_tracking.REQUIRED_FEATURES}
    return out


def properties_to_set(previous: Metadata | None, configuration: dict[str, str], table: str) -> dict[str, str]:
    """Properties delta-spark sets by itself when IcebergCompatV3 is being enabled (RequireRowTracking).

    Row tracking is turned on when the user did not set it, on a new table and on an existing one alike
    (the caller runs the backfill an existing table needs). An existing table that already tracks rows is
    refused, as delta-spark refuses it (CheckNoRowTrackingBeforeUpgradeV3): files rewritten since then hold
    materialized row ids without Iceberg's reserved field ids, which Iceberg readers could not find.
    """
    if not is_v3(configuration) or (previous is not None and is_v3(previous.configuration)):
        return {}
    if previous is not None and str(previous.configuration.get(row_tracking.ENABLE_KEY, "")).lower() == "true":
        raise IcebergCompatViolationError(
            f"Alter Table enable icebergCompatV3 with RowTracking enabled is not supported ({table}): files rewritten "
            "since row tracking was enabled hold materialized row ids without Iceberg's reserved field ids, so Iceberg "
            "readers would see wrong row ids. Create a new table with 'delta.enableIcebergCompatV3' = 'true' and copy "
            "the rows into it, or publish Iceberg metadata on demand with `dvlake uniform sync`.",
            "DVLAKE_ICEBERG_COMPAT_V3_ROW_TRACKING_ALREADY_ENABLED")
    if row_tracking.ENABLE_KEY in configuration:
        return {}
    return {row_tracking.ENABLE_KEY: "true"}

