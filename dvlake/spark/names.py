"""How the session matches a name to a column: ``spark.sql.caseSensitive``, read in one place.

Spark's analyzer resolves the names in conditions and values under this setting; the names dvlake resolves
itself (UPDATE SET and MERGE assignment targets, INSERT column lists) must follow the same rule, or ``SET S = 1``
would update a column ``s`` where delta-spark reports ``UNRESOLVED_COLUMN``.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

CASE_SENSITIVE = "spark.sql.caseSensitive"


def case_sensitive(spark: SparkSession) -> bool:
    """Whether the session matches names with case (Spark's default: no)."""
    return str(spark.conf.get(CASE_SENSITIVE, "false") or "false").strip().lower() == "true"


def name_key(name: str, sensitive: bool) -> str:
    """The form two names are compared in: as written when case matters, lower case otherwise."""
    return name if sensitive else name.lower()


def same_name(a: str, b: str, sensitive: bool) -> bool:
    """Whether ``a`` names ``b`` under the session's case sensitivity."""
    return name_key(a, sensitive) == name_key(b, sensitive)
