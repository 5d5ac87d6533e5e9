"""Z-order clustering keys as Spark column expressions.

Each Z-order column is mapped to a *range id*: its rank among range boundaries sampled from the
data (so skewed values and any orderable type - strings, dates, timestamps, decimals - spread
evenly over the ids). The range ids' bits are then interleaved into one long, the Z-value:
rows close on the Z-curve are close in every column at once, so files cut from a Z-sorted
stream have narrow min/max ranges on each column and data skipping prunes on any of them.

Nulls get range id 0, below every value (Spark sorts nulls first, and a file of nulls then
carries no bounds that widen its neighbours). Everything here is DataFrame expressions built
from literals, so executors need no driver state.
"""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

#: Bits per column of the Z-value (at most 256 ranges per column; the range tree stays small).
MAX_BITS_PER_COLUMN = 8
#: Rows sampled to choose range boundaries (on the driver: values of the Z-order columns only).
SAMPLE_ROWS = 20_000


def bits_per_column(num_columns: int) -> int:
    """Bits each column gets so the interleaved value fits in a non-negative long."""
    return max(1, min(MAX_BITS_PER_COLUMN, 62 // max(num_columns, 1)))


def range_boundaries(values: list[Any], num_ranges: int) -> list[Any]:
    """Up to ``num_ranges - 1`` increasing boundaries splitting the sorted non-null ``values`` evenly."""
    clean = sorted(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not clean or num_ranges <= 1:
        return []
    out: list[Any] = []
    for i in range(1, num_ranges):
        b = clean[min(len(clean) - 1, (i * len(clean)) // num_ranges)]
        if not out or b > out[-1]:
            out.append(b)
    return out


def range_id(col: Column, boundaries: list[Any]) -> Column:
    """0 for null, else 1 + the number of boundaries <= the value (a balanced comparison tree)."""

    def tree(lo: int, hi: int) -> Column:  # answer in [lo, hi] = count of boundaries <= value
        if lo == hi:
            return F.lit(lo)
        mid = (lo + hi + 1) // 2
        return F.when(col >= F.lit(boundaries[mid - 1]), tree(mid, hi)).otherwise(tree(lo, mid - 1))

    return F.when(col.isNull(), F.lit(0)).otherwise(tree(0, len(boundaries)) + 1).cast("long")


def interleave(ids: list[Column], bits: int) -> Column:
    """The Z-value: bit ``b`` of column ``i`` lands at ``b * k + (k - 1 - i)``, highest bits first."""
    k = len(ids)
    z: Column = F.lit(0).cast("long")
    for b in range(bits):
        for i, rid in enumerate(ids):
            bit = F.shiftright(rid, b).bitwiseAND(F.lit(1).cast("long"))
            z = z.bitwiseOR(F.shiftleft(bit, b * k + (k - 1 - i)))
    return z


def with_zorder_value(df: DataFrame, columns: list[str], expected_rows: int, name: str) -> DataFrame:
    """``df`` plus column ``name``, the Z-value over ``columns`` (samples ``df`` once to pick range boundaries).

    The range ids are projected first and the interleaving refers to them by name, so each
    comparison tree is evaluated (and shipped in the plan) once per row, not once per bit.
    """
    bits = bits_per_column(len(columns))
    num_ranges = (1 << bits) - 1  # id 0 is reserved for null
    fraction = 1.0 if expected_rows <= SAMPLE_ROWS else SAMPLE_ROWS / expected_rows
    picked = df.select(*[F.col(f"`{c}`") for c in columns])
    sample = (picked if fraction >= 1.0 else picked.sample(fraction=fraction, seed=17)).collect()
    id_names = [f"{name}_rid{i}" for i in range(len(columns))]
    ranged = df.select("*", *[range_id(F.col(f"`{c}`"), range_boundaries([r[i] for r in sample], num_ranges)).alias(rid)
                              for i, (c, rid) in enumerate(zip(columns, id_names, strict=True))])
    return ranged.withColumn(name, interleave([F.col(r) for r in id_names], bits)).drop(*id_names)
