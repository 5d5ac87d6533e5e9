"""Predicates for file pruning, without Spark: conjunct splitting and parsing, min/max/nullCount
data skipping (evaluated with Arrow on the files' stats) and partition-value evaluation of the
simple conjuncts (the rest is left to Spark by ``dvlake.spark.pruning``).

Both only ever drop files that cannot hold a matching row; anything not understood keeps the
file. Bounds of files with ``tightBounds: false`` (files with DVs) are wider than their live
rows, which is still safe: a bound of a set holds for every subset.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

if TYPE_CHECKING:  # only for annotations: this module never imports Spark
    from pyspark.sql import Column

_OPS = {"=": "eq", "==": "eq", "<": "lt", "<=": "le", ">": "gt", ">=": "ge", "<=>": "eq"}
_FLIP = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq"}
_IDENT = r"`[^`]+`|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_LIT = r"(?:DATE|TIMESTAMP)\s*'[^']*'|'(?:[^'\\]|\\.)*'|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?[LD]?|true|false"


@dataclass(frozen=True)
class Conjunct:
    """``column op value(s)`` understood for data skipping."""

    column: str
    op: str  # eq lt le gt ge in isnull notnull
    values: tuple[Any, ...] = ()


def condition_text(condition: str | Column | None) -> str | None:
    """SQL text of a condition; for a Column, the text inside its repr (best effort)."""
    if condition is None:
        return None
    if isinstance(condition, str):
        return condition
    m = re.match(r"^Column<'(.*)'>$", repr(condition), re.S)
    if m is None or _FUNCTION_FORM.search(m.group(1)):
        return None  # Spark 4's repr of some Columns is not SQL (``=(day, 'a')``): nothing to parse, no pruning
    return m.group(1)


#: An operator written as a function call, as Spark 4 prints some Columns: ``=(a, 1)``, ``and(…)``.
_FUNCTION_FORM = re.compile(r"(?:^|[\s(,])(?:=|==|<=>|<|>|<=|>=|!=|<>|and|or|\+|-|\*|/)\(", re.I)


def split_conjuncts(text: str) -> list[str]:
    """Split on top-level AND (outside parentheses, quotes and BETWEEN … AND)."""
    parts, depth, quote, start, i = [], 0, None, 0, 0
    upper = text.upper()
    between = False
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"', "`"):
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and upper.startswith("BETWEEN", i) and (i == 0 or not text[i - 1].isalnum()):
            between = True
        elif depth == 0 and upper.startswith("AND", i) and (i == 0 or not text[i - 1].isalnum()) and \
                (i + 3 >= len(text) or not text[i + 3].isalnum()):
            if between:
                between = False
            else:
                parts.append(text[start:i].strip())
                start = i + 3
                i += 3
                continue
        i += 1
    parts.append(text[start:].strip())
    out = []
    for p in parts:
        while p.startswith("(") and p.endswith(")") and _balanced(p[1:-1]):
            p = p[1:-1].strip()
        if p:
            out.append(p)
    return out


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += ch == "("
        depth -= ch == ")"
        if depth < 0:
            return False
    return depth == 0


def _literal(text: str) -> Any:
    t = text.strip()
    up = t.upper()
    if up.startswith("DATE"):
        return dt.date.fromisoformat(t[t.index("'") + 1:-1])
    if up.startswith("TIMESTAMP"):
        v = dt.datetime.fromisoformat(t[t.index("'") + 1:-1].replace("Z", "+00:00"))
        return v if v.tzinfo else v.replace(tzinfo=dt.UTC)
    if t.startswith("'"):
        return t[1:-1].replace("\\'", "'")
    if up in ("TRUE", "FALSE"):
        return up == "TRUE"
    t = t.rstrip("LDld")
    return float(t) if any(c in t for c in ".eE") else int(t)


def parse_conjunct(text: str) -> Conjunct | None:
    """One conjunct to a Conjunct, or None when it is not a simple column comparison.

    Literals with a backslash are refused: Spark's escape rules would give another string than a
    naive reading, and a wrong literal could prune a file that holds matching rows.
    """
    if "\\" in text:
        return None
    def col(c: str) -> str:
        return c.strip("`")
    if m := re.fullmatch(rf"\s*({_IDENT})\s+IS\s+(NOT\s+)?NULL\s*", text, re.I):
        return Conjunct(col(m.group(1)), "notnull" if m.group(2) else "isnull")
    if m := re.fullmatch(rf"\s*({_IDENT})\s+IN\s*\(\s*((?:{_LIT})(?:\s*,\s*(?:{_LIT}))*)\s*\)\s*", text, re.I):
        vals = re.findall(_LIT, m.group(2), re.I)
        return Conjunct(col(m.group(1)), "in", tuple(_literal(v) for v in vals))
    if m := re.fullmatch(rf"\s*({_IDENT})\s+BETWEEN\s+({_LIT})\s+AND\s+({_LIT})\s*", text, re.I):
        return Conjunct(col(m.group(1)), "between", (_literal(m.group(2)), _literal(m.group(3))))
    if m := re.fullmatch(rf"\s*({_IDENT})\s*(<=>|==|<=|>=|=|<|>)\s*({_LIT})\s*", text, re.I):
        if m.group(1).lower() in ("true", "false"):
            return None
        return Conjunct(col(m.group(1)), _OPS[m.group(2)], (_literal(m.group(3)),))
    if m := re.fullmatch(rf"\s*({_LIT})\s*(<=>|==|<=|>=|=|<|>)\s*({_IDENT})\s*", text, re.I):
        return Conjunct(col(m.group(3)), _FLIP[_OPS[m.group(2)]], (_literal(m.group(1)),))
    return None


def _arrow_type(value: Any) -> pa.DataType | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return pa.float64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, dt.datetime):
        return pa.timestamp("ms", tz="UTC")
    if isinstance(value, (str, dt.date)):
        return pa.string()
    return None


def _norm(value: Any) -> Any:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def skipping_mask(stats: pa.Array | pa.ChunkedArray, conjuncts: list[Conjunct], physical: dict[str, str]) -> np.ndarray:
    """True for files that may hold matching rows, judged from their stats.

    ``physical`` maps a (lower-cased, dotted) logical column name to its dotted physical path.
    """
    n = len(stats)
    keep = np.ones(n, dtype=bool)
    usable = [c for c in conjuncts if c.column.lower() in physical and
              (c.op in ("isnull", "notnull") or all(_arrow_type(v) is not None for v in c.values))]
    if not usable or n == 0:
        return keep
    fields: dict[str, dict[str, pa.DataType]] = {"minValues": {}, "maxValues": {}, "nullCount": {}}
    for c in usable:
        path = physical[c.column.lower()]
        if c.op in ("isnull", "notnull"):
            fields["nullCount"][path] = pa.int64()
        else:
            t = _arrow_type(c.values[0])
            fields["minValues"][path] = t
            fields["maxValues"][path] = t

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

    schema = pa.schema([("numRecords", pa.int64())] + [(k, nested(v)) for k, v in fields.items() if v])
    if isinstance(stats, pa.ChunkedArray):
        stats = stats.combine_chunks()
    text = "\n".join(s if s else "{}" for s in stats.fill_null("{}").to_pylist())
    try:
        table = pajson.read_json(io.BytesIO(text.encode("utf-8")), parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return keep  # stats in a shape we did not expect: skip nothing

    def column(kind: str, path: str) -> pa.Array:
        arr = table.column(kind).combine_chunks()
        for part in path.split("."):
            arr = arr.field(part)
        return arr

    for c in usable:
        path = physical[c.column.lower()]
        if c.op in ("isnull", "notnull"):
            nulls = column("nullCount", path)
            if c.op == "isnull":
                cannot = pc.equal(nulls, 0)
            else:
                cannot = pc.equal(nulls, table.column("numRecords").combine_chunks())
        else:
            lo, hi = column("minValues", path), column("maxValues", path)
            vals = [_norm(v) for v in c.values]
            t = _arrow_type(c.values[0])
            s = [pa.scalar(v, type=t) for v in vals]
            if c.op == "eq":
                cannot = pc.or_(pc.less(s[0], lo), pc.greater(s[0], hi))
            elif c.op == "lt":
                cannot = pc.greater_equal(lo, s[0])
            elif c.op == "le":
                cannot = pc.greater(lo, s[0])
            elif c.op == "gt":
                cannot = pc.less_equal(hi, s[0])
            elif c.op == "ge":
                cannot = pc.less(hi, s[0])
            elif c.op == "between":
                cannot = pc.or_(pc.greater(lo, s[1]), pc.less(hi, s[0]))
            else:  # in
                cannot = None
                for v in s:
                    out = pc.or_(pc.less(v, lo), pc.greater(v, hi))
                    cannot = out if cannot is None else pc.and_(cannot, out)
        keep &= ~pc.fill_null(cannot, False).to_numpy(zero_copy_only=False)
    return keep


def _identifiers(text: str) -> set[str]:
    """Lower-cased words of a SQL text outside string literals (backquoted names unquoted)."""
    without_strings = re.sub(r"'(?:[^'\\]|\\.)*'", " ", text)
    names = {m.lower() for m in re.findall(r"`([^`]+)`", without_strings)}
    names |= {m.lower() for m in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", re.sub(r"`[^`]+`", " ", without_strings))}
    return names


def mentions_only(text: str, allowed: set[str], all_columns: set[str]) -> bool:
    """Whether a SQL text names no column outside ``allowed`` (conservative: any mention counts)."""
    return not ((_identifiers(text) & all_columns) - allowed)


def references_only(condition: str | Column | None, allowed: set[str], all_columns: set[str]) -> bool:
    """Whether the whole condition mentions only ``allowed`` columns (e.g. partition columns)."""
    if condition is None:
        return True
    text = condition_text(condition)
    return text is not None and mentions_only(text, {a.lower() for a in allowed}, {c.lower() for c in all_columns})


_COMPARABLE = (bool, int, float, str, dt.date)


def _same_kind(value: Any, literal: Any) -> bool:
    """Whether Python compares the two as Spark would (no implicit SQL cast involved)."""
    if isinstance(value, bool) or isinstance(literal, bool):
        return isinstance(value, bool) and isinstance(literal, bool)
    if isinstance(value, (int, float)) and isinstance(literal, (int, float)):
        return True
    if isinstance(value, dt.datetime) or isinstance(literal, dt.datetime):
        return False  # time zones and precision: left to Spark
    return type(value) is type(literal) and isinstance(value, _COMPARABLE)


def _holds(c: Conjunct, value: Any) -> bool | None:
    """SQL truth of ``c`` for one partition value: True/False, or None when Python cannot decide it like Spark."""
    if c.op == "isnull":
        return value is None
    if c.op == "notnull":
        return value is not None
    if any(not _same_kind(v, c.values[0]) for v in c.values):
        return None
    if value is None:
        return False  # a comparison with null is not true: the row (and so the file) cannot match
    if not _same_kind(value, c.values[0]):
        return None
    if c.op == "eq":
        return bool(value == c.values[0])
    if c.op == "lt":
        return bool(value < c.values[0])
    if c.op == "le":
        return bool(value <= c.values[0])
    if c.op == "gt":
        return bool(value > c.values[0])
    if c.op == "ge":
        return bool(value >= c.values[0])
    if c.op == "between":
        return bool(c.values[0] <= value <= c.values[1])
    if c.op == "in":
        return any(value == v for v in c.values)
    return None


def partition_values_mask(conjunct_texts: list[str], partition_names: list[str],
                          partition_rows: list[tuple[Any, ...]]) -> tuple[np.ndarray, list[str]]:
    """Evaluate partition-only conjuncts on typed partition values, without Spark.

    Returns the keep mask over ``partition_rows`` from the conjuncts decided here, and the texts of
    the conjuncts left undecided (functions, casts, type mismatches), which the caller must still
    apply. A conjunct is decided only when every partition value compares as Spark would compare it.
    """
    keep = np.ones(len(partition_rows), dtype=bool)
    index = {name.lower(): i for i, name in enumerate(partition_names)}
    undecided: list[str] = []
    for text in conjunct_texts:
        c = parse_conjunct(text)
        if c is None or c.column.lower() not in index:
            undecided.append(text)
            continue
        col = index[c.column.lower()]
        verdicts = [_holds(c, row[col]) for row in partition_rows]
        if any(v is None for v in verdicts):
            undecided.append(text)
            continue
        keep &= np.array(verdicts, dtype=bool)
    return keep, undecided
