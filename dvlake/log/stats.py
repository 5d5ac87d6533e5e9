"""Per-file statistics (``add.stats``): parse, build, and read in bulk.

With deletion vectors ``numRecords`` counts *physical* rows (deleted ones included) and
``tightBounds: false`` says min/max/nullCount may be wider than the live rows — still valid
for skipping, since bounds of a set hold for any subset.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pajson


def parse_stats(stats: str | None) -> dict[str, Any] | None:
    """One stats string to a dict (None when absent or unparseable: stats are optional)."""
    if not stats:
        return None
    try:
        return json.loads(stats)
    except ValueError:
        return None


def num_records_of(stats: str | None) -> int | None:
    parsed = parse_stats(stats)
    if parsed is None or parsed.get("numRecords") is None:
        return None
    return int(parsed["numRecords"])


def num_records_array(stats: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """numRecords of many files at once, -1 where unknown; parsed by Arrow's JSON reader, not per row in Python."""
    if isinstance(stats, pa.ChunkedArray):
        stats = stats.combine_chunks() if stats.num_chunks else pa.array([], pa.string())
    if len(stats) == 0:
        return np.zeros(0, dtype=np.int64)
    filled = stats.fill_null("{}")
    text = "\n".join(s if s else "{}" for s in filled.to_pylist())
    try:
        table = pajson.read_json(
            io.BytesIO(text.encode("utf-8")),
            parse_options=pajson.ParseOptions(explicit_schema=pa.schema([("numRecords", pa.int64())]),
                                              unexpected_field_behavior="ignore", newlines_in_values=False),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # a damaged stats string: stats are optional, so "unknown" for it
        return np.array([_num_records_or_unknown(s) for s in filled.to_pylist()], dtype=np.int64)
    col = table.column("numRecords")
    return col.fill_null(-1).to_numpy()


def _num_records_or_unknown(stats: str | None) -> int:
    parsed = parse_stats(stats)
    value = parsed.get("numRecords") if isinstance(parsed, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 else -1


def build_stats(num_records: int, min_values: dict[str, Any] | None = None, max_values: dict[str, Any] | None = None,
                null_count: dict[str, Any] | None = None, tight_bounds: bool | None = None) -> str:
    """A stats JSON string in Delta's key order."""
    out: dict[str, Any] = {"numRecords": int(num_records)}
    if min_values is not None:
        out["minValues"] = min_values
    if max_values is not None:
        out["maxValues"] = max_values
    if null_count is not None:
        out["nullCount"] = null_count
    if tight_bounds is not None:
        out["tightBounds"] = tight_bounds
    return json.dumps(out, separators=(",", ":"))


def with_loose_bounds(stats: str | None, num_records: int | None = None) -> str | None:
    """The stats of a file that just got (or changed) a DV: same bounds, ``tightBounds: false``.

    delta-spark requires numRecords and tightBounds=false on every add that carries a new DV.
    """
    parsed = parse_stats(stats) or {}
    if num_records is not None:
        parsed["numRecords"] = num_records
    if "numRecords" not in parsed:
        return None
    parsed["tightBounds"] = False
    return json.dumps(parsed, separators=(",", ":"))
