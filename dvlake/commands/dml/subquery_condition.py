"""A DELETE condition whose subqueries read Delta tables, bound to one snapshot of the target.

delta-spark runs ``DELETE … WHERE EXISTS (…)``, ``IN (SELECT …)``, ``NOT IN``, scalar subqueries, correlated or
not, by letting Spark evaluate the whole condition over the target's rows. The SQL front end hands such a condition
over in its placeholder form (``Condition.query_text``: each Delta table the subqueries read is a DataFrame
argument); a reference to the target itself must read the very snapshot the command changes (its live rows, DVs
applied), so that ``v > (SELECT avg(v) FROM t)`` compares with the average of the rows the command sees, also on a
retry after a conflict. This module binds that form per snapshot and checks it as ``check_condition`` and
``require_deterministic`` check a plain condition: resolved over the table's columns before any data is read, and a
non-deterministic function refused. Text that names no Delta table never comes here: Spark reads it as written.
"""

from __future__ import annotations

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import SparkSession
from sqlglot import exp

from dvlake.errors import DeltaSqlError, InvalidNonDeterministicExpressionsError
from dvlake.log.condition import NON_DETERMINISTIC, Condition
from dvlake.log.snapshot import Snapshot
from dvlake.log.sql_dialect import SparkSQL
from dvlake.spark.bound import BoundCondition, bind
from dvlake.spark.catalog import registered_location
from dvlake.spark.layout import logical_struct
from dvlake.spark.scan import scan_snapshot, unresolved_condition


def bind_with_tables(spark: SparkSession, snapshot: Snapshot, condition: Condition, operation: str,
                     deterministic_only: bool) -> BoundCondition:
    """``condition`` (placeholder form) bound to ``snapshot``: the target's placeholders read its live rows at this
    snapshot; resolved over an empty frame of the table's columns (Spark's own error class on failure)."""
    logical = logical_struct(snapshot.schema)
    bound = bind(spark, condition, logical, target=lambda: scan_snapshot(spark, snapshot))
    probe = spark.createDataFrame([], logical)
    try:
        _ = bound.matching(probe).schema  # analysis only (Connect is lazy until the schema is asked for)
    except (AnalysisException, ParseException) as exc:
        raise unresolved_condition(operation, condition, snapshot.table_root, exc) from exc
    if deterministic_only and not _known_deterministic(condition):
        raise InvalidNonDeterministicExpressionsError(
            f"The operator expects a deterministic expression: the {operation} condition {condition.display()!r} holds "
            "a non-deterministic function, so the rows it picks could differ each time it is evaluated.")
    return bound


def _known_deterministic(condition: Condition) -> bool:
    """Whether the parsed text calls none of the functions known to change from row to row or run to run (the
    analyzer probes of ``checks.expression_kind`` take a Column, which this form cannot be made into)."""
    if condition.tree is None:
        return True
    for node in condition.tree.walk():
        if isinstance(node, exp.Rand | exp.Randn | exp.Uuid):
            return False
        if isinstance(node, exp.Func) and node.sql_name().lower() in NON_DETERMINISTIC:
            return False
        if isinstance(node, exp.Anonymous) and node.name.lower() in NON_DETERMINISTIC:
            return False
    return True


def refuse_unread_delta_tables(spark: SparkSession, condition: Condition) -> None:
    """A condition in Spark's own form (the Python API's text) whose subquery names a Delta table: Spark cannot read
    one by itself (a ``delta.`<path>```, a name dvlake or delta-spark registered), so it is refused before anything
    is read, rather than left to fail mid-scan. The SQL front end hands such tables over as DataFrames instead."""
    if condition.tree is None or condition.query_text is not None or not condition.has_subquery:
        return
    for node in condition.tree.find_all(exp.Table):
        db = node.args.get("db")
        name = exp.Table(this=node.this, db=db, catalog=node.args.get("catalog")).sql(SparkSQL)  # without its alias
        by_path = db is not None and db.name.lower() == "delta" and not node.args.get("catalog")
        if by_path or (isinstance(node.this, exp.Identifier) and registered_location(spark, name) is not None):
            raise DeltaSqlError(
                f"the DELETE condition {condition.display()!r} reads the Delta table {name!r} in a subquery, "
                "which DeltaTable.delete cannot hand to Spark; run it as SQL (dvlake.sql or, with configure_spark, "
                "spark.sql: DELETE FROM … WHERE …), which reads the table with dvlake.")
