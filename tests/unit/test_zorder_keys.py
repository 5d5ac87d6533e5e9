"""Z-order key pieces that need no Spark: range boundaries and the bit budget."""

from __future__ import annotations

import datetime as dt

from dvlake.spark.zorder import bits_per_column, range_boundaries


def test_boundaries_split_evenly_skip_nulls_and_nan_and_never_repeat():
    assert range_boundaries(list(range(100)), 4) == [25, 50, 75]
    assert range_boundaries([None, 3, float("nan"), 1, 2, None], 2) == [2]
    assert range_boundaries([5] * 50 + [6] * 50, 8) == [5, 6]
    assert range_boundaries([None, None], 8) == []
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(10)]
    assert range_boundaries(days, 2) == [dt.date(2024, 1, 6)]
    assert range_boundaries(["b", "a", "c", "d"], 2) == ["c"]


def test_bits_fit_a_non_negative_long():
    assert bits_per_column(1) == 8 and bits_per_column(3) == 8
    assert bits_per_column(10) == 6 and bits_per_column(40) == 1
    assert all(bits_per_column(k) * k <= 62 for k in range(1, 63))
