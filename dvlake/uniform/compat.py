"""IcebergCompatV2/V3 and ``delta.universalFormat.enabledFormats``: the table-property rules delta-spark enforces.

dvlake honours IcebergCompatV2 as a writer: column mapping ``name``/``id``, deletion vectors
disabled and purged, ``numRecords`` stats on every added file, types in Iceberg's allowlist. It
cannot enable IcebergCompatV3 yet: V3 requires row tracking enabled (``delta.enableRowTracking``),
refused with the error delta-spark gives for a missing required feature when it is not, and with
COMPAT_VERSION_NOT_SUPPORTED when it is (V3's row lineage in the Iceberg metadata is not written yet).
Enabling Iceberg in ``enabledFormats`` needs one IcebergCompat version, as in
delta-spark (``DELTA_UNIVERSAL_FORMAT_VIOLATION.ICEBERG_COMPAT_REQUIRED``).
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
_V2_PRIMITIVES = {"byte", "short", "integer", "long", "float", "double", "string", "binary", "boolean", "timestamp",
                  "timestamp_ntz", "date"}
_DECIMAL = re.compile(r"^decimal\(\d+,\s*\d+\)$")
_VIOLATION = "DELTA_ICEBERG_COMPAT_VIOLATION"


def enabled_compat_versions(configuration: dict[str, str]) -> list[int]:
    return [v for v, key in COMPAT_KEYS.items() if configuration.get(key, "false").lower() == "true"]


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
            "(IcebergCompatV2 is the version dvlake implements).",
            "DELTA_UNIVERSAL_FORMAT_VIOLATION.ICEBERG_COMPAT_REQUIRED")
    if not versions:
        return
    version = versions[0]
    if version == 3 and not (row_tracking.FEATURE in protocol_writer_features
                             and str(conf.get(row_tracking.ENABLE_KEY, "")).lower() == "true"):
        raise IcebergCompatViolationError(
            "The validation of IcebergCompatV3 has failed. IcebergCompatV3 requires feature rowTracking to be supported "
            f"and enabled ({table}): set 'delta.enableRowTracking' = 'true' first. (dvlake cannot enable "
            "IcebergCompatV3 yet either; use IcebergCompatV2, or `dvlake uniform sync` to publish Iceberg v3 metadata "
            "with deletion vectors on demand.)", f"{_VIOLATION}.MISSING_REQUIRED_TABLE_FEATURE")
    if version == 3:
        raise IcebergCompatViolationError(
            f"The validation of IcebergCompatV3 has failed. IcebergCompatV3 is not implemented by dvlake yet ({table}): "
            "row tracking is, but V3's row lineage in the Iceberg metadata (first-row-id, the row-id field ids) is not. "
            "Use IcebergCompatV2, or `dvlake uniform sync` to publish Iceberg v3 metadata with deletion vectors on "
            "demand.", f"{_VIOLATION}.COMPAT_VERSION_NOT_SUPPORTED")
    if version == 1:
        raise IcebergCompatViolationError(
            f"The validation of IcebergCompatV1 has failed. IcebergCompatVersion = 1 is not supported by dvlake ({table}); "
            "use 'delta.enableIcebergCompatV2' = 'true'.", f"{_VIOLATION}.COMPAT_VERSION_NOT_SUPPORTED")
    mode = column_mapping_mode(metadata)
    if mode not in ("name", "id"):
        raise IcebergCompatViolationError(
            f"The validation of IcebergCompatV2 has failed. IcebergCompatV2 requires table property "
            f"'delta.columnMapping.mode' to be set to 'name'. Current value: '{mode}' ({table}).",
            f"{_VIOLATION}.WRONG_REQUIRED_TABLE_PROPERTY")
    if V2_FEATURE not in protocol_writer_features:
        raise IcebergCompatViolationError(
            f"The validation of IcebergCompatV2 has failed. IcebergCompatV2 requires feature {V2_FEATURE} to be "
            f"supported and enabled ({table}).", f"{_VIOLATION}.MISSING_REQUIRED_TABLE_FEATURE")
    if conf.get("delta.enableDeletionVectors", "false").lower() == "true":
        raise IcebergCompatViolationError(
            "The validation of IcebergCompatV2 has failed. IcebergCompatV2 requires Deletion Vectors to be disabled on "
            f"the table first ({table}). Then run REORG PURGE command to purge the Deletion Vectors on the table.",
            f"{_VIOLATION}.DELETION_VECTORS_SHOULD_BE_DISABLED")
    if live_dvs:
        raise IcebergCompatViolationError(
            "The validation of IcebergCompatV2 has failed. IcebergCompatV2 requires Deletion Vectors to be completely "
            f"purged from the table ({table} has {live_dvs} file(s) with one). Please run the REORG TABLE APPLY (PURGE) "
            "command.", f"{_VIOLATION}.DELETION_VECTORS_NOT_PURGED")
    _check_types(metadata, table)


def _check_types(metadata: Metadata, table: str) -> None:
    partition = {c.lower() for c in metadata.partition_columns}

    def visit(t: Any, where: str, is_partition: bool) -> None:
        if isinstance(t, str):
            if t in _V2_PRIMITIVES or _DECIMAL.match(t):
                return
            kind = "UNSUPPORTED_PARTITION_DATA_TYPE" if is_partition else "UNSUPPORTED_DATA_TYPE"
            raise IcebergCompatViolationError(
                f"The validation of IcebergCompatV2 has failed. IcebergCompatV2 does not support the data type {t} "
                f"(column {where} of {table}).", f"{_VIOLATION}.{kind}")
        if is_partition:
            raise IcebergCompatViolationError(
                f"The validation of IcebergCompatV2 has failed. IcebergCompatV2 does not support the data type "
                f"{t.get('type')} for partition columns (column {where} of {table}).",
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
                f"The validation of IcebergCompatV2 has failed. IcebergCompatV2 as implemented by dvlake does not "
                f"support the data type {kind} (column {where} of {table}): dvlake does not write the nested field "
                "ids (delta.columnMapping.nested.ids) Iceberg readers need for array elements and map keys/values. "
                "Store the column as a struct or a JSON string, or keep the table Delta-only.",
                f"{_VIOLATION}.UNSUPPORTED_DATA_TYPE")

    for f in metadata.schema.get("fields", []):
        visit(f["type"], f["name"], f["name"].lower() in partition)


def check_actions(metadata: Metadata, actions: Iterable[Action], table: str) -> None:
    """Per-commit rule of an IcebergCompatV2 table: every added file has numRecords stats (CheckAddFileHasStats)."""
    if 2 not in enabled_compat_versions(metadata.configuration):
        return
    for a in actions:
        if isinstance(a, AddFile):
            stats = parse_stats(a.stats)
            if not stats or stats.get("numRecords") is None:
                raise IcebergCompatViolationError(
                    f"The validation of IcebergCompatV2 has failed. IcebergCompatV2 requires every added file to have "
                    f"numRecords statistics; {a.path} of {table} has none.", _VIOLATION)


def writer_features_for(configuration: dict[str, str]) -> set[str]:
    """Writer features a new or altered table gets from its IcebergCompat property (delta-spark adds them)."""
    return {V2_FEATURE} if 2 in enabled_compat_versions(configuration) else set()

