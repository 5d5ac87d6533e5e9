"""SQL for the Delta statements Spark has no grammar for without delta-spark.

``sql(spark, stmt)`` recognises Delta statements on path identifiers (``delta.`/path```) and
runs them through dvlake's commands; every other statement goes to ``spark.sql`` unchanged.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from dvlake.errors import InvalidArgumentError

if TYPE_CHECKING:  # PySpark is imported only when a statement runs, so ``dvlake.sql`` stays importable cheaply
    from pyspark.sql import DataFrame, SparkSession

_TABLE = r"delta\.`(?P<path>[^`]+)`"


def _props(text: str) -> dict[str, str]:
    """Parse ``'k' = 'v', k2 = true`` into a dict."""
    out = {}
    for m in re.finditer(r"""\s*(?:'([^']*)'|`([^`]*)`|([\w.]+))\s*(?:=\s*(?:'([^']*)'|"([^"]*)"|([\w.\-]+)))?\s*(?:,|$)""", text):
        key = m.group(1) or m.group(2) or m.group(3)
        if key is None:
            continue
        value = next((g for g in (m.group(4), m.group(5), m.group(6)) if g is not None), None)
        out[key] = value
    return out


def _strip(stmt: str) -> str:
    return stmt.strip().rstrip(";").strip()


def sql(spark: SparkSession, statement: str) -> DataFrame:
    """Run one SQL statement; Delta statements on ``delta.`path``` are handled by dvlake."""
    stmt = _strip(statement)
    for pattern, handler in _HANDLERS:
        m = re.fullmatch(pattern, stmt, re.I | re.S)
        if m:
            return handler(spark, m)
    return spark.sql(statement)


def _empty(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], "result string")


def _set_props(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands.alter import set_properties

    props = _props(m.group("props"))
    if any(v is None for v in props.values()):
        raise InvalidArgumentError(f"SET TBLPROPERTIES needs key = value pairs; got {m.group('props')!r}")
    set_properties(m.group("path"), props)
    return _empty(spark)


def _unset_props(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands.alter import unset_properties

    unset_properties(m.group("path"), list(_props(m.group("props"))), if_exists=bool(m.group("ifexists")))
    return _empty(spark)


def _history(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.api import DeltaTable

    limit = int(m.group("limit")) if m.group("limit") else None
    return DeltaTable(spark, m.group("path")).history(limit)


def _detail(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.api import DeltaTable

    return DeltaTable(spark, m.group("path")).detail()


def _delete(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands.delete import delete

    metrics = delete(spark, m.group("path"), m.group("where"))
    return spark.createDataFrame([(int(metrics.get("numDeletedRows", 0)),)], "num_affected_rows long")


# --- UPDATE and MERGE INTO (issue 10) ---------------------------------------------------------------


def _split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses, brackets, quotes and backquotes."""
    out: list[str] = []
    cur: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _assignments(text: str) -> dict[str, str]:
    """``a = 1, t.b.c = s.x + 1`` → {a: 1, t.b.c: s.x + 1} (the first top-level ``=`` of each item)."""
    out: dict[str, str] = {}
    for item in _split_top_level(text):
        m = re.match(r"\s*((?:`[^`]+`|[\w]+)(?:\s*\.\s*(?:`[^`]+`|\w+))*)\s*=(?!=)\s*(.+)$", item, re.S)
        if not m:
            raise InvalidArgumentError(f"cannot parse the assignment {item!r}; write column = expression")
        out[re.sub(r"\s+", "", m.group(1))] = m.group(2).strip()
    return out


def _update(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands.update import update

    assignments: dict[str, Any] = dict(_assignments(m.group("set")))
    metrics = update(spark, m.group("path"), assignments, m.group("where"), alias=m.group("alias"))
    return spark.createDataFrame([(int(metrics.get("numUpdatedRows", 0)),)], "num_affected_rows long")


def _merge(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands.merge import merge_from_sql

    return merge_from_sql(spark, m.group("path"), m.group("alias"), m.group("source").strip(), m.group("salias"),
                          m.group("on"), m.group("clauses"), _split_top_level, _assignments,
                          schema_evolution=bool(m.group("evolution")))


_NOT_KEYWORD = r"(?!(?:SET|USING|ON|WHERE|WHEN)\b)"

_HANDLERS_DML: list[tuple[str, Callable[[SparkSession, re.Match], DataFrame]]] = [
    (rf"UPDATE\s+{_TABLE}(?:\s+(?:AS\s+)?{_NOT_KEYWORD}(?P<alias>\w+))?\s+SET\s+(?P<set>.+?)(?:\s+WHERE\s+(?P<where>.+))?",
     _update),
    (rf"MERGE\s+(?P<evolution>WITH\s+SCHEMA\s+EVOLUTION\s+)?INTO\s+{_TABLE}(?:\s+(?:AS\s+)?{_NOT_KEYWORD}(?P<alias>\w+))?\s+USING\s+"
     rf"(?P<source>\(.+\)|[\w.`]+)(?:\s+(?:AS\s+)?{_NOT_KEYWORD}(?P<salias>\w+))?\s+ON\s+(?P<on>.+?)"
     r"\s+(?P<clauses>WHEN\s+.+)", _merge),
]

_HANDLERS: list[tuple[str, Callable[[SparkSession, re.Match], DataFrame]]] = [
    (rf"ALTER\s+TABLE\s+{_TABLE}\s+SET\s+TBLPROPERTIES\s*\((?P<props>.*)\)", _set_props),
    (rf"ALTER\s+TABLE\s+{_TABLE}\s+UNSET\s+TBLPROPERTIES\s*(?P<ifexists>IF\s+EXISTS\s*)?\((?P<props>.*)\)", _unset_props),
    (rf"DESCRIBE\s+HISTORY\s+{_TABLE}(?:\s+LIMIT\s+(?P<limit>\d+))?", _history),
    (rf"DESCRIBE\s+DETAIL\s+{_TABLE}", _detail),
    (rf"DELETE\s+FROM\s+{_TABLE}(?:\s+(?:AS\s+)?\w+)?(?:\s+WHERE\s+(?P<where>.+))?", _delete),
]
_HANDLERS += _HANDLERS_DML
