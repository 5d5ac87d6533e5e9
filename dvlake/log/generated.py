"""A table's generated columns (``GENERATED ALWAYS AS (expr)``), read from its metadata (no Spark here).

delta-spark keeps a generated column's expression as the field metadata ``delta.generationExpression``
(top-level columns only). The expression binds only when the protocol has the ``generatedColumns``
writer feature (legacy writer version 4 or more, or the feature listed): a schema that carries the key
without it is an ordinary table, whose values nobody enforces (``GeneratedColumn.enforcesGeneratedColumns``).

A writer computes a generated column the written data lacks from its expression, and checks a provided
value against it with the extra CHECK rule ``Generated Column`` (``col <=> (expr)``): null-safe, so a NULL
is right exactly when the expression is NULL. The Spark side is ``dvlake.spark.constraints``.
"""

from __future__ import annotations

from dvlake.log import features
from dvlake.log.actions import Metadata, Protocol
from dvlake.log.constraints import Check
from dvlake.log.sql_dialect import quote_identifier

KEY = "delta.generationExpression"
FEATURE = "generatedColumns"
#: delta-spark's constraint name for a generated column's check (the violation message says "CHECK constraint Generated Column").
CHECK_NAME = "Generated Column"


def enforced(protocol: Protocol) -> bool:
    """The protocol makes generation expressions binding (the ``generatedColumns`` writer feature)."""
    return FEATURE in features.writer_features(protocol)


def expressions(protocol: Protocol, metadata: Metadata) -> dict[str, str]:
    """{column name: expression text} for the table's generated columns, in schema order; empty when the
    protocol does not enforce them."""
    if not enforced(protocol):
        return {}
    out: dict[str, str] = {}
    for f in metadata.schema.get("fields", []):
        text = (f.get("metadata") or {}).get(KEY)
        if text is not None:
            out[f["name"]] = str(text)
    return out


def checks(protocol: Protocol, metadata: Metadata) -> list[Check]:
    """One CHECK rule per generated column: the written value equals the expression, null-safe."""
    return [Check(CHECK_NAME, f"{quote_identifier(name)} <=> ({text})")
            for name, text in expressions(protocol, metadata).items()]

