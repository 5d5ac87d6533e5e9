"""Running SQL on Spark itself, past any ``spark.sql`` hook (see ``dvlake.spark.native_sql``).

A hook that replaces ``SparkSession.sql`` with a function calling :func:`dvlake.sql` must first
hand the function it replaces to :func:`register_original_sql` (per session class: classic and
Spark Connect sessions are different classes). dvlake then runs every non-Delta statement, and
the rewritten queries, through that original, never through the hook again.
"""

from __future__ import annotations

from dvlake.spark.native_sql import native_sql as passthrough
from dvlake.spark.native_sql import original_sql, register_original_sql

__all__ = ["original_sql", "passthrough", "register_original_sql"]
