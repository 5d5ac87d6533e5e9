"""ALTER TABLE … ALTER COLUMN c SET DEFAULT expr | DROP DEFAULT: a metadata-only commit (``dvlake.log.defaults``)."""

from __future__ import annotations

import json
from collections.abc import Callable

from dvlake.log import defaults
from dvlake.log.actions import Metadata
from dvlake.log.schema import field_by_name, schema_json
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction


def set_default(path: str, column: str, expression: str | None,
                check: Callable[[str], None] | None = None) -> int | None:
    """Set (``expression``) or drop (None) ``column``'s default; returns the committed version, None when nothing
    changes. Setting one needs the ``allowColumnDefaults`` feature (delta-spark's class otherwise); ``check`` gets
    the column's type name and refuses an expression that does not fit it."""
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    field = field_by_name(snapshot.schema, column)  # an unknown column is a typed error
    if expression is not None and not defaults.enabled(snapshot.protocol):
        defaults.refuse_without_feature("ALTER TABLE", root)
    if expression is not None and check is not None:
        ftype = field["type"]
        check(ftype if isinstance(ftype, str) else json.dumps(ftype))
    if (field.get("metadata") or {}).get(defaults.KEY) == expression:
        return None
    schema = defaults.with_default(snapshot.schema, column, expression)
    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(Metadata(**{**snapshot.metadata.__dict__, "schema_string": schema_json(schema)}))
    new_field = field_by_name(schema, column)
    return txn.commit([], "CHANGE COLUMN", {"column": json.dumps(new_field)})
