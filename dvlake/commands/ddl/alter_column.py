"""ALTER TABLE … ALTER [COLUMN] c COMMENT | SET NOT NULL | DROP NOT NULL | TYPE | FIRST | AFTER x.

Each is one metadata commit (``CHANGE COLUMN``, or ``CHANGE COLUMNS`` for several changes in one statement): no
file is read or rewritten, because none of them changes what a Parquet file holds.

- COMMENT sets the field's ``comment`` metadata (nested fields too), keeping the rest of its metadata (column
  mapping's physical name and id above all).
- FIRST / AFTER reorders the fields of the struct the column is in. Files are read by name (logical or
  physical), never by position, so delta-spark allows it with and without column mapping, and so do we.
- DROP NOT NULL makes the field nullable: every existing row stays valid.
- SET NOT NULL on a nullable column is refused, as delta-spark 4.x refuses it (``DELTA_UNSUPPORTED_ALTER_TABLE_
  CHANGE_COL_OP``) whatever the rows hold; the way delta-spark offers is a CHECK constraint ``c IS NOT NULL``,
  which does check the live rows (ADD CONSTRAINT). On a column that is already NOT NULL it is a no-op change.
- TYPE to the column's own type is a no-op change; to a wider type it is type widening (``widen_column.py``: needs
  ``delta.enableTypeWidening``, records ``delta.typeChanges``); any other change of type is refused with
  delta-spark's class.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from typing import Any

from dvlake.commands.ddl.columns import _dotted, _field, _struct_at
from dvlake.commands.ddl.widen_column import widen_column
from dvlake.errors import ColumnNotFoundError, DeltaAnalysisException
from dvlake.log.schema import schema_json
from dvlake.log.snapshot import Snapshot
from dvlake.log.type_sql import sql_type
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

_CHANGE_OP = "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP"

@dataclass(frozen=True)
class ColumnChange:
    """One ALTER COLUMN clause: the column's path and what changes (None: unchanged).

    ``position`` is ``"FIRST"`` or ``"AFTER <name>"``; ``data_type`` is a type in Delta's JSON form
    (``"long"``, ``"decimal(10,2)"``) as the schema stores it.
    """

    column: list[str]
    comment: str | None = None
    nullable: bool | None = None
    position: str | None = None
    data_type: Any = None


def _typed(data_type: Any, nullable: bool) -> str:
    return sql_type(data_type) + ("" if nullable else " NOT NULL")


def _type_name(data_type: Any) -> str:
    """Spark's ``DataType.typeName`` of a Delta JSON type (what ``operationParameters.column.type`` holds)."""
    if isinstance(data_type, str):
        return data_type.split("(")[0] if data_type.startswith("decimal") else data_type
    return str(data_type.get("type"))


def _refuse(root: str, change: ColumnChange, field: dict[str, Any], data_type: Any, nullable: bool, why: str) -> None:
    raise DeltaAnalysisException(
        f"ALTER TABLE CHANGE COLUMN is not supported for changing column {_dotted(change.column)} of {root} from "
        f"{_typed(field['type'], field.get('nullable', True))} to {_typed(data_type, nullable)}: {why}",
        error_class=_CHANGE_OP)


def _apply(root: str, struct: dict[str, Any], change: ColumnChange) -> dict[str, Any]:
    """Apply one change to the field in ``struct`` (in place); returns the changed field."""
    field = _field(struct, change.column[-1], change.column, root)
    data_type = field["type"] if change.data_type is None else change.data_type
    nullable = field.get("nullable", True) if change.nullable is None else change.nullable
    if data_type != field["type"]:  # TYPE clauses are applied by widen_column before this
        _refuse(root, change, field, data_type, nullable, "change the type with its own ALTER COLUMN … TYPE clause")
    if field.get("nullable", True) and not nullable:
        _refuse(root, change, field, data_type, nullable,
                f"delta-spark does not make a nullable column NOT NULL; add a CHECK constraint instead: ALTER TABLE … ADD "
                f"CONSTRAINT {change.column[-1]}_not_null CHECK ({_dotted(change.column)} IS NOT NULL)")
    field["nullable"] = nullable
    if change.comment is not None:
        field["metadata"] = {**field.get("metadata", {}), "comment": change.comment}
    if change.position is not None:
        _move(root, struct, field, change.position)
    return field


def _move(root: str, struct: dict[str, Any], field: dict[str, Any], position: str) -> None:
    """Reorder ``field`` within ``struct``: first, or right after a sibling (after itself: where it is)."""
    fields: list[dict[str, Any]] = struct["fields"]
    rest = [f for f in fields if f is not field]
    if position.upper() == "FIRST":
        struct["fields"] = [field, *rest]
        return
    after = position.split(" ", 1)[1]
    if after.lower() == field["name"].lower():
        return
    at = next((i for i, f in enumerate(rest) if f["name"].lower() == after.lower()), None)
    if at is None:
        known = ", ".join(f["name"] for f in rest)
        raise ColumnNotFoundError(f"AFTER {after}: no column {after!r} beside {field['name']} in {root} (columns there: "
                                  f"{known})", error_class="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA")
    struct["fields"] = rest[:at + 1] + [field] + rest[at + 1:]


def _parameters(change: ColumnChange, field: dict[str, Any]) -> dict[str, Any]:
    """delta-spark's CHANGE COLUMN parameters: the new field as a map (its path in ``name``) and the position."""
    column = {"name": _dotted([*change.column[:-1], field["name"]]), "type": _type_name(field["type"]),
              "nullable": field.get("nullable", True), "metadata": field.get("metadata", {})}
    params: dict[str, Any] = {"column": json.dumps(column, separators=(",", ":"))}
    if change.position is not None:
        params["position"] = change.position
    return params


def alter_columns(path: str, changes: list[ColumnChange]) -> int:
    """Apply ALTER COLUMN changes in one metadata commit.

    Args:
        path: the table root.
        changes: the clauses, applied in order (``ALTER COLUMN a COMMENT 'x', b FIRST`` is two).

    Returns:
        The committed version.

    Raises:
        ColumnNotFoundError: no such column, or no such sibling for AFTER.
        DeltaAnalysisException: SET NOT NULL on a nullable column or a change of type that is not a widening or
            on a table without delta.enableTypeWidening (DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP).
        SchemaMismatchError: a path through something that is not a struct.

    Example:
        >>> alter_columns("/tables/orders", [ColumnChange(["label"], comment="shown to users")])  # doctest: +SKIP
    """
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    schema = copy.deepcopy(snapshot.schema)
    parameters = []
    for change in changes:
        if change.data_type is not None:  # TYPE: a widening, or refused (widen_column.py)
            field = widen_column(snapshot, schema, change.column, change.data_type)
            change = replace(change, data_type=None)
            if change == ColumnChange(change.column):
                parameters.append(_parameters(change, field))
                continue
        field = _apply(root, _struct_at(schema, change.column[:-1], root), change)
        parameters.append(_parameters(change, field))
    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(replace(snapshot.metadata, schema_string=schema_json(schema)))
    if len(parameters) == 1:
        return txn.commit([], "CHANGE COLUMN", parameters[0])
    listed = [{**json.loads(p["column"]), **({"position": p["position"]} if "position" in p else {})} for p in parameters]
    return txn.commit([], "CHANGE COLUMNS", {"columns": json.dumps(listed, separators=(",", ":"))})
