"""SQL for the Delta statements Spark has no grammar for without delta-spark.

``sql(spark, stmt)`` recognises Delta statements on path identifiers (``delta.`/path```) and
runs them through dvlake's commands; every other statement goes to ``spark.sql`` unchanged.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable

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

    if m.group("kw") and not (m.group("where") or "").strip():
        raise InvalidArgumentError(
            "DELETE … WHERE has no condition after WHERE; write the condition, or omit WHERE to delete every row")
    metrics = delete(spark, m.group("path"), m.group("where"))
    return spark.createDataFrame([(int(metrics.get("numDeletedRows", 0)),)], "num_affected_rows long")


_HANDLERS: list[tuple[str, Callable[[SparkSession, re.Match], DataFrame]]] = [
    (rf"ALTER\s+TABLE\s+{_TABLE}\s+SET\s+TBLPROPERTIES\s*\((?P<props>.*)\)", _set_props),
    (rf"ALTER\s+TABLE\s+{_TABLE}\s+UNSET\s+TBLPROPERTIES\s*(?P<ifexists>IF\s+EXISTS\s*)?\((?P<props>.*)\)", _unset_props),
    (rf"DESCRIBE\s+HISTORY\s+{_TABLE}(?:\s+LIMIT\s+(?P<limit>\d+))?", _history),
    (rf"DESCRIBE\s+DETAIL\s+{_TABLE}", _detail),
    # the alias may not be WHERE itself, or "… WHERE" (no condition) would read as an alias and delete every row
    (rf"DELETE\s+FROM\s+{_TABLE}(?:\s+(?:AS\s+)?(?!WHERE\b)\w+)?(?:\s+(?P<kw>WHERE)\b(?:\s+(?P<where>.*))?)?", _delete),
]
