"""Independent readers for interop tests: delta-rs (deltalake) and DuckDB's delta extension."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pyarrow as pa


def read_with_deltalake(path: str, version: int | None = None) -> pa.Table:
    """delta-rs reads DV tables only through its QueryBuilder (to_pyarrow_table refuses them)."""
    from deltalake import DeltaTable, QueryBuilder

    dt = DeltaTable(path, version=version) if version is not None else DeltaTable(path)
    result = QueryBuilder().register("t", dt).execute("select * from t")
    return pa.RecordBatchReader.from_stream(result).read_all()  # arro3 → pyarrow via the C stream interface


_DUCK = None


def duckdb_connection():
    """One DuckDB connection with the delta extension loaded offline from its PyPI package."""
    global _DUCK
    if _DUCK is None:
        import duckdb

        ext = (Path(importlib.util.find_spec("duckdb_extension_delta").origin).parent / "extensions"
               / f"v{duckdb.__version__}" / "delta.duckdb_extension")
        con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
        con.execute(f"LOAD '{ext}'")
        _DUCK = con
    return _DUCK


def read_with_duckdb(path: str, version: int | None = None) -> pa.Table:
    con = duckdb_connection()
    if version is None:
        return _table(con.execute("SELECT * FROM delta_scan(?)", [path]).arrow())
    return _table(con.execute(f"SELECT * FROM delta_scan(?, version => {int(version)})", [path]).arrow())


def rows(table: pa.Table, columns: list[str]) -> list[tuple[Any, ...]]:
    """Sorted row tuples of the given columns (for order-insensitive comparisons)."""
    data = table.select(columns).to_pylist()
    return sorted((tuple(r[c] for c in columns) for r in data), key=repr)


def _table(result: Any) -> pa.Table:
    return result if isinstance(result, pa.Table) else result.read_all()
