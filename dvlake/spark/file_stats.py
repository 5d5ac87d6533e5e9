"""Per-file Delta stats taken from a written Parquet file's footer, without reading the data.

Spark's writer already computed min/max/null counts per row group; we aggregate them into
Delta's ``stats`` JSON (numRecords, minValues, maxValues, nullCount) for the first
``delta.dataSkippingNumIndexedCols`` (default 32) leaf columns, keyed by physical name.
Bounds are only ever widened when unsure (truncated strings, sub-millisecond timestamps), so
they stay valid for data skipping.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow.parquet as pq

from dvlake.log.stats import build_stats
from dvlake.storage.base import Storage, storage_for

STRING_PREFIX = 32


def _json_value(value: Any, is_max: bool) -> Any:
    """A footer min/max as Delta's stats JSON writes it; None when it cannot be a safe bound."""
    if value is None:
        return None
    if isinstance(value, bool):
        return None  # delta-spark keeps no min/max for booleans
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, int):
        return value
    if isinstance(value, decimal.Decimal):
        if value == value.to_integral_value() and abs(value) < 2**53:
            return int(value)
        f = float(value)  # round outward so the bound still holds
        if is_max and decimal.Decimal(f) < value:
            f = math.nextafter(f, math.inf)
        elif not is_max and decimal.Decimal(f) > value:
            f = math.nextafter(f, -math.inf)
        return f
    if isinstance(value, str):
        if len(value) <= STRING_PREFIX:
            return value
        return None if is_max else value[:STRING_PREFIX]
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        value = value.astimezone(dt.UTC)
        if is_max and value.microsecond % 1000:
            value = value + dt.timedelta(microseconds=1000 - value.microsecond % 1000)
        else:
            value = value - dt.timedelta(microseconds=value.microsecond % 1000)
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    return None  # binary and anything else: no bounds


def _set_path(target: dict[str, Any], path: list[str], value: Any) -> None:
    for p in path[:-1]:
        target = target.setdefault(p, {})
    target[path[-1]] = value


def read_footer(storage: Storage, location: str) -> pq.FileMetaData:
    """The Parquet footer of one file, read through the storage seam (only the tail is fetched)."""
    f = storage.open_input(location)
    try:
        return pq.read_metadata(f)
    finally:
        f.close()


def footer_stats(location: str, data_column_paths: list[str] | None = None, num_indexed_cols: int = 32,
                 tight_bounds: bool | None = None, metadata: pq.FileMetaData | None = None,
                 storage: Storage | None = None) -> tuple[str, int]:
    """(stats JSON, numRecords) of one Parquet file from its footer.

    ``data_column_paths``: dotted leaf paths to collect, in schema order (None = all leaves).
    """
    md = metadata if metadata is not None else read_footer(storage or storage_for(location), location)
    num_rows = md.num_rows
    leaves = [md.schema.column(i).path for i in range(md.num_columns)]
    wanted = leaves if data_column_paths is None else [p for p in leaves if p in set(data_column_paths)]
    wanted = wanted[: max(num_indexed_cols, 0)] if num_indexed_cols >= 0 else wanted
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, Any] = {}
    index = {p: i for i, p in enumerate(leaves)}
    for path in wanted:
        if "list" in path.split(".") or "key_value" in path.split("."):
            continue  # no stats for arrays and maps
        ci = index[path]
        lo = hi = None
        null_total: int | None = 0
        bounds_ok = True
        for rg in range(md.num_row_groups):
            col = md.row_group(rg).column(ci)
            st = col.statistics
            if st is None:
                bounds_ok = False
                null_total = None
                break
            if st.has_null_count and null_total is not None:
                null_total += st.null_count
            else:
                null_total = None
            if md.row_group(rg).num_rows == 0:
                continue
            if not st.has_min_max:
                if st.has_null_count and st.null_count == md.row_group(rg).num_rows:
                    continue  # all-null row group: no bound needed
                bounds_ok = False
                continue
            lo = st.min if lo is None else min(lo, st.min)
            hi = st.max if hi is None else max(hi, st.max)
        keys = path.split(".")
        if null_total is not None:
            _set_path(nulls, keys, null_total)
        if bounds_ok and lo is not None:
            jlo, jhi = _json_value(lo, False), _json_value(hi, True)
            if jlo is not None:
                _set_path(mins, keys, jlo)
            if jhi is not None:
                _set_path(maxs, keys, jhi)
    return build_stats(num_rows, mins, maxs, nulls, tight_bounds), num_rows
