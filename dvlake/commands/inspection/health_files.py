"""Per-file DV numbers of a snapshot as numpy columns, without pandas: what ``dvlake files`` lists and what
``dvlake health`` builds its report on.

``dvlake files`` is a log-only command that should answer in well under a second; importing pandas
alone costs about that much, so the per-file columns are computed with Arrow and numpy here and
``dvlake.commands.inspection.health`` wraps them in a DataFrame for its grouping.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvlake.commands.common import physical_partition_columns
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.log.snapshot import Snapshot

#: Columns of a file listing; names starting with ``_`` are internal (raw DV fields, raw partition values).
Columns = dict[str, np.ndarray]

UNPARTITIONED = "(table)"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
STORAGE_KIND = {"u": "in DV files (u)", "p": "in DV files by absolute path (p)", "i": "inline (i)"}


def column(table: pa.Table, name: str) -> pa.Array:
    col = table.column(name)
    return col.combine_chunks() if col.num_chunks else pa.nulls(0, col.type)


def _strings(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A string (or any) array as a numpy object array, None for nulls."""
    return array.to_numpy(zero_copy_only=False).astype(object) if len(array) else np.zeros(0, object)


def partition_keys(snapshot: Snapshot) -> tuple[np.ndarray, list[np.ndarray]]:
    """``col=value/col2=value2`` of every live file (``(table)`` when unpartitioned), and each column's raw values.

    The raw values (None for a null partition) are kept beside the display key so predicates never have
    to re-parse a key whose values contain '/' or '='. Under column mapping ``partitionValues`` is keyed by
    physical names; the key shows the logical ones.
    """
    n = snapshot.num_files
    if not snapshot.partition_columns:
        return np.full(n, UNPARTITIONED, dtype=object), []
    values = column(snapshot.files, "partitionValues")
    physical = physical_partition_columns(snapshot.schema, snapshot.partition_columns, snapshot.column_mapping_mode)
    if not n:
        return np.zeros(0, object), [np.zeros(0, object) for _ in physical]
    raw, parts = [], []
    for col, key in zip(snapshot.partition_columns, physical, strict=True):
        found = pc.map_lookup(values, pa.scalar(key, pa.string()), "first")
        raw.append(_strings(found))
        parts.append(pc.binary_join_element_wise(pa.scalar(col + "="), pc.fill_null(found, NULL_PARTITION), ""))
    keys = pc.binary_join_element_wise(*parts, "/") if len(parts) > 1 else parts[0]
    return _strings(keys), raw


def file_columns(snapshot: Snapshot) -> Columns:
    """One entry per live file: path, partition, size, physical rows, deleted rows and ratio, the DV's storage,
    size, offset and absolute DV file (None for inline or no DV).

    ``physical_rows`` is -1 and ``deleted_ratio`` NaN for a file with a DV whose stats lack numRecords
    (delta-spark rewrites such files on OPTIMIZE).
    """
    t = snapshot.files
    n = t.num_rows
    if n:
        dv = column(t, "deletionVector")
        storage = pc.struct_field(dv, "storageType")
        has_dv = np.asarray(pc.fill_null(pc.and_(pc.is_valid(dv), pc.is_valid(storage)), False), dtype=bool)
        deleted = np.asarray(pc.fill_null(pc.struct_field(dv, "cardinality"), 0), dtype=np.int64)
        dv_size = np.asarray(pc.fill_null(pc.struct_field(dv, "sizeInBytes"), 0), dtype=np.int64)
        offset = np.array(pc.struct_field(dv, "offset").to_pylist(), dtype=object)
        kind = _strings(storage)
        dv_path = _strings(pc.struct_field(dv, "pathOrInlineDv"))
        paths = _strings(column(t, "path"))
        sizes = np.asarray(column(t, "size"), dtype=np.int64)
    else:
        has_dv = np.zeros(0, bool)
        deleted = dv_size = sizes = np.zeros(0, np.int64)
        offset = kind = dv_path = paths = np.zeros(0, object)
    deleted = np.where(has_dv, deleted, 0).astype(np.int64)
    physical = snapshot.num_records().astype(np.int64)
    known = physical >= 0
    ratio = np.divide(deleted, physical, out=np.zeros(n, np.float64), where=known & (physical > 0))
    ratio[~known & has_dv] = np.nan
    keys, raw_values = partition_keys(snapshot)
    columns: Columns = {
        "path": paths,
        "partition": keys,
        "size_bytes": sizes,
        "physical_rows": physical,
        "deleted_rows": deleted,
        "deleted_ratio": ratio,
        "live_rows": np.where(known, physical - deleted, -1),
        "has_dv": has_dv,
        "dv_storage": np.array([STORAGE_KIND.get(k, str(k)) if d else "none" for k, d in zip(kind, has_dv, strict=True)],
                               dtype=object),
        "dv_size_bytes": np.where(has_dv, dv_size, 0),
        "dv_offset": np.where(has_dv, offset, np.full(n, None, dtype=object)),
        "dv_file": dv_locations(snapshot.table_root, has_dv, kind, dv_path),
        "_dv_kind": kind,
        "_dv_path": dv_path,
    }
    for i, values in enumerate(raw_values):
        columns[f"_pv{i}"] = values
    return columns


def dv_locations(table_root: str, has_dv: np.ndarray, kinds: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """The absolute DV file of each on-disk DV (None for inline or no DV), decoding each distinct path once."""
    out = np.full(len(has_dv), None, dtype=object)
    cache: dict[tuple[str, str], str] = {}
    for i in np.flatnonzero(has_dv):
        kind, p = kinds[i], paths[i]
        if kind not in ("u", "p"):
            continue
        loc = cache.get((kind, p))
        if loc is None:
            loc = cache[(kind, p)] = DeletionVectorDescriptor(kind, p, 0, 0, 1).absolute_path(table_root)
        out[i] = loc
    return out


def plain(v: Any) -> Any:
    """A numpy scalar as the Python value JSON shows (NaN as None)."""
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if math.isnan(v) else float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def rows(columns: Columns, names: list[str], order: np.ndarray) -> list[dict[str, Any]]:
    """The files at ``order`` as dicts of ``names`` with plain Python values."""
    return [{name: plain(columns[name][i]) for name in names} for i in order]
