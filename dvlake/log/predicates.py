"""File pruning: which files may hold a row matching a condition, judged from the log alone.

A visitor over a :class:`~dvlake.log.condition.Condition`'s tree answers, per file, "may match"
(keep) or "no row can match" (skip). It says "skip" only when that is proven from the file's
partition values or its min/max/nullCount statistics; any node it does not model keeps the file,
and Spark later decides every row with the user's own text.

What it models, exactly (anything else keeps the file):
- ``AND`` (skip when either side is proven empty), ``OR`` (when both are), parentheses;
- ``col op literal`` and ``literal op col`` for ``= < <= > >= <=>``, ``col IN (literals)``,
  ``col BETWEEN lo AND hi``, ``col IS [NOT] NULL``; ``NOT`` only as ``IS NOT NULL``;
- literals: integers and decimals on integer/float/double columns, strings on string columns,
  ``DATE'…'`` on date columns, ``TIMESTAMP'…'`` on timestamp columns, read in the session time zone
  as Spark reads them.
How statistics are read (PROTOCOL.md "Per-file Statistics"; delta-spark's writers):
- timestamps are truncated to milliseconds, so a max is widened by 999 µs;
- strings may be truncated prefixes: a max only excludes values that do not start with it;
- float/double columns may hold NaN, which Spark orders above every number and stats omit: their
  max excludes nothing;
- missing stats, a missing column in them, decimals, collated strings, timestamp_ntz and
  timestamp partition values are not used;
- files with deletion vectors have bounds over all their rows (``tightBounds: false``), which is
  still an envelope of the live ones.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import re
import zoneinfo
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
from sqlglot import exp

from dvlake.log.condition import Condition

_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq"}
_COMPARISONS: dict[type, str] = {exp.EQ: "eq", exp.LT: "lt", exp.LTE: "le", exp.GT: "gt", exp.GTE: "ge",
                                 exp.NullSafeEQ: "eq"}
_INTEGRAL = ("byte", "short", "integer", "long")
_FLOATING = ("float", "double")
_MAX_EXACT_FLOAT = 2 ** 53
_TIMESTAMP_TEXT = re.compile(
    r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?)?\s*"
    r"(Z|UTC|[+-]\d{2}:?\d{2})?\s*$", re.I)


@dataclass(frozen=True)
class Leaf:
    """``column op values`` where the visitor can compare values with the file's facts."""

    column: str   # lower-cased dotted logical name
    op: str       # eq lt le gt ge in between isnull notnull
    values: tuple[Any, ...] = ()


@dataclass
class FileFacts:
    """What the log says about each candidate file, in one order.

    ``types`` maps a lower-cased dotted logical column name to its Delta type name (``"long"``,
    ``"string"``, ``"timestamp"``, …; ``"unsupported"`` for collated strings or other types the
    visitor leaves alone); ``physical`` maps data columns to their dotted physical stats path.
    """

    stats: pa.Array | pa.ChunkedArray | None
    partition_names: list[str]
    partition_rows: list[tuple[Any, ...]]
    types: dict[str, str]
    physical: dict[str, str]
    session_time_zone: str = "UTC"

    @property
    def count(self) -> int:
        return len(self.partition_rows) if self.stats is None else len(self.stats)


@dataclass
class PruneResult:
    """The keep mask, and whether it is exact on partition values (every node decided per file)."""

    keep: np.ndarray
    exact: bool


def prune(condition: Condition | None, facts: FileFacts) -> PruneResult:
    """Keep-mask over the files of ``facts``: False only where no row of the file can match."""
    n = facts.count
    if condition is None or condition.tree is None or n == 0:
        return PruneResult(np.ones(n, dtype=bool), False)
    visitor = _Pruner(condition, facts)
    keep = visitor.visit(condition.tree)
    return PruneResult(keep, visitor.exact)


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
        col, value = _column(left, condition), _literal(right, session_time_zone)
        if col is None:
            col, value, op = _column(right, condition), _literal(left, session_time_zone), _FLIP[op]
        if col is None or value is _UNKNOWN:
            return None
        return Leaf(col, op, (value,))
    if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        col = _column(node.this, condition)
        values = tuple(_literal(v, session_time_zone) for v in node.expressions)
        if col is None or not values or any(v is _UNKNOWN for v in values):
            return None
        return Leaf(col, "in", values)
    if isinstance(node, exp.Between):
        col = _column(node.this, condition)
        lo, hi = _literal(node.args.get("low"), session_time_zone), _literal(node.args.get("high"), session_time_zone)
        if col is None or lo is _UNKNOWN or hi is _UNKNOWN:
            return None
        return Leaf(col, "between", (lo, hi))
    return None


_UNKNOWN: Any = object()


def _column(node: exp.Expr | None, condition: Condition) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        return condition.column_path(node)
    return None


def _literal(node: exp.Expr | None, tz: str) -> Any:
    """The Python value of a literal as Spark reads it, or _UNKNOWN."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        inner = _literal(node.this, tz)
        return -inner if isinstance(inner, int | decimal.Decimal) and not isinstance(inner, bool) else _UNKNOWN
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
    """How a column of ``delta_type`` compares with ``value``: numeric/float/string/date/timestamp, or None."""
    if isinstance(value, bool):
        return None
    if delta_type in _INTEGRAL or delta_type in _FLOATING:
        if isinstance(value, int | decimal.Decimal) and abs(value) < _MAX_EXACT_FLOAT:  # type: ignore[operator]
            return "float" if delta_type in _FLOATING else "numeric"
        return None
    if delta_type == "string" and isinstance(value, str):
        return "string"
    if delta_type == "date" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return "date"
    if delta_type == "timestamp" and isinstance(value, dt.datetime):
        return "timestamp"
    return None


# --- the visitor ------------------------------------------------------------------------------


class _Pruner:
    def __init__(self, condition: Condition, facts: FileFacts) -> None:
        self.condition, self.facts = condition, facts
        self.n = facts.count
        self.exact = True
        self.partitions = {name.lower(): i for i, name in enumerate(facts.partition_names)}
        self._stats: pa.Table | None | bool = False  # False: not read yet
        self._needed = self._stats_needed()

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
        if leaf.op not in ("isnull", "notnull") and any(_kind(delta_type, v) in (None, "timestamp") for v in leaf.values):
            return self._unknown()
        verdicts = [_holds(leaf, row[col]) for row in self.facts.partition_rows]
        if any(v is None for v in verdicts):
            return self._unknown()
        return np.array(verdicts, dtype=bool)

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
            arrow = _arrow_type(self.facts.types.get(leaf.column, "unsupported"), leaf.values)
            if arrow is not None:
                needed["minValues"][path] = arrow
                needed["maxValues"][path] = arrow
        return needed

    def _table(self) -> pa.Table | None:
        if self._stats is False:
            self._stats = _read_stats(self.facts.stats, self._needed)
        return self._stats if isinstance(self._stats, pa.Table) else None

    def _on_stats(self, leaf: Leaf) -> np.ndarray:
        keep = np.ones(self.n, dtype=bool)
        path = self.facts.physical.get(leaf.column)
        table = self._table()
        if path is None or table is None:
            return keep
        if leaf.op in ("isnull", "notnull"):
            nulls = _field(table, "nullCount", path)
            if nulls is None:
                return keep
            other = pa.scalar(0, pa.int64()) if leaf.op == "isnull" else table.column("numRecords").combine_chunks()
            return ~_filled(pc.equal(nulls, other))
        delta_type = self.facts.types.get(leaf.column, "unsupported")
        kinds = {_kind(delta_type, v) for v in leaf.values}
        if len(kinds) != 1 or None in kinds:
            return keep
        kind: str = kinds.pop()  # type: ignore[assignment]  # None was ruled out above
        lo, hi = _field(table, "minValues", path), _field(table, "maxValues", path)
        if lo is None or hi is None:
            return keep
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

    def _above_max(self, kind: str, hi: pa.Array, value: pa.Scalar, raw: Any) -> np.ndarray:
        """Files whose rows are all below ``value`` (value > the true max)."""
        if kind == "float":
            return np.zeros(self.n, dtype=bool)  # NaN rows sit above every number and stats leave them out
        if kind == "timestamp":
            return _filled(pc.greater(value, pc.add(hi, pa.scalar(999, pa.duration("us")))))
        if kind == "string":
            return _string_above(hi, raw)
        return _filled(pc.greater(value, hi))

    def _at_or_above_max(self, kind: str, hi: pa.Array, value: pa.Scalar, raw: Any) -> np.ndarray:
        """Files whose rows are all at or below ``value`` (``col > value`` cannot hold)."""
        if kind == "float":
            return np.zeros(self.n, dtype=bool)
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
    """Whether ``leaf`` holds for a partition value: True/False, or None when Python cannot say it like Spark."""
    if leaf.op == "isnull":
        return value is None
    if leaf.op == "notnull":
        return value is not None
    if value is None:
        return False  # a comparison with null is never true
    if isinstance(value, bool) or isinstance(value, dt.datetime):
        return None
    vals = leaf.values
    try:
        if leaf.op == "eq":
            return bool(value == vals[0])
        if leaf.op == "lt":
            return bool(value < vals[0])
        if leaf.op == "le":
            return bool(value <= vals[0])
        if leaf.op == "gt":
            return bool(value > vals[0])
        if leaf.op == "ge":
            return bool(value >= vals[0])
        if leaf.op == "between":
            return bool(vals[0] <= value <= vals[1])
        if leaf.op == "in":
            return any(value == v for v in vals)
    except TypeError:
        return None
    return None


# --- reading statistics -----------------------------------------------------------------------


def _arrow_type(delta_type: str, values: tuple[Any, ...]) -> pa.DataType | None:
    kinds = {_kind(delta_type, v) for v in values}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    return {"numeric": pa.int64(), "float": pa.float64(), "string": pa.string(), "date": pa.string(),
            "timestamp": pa.timestamp("us", tz="UTC")}.get(kind) if kind else None


def _scalar(kind: str, value: Any) -> pa.Scalar:
    if kind == "numeric":
        return pa.scalar(int(value), pa.int64()) if value == int(value) else pa.scalar(float(value), pa.float64())
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
