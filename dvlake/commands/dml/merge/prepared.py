"""What a MERGE planned on one snapshot (``PreparedMerge``) and what its matching job found (``Matches``).

Every path (insert-only, deletion vectors, copy-on-write) reads the same plan: one frozen record passed whole, in
place of the 17 to 24 positional parameters the paths took before, so a path cannot receive two values in the
wrong order and a new piece of the plan is added in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from dvlake.commands.dml.dv_pairs import PairWatch
from dvlake.commands.dml.merge.clauses import clause_frame, no_value
from dvlake.commands.dml.merge.frames import Sides, with_unqualified
from dvlake.commands.dml.merge.identity import identities_of
from dvlake.commands.dml.merge.names import SOURCE_ONLY, TARGET_ONLY, MergeNames
from dvlake.commands.dml.merge.spec import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, OUTCOMES, MergeClause, MergeSpec
from dvlake.commands.dml.merge.steps import unmatched_target
from dvlake.commands.dml.store_assign import Casting
from dvlake.log import generated
from dvlake.log.actions import AddFile, Metadata
from dvlake.log.snapshot import Snapshot
from dvlake.spark.scan import ScanPlan


@dataclass(frozen=True)
class PreparedMerge:
    """One MERGE planned on ``snapshot``: the files to read, the two sides' names, the (possibly evolved) schema."""

    spark: SparkSession
    snapshot: Snapshot
    spec: MergeSpec
    #: the target files a row of which may be matched or taken by a BY SOURCE clause (``pruning.py``)
    plan: ScanPlan
    candidates: list[AddFile]
    sides: Sides
    names: MergeNames
    #: the table's logical schema after evolution, and the metadata it comes from
    schema: StructType
    md: Metadata
    evolving: bool
    rules: Casting
    #: the ON condition as the Column Spark joins on
    on: Column
    #: a target row's columns in ``schema`` (new columns NULL)
    old_row: list[Column]
    schema_changed: bool
    generated: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """How messages name the command."""
        return f"MERGE INTO {self.snapshot.table_root}"

    @property
    def root(self) -> str:
        return self.snapshot.table_root

    def clauses(self, kind: str) -> list[MergeClause]:
        """The clauses of one kind (MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE), in order."""
        return [c for c in self.spec.clauses if c.kind == kind]

    @property
    def matched(self) -> list[MergeClause]:
        return self.clauses(MATCHED)

    @property
    def not_matched(self) -> list[MergeClause]:
        return self.clauses(NOT_MATCHED)

    @property
    def by_source(self) -> list[MergeClause]:
        return self.clauses(NOT_MATCHED_BY_SOURCE)

    def old_value(self, name: str) -> Column:
        """A column's value in the matched target row (NULL for a column schema evolution adds)."""
        old_columns = self.sides.tgt_columns
        for c in old_columns:
            if c.lower() == name.lower():
                return F.col(self.sides.tgt).getField(c)
        return F.lit(None).cast(self.schema[name].dataType)


    def matched_outcomes(self, frame: DataFrame, **options: Any) -> DataFrame:
        """The change rows the MATCHED clauses make of the matched pairs in ``frame``."""
        return self._outcomes(frame, MATCHED, **options)

    def insert_outcomes(self, frame: DataFrame) -> DataFrame:
        """The change rows the NOT MATCHED clauses make of the unmatched source rows in ``frame``."""
        return self._outcomes(frame, NOT_MATCHED)

    def by_source_outcomes(self, frame: DataFrame) -> DataFrame:
        """The change rows the NOT MATCHED BY SOURCE clauses make of the unmatched target rows in ``frame``."""
        return self._outcomes(frame, NOT_MATCHED_BY_SOURCE)

    def _outcomes(self, frame: DataFrame, kind: str, **options: Any) -> DataFrame:
        """``clauses.clause_frame`` with this MERGE's schema, names, evolution, rules and generated columns, for the
        clauses of one kind: the codes their actions yield (``OUTCOMES``) and a column's value before the clause (the
        matched target row's; none for an insert) follow from the kind, so no path passes them."""
        current: Callable[[str], Column | None] = no_value if kind == NOT_MATCHED else self.old_value
        return clause_frame(frame, self.clauses(kind), OUTCOMES[kind], self.schema, self.sides, current, self.evolving,
                            self.where, self.rules, generated=self.generated,
                            identities=identities_of(self.snapshot.protocol, self.md), **options)

    def unmatched_sources(self, found: Matches) -> DataFrame:
        """The source rows no target row matched, their columns also unqualified (what NOT MATCHED clauses see)."""
        return with_unqualified(found.src.join(found.matched_sources, self.sides.sid, "left_anti"), self.names,
                                SOURCE_ONLY)

    def unmatched_targets(self, found: Matches, matches: DataFrame) -> DataFrame:
        """The target rows no source row matched, unqualified too (what NOT MATCHED BY SOURCE clauses see)."""
        return with_unqualified(unmatched_target(self.spark, found.target, matches, self.sides, found.num_pairs),
                                self.names, TARGET_ONLY)


def generated_of(snapshot: Snapshot, md: Metadata) -> dict[str, str]:
    """The generated columns (name → expression) a clause computes where it does not assign them."""
    return generated.expressions(snapshot.protocol, md)


@dataclass(frozen=True)
class Matches:
    """What the matching job found, for the DV and copy-on-write paths."""

    #: the source wrapped with its row id, and the target wrapped (``frames.wrap_*``)
    src: DataFrame
    target: DataFrame
    #: the matched (source row, target row) pairs, materialized, and the source rows among them
    matches: DataFrame
    matched_sources: DataFrame
    num_pairs: int
    #: a lone unconditional MATCHED delete: a target row matched twice is no error
    exempt: bool
    num_source_rows: int
    materialize_ms: int
    #: ``time.monotonic()`` when the scan of the target began (``scanTimeMs``)
    scan_started: float
    #: marks gathered by the matches' job (DV path with a broadcast source), else an empty watch
    watch: PairWatch = field(default_factory=lambda: PairWatch(None))
    index_col: str | None = None
