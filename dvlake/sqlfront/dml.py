"""DELETE, UPDATE and MERGE INTO from sqlglot's AST to dvlake's commands.

Conditions and assignment values are handed to the commands as the user's own text, sliced from the
statement (``parse.written``), never regenerated from the AST; DELETE's and UPDATE's WHERE goes with the tree the
statement's parse made (``parse.written_condition``), so the command does not parse it again; sources of MERGE (a
table, a Delta path at any version, or a subquery that may itself read Delta tables) become DataFrames first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dvlake.log.condition import Condition, refuse_subquery
from dvlake.spark.names import case_sensitive
from dvlake.spark.view_target import ViewTarget, view_target
from dvlake.sqlfront import view_statements
from dvlake.sqlfront.delete_subqueries import delete_condition
from dvlake.sqlfront.parse import DIALECT, is_word, parse_statement, sql_error, tokenize, written, written_condition
from dvlake.sqlfront.passthrough import passthrough
from dvlake.sqlfront.refs import (
    catalog_location,
    delta_frame,
    delta_tables_as_views,
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
        raise sql_error(text, offset_of(node), f"{statement} needs a table: delta.`<path>` or a table name",
                        parse=True)
    ref = table_ref(node)
    if node.args.get("version") is not None or (ref is not None and (ref.version is not None or ref.timestamp is not None)):
        raise sql_error(text, offset_of(node),
                        f"{statement} cannot change an old version of a table (remove the time travel)", parse=True)
    if ref is not None:
        assert ref.path is not None
        return ref.path
    return catalog_location(spark, name_of(node), text, offset_of(node))


def view_of(spark: SparkSession, node: exp.Expr, statement: str) -> ViewTarget | None:
    """The temporary view over a Delta table that a DML statement names as its target, else None (a plain name that
    is not a temporary view goes on to the catalog, as before)."""
    if (not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier) or table_ref(node) is not None
            or node.args.get("version") is not None or node.args.get("catalog") is not None):
        return None
    return view_target(spark, name_of(node), statement)


def _alias(node: exp.Expr) -> str | None:
    alias = node.args.get("alias")
    return alias.name if alias is not None and alias.name else None


def _implicit_alias(node: exp.Expr, taken: str | None = None) -> str | None:
    """The name a catalog table without an alias is qualified by (``MERGE INTO target USING source ON source.key =
    target.key``), as Spark qualifies a relation by its table name; None for a path, a subquery, or a name the other
    side already uses (``MERGE INTO t USING t`` needs aliases to tell them apart)."""
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier) or table_ref(node) is not None:
        return None
    name = node.name
    return None if taken is not None and name.lower() == taken.lower() else name


def _tables_resolve(spark: SparkSession, node: exp.Expr | None) -> None:
    """Spark's TABLE_OR_VIEW_NOT_FOUND for a table a subquery in a MERGE condition reads that does not exist, before
    the subquery itself is refused (delta-spark's analyzer resolves the names first: ``s.v IN (SELECT v FROM t)``
    with ``t`` the target's alias reports ``t`` as unknown)."""
    from pyspark.errors import AnalysisException

    if node is None:
        return
    for table in node.find_all(exp.Table):
        if table_ref(table) is None and isinstance(table.this, exp.Identifier):
            try:
                _ = spark.table(name_of(table)).schema
            except AnalysisException as exc:
                if exc.getCondition() == "TABLE_OR_VIEW_NOT_FOUND":
                    raise
                # any other trouble reading it: the subquery is refused next, as before


def _no_subqueries(node: exp.Expr | None, text: str, command: str, operation: str | None = None) -> None:
    """``log.condition.refuse_subquery`` from the statement's own tree, before a subquery reading a Delta table is
    resolved (the commands refuse the others too)."""
    if node is not None and any(isinstance(n, exp.Query | exp.Subquery | exp.Exists) for n in node.walk()):
        refuse_subquery(command, True, written(text, node), operation)  # the text only for the message


def _sql(node: exp.Expr) -> str:
    return node.sql(DIALECT)


def _affected(spark: SparkSession, n: Any) -> DataFrame:
    return spark.createDataFrame([(int(n or 0),)], "num_affected_rows long")


def delete(spark: SparkSession, node: exp.Delete, text: str) -> DataFrame:
    from dvlake.commands.dml.delete import delete as run_delete

    if node.args.get("using") or node.args.get("joins"):
        raise sql_error(text, offset_of(node), "DELETE … USING is not supported; use MERGE … WHEN MATCHED THEN DELETE",
                        parse=True)
    view = view_of(spark, node.this, "DELETE")
    if view is not None and view.renames:
        return view_statements.delete_through(spark, node, text, view, _alias(node.this), delete)
    path = view.root if view is not None else target_path(spark, node.this, text, "DELETE")
    alias = _alias(node.this) or (view.qualifier if view is not None else None)
    where = node.args.get("where")
    condition: Condition | None = None
    if where is not None:  # subqueries run as in delta-spark; the Delta tables they read are dvlake's reads
        condition = delete_condition(spark, where.this, text, path, alias)
    if view is not None:
        view.check_resolves(spark, alias, [condition.display()] if condition is not None else [])
    metrics = run_delete(spark, path, condition, alias=alias)
    if view is not None:
        view.refresh(spark)
    return _affected(spark, metrics.get("numDeletedRows", 0))


SESSION_CATALOG = "spark_catalog"


def target_qualifiers(node: exp.Expr, alias: str | None) -> list[tuple[str, ...]]:
    """The name parts a SET column may be qualified by: the alias when the statement gives one (the table's name no
    longer qualifies then, as in Spark), else every suffix of the table's name (``spark_catalog.db.tab``,
    ``db.tab``, ``tab``; ``delta.`/path```)."""
    if alias:
        return [(alias,)]
    if not isinstance(node, exp.Table):
        return []
    parts = tuple(p.name for p in node.parts)
    if table_ref(node) is None and len(parts) == 2:  # db.tab of the session catalog: Spark's qualifier names it too
        parts = (SESSION_CATALOG, *parts)
    return [parts[i:] for i in range(len(parts))]


def _column_name(node: exp.Expr, qualifiers: list[tuple[str, ...]], sensitive: bool) -> str:
    """A SET column as the commands read it: its parts backquoted (a part may hold a dot or a ``/`` of a path), the
    target's qualifier dropped (``UPDATE db.tab SET db.tab.col``, ``UPDATE delta.`/p` SET delta.`/p`.col``)."""
    from dvlake.commands.dml.shared import split_name, unqualified

    parts = [p.name for p in node.parts] if isinstance(node, exp.Column) else split_name(_sql(node))
    kept = unqualified(parts, qualifiers, sensitive)
    if kept == parts and isinstance(node, exp.Column | exp.Dot):
        return _sql(node)  # unqualified: the name as parsed (the commands resolve any alias still in it)
    return ".".join(f"`{p.replace('`', '``')}`" for p in kept)


def assignments(pairs: list[exp.Expr], text: str, qualifiers: list[tuple[str, ...]] | None = None,
                sensitive: bool = False) -> dict[str, Any]:
    """``SET a = 1, t.b.c = s.x`` → {"a": "1", "t.b.c": "s.x"} (names as parsed, values as written); a name qualified
    by one of ``qualifiers`` (``target_qualifiers``) loses it. Names are compared under the session's case
    sensitivity (``sensitive``): ``SET S = 1, s = 2`` assigns two columns when case matters."""
    from dvlake.spark.names import same_name

    out: dict[str, Any] = {}
    for pair in pairs:
        if not isinstance(pair, exp.EQ) or not isinstance(pair.this, exp.Column | exp.Dot):
            raise sql_error(text, offset_of(pair), f"cannot read the assignment {_sql(pair)!r}; write column = expression",
                            parse=True)
        name = _column_name(pair.this, qualifiers or [], sensitive)
        if any(same_name(k, name, sensitive) for k in out):  # a dict would silently keep the last value
            from dvlake.errors import UnresolvedAssignmentError

            raise UnresolvedAssignmentError(
                f"{sql_error(text, offset_of(pair), '').args[0]}there is a conflict from "
                f"these SET columns: {name!r} is assigned more than once", error_class="DELTA_CONFLICT_SET_COLUMN")
        out[name] = written(text, pair.expression)
    return out


def update(spark: SparkSession, node: exp.Update, text: str) -> DataFrame:
    from dvlake.commands.dml.update import update as run_update

    if node.args.get("from_") or node.args.get("from"):
        raise sql_error(text, offset_of(node), "UPDATE … FROM is not supported; use MERGE … WHEN MATCHED THEN UPDATE",
                        parse=True)
    view = view_of(spark, node.this, "UPDATE")
    if view is not None and view.renames:
        return view_statements.update_through(spark, node, text, view, _alias(node.this), update)
    path = view.root if view is not None else target_path(spark, node.this, text, "UPDATE")
    alias = _alias(node.this) or (view.qualifier if view is not None else None)
    where = node.args.get("where")
    # the tree parsed with the statement goes to the command with the user's text: the condition is parsed once
    condition = written_condition(text, where.this, alias) if where is not None else None
    if condition is not None:
        condition.refuse_subqueries("UPDATE")
    pairs = assignments(node.expressions, text, target_qualifiers(node.this, alias), case_sensitive(spark))
    if any(v.strip().upper() == "DEFAULT" for v in pairs.values()):  # SET c = DEFAULT: the column's default
        from dvlake.sqlfront.defaults import keywords_replaced, table_defaults

        pairs = keywords_replaced(pairs, table_defaults(path))
    # SET b = (SELECT … FROM <Delta table>): scalar subqueries in values run, as in delta-spark (only the condition
    # refuses subqueries); the tables they read are dvlake's reads, never what plain Spark sees of a name
    reading = {name: pair.expression for name, pair in zip(pairs, node.expressions, strict=True)
               if reads_delta_tables(spark, pair.expression)}
    if view is not None:  # SET names, values and the condition see the view's columns only
        view.check_resolves(spark, alias, [t for t in (condition.display() if condition is not None else None, *pairs,
                                                       *(v for k, v in pairs.items() if k not in reading)) if t])
    with delta_tables_as_views(spark, list(reading.values()), text) as values:
        pairs.update(zip(reading, values, strict=True))
        metrics = run_update(spark, path, pairs, condition, alias=alias)
    if view is not None:
        view.refresh(spark)
    return _affected(spark, metrics.get("numUpdatedRows", 0))


def _cte_prefix(text: str) -> str:
    """``WITH c AS (…) [, …]`` as the user wrote it before ``MERGE``: the text up to the MERGE keyword outside
    parentheses."""
    depth = 0
    for tok in tokenize(text):
        if tok.token_type.name in ("L_PAREN",):
            depth += 1
        elif tok.token_type.name in ("R_PAREN",):
            depth -= 1
        elif depth == 0 and is_word(tok, "MERGE"):
            return text[:tok.start]
    raise sql_error(text, 0, "cannot find MERGE after the WITH clause", parse=True)


def _with_ctes(spark: SparkSession, node: exp.Expr, text: str, with_: exp.Expr | None) -> DataFrame | None:
    """A MERGE source that reads the statement's CTEs (``WITH c AS (…) MERGE INTO t USING c …``, or a subquery over
    them): the CTEs and a ``SELECT *`` of the source run as one query, as Spark resolves a CTE for the whole statement.
    None when the source reads no CTE."""
    if not isinstance(with_, exp.With):
        return None
    names = {c.alias_or_name.lower() for c in with_.expressions}
    if isinstance(node, exp.Table):
        if node.args.get("db") is not None or node.name.lower() not in names:
            return None
        body = name_of(node)
    elif isinstance(node, exp.Subquery):
        body = f"({written(text, node.this)})"
    else:
        return None
    query = f"{_cte_prefix(text)}SELECT * FROM {body}"
    return run_query(spark, parse_statement(query), query, whole=True)


def _source(spark: SparkSession, node: exp.Expr, text: str, with_: exp.Expr | None = None) -> DataFrame:
    from_ctes = _with_ctes(spark, node, text, with_)
    if from_ctes is not None:
        return from_ctes
    if isinstance(node, exp.Subquery):
        return run_query(spark, node.this, text)
    if isinstance(node, exp.Table):
        frame = delta_frame(spark, node, text)
        if frame is not None:
            return frame
        if isinstance(node.this, exp.Identifier):
            return passthrough(spark, f"SELECT * FROM {name_of(node)}")
    raise sql_error(text, offset_of(node), "the MERGE source must be a table, delta.`<path>` or a (subquery)", parse=True)


_ACTION_OF: dict[type[exp.Expr], str] = {exp.Update: "UPDATE", exp.Insert: "INSERT"}


def _clause(when: exp.When, text: str, qualifiers: list[tuple[str, ...]], sensitive: bool) -> Any:
    from dvlake.commands.dml.merge import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, MergeClause

    kind = MATCHED if when.args.get("matched") else (NOT_MATCHED_BY_SOURCE if when.args.get("source") else NOT_MATCHED)
    cond = when.args.get("condition")
    action = next((name for kind, name in _ACTION_OF.items() if isinstance(when.args.get("then"), kind)), "DELETE")
    _no_subqueries(cond, text, "MERGE", f"{action} condition of MERGE operation")
    condition = written(text, cond) if cond is not None else None
    then = when.args.get("then")
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        return MergeClause.of(kind, "delete", condition)
    if isinstance(then, exp.Update):
        if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
            return MergeClause.of(kind, "update", condition, None)
        return MergeClause.of(kind, "update", condition, assignments(then.expressions, text, qualifiers, sensitive))
    if isinstance(then, exp.Insert):
        if isinstance(then.this, exp.Star):
            return MergeClause.of(kind, "insert", condition, None)
        cols, vals = then.this, then.expression
        if not isinstance(cols, exp.Tuple) or not isinstance(vals, exp.Tuple):
            raise sql_error(text, offset_of(then), "write INSERT * or INSERT (columns) VALUES (values)", parse=True)
        if len(cols.expressions) != len(vals.expressions):
            raise sql_error(text, offset_of(then), f"INSERT names {len(cols.expressions)} columns but gives "
                                                   f"{len(vals.expressions)} values")
        return MergeClause.of(kind, "insert", condition,
                           {_sql(c): written(text, v) for c, v in zip(cols.expressions, vals.expressions, strict=True)})
    raise sql_error(text, offset_of(when), f"cannot read the MERGE action {then.sql(DIALECT) if then else ''!r}")


def merge(spark: SparkSession, node: exp.Merge, text: str, schema_evolution: bool = False) -> DataFrame:
    from dvlake.commands.dml.merge import MergeSpec, evolves, result_frame
    from dvlake.commands.dml.merge import merge as run_merge

    view = view_of(spark, node.this, "MERGE")
    path = view.root if view is not None else target_path(spark, node.this, text, "MERGE")
    target_alias = _alias(node.this) or (view.qualifier if view is not None else _implicit_alias(node.this))
    using = node.args["using"]
    source = _source(spark, using, text, node.args.get("with_") or node.args.get("with"))
    source_alias = _alias(using) or _implicit_alias(using, taken=target_alias)
    if source_alias:
        source = source.alias(source_alias)
    if view is not None and (view.renames or view.is_projection):
        assert target_alias is not None
        return view_statements.merge_through(spark, node, text, view, target_alias, source, source_alias, merge,
                                             schema_evolution=schema_evolution)
    on = node.args.get("on")
    if on is None:
        raise sql_error(text, offset_of(node), "MERGE needs ON <condition>", parse=True)
    whens = node.args.get("whens")
    for cond in [on, *(w.args.get("condition") for w in (whens.expressions if whens is not None else []))]:
        _tables_resolve(spark, cond)
    _no_subqueries(on, text, "MERGE", "search condition of MERGE operation")
    qualifiers, sensitive = target_qualifiers(node.this, target_alias), case_sensitive(spark)
    clauses = [_clause(w, text, qualifiers, sensitive) for w in (whens.expressions if whens is not None else [])]
    if not clauses:  # Spark's parser refuses it before delta-spark sees it
        raise sql_error(text, offset_of(node), "There must be at least one WHEN clause in a MERGE statement.",
                        parse=True, error_class="MERGE_WITHOUT_WHEN")
    from dvlake.sqlfront.defaults import clauses_with_defaults

    clauses = clauses_with_defaults(clauses, path)  # UPDATE SET c = DEFAULT, INSERT … VALUES (…, DEFAULT)
    spec = MergeSpec(source, Condition.parse(written(text, on)), clauses, target_alias, source_alias, schema_evolution)
    metrics = run_merge(spark, path, spec)
    if view is not None:
        view.refresh(spark)
    if evolves(spark, spec):
        refresh_catalog_columns(spark, node.this)  # the catalog's columns follow the added ones
    return result_frame(spark, metrics)
