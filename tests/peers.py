"""Independent readers for interop tests: delta-rs (deltalake), DuckDB's delta and iceberg extensions, pyiceberg."""

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


def _extension(name: str) -> Path:
    """A DuckDB extension binary shipped by its PyPI package (``duckdb-extension-<name>``), loaded offline."""
    import duckdb

    return (Path(importlib.util.find_spec(f"duckdb_extension_{name}").origin).parent / "extensions"
            / f"v{duckdb.__version__}" / f"{name}.duckdb_extension")


def duckdb_connection():
    """One DuckDB connection with the delta, avro and iceberg extensions loaded offline from their PyPI packages."""
    global _DUCK
    if _DUCK is None:
        import duckdb

        con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
        for name in ("delta", "avro", "iceberg"):
            con.execute(f"LOAD '{_extension(name)}'")
        _DUCK = con
    return _DUCK


def read_iceberg_with_duckdb(metadata_location: str) -> pa.Table:
    """DuckDB's iceberg extension reading one ``vN.metadata.json`` (its current snapshot)."""
    return _table(duckdb_connection().execute("SELECT * FROM iceberg_scan(?)", [metadata_location]).arrow())


def read_iceberg_with_pyiceberg(metadata_location: str) -> pa.Table:
    """pyiceberg's StaticTable over one metadata file (no catalog), scanned to Arrow with its DVs applied."""
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(metadata_location).scan().to_arrow()


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
