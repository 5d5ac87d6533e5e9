"""The identity high-water mark rules of ``dvlake.log.identity`` (delta-spark's ``updateToValidHighWaterMark``)."""

from __future__ import annotations

import pytest

from dvlake.errors import IdentityColumnError
from dvlake.log import identity
from dvlake.log.identity import Identity


@pytest.mark.parametrize("ident, candidate, mark", [
    (Identity("id", 5, 3, True, None), 5, 5),  # on the grid
    (Identity("id", 5, 3, True, None), 100, 101),  # rounded up onto start + k * step
    (Identity("id", 5, 3, True, None), 4, None),  # before the start: the start must stay reachable
    (Identity("id", 5, 3, True, 101), 50, None),  # never backwards
    (Identity("id", 5, 3, True, 101), 101, None),  # unchanged: no metadata action
    (Identity("id", 0, -2, True, None), -3, -4),  # negative step rounds downwards
    (Identity("id", 0, -2, True, -4), -2, None),
    (Identity("id", 0, -2, True, -4), 1, None),
], ids=["on-grid", "rounded", "before-start", "backwards", "same", "negative-rounded", "negative-backwards",
        "negative-before-start"])
def test_next_mark(ident: Identity, candidate: int, mark: int | None) -> None:
    assert ident.next_mark(candidate) == mark


def test_first_value_and_schema_update() -> None:
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": identity.field_metadata(10, 7, False)},
        {"name": "v", "type": "string", "nullable": True, "metadata": {}}]}
    [ident] = identity.columns(schema)
    assert (ident.first_value(), ident.always) == (10, True)
    moved = identity.with_high_water_marks(schema, {"id": 30})
    assert moved is not None
    assert moved["fields"][0]["metadata"] == {"delta.identity.start": 10, "delta.identity.step": 7,
                                              "delta.identity.allowExplicitInsert": False,
                                              "delta.identity.highWaterMark": 31}
    assert identity.columns(moved)[0].first_value() == 38
    assert identity.with_high_water_marks(moved, {"id": 31}) is None
    with pytest.raises(IdentityColumnError) as info:
        identity.refuse_explicit(identity.columns(moved), ["ID", "v"])
    assert info.value.getCondition() == "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"
