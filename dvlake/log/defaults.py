"""Column defaults (``c STRING DEFAULT 'new'``), read from a table's schema (no Spark here).

delta-spark keeps a column's default as Spark does, the expression's SQL text in the field metadata
``CURRENT_DEFAULT``, and allows one only on a table whose protocol has the writer feature ``allowColumnDefaults``
(``TBLPROPERTIES ('delta.feature.allowColumnDefaults' = 'supported')``): without it, defining a default is
``WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED``. The default applies where SQL leaves a column out or says
``DEFAULT``: an INSERT column list that omits it, ``VALUES (…, DEFAULT)``, ``UPDATE … SET c = DEFAULT``.
"""

from __future__ import annotations

from typing import Any

from dvlake.errors import DeltaAnalysisException
from dvlake.log import features
from dvlake.log.actions import Protocol

KEY = "CURRENT_DEFAULT"
FEATURE = "allowColumnDefaults"
PROPERTY = f"delta.feature.{FEATURE}"
NOT_ENABLED = "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"


def expressions(schema: dict[str, Any]) -> dict[str, str]:
    """{column: default expression text} for the top-level columns that have a default, in schema order."""
    return {f["name"]: str(f["metadata"][KEY]) for f in schema.get("fields", []) if KEY in (f.get("metadata") or {})}


def enabled(protocol: Protocol) -> bool:
    """The protocol allows column defaults (the ``allowColumnDefaults`` writer feature)."""
    return FEATURE in features.writer_features(protocol)


def requested(properties: dict[str, str] | None) -> bool:
    """A new table's properties add the feature (``delta.feature.allowColumnDefaults`` = supported/enabled)."""
    return str((properties or {}).get(PROPERTY, "")).lower() in ("supported", "enabled")


def refuse_without_feature(command: str, table: str) -> None:
    """delta-spark's refusal of a default on a table without the feature, naming how to add it."""
    raise DeltaAnalysisException(
        f"Failed to execute {command} command because it assigned a column DEFAULT value to {table}, but the "
        f"corresponding table feature was not enabled. Please retry the command after executing ALTER TABLE "
        f"tableName SET TBLPROPERTIES('{PROPERTY}' = 'supported') (or give that property in CREATE TABLE).",
        error_class=NOT_ENABLED)


def with_default(schema: dict[str, Any], column: str, text: str | None) -> dict[str, Any]:
    """``schema`` with ``column``'s default set to ``text`` (None drops it); the column is matched case-insensitively."""
    fields = []
    for f in schema["fields"]:
        if f["name"].lower() == column.lower():
            md = {k: v for k, v in (f.get("metadata") or {}).items() if k != KEY}
            if text is not None:
                md[KEY] = text
            f = {**f, "metadata": md}
        fields.append(f)
    return {**schema, "fields": fields}
