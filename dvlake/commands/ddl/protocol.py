"""Protocol changes as delta-spark's Python API makes them: ``upgradeTableProtocol`` and ``addFeatureSupport``.

Both only ever add: versions go up, features are added (``log/protocol_ops.merge_protocols``). A
feature dvlake cannot honour as a writer is refused rather than added, since the table would then
be unwritable by dvlake (and silently ignoring its rules would corrupt it for other engines).
Table properties ``delta.feature.<name> = 'supported'`` and ``delta.minReaderVersion`` /
``delta.minWriterVersion`` in SET TBLPROPERTIES mean the same and are turned into protocol changes
here (they are not stored as properties, as in delta-spark).
"""

from __future__ import annotations

import json
from typing import Any

from dvlake.errors import DeltaAnalysisException, ProtocolFeatureError, UnsupportedFeatureError
from dvlake.log import features
from dvlake.log.actions import Protocol
from dvlake.log.protocol_ops import merge_protocols
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

FEATURE_PREFIX = "delta.feature."
#: delta-spark's reader-writer features (the rest of KNOWN_FEATURES are writer-only).
READER_WRITER_FEATURES = frozenset({
    "deletionVectors", "columnMapping", "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "typeWidening",
    "typeWidening-preview", "variantType", "variantType-preview", "catalogManaged", "catalogOwned-preview",
})
KNOWN_FEATURES = READER_WRITER_FEATURES | {
    "appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "identityColumns",
    "domainMetadata", "rowTracking", "inCommitTimestamp", "clustering", "icebergCompatV1", "icebergCompatV2",
    "allowColumnDefaults", "checkpointProtection", "icebergWriterCompatV1",
}


def feature_protocol(current: Protocol, name: str) -> Protocol:
    """``current`` with support for the feature ``name`` added (reader side too for reader-writer features)."""
    if name not in KNOWN_FEATURES:
        raise ProtocolFeatureError(
            f"Table features configured in the following Spark configs or Delta table properties are not recognized: "
            f"{FEATURE_PREFIX}{name}. Known features are {sorted(KNOWN_FEATURES)} (names are case-sensitive).")
    reader = name in READER_WRITER_FEATURES
    if name not in features.SUPPORTED_WRITER_FEATURES or (reader and name not in features.SUPPORTED_READER_FEATURES):
        raise UnsupportedFeatureError(
            f"cannot add support for the table feature {name!r}: dvlake does not implement it, so the table would become "
            f"unwritable by dvlake. {features.HELP}")
    return features.with_features(current, [name] if reader else [], [name])


def version_protocol(current: Protocol, reader_version: int, writer_version: int) -> Protocol:
    """``current`` raised to the given versions (the features they imply become explicit at reader 3 / writer 7)."""
    if not (1 <= reader_version <= 3 and 1 <= writer_version <= 7):
        raise DeltaAnalysisException(
            f"protocol ({reader_version}, {writer_version}) does not exist: reader versions are 1-3 and writer "
            "versions 1-7", error_class="DELTA_INVALID_PROTOCOL_VERSION")
    if reader_version == 3 and writer_version < 7:
        raise DeltaAnalysisException(f"reader version 3 needs writer version 7; got {writer_version}",
                                     error_class="DELTA_TABLE_FEATURES_REQUIRE_WRITER_VERSION_7")
    if reader_version < current.min_reader_version or writer_version < current.min_writer_version:
        raise DeltaAnalysisException(
            "Protocol version cannot be downgraded from "
            f"({current.min_reader_version},{current.min_writer_version}) to ({reader_version},{writer_version})",
            error_class="DELTA_INVALID_PROTOCOL_DOWNGRADE")
    requested = Protocol(reader_version, writer_version, () if reader_version >= 3 else None,
                         () if writer_version >= 7 else None)
    return merge_protocols(current, requested)


def split_protocol_properties(current: Protocol, props: dict[str, str]) -> tuple[dict[str, str], Protocol]:
    """Take ``delta.feature.*`` and ``delta.min{Reader,Writer}Version`` out of table properties, as a protocol."""
    protocol = current
    rest: dict[str, str] = {}
    reader = writer = None
    for key, value in props.items():
        if key.startswith(FEATURE_PREFIX):
            if str(value).lower() not in ("supported", "enabled"):
                raise DeltaAnalysisException(
                    f"{key} can only be set to 'supported'; got {value!r}. To drop a feature use ALTER TABLE … DROP "
                    "FEATURE", error_class="DELTA_FEATURE_REQUIRES_SUPPORTED")
            protocol = feature_protocol(protocol, key[len(FEATURE_PREFIX):])
        elif key == "delta.minReaderVersion":
            reader = int(value)
        elif key == "delta.minWriterVersion":
            writer = int(value)
        else:
            rest[key] = value
    if reader is not None or writer is not None:
        protocol = version_protocol(protocol, max(reader or 1, protocol.min_reader_version),
                                    max(writer or 1, protocol.min_writer_version))
    return rest, protocol


def upgrade_table_protocol(path: str, reader_version: int, writer_version: int) -> int | None:
    """delta-spark's ``upgradeTableProtocol``; returns the committed version (None when nothing changes).

    delta-spark runs it as ``SET TBLPROPERTIES (delta.minReaderVersion, delta.minWriterVersion)``, which only ever
    raises the protocol: asking for less than the table has (``(1, 2)`` on a ``(1, 3)`` table) is a no-op, not an
    error. Versions that do not exist are still refused."""
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    current = snapshot.protocol
    version_protocol(Protocol(1, 1), reader_version, writer_version)  # the versions themselves must exist
    protocol = version_protocol(current, max(reader_version, current.min_reader_version),
                                max(writer_version, current.min_writer_version))
    props = {"delta.minReaderVersion": str(reader_version), "delta.minWriterVersion": str(writer_version)}
    return _commit_protocol(snapshot, protocol, "SET TBLPROPERTIES", {"properties": json.dumps(props)})


def add_feature_support(path: str, feature_name: str) -> int | None:
    """delta-spark's ``addFeatureSupport``; returns the committed version (None when already supported)."""
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    protocol = feature_protocol(snapshot.protocol, feature_name)
    props = {FEATURE_PREFIX + feature_name: "supported"}
    return _commit_protocol(snapshot, protocol, "SET TBLPROPERTIES", {"properties": json.dumps(props)})


def _commit_protocol(snapshot: Snapshot, protocol: Protocol, operation: str, params: dict[str, Any]) -> int | None:
    if protocol == snapshot.protocol:
        return None
    features.validate_protocol(protocol)
    txn = OptimisticTransaction(snapshot.table_root, snapshot)
    txn.update_protocol(protocol)
    return txn.commit([], operation, params)
