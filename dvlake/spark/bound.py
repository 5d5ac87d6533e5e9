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

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from sqlglot import exp

from dvlake.log.condition import Condition
from dvlake.spark.names import case_sensitive
from dvlake.spark.native_sql import native_sql
from dvlake.spark.pruning import condition_column, session_time_zone

#: The placeholder of the frame a placeholder-form condition filters (``Condition.query_text``).
ROWS_KEY = "dvlake_dml_rows"


@dataclass(frozen=True, eq=False)
class BoundCondition:
    """One parsed condition bound to a table's columns, case sensitivity and session time zone."""

    condition: Condition
    columns: tuple[str, ...]
    case_sensitive: bool
    time_zone: str
    #: the DataFrames behind ``Condition.query_text``'s placeholders, the target's own read at the command's snapshot
    frames: dict[str, Any] = field(default_factory=dict)

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

    @property
    def reads_tables(self) -> bool:
        """Whether Spark evaluates the condition as a query with DataFrame arguments (subqueries over Delta tables)."""
        return self.condition.query_text is not None

    def matching(self, df: DataFrame) -> DataFrame:
        """The rows of ``df`` where the condition is TRUE (not where it is NULL: SQL's WHERE)."""
        return self._where(df, "coalesce(({cond}\n), false)", lambda c: F.coalesce(c, F.lit(False)))

    def not_matching(self, df: DataFrame) -> DataFrame:
        """The rows of ``df`` where the condition is FALSE or NULL: what a DELETE keeps."""
        return self._where(df, "NOT coalesce(({cond}\n), false)", lambda c: ~F.coalesce(c, F.lit(False)))

    def _where(self, df: DataFrame, template: str, wrap: Callable[[Column], Column]) -> DataFrame:
        """``df`` (under the condition's alias) filtered by the condition. A condition whose subqueries read Delta
        tables runs as one query over ``df`` and those tables' frames (``spark.sql``'s DataFrame arguments: no name
        of ours enters the catalog); correlated references to the target then resolve to ``df``'s columns as in a
        WHERE clause, and Spark plans the subqueries (semi/anti joins, a scalar aggregate) itself."""
        query_text = self.condition.query_text
        if query_text is None:
            return (df.alias(self.alias) if self.alias else df).filter(wrap(self.column))
        alias = f" AS `{self.alias.replace('`', '``')}`" if self.alias else ""
        where = template.replace("{cond}", query_text)
        return native_sql(df.sparkSession, f"SELECT * FROM {{{ROWS_KEY}}}{alias} WHERE {where}",
                          **{ROWS_KEY: df, **self.frames})


def bind(spark: SparkSession, condition: Condition, schema: StructType,
         target: Callable[[], DataFrame] | None = None) -> BoundCondition:
    """``condition`` bound to the table whose logical schema is ``schema``, under ``spark``'s session settings.

    ``target`` reads the table's live rows at the command's snapshot: the frame a subquery naming the target
    itself reads (``Condition.target_keys``), so it sees the rows the command changes, not a newer version."""
    frames = dict(condition.query_frames)
    if condition.target_keys:
        assert target is not None, "a condition reading its own target needs the target's frame"
        own = target()
        frames.update(dict.fromkeys(condition.target_keys, own))
    return BoundCondition(condition, tuple(schema.fieldNames()), case_sensitive(spark), session_time_zone(spark),
                          frames)

