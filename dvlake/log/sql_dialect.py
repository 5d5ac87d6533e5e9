"""The SQL dialect dvlake reads and writes: sqlglot's Spark dialect, with Spark 4's string escapes.

Spark 4 reads a doubled quote inside a string literal as one quote (``'it''s'`` is ``it's``); sqlglot's
Spark dialect reads it as two adjacent literals and writes ``CONCAT('it', 's')`` (= ``its``) — a
different value, and so different rows. This dialect tokenizes doubled quotes as Spark does, so an
expression regenerated from the AST means what the user wrote.
"""

from __future__ import annotations

from typing import ClassVar

from sqlglot.dialects.spark import Spark


class SparkSQL(Spark):
    """sqlglot's Spark dialect with the doubled-quote escape Spark 4's lexer accepts."""

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES: ClassVar[list[str]] = [*Spark.Tokenizer.STRING_ESCAPES, "'"]


def backquoted(name: str) -> str:
    """``name`` as one Spark SQL identifier, always back-quoted (``` doubled): safe in any position of generated SQL
    text, also where a plain word would read as a keyword (a column named ``end`` in ``ELSE end END``)."""
    return "`" + name.replace("`", "``") + "`"


def quote_identifier(name: str) -> str:
    """``name`` as one Spark SQL identifier: plain when it is a simple word, else back-quoted with ``` doubled
    (a dot, space or back-quote inside a column name must not split or end it)."""
    if name.replace("_", "a").isalnum() and name.isascii() and not name[:1].isdigit():
        return name
    return backquoted(name)
