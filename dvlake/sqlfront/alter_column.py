"""ALTER TABLE <table> ALTER [COLUMN] <path> <action> [, <path> <action> …], read token by token.

sqlglot's Spark dialect has no grammar for nested paths (``s.a``) or FIRST / AFTER, so this reads Spark's own
grammar: the action is TYPE <type>, COMMENT '<text>', FIRST, AFTER <column>, SET NOT NULL or DROP NOT NULL.
SET/DROP DEFAULT is not read here (None: the AST path answers it). The changes run as one metadata commit in
:mod:`dvlake.commands.ddl.alter_column`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sqlglot.tokens import TokenType

from dvlake.sqlfront.parse import Cursor, sql_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dvlake.commands.ddl.alter_column import ColumnChange

FORM = ("ALTER TABLE <table> ALTER [COLUMN] <column> TYPE <type> | COMMENT '<text>' | FIRST | AFTER <column> | "
        "SET NOT NULL | DROP NOT NULL [, <column> …]")


def _name(cur: Cursor) -> str:
    tok = cur.next()
    if tok.token_type in (TokenType.STRING, TokenType.COMMA, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.DOT):
        raise sql_error(cur.text, tok.start, f"expected a column name, got {tok.text!r}; the form is {FORM}", parse=True)
    return tok.text


def _path(cur: Cursor) -> list[str]:
    parts = [_name(cur)]
    while cur.peek() is not None and cur.peek().token_type == TokenType.DOT:  # type: ignore[union-attr]
        cur.next()
        parts.append(_name(cur))
    return parts


def _type(spark: SparkSession, cur: Cursor) -> Any:
    """The type up to the next top-level comma, in Delta's JSON form (Spark's DDL parser reads it)."""
    text, start = cur.span_until((",",), angles=True)  # MAP<STRING, BIGINT>: its comma is the type's
    if not text.strip():
        raise sql_error(cur.text, start, "TYPE needs a type", parse=True)
    try:
        schema = spark.createDataFrame([], f"`c` {text.strip()}").schema
    except Exception as e:  # noqa: BLE001 - Spark's parser names what it cannot read
        raise sql_error(cur.text, start, f"cannot read the type {text.strip()!r}: {e}", parse=True) from None
    return json.loads(schema.json())["fields"][0]["type"]


def _clause(spark: SparkSession, cur: Cursor) -> ColumnChange | None:
    from dvlake.commands.ddl.alter_column import ColumnChange

    column = _path(cur)
    if cur.accept("COMMENT"):
        tok = cur.next()
        if tok.token_type != TokenType.STRING:
            raise sql_error(cur.text, tok.start, "COMMENT takes a string literal", parse=True)
        return ColumnChange(column, comment=tok.text)
    if cur.accept("TYPE"):
        return ColumnChange(column, data_type=_type(spark, cur))
    if cur.accept("FIRST"):
        return ColumnChange(column, position="FIRST")
    if cur.accept("AFTER"):
        return ColumnChange(column, position=f"AFTER {_name(cur)}")
    if cur.accept("SET", "NOT", "NULL"):
        return ColumnChange(column, nullable=False)
    if cur.accept("DROP", "NOT", "NULL"):
        return ColumnChange(column, nullable=True)
    if cur.at("SET", "DEFAULT") or cur.at("DROP", "DEFAULT"):
        return None
    raise cur.error(f"cannot read this ALTER COLUMN action; the form is {FORM}", parse=True)


CHANGE_FORM = "ALTER TABLE <table> CHANGE [COLUMN] <column> <same name> <type> [COMMENT '<text>'] [FIRST | AFTER <column>]"


def read_change_column(spark: SparkSession, cur: Cursor) -> list[ColumnChange]:
    """Hive-style ``CHANGE [COLUMN] c c <type> [COMMENT …] [FIRST | AFTER x]`` (the cursor at CHANGE): one change.

    Spark reads it into the same column changes as ALTER COLUMN; a different second name is a rename, which Spark
    and delta-spark refuse here (RENAME COLUMN does it).
    """
    from dvlake.commands.ddl.alter_column import ColumnChange

    cur.expect("CHANGE", form=CHANGE_FORM)
    cur.accept("COLUMN")
    column = _path(cur)
    start = cur.offset()
    new_name = _name(cur)
    if new_name.strip("`").lower() != column[-1].strip("`").lower():
        raise sql_error(cur.text, start, f"CHANGE COLUMN cannot rename {column[-1]} to {new_name}: use ALTER TABLE … "
                        "RENAME COLUMN", parse=True)
    text, _ = cur.span_until(("COMMENT",), ("FIRST",), ("AFTER",), angles=True)
    data_type = _type(spark, Cursor(text)) if text.strip() else None
    comment = None
    if cur.accept("COMMENT"):
        tok = cur.next()
        if tok.token_type != TokenType.STRING:
            raise sql_error(cur.text, tok.start, "COMMENT takes a string literal", parse=True)
        comment = tok.text
    position = "FIRST" if cur.accept("FIRST") else (f"AFTER {_name(cur)}" if cur.accept("AFTER") else None)
    cur.expect_end(CHANGE_FORM)
    return [ColumnChange(column, comment=comment, position=position, data_type=data_type)]


def read_changes(spark: SparkSession, cur: Cursor) -> list[ColumnChange] | None:
    """The clauses after ``ALTER TABLE <table>`` (the cursor at ALTER); None when one is a DEFAULT change."""
    cur.expect("ALTER", form=FORM)
    cur.accept("COLUMN")
    changes: list[ColumnChange] = []
    while True:
        change = _clause(spark, cur)
        if change is None:
            return None
        changes.append(change)
        if not cur.accept(","):
            break
        cur.accept("COLUMN")
    cur.expect_end(FORM)
    return changes
