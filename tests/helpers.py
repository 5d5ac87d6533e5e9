"""Small helpers many test files share (one definition each, imported rather than copied)."""

from __future__ import annotations

from typing import Any

import dvlake

#: Table properties that turn deletion vectors on for a new table.
DV_PROPS = {"delta.enableDeletionVectors": "true"}


def table_rows(spark: Any, path: str, version: int | None = None) -> list[tuple]:
    """The table's live rows at ``version`` (latest when None) as sorted tuples, read by ``dvlake.read``."""
    return sorted(tuple(r) for r in dvlake.read(spark, path, version=version).collect())
