"""ALTER TABLE … SET / UNSET TBLPROPERTIES, with the protocol upgrades some properties imply.

Setting ``delta.enableDeletionVectors=true`` upgrades the protocol to reader 3 / writer 7 with
``deletionVectors`` in both feature lists in the same commit (delta-spark's
FeatureAutomaticallyEnabledByMetadata); the legacy features the old versions implied become
explicit writer features.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from dvlake.config import normalize_properties
from dvlake.errors import InvalidArgumentError
from dvlake.log import constraints, features, row_tracking
from dvlake.log.actions import Protocol
from dvlake.log.protocol_ops import merge_protocols
from dvlake.log.schema import MODE_KEY
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction
from dvlake.uniform import compat

_AUTO_FEATURES = {
    "delta.enableDeletionVectors": ({features.DELETION_VECTORS}, set()),
    "delta.appendOnly": (set(), {"appendOnly"}),
    "delta.enableIcebergCompatV2": (set(), {"icebergCompatV2"}),
    "delta.enableIcebergCompatV3": (set(), {"icebergCompatV3"}),
    row_tracking.ENABLE_KEY: (set(), {row_tracking.FEATURE}),
    "delta.enableTypeWidening": ({features.TYPE_WIDENING}, set()),
}
#: Properties whose feature is a legacy one: the protocol is merged with the legacy versions that
#: imply it, as delta-spark's Protocol.merge does ((1,2) → (1,4); a table-features protocol gains the
#: features (1,4) implies, listed explicitly).
_LEGACY_AUTO = {"delta.enableChangeDataFeed": Protocol(1, 4)}


def set_properties(path: str, properties: dict[str, Any]) -> int:
    """Set table properties; returns the committed version."""
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    props = normalize_properties(properties)
    if any(k.lower().startswith(constraints.PREFIX) for k in props):
        from dvlake.errors import DeltaAnalysisException

        raise DeltaAnalysisException("Please use ALTER TABLE ADD CONSTRAINT to add CHECK constraints.",
                                     error_class="DELTA_ADD_CONSTRAINTS")
    # enabling IcebergCompatV3 turns row tracking on as delta-spark does (so the backfill below runs first)
    props = {**props, **compat.properties_to_set(snapshot.metadata, {**snapshot.configuration, **props}, root)}
    if compat.is_v3(props) and not compat.is_v3(snapshot.configuration):  # refuse before the backfill commits
        compat.check_metadata(snapshot.metadata.with_configuration(**props),
                              features.writer_features(snapshot.protocol) | compat.writer_features_for(props), 0, root)
    if _enables_row_tracking(snapshot, props):  # delta-spark's backfill commits first, then this one sets it
        from dvlake.commands.ddl.row_tracking_backfill import backfill

        backfill(root)
        snapshot = Snapshot.load(root)
    from dvlake.commands.ddl.protocol import split_protocol_properties

    props, requested = split_protocol_properties(snapshot.protocol, props)  # delta.feature.* → protocol, not properties
    if MODE_KEY in props and props[MODE_KEY] != snapshot.configuration.get(MODE_KEY, "none"):
        raise InvalidArgumentError(
            f"changing {MODE_KEY} of an existing table is not supported by dvlake yet (it would need physical names "
            "for the existing columns); create a new table with the mode instead")
    reader: set[str] = set()
    writer: set[str] = set()
    for key, value in props.items():
        if key in _AUTO_FEATURES and value == "true":
            reader |= _AUTO_FEATURES[key][0]
            writer |= _AUTO_FEATURES[key][1]
    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(snapshot.metadata.with_configuration(**props))
    protocol = features.with_features(requested, reader, writer)
    for key, legacy in _LEGACY_AUTO.items():
        if props.get(key) == "true":
            protocol = merge_protocols(protocol, legacy)
    if protocol != snapshot.protocol:
        txn.update_protocol(protocol)
    return txn.commit([], "SET TBLPROPERTIES", {"properties": json.dumps(props)})


def _enables_row_tracking(snapshot: Snapshot, props: dict[str, str]) -> bool:
    turning_on = str(props.get(row_tracking.ENABLE_KEY, "false")).strip().lower() == "true"
    return turning_on and not row_tracking.is_enabled(snapshot.protocol, snapshot.metadata) and snapshot.num_files > 0


def unset_properties(path: str, keys: Iterable[str], if_exists: bool = True) -> int:
    """Unset table properties (features stay in the protocol, as in delta-spark)."""
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    keys = list(keys)
    missing = [k for k in keys if k not in snapshot.configuration]
    if missing and not if_exists:
        raise InvalidArgumentError(f"cannot unset {missing}: not set on {root}")
    conf = {k: v for k, v in snapshot.configuration.items() if k not in keys}
    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(replace(snapshot.metadata, configuration=conf))
    return txn.commit([], "UNSET TBLPROPERTIES", {"properties": json.dumps(keys), "ifExists": str(if_exists).lower()})


# --- ALTER TABLE … ADD COLUMNS (issue 14) ------------------------------------------------------------


def add_columns(path: str, columns: list[dict[str, Any]]) -> int:
    """Append top-level columns (Delta schema JSON fields) to the schema; returns the committed version.

    New columns must be nullable (existing rows read NULL for them) and their names new
    (case-insensitively). With column mapping they get fresh ids and physical names.
    """
    from dvlake.errors import SchemaMismatchError
    from dvlake.log.schema import MAX_COLUMN_ID_KEY, assign_column_mapping, schema_json

    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    schema = snapshot.schema
    taken = {f["name"].lower() for f in schema["fields"]}
    for col in columns:
        if col["name"].lower() in taken:
            raise SchemaMismatchError(f"cannot add column {col['name']!r} to {root}: a column of that name exists")
        if not col.get("nullable", True):
            raise SchemaMismatchError(f"cannot add column {col['name']!r} as NOT NULL: the existing rows have no value "
                                      "for it; add it nullable")
        taken.add(col["name"].lower())
    new_schema = {**schema, "fields": list(schema["fields"]) + [dict(c) for c in columns]}
    metadata = snapshot.metadata
    if snapshot.configuration.get(MODE_KEY, "none") != "none":
        start = int(snapshot.configuration.get(MAX_COLUMN_ID_KEY, "0"))
        new_schema, max_id = assign_column_mapping(new_schema, start)
        metadata = metadata.with_configuration(**{MAX_COLUMN_ID_KEY: str(max_id)})
    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(replace(metadata, schema_string=schema_json(new_schema)))
    added = [{"column": {k: c[k] for k in ("name", "type", "nullable", "metadata") if k in c}} for c in columns]
    return txn.commit([], "ADD COLUMNS", {"columns": json.dumps(added)})
