"""A table's identity columns (``GENERATED ALWAYS | BY DEFAULT AS IDENTITY``), read from its schema (no Spark here).

PROTOCOL.md keeps an identity column's definition in its field metadata: ``delta.identity.start``,
``delta.identity.step`` (never 0), ``delta.identity.allowExplicitInsert`` (true for BY DEFAULT) and, once a writer
has put values in it, ``delta.identity.highWaterMark``: the highest value written so far (the lowest for a negative
step). A writer generates ``start + k * step`` values strictly beyond the mark, unique but not necessarily
contiguous, and moves the mark in the same commit as the data, so a later writer never hands out a value twice.
Because the mark lives in the schema, every write to an identity column changes the table's metadata: two
concurrent writers conflict (``MetadataChangedException``), as they do under delta-spark.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dvlake.errors import IdentityColumnError
from dvlake.log import features
from dvlake.log.actions import Protocol

START = "delta.identity.start"
STEP = "delta.identity.step"
HIGH_WATER_MARK = "delta.identity.highWaterMark"
ALLOW_EXPLICIT_INSERT = "delta.identity.allowExplicitInsert"
FEATURE = "identityColumns"
#: the only type delta-spark allows for an identity column
TYPE = "long"


@dataclasses.dataclass(frozen=True)
class Identity:
    """One identity column's definition and its high-water mark (None before any value was written)."""

    name: str
    start: int
    step: int
    allow_explicit_insert: bool
    high_water_mark: int | None

    @property
    def always(self) -> bool:
        """GENERATED ALWAYS: the writer alone chooses the values."""
        return not self.allow_explicit_insert

    def first_value(self) -> int:
        """The first value the next write may generate: ``start`` on a fresh column, else one step beyond the mark."""
        return self.start if self.high_water_mark is None else self.high_water_mark + self.step

    def next_mark(self, candidate: int) -> int | None:
        """The high-water mark after a write whose values in this column reach ``candidate`` (its max for a positive
        step, min for a negative one), or None when the mark stays: a candidate is rounded up to the next value of
        ``start + k * step`` (an explicit BY DEFAULT value need not be one), never moves the mark backwards, and
        one before ``start`` does not move it at all (the start would otherwise be skipped)."""
        forward = self.step > 0

        def before(a: int, b: int) -> bool:
            return a < b if forward else a > b

        if before(candidate, self.start):
            return None
        offset = candidate - self.start
        rounded = candidate if offset % self.step == 0 else self.start + self.step * (offset // self.step + 1)
        if self.high_water_mark is not None and not before(self.high_water_mark, rounded):
            return None
        return rounded


def field_metadata(start: int, step: int, allow_explicit_insert: bool) -> dict[str, Any]:
    """The field metadata of a new identity column, as delta-spark writes it (no mark until values exist)."""
    return {START: start, STEP: step, ALLOW_EXPLICIT_INSERT: allow_explicit_insert}


def is_identity(field: dict[str, Any]) -> bool:
    """A schema field (JSON form) is an identity column: its metadata has the start and step keys."""
    md = field.get("metadata") or {}
    return START in md and STEP in md


def columns(schema: dict[str, Any]) -> list[Identity]:
    """The identity columns of a table's schema (top level only, as PROTOCOL.md allows), in schema order."""
    out = []
    for f in schema.get("fields", []):
        if not is_identity(f):
            continue
        md = f["metadata"]
        mark = md.get(HIGH_WATER_MARK)
        out.append(Identity(f["name"], int(md[START]), int(md[STEP]), bool(md.get(ALLOW_EXPLICIT_INSERT, False)),
                            None if mark is None else int(mark)))
    return out


def defines_identity(schema: dict[str, Any]) -> bool:
    """The schema has at least one identity column (the ``identityColumns`` feature joins a new table's protocol)."""
    return any(is_identity(f) for f in schema.get("fields", []))


def enforced(protocol: Protocol) -> bool:
    """The protocol makes identity definitions binding (the ``identityColumns`` writer feature, writer version 6+)."""
    return FEATURE in features.writer_features(protocol)


def check_definitions(schema: dict[str, Any], partition_by: list[str] | tuple[str, ...]) -> None:
    """delta-spark's rules for defining identity columns: BIGINT only, a step other than 0, not a partition
    column, not a generated column too."""
    parts = {p.lower() for p in partition_by}
    for f in schema.get("fields", []):
        if not is_identity(f):
            continue
        md = f["metadata"]
        if f["type"] != TYPE:
            raise IdentityColumnError(f"identity column {f['name']!r} has type {f['type']}; an identity column must be "
                                      "BIGINT", error_class="DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE")
        if int(md[STEP]) == 0:
            raise IdentityColumnError(f"identity column {f['name']!r} has INCREMENT BY 0; the step must not be 0",
                                      error_class="DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP")
        if f["name"].lower() in parts:
            raise IdentityColumnError(f"identity column {f['name']!r} cannot be a partition column; partition by "
                                      "another column", error_class="DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED")
        if "delta.generationExpression" in md:
            raise IdentityColumnError(f"column {f['name']!r} is both an identity column and a generated column; "
                                      "give it one of the two",
                                      error_class="DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION")


def refuse_explicit(identities: list[Identity], written: list[str]) -> None:
    """A write that gives values for a GENERATED ALWAYS identity column is refused (delta-spark's class)."""
    _refuse([i for i in identities if i.always], written, "is GENERATED ALWAYS AS IDENTITY: its values are generated, so "
            "it cannot be given one; leave it out of the column list or the DataFrame",
            "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED")


def refuse_update(identities: list[Identity], assigned: list[str]) -> None:
    """UPDATE (or MERGE's UPDATE SET) of an identity column is refused, ALWAYS and BY DEFAULT alike, as in delta-spark."""
    _refuse(identities, assigned, "is an identity column; its values cannot be updated",
            "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED")


def _refuse(identities: list[Identity], names: list[str], why: str, error_class: str) -> None:
    given = {c.lower() for c in names}
    for ident in identities:
        if ident.name.lower() in given:
            raise IdentityColumnError(f"column {ident.name!r} {why}", error_class=error_class)


def with_high_water_marks(schema: dict[str, Any], candidates: dict[str, int]) -> dict[str, Any] | None:
    """``schema`` with the marks of the columns in ``candidates`` (name → reached value) moved, or None when no
    mark changes (the commit then needs no metadata action)."""
    by_name = {i.name: i for i in columns(schema)}
    changed = False
    fields = []
    for f in schema["fields"]:
        ident = by_name.get(f["name"])
        mark = ident.next_mark(candidates[f["name"]]) if ident is not None and f["name"] in candidates else None
        if mark is not None:
            f = {**f, "metadata": {**f["metadata"], HIGH_WATER_MARK: mark}}
            changed = True
        fields.append(f)
    return {**schema, "fields": fields} if changed else None
