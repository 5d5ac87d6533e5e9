"""The ``typeWidening`` table feature: which type changes are widenings, and their history in field metadata.

A widening changes a column's type in the schema only: files written before it keep the narrow physical type and
every reader converts their values on read (Spark's Parquet reader does it for each of these pairs), so the change
never rewrites data. That is only sound for changes where every narrow value has one exact wide value, hence the
closed list PROTOCOL.md gives (delta-spark 4.x's ``TypeWidening.isTypeChangeSupported``):

- integers to a wider integer (byte → short → integer → long);
- float → double, and byte/short/integer → double (exact: 31 bits fit a double's 53-bit mantissa);
- date → timestamp_ntz (a date has no zone, so midnight without zone is its only reading);
- decimal(p, s) → decimal(p + k1, s + k2) with k1 >= k2 >= 0 (no integer digit and no fraction digit lost);
- byte/short/integer → decimal with at least 10 integer digits, long → decimal with at least 20.

Each change is recorded in the ``delta.typeChanges`` metadata of the nearest enclosing struct field, as a list of
``{"fromType", "toType"}`` objects, with ``fieldPath`` (``key``, ``value``, ``element``, dotted when nested) when the
changed type is inside a map or array of that field. Readers use it to know a file may hold an older type; DROP
FEATURE typeWidening rewrites such files and removes it.

Tables whose Iceberg compatibility is on only get the changes Iceberg V2 can express (PROTOCOL.md's writer rules).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator
from typing import Any

FEATURE = "typeWidening"
PREVIEW_FEATURE = "typeWidening-preview"
ENABLE_KEY = "delta.enableTypeWidening"
TYPE_CHANGES_KEY = "delta.typeChanges"

_INTEGRAL = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
#: integer digits a decimal needs to hold every value of an integral type (INT32 / INT64 in Parquet)
_DECIMAL_DIGITS = {"byte": 10, "short": 10, "integer": 10, "long": 20}


def _decimal(t: Any) -> tuple[int, int] | None:
    if not isinstance(t, str):
        return None
    m = _DECIMAL.match(t.strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def is_widening(from_type: Any, to_type: Any) -> bool:
    """Whether changing the atomic type ``from_type`` to ``to_type`` (Delta JSON names) is a supported widening."""
    if from_type == to_type:
        return True
    if not isinstance(from_type, str) or not isinstance(to_type, str):
        return False
    if from_type in _INTEGRAL and to_type in _INTEGRAL:
        return _INTEGRAL.index(from_type) < _INTEGRAL.index(to_type)
    if (from_type, to_type) == ("float", "double") or (from_type, to_type) == ("date", "timestamp_ntz"):
        return True
    if from_type in ("byte", "short", "integer") and to_type == "double":
        return True
    target = _decimal(to_type)
    if target is None:
        return False
    source = _decimal(from_type)
    if source is not None:
        return target[1] >= source[1] and target[0] - target[1] >= source[0] - source[1]
    if from_type in _DECIMAL_DIGITS:
        return target[0] - target[1] >= _DECIMAL_DIGITS[from_type]
    return False


def iceberg_can_widen(from_type: Any, to_type: Any) -> bool:
    """Whether Iceberg V2's schema evolution has this change (the subset IcebergCompat tables may apply)."""
    if from_type in _INTEGRAL and to_type in _INTEGRAL:
        return True
    if (from_type, to_type) == ("float", "double"):
        return True
    source, target = _decimal(from_type), _decimal(to_type)
    return source is not None and target is not None and source[1] == target[1] and target[0] >= source[0]


class TypeChangeRefused(Exception):
    """A change that is not a widening (``path`` names where below the column, ``why`` says what)."""

    def __init__(self, from_type: Any, to_type: Any, path: str, why: str) -> None:
        super().__init__(why)
        self.from_type, self.to_type, self.path, self.why = from_type, to_type, path, why


def _type_text(t: Any) -> str:
    return t if isinstance(t, str) else str(t.get("type"))


def _merge(old: Any, new: Any, path: str, changes: list[dict[str, Any]], iceberg: bool) -> Any:
    """``new`` checked against ``old`` level by level; atomic changes are appended to ``changes`` (with ``path``)."""
    if isinstance(old, str) or isinstance(new, str):
        if old == new:
            return new
        if not isinstance(old, str) or not isinstance(new, str):
            raise TypeChangeRefused(old, new, path, f"{_type_text(old)} and {_type_text(new)} are different kinds of type")
        if not is_widening(old, new):
            raise TypeChangeRefused(old, new, path, f"{old} to {new} is not a widening the typeWidening feature allows")
        if iceberg and not iceberg_can_widen(old, new):
            raise TypeChangeRefused(old, new, path, f"Iceberg V2 cannot widen {old} to {new} (IcebergCompat is on)")
        changes.append({"fromType": old, "toType": new, **({"fieldPath": path} if path else {})})
        return new
    kind = old.get("type")
    if kind != new.get("type"):
        raise TypeChangeRefused(old, new, path, f"{kind} and {new.get('type')} are different kinds of type")
    out = dict(new)
    if kind in ("array", "map"):
        _inside(out, old, new, path, lambda o, n, p: _merge(o, n, p, changes, iceberg))
    elif kind == "struct":
        old_fields, new_fields = old.get("fields", []), new.get("fields", [])
        if [f["name"].lower() for f in old_fields] != [f["name"].lower() for f in new_fields]:
            raise TypeChangeRefused(old, new, path, "a struct's fields can only change type here, not names or order")
        out["fields"] = [widen_field(o, n["type"], iceberg) for o, n in zip(old_fields, new_fields, strict=True)]
    return out


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def _inside(out: dict[str, Any], old: dict[str, Any], new: dict[str, Any], path: str,
            step: Callable[[Any, Any, str], Any]) -> None:
    """``step`` applied to an array's element or a map's key and value (old, new, path below), written into ``out``."""
    parts = (("elementType", "element"),) if old["type"] == "array" else (("keyType", "key"), ("valueType", "value"))
    for key, name in parts:
        out[key] = step(old[key], new[key], _join(path, name))


def _recorded(field: dict[str, Any], new_type: Any, changes: list[dict[str, Any]]) -> dict[str, Any]:
    """A copy of ``field`` with type ``new_type`` and ``changes`` appended to its ``delta.typeChanges``."""
    out = copy.deepcopy(field)
    out["type"] = new_type
    if changes:
        metadata = dict(out.get("metadata") or {})
        metadata[TYPE_CHANGES_KEY] = [*(metadata.get(TYPE_CHANGES_KEY) or []), *changes]
        out["metadata"] = metadata
    return out


def widen_field(field: dict[str, Any], new_type: Any, iceberg: bool = False) -> dict[str, Any]:
    """A copy of ``field`` with type ``new_type``, every atomic change recorded in its (or a nested field's) metadata.

    Raises:
        TypeChangeRefused: some part of the change is not a supported widening.
    """
    changes: list[dict[str, Any]] = []
    return _recorded(field, _merge(field["type"], new_type, "", changes, iceberg), changes)


def _fields(t: Any, prefix: list[str]) -> Iterator[tuple[list[str], dict[str, Any]]]:
    if not isinstance(t, dict):
        return
    if t.get("type") == "struct":
        for f in t.get("fields", []):
            yield [*prefix, f["name"]], f
            yield from _fields(f["type"], [*prefix, f["name"]])
    elif t.get("type") == "array":
        yield from _fields(t["elementType"], [*prefix, "element"])
    elif t.get("type") == "map":
        yield from _fields(t["keyType"], [*prefix, "key"])
        yield from _fields(t["valueType"], [*prefix, "value"])


def type_changes(schema: dict[str, Any]) -> list[tuple[list[str], dict[str, Any]]]:
    """Every recorded type change: (the path of the field holding it, the change object)."""
    out = []
    for path, field in _fields(schema, []):
        for change in (field.get("metadata") or {}).get(TYPE_CHANGES_KEY) or []:
            out.append((path, change))
    return out


def unsupported_changes(schema: dict[str, Any]) -> list[str]:
    """Recorded changes this reader cannot convert (a reader must refuse the table then), as ``path: from → to``."""
    bad = []
    for path, change in type_changes(schema):
        if not isinstance(change, dict) or not is_widening(change.get("fromType"), change.get("toType")):
            where = ".".join([*path, *([change["fieldPath"]] if isinstance(change, dict) and change.get("fieldPath") else [])])
            got = f"{change.get('fromType')} → {change.get('toType')}" if isinstance(change, dict) else repr(change)
            bad.append(f"{where}: {got}")
    return bad


#: ``spark.databricks.delta.typeWidening.allowAutomaticWidening``'s values: which widenings schema evolution applies
AUTOMATIC_ALWAYS, AUTOMATIC_SAME_FAMILY, AUTOMATIC_NEVER = "always", "same_family_type", "never"
AUTOMATIC_MODES = (AUTOMATIC_ALWAYS, AUTOMATIC_SAME_FAMILY, AUTOMATIC_NEVER)


def is_same_family_widening(from_type: Any, to_type: Any) -> bool:
    """A widening inside one family of types (integer → integer, float → double, decimal → decimal, date →
    timestamp_ntz): what schema evolution applies under ``same_family_type`` (delta-spark 4.0's only behaviour).
    Integers becoming double or decimal change how values are compared and rounded, so that mode leaves them out."""
    if not is_widening(from_type, to_type):
        return False
    if from_type == to_type or (from_type in _INTEGRAL and to_type in _INTEGRAL):
        return True
    if (from_type, to_type) in (("float", "double"), ("date", "timestamp_ntz")):
        return True
    return _decimal(from_type) is not None and _decimal(to_type) is not None


def evolution_allows(from_type: Any, to_type: Any, mode: str, iceberg: bool) -> bool:
    """Whether schema evolution (mergeSchema, autoMerge, MERGE WITH SCHEMA EVOLUTION) widens ``from_type`` to
    ``to_type`` by itself, under the automatic-widening ``mode``; ``iceberg``: UniForm Iceberg is on, so only the
    changes Iceberg V2 can express."""
    if from_type == to_type or mode == AUTOMATIC_NEVER:
        return False
    allowed = is_widening(from_type, to_type) if mode == AUTOMATIC_ALWAYS else is_same_family_widening(from_type, to_type)
    return allowed and (not iceberg or iceberg_can_widen(from_type, to_type))


def _evolve(old: Any, new: Any, path: str, changes: list[dict[str, Any]], allows: Callable[[Any, Any], bool]) -> Any:
    """``old`` with every atomic part ``allows`` widens to ``new``'s type; every other difference keeps ``old``."""
    if isinstance(old, str) or isinstance(new, str):
        if isinstance(old, str) and isinstance(new, str) and allows(old, new):
            changes.append({"fromType": old, "toType": new, **({"fieldPath": path} if path else {})})
            return new
        return old
    kind = old.get("type")
    if kind != new.get("type"):
        return old
    out = dict(old)
    if kind in ("array", "map"):
        _inside(out, old, new, path, lambda o, n, p: _evolve(o, n, p, changes, allows))
    elif kind == "struct":
        by_name = {f["name"].lower(): f for f in new.get("fields", [])}
        out["fields"] = [evolve_field(f, by_name[f["name"].lower()]["type"], allows) if f["name"].lower() in by_name else f
                         for f in old.get("fields", [])]
    return out


def evolve_field(field: dict[str, Any], data_type: Any, allows: Callable[[Any, Any], bool]) -> dict[str, Any]:
    """``field`` after schema evolution met data of type ``data_type``: each atomic type (nested struct fields, map
    keys and values, array elements too) that ``allows`` widens takes the data's type and is recorded in
    ``delta.typeChanges`` as ALTER COLUMN records it; everything else stays (the writer then casts or refuses)."""
    changes: list[dict[str, Any]] = []
    evolved = _evolve(field["type"], data_type, "", changes, allows)
    return field if evolved == field["type"] else _recorded(field, evolved, changes)


def without_type_changes(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` with every ``delta.typeChanges`` removed (DROP FEATURE, once no file holds an old type)."""
    out = copy.deepcopy(schema)
    for _, field in _fields(out, []):
        metadata = field.get("metadata")
        if metadata and TYPE_CHANGES_KEY in metadata:
            del metadata[TYPE_CHANGES_KEY]
    return out


def is_supported(reader_features: set[str]) -> bool:
    """The protocol has type widening (stable or preview)."""
    return FEATURE in reader_features or PREVIEW_FEATURE in reader_features


def is_enabled(configuration: dict[str, str]) -> bool:
    """``delta.enableTypeWidening`` is true: writers may apply widenings."""
    return str(configuration.get(ENABLE_KEY, "false")).strip().lower() == "true"
