"""ALTER TABLE … RENAME COLUMN and DROP COLUMN(S): column mapping's metadata-only schema changes.

Under column mapping (``delta.columnMapping.mode`` ``name`` or ``id``) the Parquet files name columns by their
physical names, so a rename only changes the logical name in the schema and a drop only takes the field out of
it: one metadata commit, no file rewritten, the physical names (and ids, and ``maxColumnId``) untouched. A
dropped column's data stays in the files, unread, until they are rewritten. Without column mapping the files
name columns by their logical names, so both would need a rewrite: refused as delta-spark refuses them, with
the advice to enable column mapping.

Refused too, as delta-spark does: a change to a column a CHECK constraint or a generated column reads (the rule
would read another column, or none), and dropping a partition column.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

from dvlake.commands.ddl.clustering import refuse_drop as refuse_clustering_drop
from dvlake.errors import ColumnNotFoundError, DeltaAnalysisException, SchemaMismatchError
from dvlake.log import constraints, generated
from dvlake.log.schema import MODE_KEY, column_mapping_mode, schema_json
from dvlake.log.snapshot import Snapshot
from dvlake.log.sql_dialect import quote_identifier
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

_ENABLE_MAPPING = (f"dvlake sets column mapping on new tables only: create the table with TBLPROPERTIES ('{MODE_KEY}' = "
                   f"'name') and copy the rows over (delta-spark can also enable it on this table with ALTER TABLE … SET "
                   f"TBLPROPERTIES ('{MODE_KEY}' = 'name'))")


def _dotted(path: list[str]) -> str:
    """A column path as delta-spark prints it in operation parameters (back-quotes only where needed)."""
    return ".".join(quote_identifier(p) for p in path)


def _struct_at(schema: dict[str, Any], parents: list[str], root: str) -> dict[str, Any]:
    """The struct type holding the fields under ``parents`` (the schema itself for a top-level column)."""
    struct = schema
    for depth, name in enumerate(parents):
        field = _field(struct, name, parents[:depth + 1], root)
        if not isinstance(field["type"], dict) or field["type"].get("type") != "struct":
            raise SchemaMismatchError(f"{_dotted(parents[:depth + 1])} in {root} is not a struct; only struct fields can be "
                                      "renamed or dropped below a column")
        struct = field["type"]
    return struct


def _field(struct: dict[str, Any], name: str, path: list[str], root: str) -> dict[str, Any]:
    for f in struct.get("fields", []):
        if f["name"].lower() == name.lower():
            return f
    known = ", ".join(f["name"] for f in struct.get("fields", []))
    raise ColumnNotFoundError(f"column {_dotted(path)} is not in the schema of {root} (columns there: {known})")


def _reads(expression: str, path: list[str]) -> bool:
    """Whether an expression reads the column ``path`` or anything below or above it (``s`` reads ``s.a``)."""
    wanted = [p.lower() for p in path]
    for ref in constraints.referenced_columns(expression):
        parts = [p.strip("`").lower() for p in ref.split(".")]
        n = min(len(parts), len(wanted))
        if parts[:n] == wanted[:n]:
            return True
    return False


def _check_dependents(snapshot: Snapshot, path: list[str], what: str = "rename or drop") -> None:
    """delta-spark refuses changing a column a CHECK constraint or a generated column's expression reads."""
    checks = {constraints.property_key(c.name): c.text for c in constraints.check_constraints(snapshot.metadata)
              if _reads(c.text, path)}
    if checks:
        listed = "; ".join(f"{k} -> {v}" for k, v in checks.items())
        raise DeltaAnalysisException(f"cannot {what} column {_dotted(path)}: CHECK constraints read it ({listed}); "
                                     "drop those constraints first", error_class="DELTA_CONSTRAINT_DEPENDENT_COLUMN_CHANGE")
    exprs = {c: e for c, e in generated.expressions(snapshot.protocol, snapshot.metadata).items() if _reads(e, path)}
    if exprs:
        listed = "; ".join(f"{k} -> {v}" for k, v in exprs.items())
        raise DeltaAnalysisException(f"cannot {what} column {_dotted(path)}: generated columns read it ({listed})",
                                     error_class="DELTA_GENERATED_COLUMNS_DEPENDENT_COLUMN_CHANGE")


def _mapped_snapshot(root: str, error_class: str, what: str) -> Snapshot:
    snapshot = Snapshot.load(root)
    if column_mapping_mode(snapshot.metadata) == "none":
        raise DeltaAnalysisException(f"{what} is not supported on {root}: its files name columns by the column names, so "
                                     f"the change needs column mapping; {_ENABLE_MAPPING}", error_class=error_class)
    return snapshot


def rename_column(path: str, column: list[str], new_name: str) -> int:
    """Rename the column ``column`` (a path: ``["s", "a"]`` is the field ``a`` of the struct ``s``) to ``new_name``.

    Metadata only: the physical name stays, so every existing file reads under the new name. A renamed partition
    column is renamed in ``partitionColumns`` too (partition values are keyed by physical name).

    Args:
        path: the table root.
        column: the column's path, case-insensitive.
        new_name: the new name of the last part of the path.

    Returns:
        The committed version.

    Raises:
        DeltaAnalysisException: no column mapping (DELTA_UNSUPPORTED_RENAME_COLUMN), a CHECK constraint or a
            generated column reads the column.
        ColumnNotFoundError: no such column.
        SchemaMismatchError: ``new_name`` is taken beside it (FIELD_ALREADY_EXISTS).
    """
    root = normalize_table_root(path)
    snapshot = _mapped_snapshot(root, "DELTA_UNSUPPORTED_RENAME_COLUMN", "RENAME COLUMN")
    schema = copy.deepcopy(snapshot.schema)
    struct = _struct_at(schema, column[:-1], root)
    field = _field(struct, column[-1], column, root)
    if new_name.lower() != field["name"].lower() and any(f["name"].lower() == new_name.lower() for f in struct["fields"]):
        raise SchemaMismatchError(f"cannot rename {_dotted(column)} to {new_name!r} in {root}: a column of that name exists "
                                  "beside it", error_class="FIELD_ALREADY_EXISTS")
    _check_dependents(snapshot, column)
    old_name = field["name"]
    field["name"] = new_name
    partitions = tuple(new_name if len(column) == 1 and p.lower() == old_name.lower() else p
                       for p in snapshot.metadata.partition_columns)
    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(replace(snapshot.metadata, schema_string=schema_json(schema), partition_columns=partitions))
    return txn.commit([], "RENAME COLUMN", {"oldColumnPath": _dotted(column),
                                            "newColumnPath": _dotted([*column[:-1], new_name])})


def drop_columns(path: str, columns: list[list[str]], if_exists: bool = False) -> int | None:
    """Drop columns (paths as in :func:`rename_column`) from the schema; their data stays in the files, unread.

    Args:
        path: the table root.
        columns: the columns' paths, case-insensitive.
        if_exists: skip columns that are not there (``DROP COLUMN IF EXISTS``).

    Returns:
        The committed version; None when ``if_exists`` left nothing to drop (nothing is committed).

    Raises:
        DeltaAnalysisException: no column mapping (DELTA_UNSUPPORTED_DROP_COLUMN), a partition column
            (DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN), a CHECK constraint or generated column reads one.
        ColumnNotFoundError: no such column (without ``if_exists``).
        SchemaMismatchError: the last field of the table or of a struct.
    """
    root = normalize_table_root(path)
    snapshot = _mapped_snapshot(root, "DELTA_UNSUPPORTED_DROP_COLUMN", "DROP COLUMN")
    schema = copy.deepcopy(snapshot.schema)
    partitions = {p.lower() for p in snapshot.metadata.partition_columns}
    on_partitions = [_dotted(c) for c in columns if len(c) == 1 and c[0].lower() in partitions]
    if on_partitions:
        raise DeltaAnalysisException(f"cannot drop the partition columns {', '.join(on_partitions)} of {root}: the files "
                                     "are laid out by them", error_class="DELTA_UNSUPPORTED_DROP_PARTITION_COLUMN")
    dropped: list[list[str]] = []
    for column in columns:
        try:
            struct = _struct_at(schema, column[:-1], root)
            field = _field(struct, column[-1], column, root)
        except ColumnNotFoundError:
            if if_exists:
                continue
            raise
        _check_dependents(snapshot, column)
        refuse_clustering_drop(snapshot, [*column[:-1], field["name"]])
        if len(struct["fields"]) == 1:
            raise SchemaMismatchError(f"cannot drop {_dotted(column)} from {root}: it is the only field of "
                                      f"{'the table' if len(column) == 1 else _dotted(column[:-1])}")
        struct["fields"] = [f for f in struct["fields"] if f is not field]
        dropped.append([*column[:-1], field["name"]])
    if not dropped:
        return None
    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(replace(snapshot.metadata, schema_string=schema_json(schema)))
    return txn.commit([], "DROP COLUMNS", {"columns": json.dumps([_dotted(c) for c in dropped])})
