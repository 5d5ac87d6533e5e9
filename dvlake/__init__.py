"""dvlake: Delta Lake tables with deletion vectors, on Apache Spark through PySpark.

The Spark-facing names are imported lazily, so the Spark-free layers (``dvlake.dv``,
``dvlake.log``, ``dvlake.txn``, ``dvlake.storage``) can be used without importing PySpark.
"""

from __future__ import annotations

from typing import Any

from dvlake._version import __version__
from dvlake.sql import sql  # the function shadows its module's name on the package, as users expect

__all__ = ["DeltaTable", "DeltaTableBuilder", "IdentityGenerator", "read", "read_changes", "read_stream", "write", "sql",
           "configure_spark", "configure_spark_with_delta_pip", "session", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("DeltaTable", "DeltaTableBuilder", "IdentityGenerator", "read", "write", "read_changes", "read_stream"):
        from dvlake import api

        return getattr(api, name)
    if name in ("configure_spark", "configure_spark_with_delta_pip"):
        from dvlake import faces

        return getattr(faces, name)
    if name == "session":
        from dvlake import adapter

        return adapter.session
    raise AttributeError(f"module 'dvlake' has no attribute {name!r}")
