"""Long listings (``dvlake files``) as lines of aligned columns, drawn without rich's layout engine.

rich lays out every cell of a table (measuring, wrapping, cropping), which costs about 10 ms per
row: 13 of the 17 seconds of listing a 1,000-file table went there. A listing has one line per
file and never wraps (it is read with grep, sort and less), so it only needs each column's width:
the lines are drawn in the box characters of rich's default table style, in linear time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def listing_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]], right: set[str] | frozenset[str] = frozenset()
                  ) -> list[str]:
    """The header, rule, one line per row and the bottom rule, each cell padded to its column's width."""
    cells = [[_text(v) for v in row] for row in rows]
    widths = [cell_len(c) for c in columns]
    for row in cells:
        for i, cell in enumerate(row):
            n = cell_len(cell)
            if n > widths[i]:
                widths[i] = n
    aligned_right = [c in right for c in columns]

    def line(values: Sequence[str], bar: str) -> str:
        parts = []
        for value, width, to_right in zip(values, widths, aligned_right, strict=True):
            pad = " " * (width - cell_len(value))
            parts.append(f" {pad}{value} " if to_right else f" {value}{pad} ")
        return bar + bar.join(parts) + bar

    def rule(left: str, fill: str, mid: str, end: str) -> str:
        return left + mid.join(fill * (w + 2) for w in widths) + end

    out = [rule("┏", "━", "┳", "┓"), line(columns, "┃"), rule("┡", "━", "╇", "┩")]
    out.extend(line(row, "│") for row in cells)
    out.append(rule("└", "─", "┴", "┘"))
    return out
