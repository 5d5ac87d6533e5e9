"""How dvlake shows numbers to people: byte sizes and percentages (a shared leaf, no imports of dvlake).

A percentage that rounds a real deletion away is a wrong answer on a screen: 3 rows deleted of
300,000 printed as ``0.00%`` says "nothing deleted". ``percent`` keeps the fixed number of decimals
people expect and adds digits only when those would show a non-zero ratio as 0 (or a partial one
as 100).
"""

from __future__ import annotations

import math


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``count(1, "file")`` -> '1 file', ``count(3, "file")`` -> '3 files' (thousands separated)."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def human_bytes(n: float) -> str:
    """1,234,567 -> '1.2 MB' (decimal units, as file listings show)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def _digits_for(distance: float, decimals: int) -> int:
    """Decimals that show the first significant digit of ``distance`` (a percentage > 0), at least ``decimals``."""
    return max(decimals, -math.floor(math.log10(distance)))


def percent(ratio: float, decimals: int = 2) -> str:
    """``ratio`` (0.25 for a quarter) as a percentage with ``decimals`` decimals, never rounded to 0 % or 100 %
    when it is not exactly that: 3 of 300,000 is ``0.001%``, 299,999 of 300,000 is ``99.9997%``. NaN is ''."""
    if ratio != ratio:  # NaN: unknown (a file without numRecords)
        return ""
    p = ratio * 100
    digits = decimals
    if 0 < abs(p) < 10 ** -decimals / 2:
        digits = _digits_for(abs(p), decimals)
    elif 0 < 100 - p < 10 ** -decimals / 2:
        digits = _digits_for(100 - p, decimals)
    return f"{p:.{digits}f}%"
