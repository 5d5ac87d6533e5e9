"""SQL for Delta tables: ``dvlake.sql(spark, statement)``.

The statement is parsed with sqlglot's Spark dialect (:mod:`dvlake.sqlfront`); statements that
read or change Delta tables run through dvlake's commands, every other statement goes to Spark's
own ``spark.sql`` unchanged.

For a hook that routes ``spark.sql`` itself to :func:`sql`: register the un-hooked function first
with :func:`register_original_sql` (``from dvlake.sql import register_original_sql``); dvlake then
sends non-Delta statements and its rewritten queries to that original, never back into the hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dvlake.sqlfront.passthrough import passthrough, register_original_sql

if TYPE_CHECKING:  # PySpark is imported only when a statement runs, so ``dvlake.sql`` stays importable cheaply
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["sql", "passthrough", "register_original_sql"]


def sql(spark: SparkSession, statement: str, args: Any = None, **kwargs: Any) -> DataFrame:
    """Run one SQL statement; statements on Delta tables are run by dvlake.

    Delta statements (on ``delta.`<path>```, a ``@v<n>`` path suffix, or catalog tables with a location):

    - queries, CTEs, subqueries, joins and ``CREATE TEMP VIEW … AS`` reading Delta tables, with
      ``VERSION AS OF n`` / ``TIMESTAMP AS OF ts``, and ``table_changes('delta.`<path>`', start[, end])``;
    - ``CREATE [OR REPLACE] TABLE [IF NOT EXISTS] … USING delta [PARTITIONED BY] [LOCATION] [TBLPROPERTIES] [AS SELECT]``;
    - ``INSERT INTO | OVERWRITE … [PARTITION (…)] SELECT | VALUES``, ``DELETE``, ``UPDATE``, ``MERGE INTO``;
    - ``OPTIMIZE``, ``REORG … APPLY (PURGE)``, ``VACUUM``, ``RESTORE``, ``DESCRIBE [HISTORY | DETAIL]``,
      ``ALTER TABLE … SET | UNSET TBLPROPERTIES | ADD COLUMNS | DROP FEATURE``, ``GENERATE``,
      ``SHOW TBLPROPERTIES``, ``CONVERT TO DELTA parquet.`<path>```.

    Args:
        spark: the session.
        statement: one SQL statement (a trailing ``;`` is allowed).
        args: parameter marker values, passed to ``spark.sql`` as it takes them.
        kwargs: ``spark.sql``'s format parameters, for statements Spark runs.

    Returns:
        The statement's result, as delta-spark returns it (e.g. metrics rows for OPTIMIZE and RESTORE).

    Raises:
        DeltaSqlError: a Delta statement dvlake cannot run; the message names the statement and the line
            and column (``DeltaSqlParseError`` when it does not parse).

    Example:
        >>> sql(spark, "DELETE FROM delta.`/data/events` WHERE user_id = 3")
        >>> sql(spark, "SELECT * FROM delta.`/data/events` VERSION AS OF 3 a JOIN delta.`/data/users` u USING (user_id)")
    """
    from dvlake.sqlfront.router import run

    return run(spark, statement, args, **kwargs)
