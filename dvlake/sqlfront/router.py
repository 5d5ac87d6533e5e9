"""Which statement is it, and who runs it: dvlake (Delta statements) or Spark (everything else).

1. Delta's utility statements (OPTIMIZE, VACUUM, …) are recognised by their first words and read
   token by token (:mod:`dvlake.sqlfront.utility`).
2. Everything else is parsed by sqlglot's Spark dialect; statements that read or change Delta tables
   go to :mod:`~dvlake.sqlfront.dml`, :mod:`~dvlake.sqlfront.ddl` or :func:`~dvlake.sqlfront.refs.run_query`.
3. A statement with no Delta table goes to Spark verbatim. One that names ``delta.`<path>``` but that
   dvlake has no handler for is a typed error at that position, never a pass-through that Spark
   would misreport as TABLE_OR_VIEW_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dvlake.errors import DeltaSqlError
from dvlake.sqlfront import by_name, ddl, dml, utility
from dvlake.sqlfront.metadata_query import count_from_metadata
from dvlake.sqlfront.parse import Cursor, is_word, looks_like_delta, parse_statement, sql_error, tokenize
from dvlake.sqlfront.passthrough import passthrough
from dvlake.sqlfront.refs import has_delta_tables, reads_catalog_delta_tables, run_query

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# statements only Delta has: a parse failure of these is reported by dvlake, not passed to Spark
_DELTA_ONLY = {"OPTIMIZE", "VACUUM", "RESTORE", "REORG", "GENERATE", "CONVERT", "MERGE"}


def _clean(statement: str) -> str:
    text = statement.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


def run(spark: SparkSession, statement: str, args: Any = None, **kwargs: Any) -> DataFrame:
    """Run one statement: Delta statements through dvlake's commands, the rest through Spark unchanged."""
    text = _clean(statement)
    try:
        tokens = tokenize(text)
    except DeltaSqlError:
        return passthrough(spark, statement, args, **kwargs)  # Spark reports its own syntax errors
    if not tokens:
        return passthrough(spark, statement, args, **kwargs)
    first = tokens[0].text.upper() if not tokens[0].token_type.name == "IDENTIFIER" else ""
    delta_at = looks_like_delta(tokens)

    result = _utility(spark, text, tokens, first)
    if result is not None:
        return result

    evolution = False
    if first == "MERGE" and len(tokens) > 4 and all(is_word(t, w) for t, w in zip(tokens[1:4], ("WITH", "SCHEMA", "EVOLUTION"),
                                                                                    strict=True)):
        # sqlglot has no MERGE WITH SCHEMA EVOLUTION: drop the three words (same length of blanks keeps positions)
        evolution = True
        text = text[:tokens[1].start] + " " * (tokens[3].end + 1 - tokens[1].start) + text[tokens[3].end + 1:]

    try:
        tree = parse_statement(text)
    except DeltaSqlError:
        if delta_at is not None or first in _DELTA_ONLY:
            raise
        return passthrough(spark, statement, args, **kwargs)

    handled = _dispatch(spark, tree, text, args, evolution, **kwargs)
    if handled is not None:
        return handled
    if delta_at is not None:
        raise sql_error(text, delta_at, "dvlake does not support this statement on a Delta table; supported: queries and "
                                        "temporary views, CREATE TABLE [AS SELECT], INSERT, DELETE, UPDATE, MERGE, OPTIMIZE, "
                                        "REORG, VACUUM, RESTORE, DESCRIBE [HISTORY|DETAIL], ALTER TABLE, GENERATE, CONVERT")
    return passthrough(spark, statement, args, **kwargs)


def _utility(spark: SparkSession, text: str, tokens: list[Any], first: str) -> DataFrame | None:
    cur = Cursor(text, tokens)
    if first in utility.READERS:
        return utility.READERS[first](spark, cur)
    second = tokens[1].text.upper() if len(tokens) > 1 else ""
    if first in ("DESCRIBE", "DESC") and second in ("HISTORY", "DETAIL") and len(tokens) > 2:
        return utility.describe(spark, cur)
    if first == "ALTER" and second == "TABLE":
        return utility.alter(spark, cur)
    if first == "SHOW" and second == "TBLPROPERTIES":
        return utility.show_properties(spark, cur)
    if first == "SHOW" and second == "PARTITIONS":
        return utility.show_partitions(spark, cur)
    if first == "SHOW" and second == "CREATE":
        return by_name.show_create_table(spark, cur)
    if first in by_name.READERS:
        return by_name.READERS[first](spark, cur)
    return None


def _dispatch(spark: SparkSession, tree: exp.Expr, text: str, args: Any, evolution: bool,
              **kwargs: Any) -> DataFrame | None:
    if isinstance(tree, exp.Delete):
        return dml.delete(spark, tree, text)
    if isinstance(tree, exp.Update):
        return dml.update(spark, tree, text)
    if isinstance(tree, exp.Merge):
        return dml.merge(spark, tree, text, evolution)
    if isinstance(tree, exp.Create):
        return ddl.create(spark, tree, text)
    if isinstance(tree, exp.Insert):
        return ddl.insert(spark, tree, text)
    if isinstance(tree, exp.Alter):
        return ddl.alter(spark, tree, text)
    if isinstance(tree, exp.Describe):
        return ddl.describe(spark, tree, text)
    if isinstance(tree, exp.Drop):
        return ddl.drop(spark, tree, text)
    if isinstance(tree, exp.Query):  # without Delta tables it runs as written (kwargs and all)
        if not has_delta_tables(tree) and not reads_catalog_delta_tables(spark, tree):
            return passthrough(spark, text, args, **kwargs)
        counted = None if kwargs else count_from_metadata(spark, tree, text)
        if counted is not None:
            return counted
        return run_query(spark, tree, text, args, whole=True, **kwargs)
    return None
