"""ALTER TABLE … ALTER COLUMN c TYPE t (and CHANGE COLUMN c c t): type widening, as delta-spark 4.x applies it.

A change of type is a metadata commit only: files keep the type they were written with and readers widen them
(``log/type_widening.py``). So it is allowed only where that is exact and the table says readers can do it:

- ``delta.enableTypeWidening`` must be true (it puts ``typeWidening`` in the protocol, reader and writer); without
  it any change of type is refused with delta-spark's DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP, as before;
- the change must be a widening of the feature's list (else the same class), Iceberg V2's subset when IcebergCompat
  is on;
- a column a CHECK constraint or a generated column reads keeps its type (delta-spark's
  DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE / DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE): the expression was
  checked against the old type.

The path may end inside maps and arrays (``m.key``, ``m.value``, ``a.element``, Spark's names): the change is then
recorded on the nearest struct field with a ``fieldPath``.
"""

from __future__ import annotations

import copy
from typing import Any

from dvlake.commands.ddl.columns import _check_dependents, _dotted, _field
from dvlake.errors import DeltaAnalysisException, SchemaMismatchError
from dvlake.log import features, type_widening
from dvlake.log.snapshot import Snapshot
from dvlake.log.type_sql import sql_type

_CHANGE_OP = "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"
_INNER = {"array": ("element",), "map": ("key", "value")}
_INNER_KEY = {"element": "elementType", "key": "keyType", "value": "valueType"}


def _locate(schema: dict[str, Any], column: list[str], root: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """The struct holding the nearest struct field of ``column``, that field, and the path below it (element/key/value)."""
    owner = schema
    field = _field(schema, column[0], column[:1], root)
    inner: list[str] = []
    current: Any = field["type"]
    for depth, part in enumerate(column[1:], start=1):
        kind = current.get("type") if isinstance(current, dict) else None
        if kind == "struct":
            owner, field, inner = current, _field(current, part, column[:depth + 1], root), []
            current = field["type"]
        elif kind in _INNER and part.lower() in _INNER[kind]:
            inner.append(part.lower())
            current = current[_INNER_KEY[part.lower()]]
        else:
            raise SchemaMismatchError(f"{_dotted(column[:depth])} in {root} is a {sql_type(current)}: it has no field "
                                      f"{part!r} (maps have key and value, arrays element)")
    return owner, field, inner


def _replaced(t: Any, inner: list[str], new_type: Any) -> Any:
    """``t`` with the type at ``inner`` (element/key/value steps) replaced by ``new_type``."""
    if not inner:
        return new_type
    out = copy.deepcopy(t)
    key = _INNER_KEY[inner[0]]
    out[key] = _replaced(t[key], inner[1:], new_type)
    return out


def _at(t: Any, inner: list[str]) -> Any:
    for part in inner:
        t = t[_INNER_KEY[part]]
    return t


def _refuse(root: str, column: list[str], old: Any, new: Any, why: str) -> DeltaAnalysisException:
    return DeltaAnalysisException(
        f"ALTER TABLE CHANGE COLUMN is not supported for changing column {_dotted(column)} of {root} from {sql_type(old)} "
        f"to {sql_type(new)}: {why}", error_class=_CHANGE_OP)


def widen_column(snapshot: Snapshot, schema: dict[str, Any], column: list[str], new_type: Any) -> dict[str, Any]:
    """Change the type of ``column`` in ``schema`` (in place) to ``new_type``; returns the changed struct field.

    Raises:
        ColumnNotFoundError: no such column.
        DeltaAnalysisException: type widening is not enabled, or the change is not a supported widening
            (DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP); a CHECK constraint or a generated column reads it.
    """
    root = snapshot.table_root
    owner, field, inner = _locate(schema, column, root)
    old = _at(field["type"], inner)
    if old == new_type:
        return field
    if not type_widening.is_enabled(snapshot.configuration) or \
            not type_widening.is_supported(features.reader_features(snapshot.protocol)):
        raise _refuse(root, column, old, new_type,
                      f"the files hold the old type; set the table property {type_widening.ENABLE_KEY} = 'true' first "
                      "(it adds the typeWidening feature, so readers widen the older files), then change it to a wider type")
    iceberg = any(snapshot.configuration.get(f"delta.enableIcebergCompatV{v}", "").lower() == "true" for v in (1, 2, 3))
    try:
        widened = type_widening.widen_field(field, _replaced(field["type"], inner, new_type), iceberg)
    except type_widening.TypeChangeRefused as e:
        raise _refuse(root, column, old, new_type,
                      f"{e.why}. Supported widenings: byte → short → int → long, float → double, byte/short/int → double, "
                      "date → timestamp_ntz, decimal(p, s) → decimal(p + k1, s + k2) with k1 >= k2 >= 0, byte/short/int → "
                      "decimal(10 + k1, k2) and long → decimal(20 + k1, k2)") from None
    _check_dependents(snapshot, column[:len(column) - len(inner)], "change the type of")
    owner["fields"] = [widened if f is field else f for f in owner["fields"]]
    return widened
