"""A row condition bound to one table layout: parsed once at the command's entry (``log.condition.Condition``),
bound here once per snapshot, then only visited.

Binding fixes what the condition's meaning depends on besides its text: the table's columns (a ``*`` argument is
spelled as them; the frames dvlake filters carry internal columns too), whether names are matched with case
(``spark.sql.caseSensitive``) and the zone TIMESTAMP literals are read in (``spark.sql.session.timeZone``, which
pruning reads them with). Every consumer then asks the bound form: the Spark ``Column`` (built once), whether it
decides per file from partition values alone, its top-level conjuncts, and its text for the log and messages. Code
below the command entry takes this form only, never text, so nothing parses or renders a condition twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from pyspark.sql import Column, SparkSession
from pyspark.sql.types import StructType
from sqlglot import exp

from dvlake.log.condition import Condition
from dvlake.spark.names import case_sensitive
from dvlake.spark.pruning import condition_column, session_time_zone


@dataclass(frozen=True, eq=False)
class BoundCondition:
    """One parsed condition bound to a table's columns, case sensitivity and session time zone."""

    condition: Condition
    columns: tuple[str, ...]
    case_sensitive: bool
    time_zone: str

    @cached_property
    def column(self) -> Column:
        """The Column Spark evaluates (the user's text with ``*`` spelled as the table's columns, or their Column):
        built once, so a command's scans all filter with the same expression."""
        return condition_column(self.condition, list(self.columns))

    @property
    def alias(self) -> str | None:
        return self.condition.alias

    def partition_only(self, partition_columns: list[str]) -> bool:
        """Whether the condition provably decides per file from ``partition_columns`` alone (see
        ``Condition.references_only``): the template's partition-only path."""
        return self.condition.references_only(set(partition_columns))

    def conjuncts(self) -> list[exp.Expr]:
        """The top-level AND-ed parts of the parsed condition (none for a Column or unparsed text)."""
        return self.condition.conjuncts()

    def display(self) -> str:
        return self.condition.display()


def bind(spark: SparkSession, condition: Condition, schema: StructType) -> BoundCondition:
    """``condition`` bound to the table whose logical schema is ``schema``, under ``spark``'s session settings."""
    return BoundCondition(condition, tuple(schema.fieldNames()), case_sensitive(spark), session_time_zone(spark))

