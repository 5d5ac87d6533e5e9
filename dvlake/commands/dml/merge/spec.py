"""What a MERGE is asked to do: its clauses, the spec the builder and SQL fill in, and the codes of a change row's
outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame

from dvlake.commands.dml.merge.names import BOTH, SOURCE_ONLY, TARGET_ONLY
from dvlake.log.condition import Condition

MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE = "matched", "notMatched", "notMatchedBySource"


# the side(s) a clause's expressions see: no target row for NOT MATCHED, no source row for NOT MATCHED BY SOURCE
SCOPE = {MATCHED: BOTH, NOT_MATCHED: SOURCE_ONLY, NOT_MATCHED_BY_SOURCE: TARGET_ONLY}


# kind codes of a change row
NOOP, M_UPDATE, M_DELETE, N_INSERT, S_UPDATE, S_DELETE = 0, 1, 2, 3, 4, 5


MARKED = (M_UPDATE, M_DELETE, S_UPDATE, S_DELETE)


WRITTEN = (M_UPDATE, N_INSERT, S_UPDATE)


#: a clause's kind → its action → the code of the change rows it yields: every path asks ``clause_frame`` with these
OUTCOMES: dict[str, dict[str, int]] = {MATCHED: {"update": M_UPDATE, "delete": M_DELETE},
                                       NOT_MATCHED: {"insert": N_INSERT},
                                       NOT_MATCHED_BY_SOURCE: {"update": S_UPDATE, "delete": S_DELETE}}


def updated_rows(counts: dict[int, int]) -> int:
    """The target rows updated (by a MATCHED or a NOT MATCHED BY SOURCE clause) in change-row counts by code."""
    return counts.get(M_UPDATE, 0) + counts.get(S_UPDATE, 0)


RESULT_SCHEMA = "num_affected_rows long, num_updated_rows long, num_deleted_rows long, num_inserted_rows long"


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause: its kind, action (update/delete/insert), optional condition and assignments (None = ``*``)."""

    kind: str
    action: str
    #: parsed where the clause is given (``Condition.of``): the command never parses it again
    condition: Condition | None = None
    assignments: dict[str, str | Column] | None = None

    @classmethod
    def of(cls, kind: str, action: str, condition: str | Column | Condition | None = None,
           assignments: dict[str, str | Column] | None = None) -> MergeClause:
        """A clause with its condition parsed once."""
        return cls(kind, action, Condition.of(condition), assignments)


@dataclass
class MergeSpec:
    """Everything a MERGE needs, independent of the table version it runs on."""

    source: DataFrame
    #: the ON condition, parsed where the MERGE is given (the builder, the SQL front end)
    condition: Condition
    clauses: list[MergeClause]
    target_alias: str | None = None
    source_alias: str | None = None
    schema_evolution: bool = False
    _checked: bool = field(default=False, repr=False)
