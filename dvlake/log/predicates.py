"""File pruning: which files may hold a row matching a condition, judged from the log alone.

A visitor over a :class:`~dvlake.log.condition.Condition`'s tree answers, per file, "may match"
(keep) or "no row can match" (skip). It says "skip" only when that is proven from the file's
partition values or its min/max/nullCount statistics; any node it does not model keeps the file,
and Spark later decides every row with the user's own text.

What it models, exactly (anything else keeps the file):
- ``AND`` (skip when either side is proven empty), ``OR`` (when both are), parentheses;
- ``col op literal`` and ``literal op col`` for ``= < <= > >= <=>``, ``col IN (literals)``,
  ``col BETWEEN lo AND hi``, ``col IS [NOT] NULL``; ``NOT`` only as ``IS NOT NULL``; a NULL literal
  makes a comparison never true (``<=>`` NULL is IS NULL; NULL in an IN list never matches);
- literals: integers and decimals on integer/float/double columns, single-quoted strings on string
  columns, ``DATE'…'`` on date columns, ``TIMESTAMP'…'`` on timestamp columns, read in the session time
  zone as Spark reads them; anything else (``1e2``, ``5L``, ``"text"``, which names a column
  under ``spark.sql.ansi.doubleQuotedIdentifiers``) keeps the file.
How values are compared (Spark's coercion rules, checked against Spark 4):
- integer column vs decimal literal: exactly (Spark widens both to decimal): ``id < 2.0000000000000001``
  is ``id < 3``; a scale above 18 is left to Spark (the widening could overflow decimal(38));
- float/double column vs decimal or integer literal: the literal cast to double, and Spark's order:
  NaN = NaN, NaN above every number, -0.0 = 0.0; float partition values (float32 parsed from text)
  are left to Spark, and a float column's minimum is taken one float32 step lower (0.7f prints as 0.7;
  so is a double column widened from float, whose older files carry float stats); integer literals
  beyond 2^24 on float columns are left to Spark (without ANSI mode it casts them to float).
How statistics are read (PROTOCOL.md "Per-file Statistics"; delta-spark's writers):
- timestamps are truncated to milliseconds, so a max is widened by 999 µs;
- strings may be truncated prefixes: a max only excludes values that do not start with it;
- float/double columns may hold NaN, which Spark orders above every number and stats omit: their
  max excludes nothing;
- missing stats, a missing column in them, decimals, collated strings, CHAR(n) columns (Spark pads
  the literal to n), timestamp_ntz and
  timestamp partition values are not used, nor date bounds outside years 0000-9999 (written with a
  sign, they do not sort as text);
- files with deletion vectors have bounds over all their rows (``tightBounds: false``), which is
  still an envelope of the live ones.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import math
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
from sqlglot import exp

from dvlake.log.arrow import take_rows
from dvlake.log.condition import Condition

_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq"}
_COMPARISONS: dict[type, str] = {exp.EQ: "eq", exp.LT: "lt", exp.LTE: "le", exp.GT: "gt", exp.GTE: "ge",
                                 exp.NullSafeEQ: "eq"}
_INTEGRAL = ("byte", "short", "integer", "long")
_FLOATING = ("float", "double")
_MAX_EXACT_FLOAT = 2 ** 53
_MAX_EXACT_FLOAT32 = 2 ** 24
_MAX_DECIMAL_DIGITS = 38
_MAX_SCALE_ON_INTEGERS = 38 - 20  # a bigint is a decimal(20, 0) in Spark's widening
_ISO_DATE = r"^\d{4}-\d{2}-\d{2}$"  # years beyond 0000-9999 are written with a sign and do not sort as text
_TIMESTAMP_TEXT = re.compile(
    r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?\s*"
    r"(Z|UTC|[+-]\d{2}:?\d{2})?\s*$", re.I)


@dataclass(frozen=True)
class Leaf:
    """``column op values`` where the visitor can compare values with the file's facts."""

    column: str   # lower-cased dotted logical name
    op: str       # eq lt le gt ge in between isnull notnull never (no row can satisfy it)
    values: tuple[Any, ...] = ()


@dataclass
class FileFacts:
    """What the log says about each candidate file, in one order.

    ``types`` maps a lower-cased dotted logical column name to its Delta type name (``"long"``,
    ``"string"``, ``"timestamp"``, …; ``"unsupported"`` for collated strings or other types the
    visitor leaves alone); ``physical`` maps data columns to their dotted physical stats path.

    With ``partition_codes`` (one per file) ``partition_rows`` are the distinct partition tuples and file ``i`` has
    ``partition_rows[partition_codes[i]]``: a partition leaf is then judged once per tuple, not once per file (a
    million files in a hundred partitions are a hundred verdicts).
    """

    stats: pa.Array | pa.ChunkedArray | None
    partition_names: list[str]
    partition_rows: list[tuple[Any, ...]]
    types: dict[str, str]
    physical: dict[str, str]
    session_time_zone: str = "UTC"
    partition_codes: np.ndarray | None = None

    @property
    def count(self) -> int:
        if self.partition_codes is not None:
            return len(self.partition_codes)
        return len(self.partition_rows) if self.stats is None else len(self.stats)


@dataclass
class PruneResult:
    """The keep mask, and whether it is exact on partition values (every node decided per file)."""

    keep: np.ndarray
    exact: bool


def prune(condition: Condition | None, facts: FileFacts) -> PruneResult:
    """Keep-mask over the files of ``facts``: False only where no row of the file can match.

    Two passes, so that stats are parsed only for files their partition values leave in: the first judges the
    partition leaves and lets every stats leaf keep its files; the second reads the stats of the files the first
    kept. The visitor is monotone (AND, OR, no NOT over a leaf), so the first pass's mask holds the second's
    answer and their AND is the one-pass answer on every file the first kept. One difference in kind: stats that
    Arrow cannot read as expected disable stats skipping for the files read, not for the whole table."""
    n = facts.count
    if condition is None or condition.tree is None or n == 0:
        return PruneResult(np.ones(n, dtype=bool), False)
    first = _Pruner(condition, facts, stats_rows=_NO_STATS)
    keep = first.visit(condition.tree)
    if first.exact or facts.stats is None or not any(first.needs_stats.values()) or not keep.any():
        return PruneResult(keep, first.exact)
    rows = None if keep.all() else np.nonzero(keep)[0]
    return PruneResult(keep & _Pruner(condition, facts, stats_rows=rows).visit(condition.tree), first.exact)


#: ``_Pruner(stats_rows=_NO_STATS)``: a pass that reads no stats (every stats leaf keeps its files)
_NO_STATS = np.zeros(0, dtype=np.int64)


# --- leaves -----------------------------------------------------------------------------------


def leaf_of(node: exp.Expr, condition: Condition, session_time_zone: str) -> Leaf | None:
    """The comparison ``node`` as a Leaf, or None when it is not one the visitor models."""
    if isinstance(node, exp.Not) and isinstance(node.this, exp.Is) and isinstance(node.this.expression, exp.Null):
        col = _column(node.this.this, condition)
        return Leaf(col, "notnull") if col else None
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        col = _column(node.this, condition)
        return Leaf(col, "isnull") if col else None
    op = _COMPARISONS.get(type(node))
    if op is not None:
        left, right = node.this, node.expression
        col, value = _column(left, condition), _literal(right, condition, session_time_zone)
        if col is None:
            col, value, op = _column(right, condition), _literal(left, condition, session_time_zone), _FLIP[op]
        if col is None or value is _UNKNOWN:
            return None
        if value is _NULL:  # x <=> NULL is x IS NULL; any other comparison with NULL is never true
            return Leaf(col, "isnull") if isinstance(node, exp.NullSafeEQ) else Leaf(col, "never")
        return Leaf(col, op, (value,))
    if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        col = _column(node.this, condition)
        values = tuple(_literal(v, condition, session_time_zone) for v in node.expressions)
        if col is None or not values or any(v is _UNKNOWN for v in values):
            return None
        # x IN (1, NULL) is true only where x = 1 (NULL, never true, elsewhere)
        non_null = tuple(v for v in values if v is not _NULL)
        return Leaf(col, "in", non_null) if non_null else Leaf(col, "never")
    if isinstance(node, exp.Between):
        col = _column(node.this, condition)
        lo = _literal(node.args.get("low"), condition, session_time_zone)
        hi = _literal(node.args.get("high"), condition, session_time_zone)
        if col is None or lo is _UNKNOWN or hi is _UNKNOWN:
            return None
        return Leaf(col, "never") if lo is _NULL or hi is _NULL else Leaf(col, "between", (lo, hi))
    return None


_UNKNOWN: Any = object()
_NULL: Any = object()  # the NULL literal


def _column(node: exp.Expr | None, condition: Condition) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return condition.column_path(node)
    return None


def _literal(node: exp.Expr | None, condition: Condition, tz: str) -> Any:
    """The Python value of a literal as Spark reads it, or _UNKNOWN.

    A double-quoted ``"text"`` is a string only while ``spark.sql.ansi.doubleQuotedIdentifiers`` is
    off (it names a column otherwise), so only single-quoted text is read as a value.
    """
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string and not condition.single_quoted(node):
        return _UNKNOWN
    if isinstance(node, exp.Neg):
        inner = _literal(node.this, condition, tz)
        return -inner if isinstance(inner, int | decimal.Decimal) and not isinstance(inner, bool) else _UNKNOWN
    if isinstance(node, exp.Null):
        return _NULL
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            value = node.this
            return value if isinstance(value, str) and "\\" not in value else _UNKNOWN
        text = str(node.this)
        if re.fullmatch(r"\d+", text):
            return int(text)
        if re.fullmatch(r"\d+\.\d*|\.\d+", text):
            return decimal.Decimal(text)
        return _UNKNOWN  # exponents, suffixes: other Spark types
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Literal) and node.this.is_string:
        if not condition.single_quoted(node.this):
            return _UNKNOWN
        target = node.to.this if isinstance(node.to, exp.DataType) else None
        if target == exp.DataType.Type.DATE:
            m = re.fullmatch(r"\s*(\d{4})-(\d{2})-(\d{2})\s*", node.this.this)
            try:
                return dt.date(int(m[1]), int(m[2]), int(m[3])) if m else _UNKNOWN
            except ValueError:
                return _UNKNOWN
        if target in (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ,
                      exp.DataType.Type.TIMESTAMPLTZ):
            return _timestamp(node.this.this, tz)
    return _UNKNOWN


def _timestamp(text: str, tz: str) -> Any:
    """A TIMESTAMP literal as an aware UTC datetime; without a zone it is in the session zone, as Spark reads it."""
    m = _TIMESTAMP_TEXT.match(text)
    if not m:
        return _UNKNOWN
    year, month, day, hour, minute, second, frac, zone = m.groups()
    try:
        micro = int((frac or "0").ljust(6, "0"))
        naive = dt.datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0), micro)
        if zone is None:
            aware = naive.replace(tzinfo=zoneinfo.ZoneInfo(tz))
        elif zone.upper() in ("Z", "UTC"):
            aware = naive.replace(tzinfo=dt.UTC)
        else:
            sign = 1 if zone[0] == "+" else -1
            digits = zone[1:].replace(":", "")
            aware = naive.replace(tzinfo=dt.timezone(sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))))
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        return _UNKNOWN
    return aware.astimezone(dt.UTC)


def _kind(delta_type: str, value: Any) -> str | None:
    """How a column of ``delta_type`` compares with ``value`` in Spark, or None when the visitor does not model it.

    ``numeric``: an integer column and an integer or decimal literal, compared exactly (Spark widens both
    to decimal; a scale above 18 could overflow decimal(38) in that widening, so it is left to Spark).
    ``float``: a float/double column and an integer or decimal literal, compared as doubles (Spark casts
    the literal to double; integers up to 2^24 on float columns, so that a cast to float is exact too).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, decimal.Decimal) and not _valid_decimal(value):
        return None
    if delta_type in _INTEGRAL:
        if isinstance(value, int) and abs(value) < _MAX_EXACT_FLOAT:
            return "numeric"
        if isinstance(value, decimal.Decimal) and _decimal_scale(value) <= _MAX_SCALE_ON_INTEGERS \
                and abs(value) < _MAX_EXACT_FLOAT:
            return "numeric"
        return None
    if delta_type in _FLOATING:
        if isinstance(value, int):
            return "float" if abs(value) <= (_MAX_EXACT_FLOAT32 if delta_type == "float" else _MAX_EXACT_FLOAT) else None
        return "float" if isinstance(value, decimal.Decimal) else None
    if delta_type == "string" and isinstance(value, str):
        return "string"
    if delta_type == "date" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return "date"
    if delta_type == "timestamp" and isinstance(value, dt.datetime):
        return "timestamp"
    return None


def _decimal_scale(value: decimal.Decimal) -> int:
    exponent = value.as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _valid_decimal(value: decimal.Decimal) -> bool:
    """A finite decimal literal Spark types as decimal(p, s) with p <= 38 (its precision is max(digits, scale))."""
    if not value.is_finite():
        return False
    t = value.as_tuple()
    assert isinstance(t.exponent, int)
    precision = max(len(t.digits), -t.exponent) if t.exponent < 0 else len(t.digits) + t.exponent
    return precision <= _MAX_DECIMAL_DIGITS


def _leaf_kind(delta_type: str, leaf: Leaf) -> str | None:
    """The one comparison kind of all of ``leaf``'s values, or None."""
    kinds = {_kind(delta_type, v) for v in leaf.values}
    return kinds.pop() if len(kinds) == 1 else None


def _as_compared(kind: str, leaf: Leaf) -> Leaf:
    """``leaf`` with its literals as Spark compares them with the column.

    ``float``: the literal cast to double. ``numeric``: the same test with integer literals — a column of
    integers is below 2.5 exactly when it is below 3 — or ``never`` when no integer can be equal.
    """
    if kind == "float":
        return Leaf(leaf.column, leaf.op, tuple(float(v) for v in leaf.values))
    if kind != "numeric" or not any(isinstance(v, decimal.Decimal) for v in leaf.values):
        return leaf
    vals, op = leaf.values, leaf.op
    if op in ("eq", "in"):
        ints = tuple(int(v) for v in vals if v == int(v))
        return Leaf(leaf.column, op, ints) if ints else Leaf(leaf.column, "never")
    if op in ("lt", "ge"):
        return Leaf(leaf.column, op, (math.ceil(vals[0]),))
    if op in ("le", "gt"):
        return Leaf(leaf.column, op, (math.floor(vals[0]),))
    if op == "between":
        return Leaf(leaf.column, op, (math.ceil(vals[0]), math.floor(vals[1])))
    return leaf


# --- the visitor ------------------------------------------------------------------------------


class _Pruner:
    """One pass of the visitor. ``stats_rows``: the files whose stats are read (None: all; ``_NO_STATS``: none);
    a stats leaf keeps every other file."""

    def __init__(self, condition: Condition, facts: FileFacts, stats_rows: np.ndarray | None = None) -> None:
        self.condition, self.facts = condition, facts
        self.n = facts.count
        self.stats_rows = stats_rows
        self.m = self.n if stats_rows is None else len(stats_rows)  # length of the stats leaves' masks
        self.exact = True
        self.partitions = {name.lower(): i for i, name in enumerate(facts.partition_names)}
        self._stats: pa.Table | None | bool = False  # False: not read yet
        self.needs_stats = self._stats_needed()

    def visit(self, node: exp.Expr) -> np.ndarray:
        if isinstance(node, exp.Paren):
            return self.visit(node.this)
        if isinstance(node, exp.And):
            return self.visit(node.this) & self.visit(node.expression)
        if isinstance(node, exp.Or):
            return self.visit(node.this) | self.visit(node.expression)
        leaf = leaf_of(node, self.condition, self.facts.session_time_zone)
        if leaf is None:
            return self._unknown()
        if leaf.op == "never":
            self.exact = self.exact and leaf.column in self.partitions
            return np.zeros(self.n, dtype=bool)
        if leaf.column in self.partitions:
            return self._on_partitions(leaf)
        self.exact = False
        return self._on_stats(leaf)

    def _unknown(self) -> np.ndarray:
        self.exact = False
        return np.ones(self.n, dtype=bool)

    # partition values: exact, row by row
    def _on_partitions(self, leaf: Leaf) -> np.ndarray:
        col = self.partitions[leaf.column]
        delta_type = self.facts.types.get(leaf.column, "unsupported")
        if leaf.op not in ("isnull", "notnull"):
            kind = _leaf_kind(delta_type, leaf)
            # float partition values are float32 in Spark: the text "0.1" is not the double 0.1
            if kind is None or kind == "timestamp" or delta_type == "float":
                return self._unknown()
            leaf = _as_compared(kind, leaf)
        verdicts = [_holds(leaf, row[col]) for row in self.facts.partition_rows]
        if any(v is None for v in verdicts):
            return self._unknown()
        out = np.array(verdicts, dtype=bool)
        return out if self.facts.partition_codes is None else out[self.facts.partition_codes]

    # statistics: bounds
    def _stats_needed(self) -> dict[str, dict[str, pa.DataType]]:
        needed: dict[str, dict[str, pa.DataType]] = {"minValues": {}, "maxValues": {}, "nullCount": {}}
        tree = self.condition.tree
        assert tree is not None
        for node in tree.walk():
            leaf = leaf_of(node, self.condition, self.facts.session_time_zone)
            if leaf is None or leaf.column in self.partitions or leaf.column not in self.facts.physical:
                continue
            path = self.facts.physical[leaf.column]
            if leaf.op in ("isnull", "notnull"):
                needed["nullCount"][path] = pa.int64()
                continue
            arrow = _arrow_type(self.facts.types.get(leaf.column, "unsupported"), leaf)
            if arrow is not None:
                needed["minValues"][path] = arrow
                needed["maxValues"][path] = arrow
        return needed

    def _table(self) -> pa.Table | None:
        if self._stats is False:
            stats, rows = self.facts.stats, self.stats_rows
            if stats is not None and rows is not None:
                stats = take_rows(stats, rows) if len(rows) else None
            self._stats = _read_stats(stats, self.needs_stats)
        return self._stats if isinstance(self._stats, pa.Table) else None

    def _on_stats(self, leaf: Leaf) -> np.ndarray:
        """The leaf's mask over all files: judged on the stats rows read, True on the others."""
        judged = self._on_stats_rows(leaf)
        if self.stats_rows is None:
            return judged
        out = np.ones(self.n, dtype=bool)
        out[self.stats_rows] = judged
        return out

    def _on_stats_rows(self, leaf: Leaf) -> np.ndarray:
        keep = np.ones(self.m, dtype=bool)
        path = self.facts.physical.get(leaf.column)
        table = self._table()
        if path is None or table is None:
            return keep
        if leaf.op in ("isnull", "notnull"):
            return self._on_null_counts(leaf, table, path, keep)
        delta_type = self.facts.types.get(leaf.column, "unsupported")
        kind = _leaf_kind(delta_type, leaf)
        if kind is None:
            return keep
        leaf = _as_compared(kind, leaf)
        if leaf.op == "never":
            return np.zeros(self.m, dtype=bool)
        lo, hi = _field(table, "minValues", path), _field(table, "maxValues", path)
        if lo is None or hi is None:
            return keep
        if kind == "date":
            lo, hi = _iso_dates(lo), _iso_dates(hi)
        if delta_type == "float":
            lo = _float32_floor(lo)
        values = [_scalar(kind, v) for v in leaf.values]
        below_min = [_filled(pc.less(v, lo)) for v in values]      # value < every row
        above_max = [self._above_max(kind, hi, v, raw) for v, raw in zip(values, leaf.values, strict=True)]
        if leaf.op == "eq":
            cannot = below_min[0] | above_max[0]
        elif leaf.op == "in":
            cannot = np.logical_and.reduce([b | a for b, a in zip(below_min, above_max, strict=True)])
        elif leaf.op == "lt":
            cannot = _filled(pc.greater_equal(lo, values[0]))
        elif leaf.op == "le":
            cannot = below_min[0]
        elif leaf.op == "gt":
            cannot = self._at_or_above_max(kind, hi, values[0], leaf.values[0])
        elif leaf.op == "ge":
            cannot = above_max[0]
        elif leaf.op == "between":
            cannot = _filled(pc.greater(lo, values[1])) | above_max[0]
        else:
            return keep
        return keep & ~cannot

    @staticmethod
    def _on_null_counts(leaf: Leaf, table: pa.Table, path: str, keep: np.ndarray) -> np.ndarray:
        """IS NULL skips files with no nulls; IS NOT NULL skips files that are all nulls (nullCount = numRecords)."""
        nulls = _field(table, "nullCount", path)
        if nulls is None:
            return keep
        other = pa.scalar(0, pa.int64()) if leaf.op == "isnull" else table.column("numRecords").combine_chunks()
        return ~_filled(pc.equal(nulls, other))

    def _above_max(self, kind: str, hi: pa.Array, value: pa.Scalar, raw: Any) -> np.ndarray:
        """Files whose rows are all below ``value`` (value > the true max)."""
        if kind == "float":
            return np.zeros(self.m, dtype=bool)  # NaN rows sit above every number and stats leave them out
        if kind == "timestamp":
            return _filled(pc.greater(value, pc.add(hi, pa.scalar(999, pa.duration("us")))))
        if kind == "string":
            return _string_above(hi, raw)
        return _filled(pc.greater(value, hi))

    def _at_or_above_max(self, kind: str, hi: pa.Array, value: pa.Scalar, raw: Any) -> np.ndarray:
        """Files whose rows are all at or below ``value`` (``col > value`` cannot hold)."""
        if kind == "float":
            return np.zeros(self.m, dtype=bool)
        if kind == "timestamp":
            return _filled(pc.greater_equal(value, pc.add(hi, pa.scalar(999, pa.duration("us")))))
        if kind == "string":
            return _string_above(hi, raw)  # equality with a possibly truncated max proves nothing
        return _filled(pc.greater_equal(value, hi))


def _string_above(hi: pa.Array, raw: str) -> np.ndarray:
    """``raw`` > every value of files whose max may be a truncated prefix of the true max.

    If ``raw`` > max and does not start with it, ``raw`` exceeds every string that does.
    """
    maxes = hi.to_pylist()
    return np.array([m is not None and raw > m and not raw.startswith(m) for m in maxes], dtype=bool)


def _holds(leaf: Leaf, value: Any) -> bool | None:
    """Whether ``leaf`` holds for a partition value: True/False, or None when Python cannot say it like Spark.

    ``leaf``'s literals are already as Spark compares them (``_as_compared``).
    """
    if leaf.op == "isnull":
        return value is None
    if leaf.op == "notnull":
        return value is not None
    if leaf.op == "never" or value is None:
        return False  # a comparison with null is never true
    if isinstance(value, bool) or isinstance(value, dt.datetime):
        return None
    vals = leaf.values
    try:
        cmp = [_spark_compare(value, v) for v in vals]
    except TypeError:
        return None
    if leaf.op == "eq":
        return cmp[0] == 0
    if leaf.op == "lt":
        return cmp[0] < 0
    if leaf.op == "le":
        return cmp[0] <= 0
    if leaf.op == "gt":
        return cmp[0] > 0
    if leaf.op == "ge":
        return cmp[0] >= 0
    if leaf.op == "between":
        return cmp[0] >= 0 and cmp[1] <= 0
    if leaf.op == "in":
        return any(c == 0 for c in cmp)
    return None


def _spark_compare(a: Any, b: Any) -> int:
    """-1/0/1 as Spark orders two non-null values: NaN equals NaN and is above every other number, -0.0 = 0.0."""
    if isinstance(a, float) or isinstance(b, float):
        a_nan, b_nan = isinstance(a, float) and math.isnan(a), isinstance(b, float) and math.isnan(b)
        if a_nan or b_nan:
            return int(a_nan) - int(b_nan)
    return (a > b) - (a < b)


def _iso_dates(bounds: pa.Array) -> pa.Array:
    """Date bounds that compare correctly as text (yyyy-mm-dd); others become null (not used)."""
    return pc.if_else(pc.match_substring_regex(bounds, _ISO_DATE), bounds, pa.scalar(None, pa.string()))


def _float32_floor(bounds: pa.Array) -> pa.Array:
    """A float column's minimums as doubles at or below the true float32 value.

    Writers print a float's shortest decimal (0.7f as ``0.7``), which as a double may be above the value
    Spark compares (0.699999988…); one float32 step down is a bound whatever the printing.
    """
    vals = np.asarray(pc.fill_null(bounds, math.nan).to_numpy(zero_copy_only=False), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        down = np.nextafter(vals.astype(np.float32), np.float32(-np.inf)).astype(np.float64)
    return pa.array(down, pa.float64())


# --- reading statistics -----------------------------------------------------------------------


def _arrow_type(delta_type: str, leaf: Leaf) -> pa.DataType | None:
    kind = _leaf_kind(delta_type, leaf)
    return {"numeric": pa.int64(), "float": pa.float64(), "string": pa.string(), "date": pa.string(),
            "timestamp": pa.timestamp("us", tz="UTC")}.get(kind) if kind else None


def _scalar(kind: str, value: Any) -> pa.Scalar:
    if kind == "numeric":
        return pa.scalar(int(value), pa.int64())  # _as_compared made decimal literals exact integers
    if kind == "float":
        return pa.scalar(float(value), pa.float64())
    if kind == "date":
        return pa.scalar(value.isoformat(), pa.string())
    if kind == "timestamp":
        return pa.scalar(value, pa.timestamp("us", tz="UTC"))
    return pa.scalar(value, pa.string())


def _read_stats(stats: pa.Array | pa.ChunkedArray | None, needed: dict[str, dict[str, pa.DataType]]) -> pa.Table | None:
    """The needed stats fields of every file as one Arrow table, or None when they cannot be read as expected."""
    if stats is None or not any(needed.values()):
        return None

    def nested(paths: dict[str, pa.DataType]) -> pa.DataType:
        tree: dict[str, Any] = {}
        for p, t in paths.items():
            node = tree
            parts = p.split(".")
            for q in parts[:-1]:
                node = node.setdefault(q, {})
            node[parts[-1]] = t

        def build(node: dict[str, Any]) -> pa.DataType:
            return pa.struct([(k, build(v) if isinstance(v, dict) else v) for k, v in node.items()])
        return build(tree)

    schema = pa.schema([("numRecords", pa.int64())] + [(k, nested(v)) for k, v in needed.items() if v])
    if isinstance(stats, pa.ChunkedArray):
        stats = stats.combine_chunks()
    text = "\n".join(s if s else "{}" for s in stats.fill_null("{}").to_pylist())
    try:
        return pajson.read_json(io.BytesIO(text.encode("utf-8")), parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None  # stats in a shape we did not expect: skip nothing


def _field(table: pa.Table, kind: str, path: str) -> pa.Array | None:
    if kind not in table.column_names:
        return None
    arr = table.column(kind).combine_chunks()
    for part in path.split("."):
        if not isinstance(arr.type, pa.StructType) or arr.type.get_field_index(part) < 0:
            return None
        arr = arr.field(part)
    return arr


def _filled(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A comparison's result with nulls (missing stats) read as "not proven"."""
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
