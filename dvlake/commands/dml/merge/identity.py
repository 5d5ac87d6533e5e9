"""Identity columns in MERGE: the values an INSERT clause generates, the refusals, and the moved high-water mark.

A NOT MATCHED ``INSERT`` that leaves an identity column out (a column list without it, or ``INSERT *`` from a source
that lacks it) gets fresh values exactly as INSERT and append do (``spark.identity.fill``'s ``first + step * row id``:
unique, on the start/step grid, one step past the mark). GENERATED ALWAYS refuses a value given in the clause;
BY DEFAULT keeps it. Updated and copied rows keep their values (an UPDATE of the column stays refused). The mark is
read back from the files the MERGE wrote and moves in the MERGE's own commit, so a concurrent identity write
conflicts on the metadata as it does for INSERT.
"""

from __future__ import annotations

import dataclasses

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dvlake.commands.common import mode_of
from dvlake.commands.dml.merge.spec import MergeSpec
from dvlake.commands.dml.template import Outcome
from dvlake.log import identity
from dvlake.log.actions import AddFile, Metadata, Protocol
from dvlake.log.identity import Identity
from dvlake.log.schema import schema_json
from dvlake.spark import identity as identity_values
from dvlake.txn.transaction import OptimisticTransaction


def identities_of(protocol: Protocol, md: Metadata) -> list[Identity]:
    """The identity columns whose values MERGE must generate: none unless the protocol makes them binding."""
    return identity.columns(md.schema) if identity.enforced(protocol) else []


def check_updates(protocol: Protocol, md: Metadata, spec: MergeSpec) -> None:
    """A MATCHED / NOT MATCHED BY SOURCE UPDATE that sets an identity column (``UPDATE SET *`` sets them all) is
    refused with delta-spark's class, ALWAYS and BY DEFAULT alike."""
    identities = identities_of(protocol, md)
    if not identities:
        return
    for clause in spec.clauses:
        if clause.action == "update":
            names = [i.name for i in identities] if clause.assignments is None else \
                [str(k).split(".")[-1].strip("`") for k in clause.assignments]
            identity.refuse_update(identities, names)


def insert_values(identities: list[Identity], assigned: set[str]) -> dict[str, Column]:
    """{identity column: its generated value} for one INSERT clause that assigns the columns ``assigned`` (top-level
    names); a GENERATED ALWAYS column among them is refused (``DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED``).
    The row id is ``monotonically_increasing_id``, unique over the frame the clause is evaluated on."""
    identity.refuse_explicit(identities, list(assigned))
    given = {a.lower() for a in assigned}
    row = F.monotonically_increasing_id()
    return {i.name: F.lit(i.first_value()).cast("long") + F.lit(i.step).cast("long") * row
            for i in identities if i.name.lower() not in given}


def with_moved_marks(outcome: Outcome, txn: OptimisticTransaction, protocol: Protocol, table_root: str,
                     session_df: DataFrame) -> Outcome:
    """Stage the schema with the high-water marks the MERGE's written files reach, when it inserted rows: the mark
    moves in the same commit as the data. Rewritten rows keep values at or behind the mark, so reading every
    added file's bound is exact. ``session_df``: any DataFrame (it lends its session to read a file
    without statistics)."""
    if not identity.enforced(protocol) or not outcome.metrics.get("numTargetRowsInserted"):
        return outcome
    md = txn.metadata
    adds = [a for a in outcome.actions if isinstance(a, AddFile)]
    moved = identity_values.moved_schema(adds, md.schema, mode_of(md), table_root, session_df)
    if moved is not None:
        txn.update_metadata(dataclasses.replace(md, schema_string=schema_json(moved)))
    return outcome
