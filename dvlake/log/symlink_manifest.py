"""Symlink-format manifests: ``_symlink_format_manifest/<partition>/manifest`` files for Presto/Trino/Athena/Hive.

A manifest lists the absolute paths of the live data files of one partition, one per line. Those
engines read the listed Parquet files whole, so a manifest cannot express rows deleted by a
deletion vector: generation is refused while any live file has a DV (delta-spark's
``DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS``), and the auto-manifest property
``delta.compatibility.symlinkFormatManifest.enabled`` is refused together with DVs.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from dvlake.errors import DeltaAnalysisException, TablePropertyValidationError, UnsupportedWithDeletionVectorsError
from dvlake.log.actions import Metadata, Protocol
from dvlake.log.features import dvs_supported
from dvlake.log.schema import column_mapping_mode
from dvlake.storage.paths import absolute_file_location, has_scheme, join

if TYPE_CHECKING:
    from dvlake.log.snapshot import Snapshot

MANIFEST_DIR = "_symlink_format_manifest"
MANIFEST_FILE = "manifest"
AUTO_MANIFEST = "delta.compatibility.symlinkFormatManifest.enabled"
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_ESCAPED = set('"#%\'*/:=?\\\x7f{[]^')


def escape_path_name(value: str) -> str:
    """Hive's partition-path escaping (``%XX`` for control and special characters)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)


def partition_dir(partition_columns: list[str], values: dict[str, str | None]) -> str:
    parts = []
    for col in partition_columns:
        value = values.get(col)
        parts.append(f"{escape_path_name(col)}={escape_path_name(value) if value not in (None, '') else HIVE_DEFAULT_PARTITION}")
    return "/".join(parts)


def manifest_location(table_root: str, add_path: str) -> str:
    """A data file as a manifest line: a fully qualified path (``file:/…`` for local tables, as Hadoop prints it)."""
    location = absolute_file_location(table_root, add_path)
    return location if has_scheme(location) else "file:" + location


def assert_no_live_dvs(snapshot: Snapshot) -> None:
    if dvs_supported(snapshot.protocol) and snapshot.dv_count() > 0:
        raise UnsupportedWithDeletionVectorsError(
            f"The 'GENERATE symlink_format_manifest' command is not supported on table versions with deletion vectors: "
            f"version {snapshot.version} of {snapshot.table_root} has {snapshot.dv_count()} file(s) with deletion vectors, "
            "whose deleted rows a manifest reader would return. Purge them first with 'REORG TABLE delta.`<path>` APPLY "
            "(PURGE)', and consider disabling deletion vectors with 'ALTER TABLE delta.`<path>` SET TBLPROPERTIES "
            "(delta.enableDeletionVectors = false)'.")


def write_manifests(snapshot: Snapshot) -> list[str]:
    """Write every partition's manifest and delete manifests of partitions that are gone; returns the written files."""
    if column_mapping_mode(snapshot.metadata) != "none":
        raise DeltaAnalysisException(
            f"{snapshot.table_root} uses column mapping; manifest readers cannot map physical column names, so no "
            "manifest is generated", error_class="DELTA_UNSUPPORTED_MANIFEST_GENERATION_WITH_COLUMN_MAPPING")
    assert_no_live_dvs(snapshot)
    root = snapshot.table_root
    storage = snapshot.storage
    partition_columns = list(snapshot.metadata.partition_columns)
    groups: dict[str, list[str]] = defaultdict(list)
    for row in snapshot.files.select(["path", "partitionValues"]).to_pylist():
        groups[partition_dir(partition_columns, dict(row["partitionValues"] or []))].append(
            manifest_location(root, row["path"]))
    if not partition_columns:
        groups.setdefault("", [])
    base = join(root, MANIFEST_DIR)
    written = []
    for part, lines in sorted(groups.items()):
        path = join(base, part, MANIFEST_FILE) if part else join(base, MANIFEST_FILE)
        storage.write(path, ("\n".join(sorted(lines)) + ("\n" if lines else "")).encode("utf-8"))
        written.append(path)
    keep = set(written)
    for info in list(storage.walk(base)):
        if info.path.rsplit("/", 1)[-1] == MANIFEST_FILE and info.path not in keep:
            storage.delete(info.path)
    return written


def check_manifest_property(metadata: Metadata, protocol: Protocol, live_dvs: int) -> None:
    """delta-spark's table-property constraints between auto manifests and deletion vectors."""
    conf = metadata.configuration
    if conf.get(AUTO_MANIFEST, "false").lower() != "true":
        return
    if conf.get("delta.enableDeletionVectors", "false").lower() == "true":
        raise TablePropertyValidationError(
            f"PERSISTENT_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION: {AUTO_MANIFEST} = true and "
            "delta.enableDeletionVectors = true cannot be set together (manifest readers would return deleted rows). "
            "Disable one of them.",
            "DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED.PERSISTENT_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION")
    if dvs_supported(protocol) and live_dvs > 0:
        raise TablePropertyValidationError(
            f"EXISTING_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION: cannot set {AUTO_MANIFEST} = true while "
            f"{live_dvs} live file(s) have deletion vectors. Run 'REORG TABLE delta.`<path>` APPLY (PURGE)' first.",
            "DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED.EXISTING_DELETION_VECTORS_WITH_INCREMENTAL_MANIFEST_GENERATION")
