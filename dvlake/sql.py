"""SQL for the Delta statements Spark has no grammar for without delta-spark.

``sql(spark, stmt)`` recognises Delta statements on path identifiers (``delta.`/path```) and
runs them through dvlake's commands; every other statement goes to ``spark.sql`` unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dvlake.errors import InvalidArgumentError

if TYPE_CHECKING:  # PySpark is imported only when a statement runs, so ``dvlake.sql`` stays importable cheaply
    from pyspark.sql import DataFrame, SparkSession

_TABLE = r"delta\.`(?P<path>[^`]+)`"


def _props(text: str) -> dict[str, str | None]:
    """Parse ``'k' = 'v', k2 = true`` into a dict (a key without ``= value`` maps to None, as in UNSET)."""
    out: dict[str, str | None] = {}
    pattern = r"""\s*(?:'([^']*)'|`([^`]*)`|([\w.]+))\s*(?:=\s*(?:'([^']*)'|"([^"]*)"|([\w.\-]+)))?\s*(?:,|$)"""
    for m in re.finditer(pattern, text):
        key = m.group(1) or m.group(2) or m.group(3)
        if key is None:
            continue
        value = next((g for g in (m.group(4), m.group(5), m.group(6)) if g is not None), None)
        out[key] = value
    return out


def _strip(stmt: str) -> str:
    return stmt.strip().rstrip(";").strip()


def sql(spark: SparkSession, statement: str) -> DataFrame:
    """Run one SQL statement; Delta statements on ``delta.`path``` are handled by dvlake.

    dvlake runs DELETE, UPDATE, MERGE INTO, OPTIMIZE, REORG … APPLY (PURGE), VACUUM, RESTORE, GENERATE,
    DESCRIBE HISTORY/DETAIL and ALTER TABLE … SET/UNSET TBLPROPERTIES | DROP FEATURE on ``delta.`<path>```;
    any other statement goes to ``spark.sql`` unchanged.

    Args:
        spark: the session.
        statement: one SQL statement (a trailing ``;`` is allowed).

    Returns:
        The statement's result, as delta-spark returns it (e.g. metrics rows for OPTIMIZE and RESTORE).

    Raises:
        InvalidArgumentError: a Delta statement dvlake recognises but cannot parse (the message says the form).

    Example:
        >>> sql(spark, "DELETE FROM delta.`/data/events` WHERE user_id = 3")
    """
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


def _optimize(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands import optimize

    zorder = [c.strip().strip("`") for c in (m.group("zorder") or "").split(",") if c.strip()]
    return optimize.run(spark, m.group("path"), m.group("where"), zorder)


def _reorg_purge(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands import reorg

    return reorg.run(spark, m.group("path"), m.group("where"))



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
    # the alias may not be WHERE itself, or "… WHERE" (no condition) would read as an alias and delete every row
    (rf"DELETE\s+FROM\s+{_TABLE}(?:\s+(?:AS\s+)?(?!WHERE\b)\w+)?(?:\s+(?P<kw>WHERE)\b(?:\s+(?P<where>.*))?)?", _delete),
    (rf"OPTIMIZE\s+{_TABLE}(?:\s+WHERE\s+(?P<where>.+?))?(?:\s+ZORDER\s+BY\s*\(?(?P<zorder>[^()]+?)\)?)?", _optimize),
    (rf"REORG\s+TABLE\s+{_TABLE}(?:\s+WHERE\s+(?P<where>.+?))?\s+APPLY\s*\(\s*PURGE\s*\)", _reorg_purge),
]


# --- table lifecycle: VACUUM, RESTORE, GENERATE ---------------------------------------------------

def _vacuum(spark: SparkSession, m: re.Match) -> DataFrame:
    """VACUUM delta.`p` [LITE|FULL] [RETAIN n HOURS] [DRY RUN], modifiers in any order."""
    from dvlake.commands.vacuum import vacuum

    rest = m.group("rest") or ""
    mode: str | None = None
    hours: float | None = None
    dry = False
    tokens = r"\s*(?:(?P<mode>LITE|FULL)|RETAIN\s+(?P<n>[-+]?\d+(?:\.\d+)?)\s+HOURS|(?P<dry>DRY\s+RUN))"
    for tok in re.finditer(tokens, rest, re.I):
        if tok.group("mode"):
            mode = tok.group("mode").upper()
        elif tok.group("n"):
            hours = float(tok.group("n"))
        else:
            dry = True
    leftover = re.sub(r"\s*(?:LITE|FULL|RETAIN\s+[-+]?\d+(?:\.\d+)?\s+HOURS|DRY\s+RUN)", "", rest, flags=re.I).strip()
    if leftover:
        raise InvalidArgumentError(f"cannot parse VACUUM near {leftover!r}; the form is "
                                   "VACUUM delta.`<path>` [LITE|FULL] [RETAIN n HOURS] [DRY RUN]")
    result = vacuum(spark, m.group("path"), hours, mode, dry)
    paths = result.paths if dry else [result.table_root]
    return spark.createDataFrame([(p,) for p in paths], "path string")


def _restore(spark: SparkSession, m: re.Match) -> DataFrame:
    """RESTORE [TABLE] delta.`p` [TO] VERSION AS OF n | TIMESTAMP AS OF 'ts'."""
    from dvlake.api import _restore_frame
    from dvlake.commands.restore import restore

    if m.group("version") is not None:
        return _restore_frame(spark, restore(spark, m.group("path"), version=int(m.group("version"))))
    ts = m.group("ts").strip()
    if ts[:1] in ("'", '"'):
        ts = ts[1:-1]
    return _restore_frame(spark, restore(spark, m.group("path"), timestamp=ts))

def _generate(spark: SparkSession, m: re.Match) -> DataFrame:
    from dvlake.commands.generate import generate

    generate(m.group("path"), m.group("mode"))
    return _empty(spark)

_HANDLERS.extend([
    (rf"VACUUM\s+{_TABLE}(?P<rest>(?:\s+.*)?)", _vacuum),
    (rf"RESTORE\s+(?:TABLE\s+)?{_TABLE}\s+(?:TO\s+)?(?:VERSION\s+AS\s+OF\s+(?P<version>\d+)|TIMESTAMP\s+AS\s+OF\s+(?P<ts>.+))",
     _restore),
    (rf"GENERATE\s+(?P<mode>\w+)\s+FOR\s+TABLE\s+{_TABLE}", _generate),
])


# --- ALTER TABLE … DROP FEATURE (issue 12) ----------------------------------------------------------

def _drop_feature(spark: SparkSession, m: re.Match) -> DataFrame:
    """ALTER TABLE delta.`p` DROP FEATURE name [TRUNCATE HISTORY]; returns an empty frame, as delta-spark."""
    from dvlake.commands.drop_feature import drop_feature

    drop_feature(spark, m.group("path"), m.group("feature").strip("`'\""), truncate_history=bool(m.group("truncate")))
    return _empty(spark)


_HANDLERS.append((rf"ALTER\s+TABLE\s+{_TABLE}\s+DROP\s+FEATURE\s+(?P<feature>`[^`]+`|'[^']+'|\"[^\"]+\"|[\w.\-]+)"
                  r"(?P<truncate>\s+TRUNCATE\s+HISTORY)?", _drop_feature))

_HANDLERS += _HANDLERS_DML
