"""DELETE, UPDATE and MERGE INTO from sqlglot's AST to dvlake's commands.

Conditions and assignment values are handed to the commands as the user's own text, sliced from the
statement (``parse.written``), never regenerated from the AST; sources of MERGE (a table, a Delta path
at any version, or a subquery that may itself read Delta tables) become DataFrames first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dvlake.sqlfront.parse import DIALECT, sql_error, written
from dvlake.sqlfront.passthrough import passthrough
from dvlake.sqlfront.refs import (
    catalog_location,
    delta_frame,
    delta_tables_as_views,
    has_delta_tables,
    name_of,
    offset_of,
    reads_delta_tables,
    refresh_catalog_columns,
    run_query,
    table_ref,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def target_path(spark: SparkSession, node: exp.Expr, text: str, statement: str) -> str:
    """The table root a Delta-only statement changes: ``delta.`<path>``` or a catalog name; no time travel."""
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise sql_error(text, offset_of(node), f"{statement} needs a table: delta.`<path>` or a table name")
    ref = table_ref(node)
    if node.args.get("version") is not None or (ref is not None and (ref.version is not None or ref.timestamp is not None)):
        raise sql_error(text, offset_of(node), f"{statement} cannot change an old version of a table (remove the time travel)")
    if ref is not None:
        assert ref.path is not None
        return ref.path
    return catalog_location(spark, name_of(node), text, offset_of(node))


def _alias(node: exp.Expr) -> str | None:
    alias = node.args.get("alias")
    return alias.name if alias is not None and alias.name else None


def _no_delta_subqueries(node: exp.Expr | None, text: str, where: str) -> None:
    if node is not None and has_delta_tables(node):
        raise sql_error(text, offset_of(node), f"subqueries reading Delta tables are not supported in the {where}; "
                                               "read the table in a MERGE source or a query instead")


def _sql(node: exp.Expr) -> str:
    return node.sql(DIALECT)


def _affected(spark: SparkSession, n: Any) -> DataFrame:
    return spark.createDataFrame([(int(n or 0),)], "num_affected_rows long")


def delete(spark: SparkSession, node: exp.Delete, text: str) -> DataFrame:
    from dvlake.commands.delete import delete as run_delete

    if node.args.get("using") or node.args.get("joins"):
        raise sql_error(text, offset_of(node), "DELETE … USING is not supported; use MERGE … WHEN MATCHED THEN DELETE")
    path = target_path(spark, node.this, text, "DELETE")
    where = node.args.get("where")
    condition = None
    if where is not None:
        _no_delta_subqueries(where, text, "DELETE condition")
        condition = written(text, where.this)
    metrics = run_delete(spark, path, condition, alias=_alias(node.this))
    return _affected(spark, metrics.get("numDeletedRows", 0))


def assignments(pairs: list[exp.Expr], text: str) -> dict[str, Any]:
    """``SET a = 1, t.b.c = s.x`` → {"a": "1", "t.b.c": "s.x"} (names as parsed, values as written)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        if not isinstance(pair, exp.EQ) or not isinstance(pair.this, exp.Column | exp.Dot):
            raise sql_error(text, offset_of(pair), f"cannot read the assignment {_sql(pair)!r}; write column = expression")
        name = _sql(pair.this)
        if any(k.lower() == name.lower() for k in out):  # a dict would silently keep the last value
            from dvlake.errors import UnresolvedAssignmentError

            raise UnresolvedAssignmentError(
                f"[DELTA_CONFLICT_SET_COLUMN] {sql_error(text, offset_of(pair), '').args[0]}there is a conflict from "
                f"these SET columns: {name!r} is assigned more than once", error_class="DELTA_CONFLICT_SET_COLUMN")
        out[name] = written(text, pair.expression)
    return out


def update(spark: SparkSession, node: exp.Update, text: str) -> DataFrame:
    from dvlake.commands.update import update as run_update

    if node.args.get("from_") or node.args.get("from"):
        raise sql_error(text, offset_of(node), "UPDATE … FROM is not supported; use MERGE … WHEN MATCHED THEN UPDATE")
    path = target_path(spark, node.this, text, "UPDATE")
    where = node.args.get("where")
    _no_delta_subqueries(where, text, "UPDATE condition")
    pairs = assignments(node.expressions, text)
    condition = written(text, where.this) if where is not None else None
    # SET b = (SELECT … FROM <Delta table>): scalar subqueries in values run, as in delta-spark (only the condition
    # refuses subqueries); the tables they read are dvlake's reads, never what plain Spark sees of a name
    reading = {name: pair.expression for name, pair in zip(pairs, node.expressions, strict=True)
               if reads_delta_tables(spark, pair.expression)}
    with delta_tables_as_views(spark, list(reading.values()), text) as values:
        pairs.update(zip(reading, values, strict=True))
        metrics = run_update(spark, path, pairs, condition, alias=_alias(node.this))
    return _affected(spark, metrics.get("numUpdatedRows", 0))


def _source(spark: SparkSession, node: exp.Expr, text: str) -> DataFrame:
    if isinstance(node, exp.Subquery):
        return run_query(spark, node.this, text)
    if isinstance(node, exp.Table):
        frame = delta_frame(spark, node, text)
        if frame is not None:
            return frame
        if isinstance(node.this, exp.Identifier):
            return passthrough(spark, f"SELECT * FROM {name_of(node)}")
    raise sql_error(text, offset_of(node), "the MERGE source must be a table, delta.`<path>` or a (subquery)")


def _clause(when: exp.When, text: str) -> Any:
    from dvlake.commands.merge import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, MergeClause

    kind = MATCHED if when.args.get("matched") else (NOT_MATCHED_BY_SOURCE if when.args.get("source") else NOT_MATCHED)
    cond = when.args.get("condition")
    _no_delta_subqueries(cond, text, "MERGE clause condition")
    condition = written(text, cond) if cond is not None else None
    then = when.args.get("then")
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        return MergeClause(kind, "delete", condition)
    if isinstance(then, exp.Update):
        if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
            return MergeClause(kind, "update", condition, None)
        return MergeClause(kind, "update", condition, assignments(then.expressions, text))
    if isinstance(then, exp.Insert):
        if isinstance(then.this, exp.Star):
            return MergeClause(kind, "insert", condition, None)
        cols, vals = then.this, then.expression
        if not isinstance(cols, exp.Tuple) or not isinstance(vals, exp.Tuple):
            raise sql_error(text, offset_of(then), "write INSERT * or INSERT (columns) VALUES (values)")
        if len(cols.expressions) != len(vals.expressions):
            raise sql_error(text, offset_of(then), f"INSERT names {len(cols.expressions)} columns but gives "
                                                   f"{len(vals.expressions)} values")
        return MergeClause(kind, "insert", condition,
                           {_sql(c): written(text, v) for c, v in zip(cols.expressions, vals.expressions, strict=True)})
    raise sql_error(text, offset_of(when), f"cannot read the MERGE action {then.sql(DIALECT) if then else ''!r}")


def merge(spark: SparkSession, node: exp.Merge, text: str, schema_evolution: bool = False) -> DataFrame:
    from dvlake.commands.merge import MergeSpec, evolves, result_frame
    from dvlake.commands.merge import merge as run_merge

    path = target_path(spark, node.this, text, "MERGE")
    using = node.args["using"]
    source = _source(spark, using, text)
    source_alias = _alias(using)
    if source_alias:
        source = source.alias(source_alias)
    on = node.args.get("on")
    if on is None:
        raise sql_error(text, offset_of(node), "MERGE needs ON <condition>")
    _no_delta_subqueries(on, text, "MERGE ON condition")
    whens = node.args.get("whens")
    clauses = [_clause(w, text) for w in (whens.expressions if whens is not None else [])]
    spec = MergeSpec(source, written(text, on), clauses, _alias(node.this), source_alias, schema_evolution)
    metrics = run_merge(spark, path, spec)
    if evolves(spark, spec):
        refresh_catalog_columns(spark, node.this)  # the catalog's columns follow the added ones
    return result_frame(spark, metrics)
