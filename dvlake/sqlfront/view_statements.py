"""DELETE, UPDATE and MERGE through a temporary view that renames, reorders, drops or computes columns.

``CREATE TEMP VIEW v AS SELECT value AS key, key AS value FROM tab`` then ``DELETE FROM v WHERE key >= 1``: the
statement means the view's ``key``, i.e. the table's ``value``. dvlake writes the statement again on the table
itself (``delta.`<root>` AS v``), each column of the view it names replaced by what the view shows
(``spark.view_projection``): conditions, SET and INSERT targets, values, ``SET *`` and ``INSERT *`` (expanded over
the view's columns, so the table's other columns are left alone or inserted as null). The names are first resolved
against the view itself (with the MERGE source beside it), so a column the view hides is Spark's
``UNRESOLVED_COLUMN`` and a name both sides have is ``AMBIGUOUS_REFERENCE``, as through delta-spark.

Deliberately different from delta-spark: delta-spark evaluates such a statement's rows through the view but skips
files with the condition's *names* read against the table's statistics (``key`` as the table's ``key``), and
resolves MERGE's INSERT columns by name against the table; its answers then depend on how rows are laid out in
files. dvlake reads every name through the view, so the result is the one the view shows, whatever the layout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from dvlake.errors import UnsupportedDmlTargetError
from dvlake.spark.names import case_sensitive, same_name
from dvlake.spark.view_projection import quoted
from dvlake.sqlfront.parse import DIALECT, parse_statement, written

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from dvlake.spark.view_projection import ShownColumn
    from dvlake.spark.view_target import ViewTarget

Runner = Callable[..., "DataFrame"]


class _Rewriter:
    """Replaces the view's columns in one statement by what they show of the table."""

    def __init__(self, view: ViewTarget, alias: str, sensitive: bool, source_columns: list[str] | None = None) -> None:
        self.view, self.alias, self.sensitive = view, alias, sensitive
        self.source_columns = source_columns or []

    def shown(self, name: str) -> ShownColumn | None:
        return next((c for c in self.view.shown if same_name(c.name, name, self.sensitive)), None)

    def _target_parts(self, column: exp.Column) -> tuple[ShownColumn, list[str]] | None:
        """The view column a column reference reads and the struct fields after it, or None for another side's."""
        parts = [p.name for p in column.parts]
        if len(parts) >= 2 and same_name(parts[0], self.alias, self.sensitive) and self.shown(parts[1]) is not None:
            return self.shown(parts[1]), parts[2:]  # type: ignore[return-value]
        if self.shown(parts[0]) is not None and not any(same_name(parts[0], s, self.sensitive)
                                                        for s in self.source_columns):
            return self.shown(parts[0]), parts[1:]  # type: ignore[return-value]
        return None

    def expression(self, node: exp.Expr) -> exp.Expr:
        """``node`` with every reference to a view column replaced (a copy)."""
        node = node.copy()
        for column in list(node.find_all(exp.Column)):
            lam = column.find_ancestor(exp.Lambda)
            if lam is not None and any(same_name(p.name, column.name, self.sensitive) for p in lam.expressions):
                continue  # a lambda's own variable (x -> x + 1)
            found = self._target_parts(column)
            if found is None:
                continue
            shown, rest = found
            if shown.plain is None and rest:
                raise UnsupportedDmlTargetError(
                    f"the view {self.view.name} computes {shown.name}; read its fields through the table instead")
            text = (".".join(quoted(p) for p in (self.alias, shown.plain, *rest)) if shown.plain is not None
                    else f"({shown.expression})")
            replacement = sqlglot.parse_one(text, read=DIALECT)
            if column is node:
                return replacement
            column.replace(replacement)
        return node

    def target(self, column: exp.Expr) -> exp.Expr:
        """A SET or INSERT column named through the view, as the table's column (unqualified)."""
        parts = [p.name for p in column.parts] if isinstance(column, exp.Column) else [column.name]
        if len(parts) >= 2 and same_name(parts[0], self.alias, self.sensitive):
            parts = parts[1:]
        shown = self.shown(parts[0])
        if shown is None or shown.plain is None:
            from dvlake.errors import UnresolvedAssignmentError

            raise UnresolvedAssignmentError(
                f"A column, variable, or function parameter with name {quoted(parts[0])} cannot be resolved: the view "
                f"{self.view.name} shows the columns {self.view.columns}")
        return sqlglot.parse_one(".".join(quoted(p) for p in (shown.plain, *parts[1:])), read=DIALECT)


def _refuse_subqueries(view: ViewTarget, nodes: list[exp.Expr | None]) -> None:
    """A subquery may name the view's columns from inside (correlated); dvlake does not rewrite inside them."""
    for node in nodes:
        if node is not None and any(isinstance(n, exp.Query | exp.Subquery | exp.Exists) for n in node.walk()):
            raise UnsupportedDmlTargetError(
                f"a subquery in a statement through the view {view.name}, which renames or computes columns, is not "
                f"supported; run the statement on the table at {view.root} with the table's column names")


def _check_names(spark: SparkSession, view: ViewTarget, alias: str, texts: list[str],
                 source: DataFrame | None = None) -> None:
    """Resolve the statement's expressions against the view's columns (and the MERGE source): Spark's own errors
    for a hidden or ambiguous name."""
    from pyspark.sql import functions as F

    probe = view.probe(spark, alias)
    if source is not None:
        probe = probe.crossJoin(source)
    probe.select(*[F.expr(t) for t in texts if t]).schema  # noqa: B018 - analysis only (Connect is lazy)


def _on_table(tree: exp.Expr, view: ViewTarget, alias: str) -> str:
    """The statement's text with its target replaced by the table the view reads, under the same qualifier."""
    table = sqlglot.parse_one(f"DELETE FROM delta.{quoted(view.root)} AS {quoted(alias)}", read=DIALECT).this
    tree.set("this", table)
    return tree.sql(DIALECT)


def _run(spark: SparkSession, view: ViewTarget, text: str, runner: Runner, **kwargs: Any) -> DataFrame:
    out = runner(spark, parse_statement(text), text, **kwargs)
    view.refresh(spark)
    return out


def delete_through(spark: SparkSession, node: exp.Delete, text: str, view: ViewTarget, alias: str | None,
                   runner: Runner) -> DataFrame:
    """DELETE through a view that renames or computes columns (computed ones only where deletion vectors mark the
    rows: delta-spark fails writing them back otherwise)."""
    alias = alias or view.qualifier
    if view.computed:
        from dvlake.commands.dml.template import use_dvs
        from dvlake.config import DELETE_DVS_PERSISTENT
        from dvlake.log.snapshot import Snapshot

        if not use_dvs(spark, Snapshot.load(view.root), DELETE_DVS_PERSISTENT):
            view.refuse_computed("DELETE")
    where = node.args.get("where")
    _refuse_subqueries(view, [where])
    if where is None:
        return _run(spark, view, _on_table(node.copy(), view, alias), runner)
    _check_names(spark, view, alias, [written(text, where.this)])
    tree = node.copy()
    tree.set("where", exp.Where(this=_Rewriter(view, alias, case_sensitive(spark)).expression(where.this)))
    return _run(spark, view, _on_table(tree, view, alias), runner)


def update_through(spark: SparkSession, node: exp.Update, text: str, view: ViewTarget, alias: str | None,
                   runner: Runner) -> DataFrame:
    """UPDATE through a view that renames, reorders or drops columns."""
    alias = alias or view.qualifier
    where = node.args.get("where")
    pairs = [p for p in node.expressions if isinstance(p, exp.EQ)]
    _refuse_subqueries(view, [where, *[p.expression for p in pairs]])
    _check_names(spark, view, alias, [written(text, where.this) if where is not None else "",
                                      *[written(text, p.expression) for p in pairs]])
    rewriter = _Rewriter(view, alias, case_sensitive(spark))
    tree = node.copy()
    tree.set("expressions", [exp.EQ(this=rewriter.target(p.this), expression=rewriter.expression(p.expression))
                             if isinstance(p, exp.EQ) else p for p in node.expressions])
    if where is not None:
        tree.set("where", exp.Where(this=rewriter.expression(where.this)))
    return _run(spark, view, _on_table(tree, view, alias), runner)


def _merge_clause(when: exp.When, rewriter: _Rewriter, source_alias: str | None) -> exp.When:
    """One WHEN clause through the view: ``*`` expanded over the view's columns (the source's columns of the same
    names), every name rewritten."""
    when = when.copy()
    cond = when.args.get("condition")
    if cond is not None:
        when.set("condition", rewriter.expression(cond))
    then = when.args.get("then")
    star = (isinstance(then, exp.Update) and len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star)) \
        or (isinstance(then, exp.Insert) and isinstance(then.this, exp.Star))
    if star and not source_alias:
        raise UnsupportedDmlTargetError(
            f"UPDATE SET * or INSERT * through the view {rewriter.view.name}, which renames or drops columns, needs an "
            "alias on the MERGE source (USING … AS s), to name the source's columns of the view's names")
    if star:
        names = [c for c in rewriter.view.shown if c.plain is not None]
        values = [sqlglot.parse_one(f"{quoted(source_alias or '')}.{quoted(c.name)}", read=DIALECT) for c in names]
        targets = [sqlglot.parse_one(quoted(c.plain or ""), read=DIALECT) for c in names]
        if isinstance(then, exp.Update):
            when.set("then", exp.Update(expressions=[exp.EQ(this=t, expression=v)
                                                      for t, v in zip(targets, values, strict=True)]))
        else:
            when.set("then", exp.Insert(this=exp.Tuple(expressions=targets), expression=exp.Tuple(expressions=values)))
        return when
    if isinstance(then, exp.Update):
        then.set("expressions", [exp.EQ(this=rewriter.target(p.this), expression=rewriter.expression(p.expression))
                                 if isinstance(p, exp.EQ) else p for p in then.expressions])
    elif isinstance(then, exp.Insert) and isinstance(then.this, exp.Tuple):
        then.set("this", exp.Tuple(expressions=[rewriter.target(c) for c in then.this.expressions]))  # values: source's
    return when


def _merge_texts(when: exp.When) -> list[exp.Expr]:
    """The expressions of a WHEN clause that read the target: its condition and its values."""
    then = when.args.get("then")
    nodes: list[exp.Expr] = [when.args["condition"]] if when.args.get("condition") is not None else []
    if isinstance(then, exp.Update):
        nodes += [p.expression for p in then.expressions if isinstance(p, exp.EQ)]
    return nodes


def merge_through(spark: SparkSession, node: exp.Merge, text: str, view: ViewTarget, alias: str, source: DataFrame,
                  source_alias: str | None, runner: Runner, **kwargs: Any) -> DataFrame:
    """MERGE into a view that renames, reorders or drops columns."""
    whens = node.args.get("whens")
    clauses = list(whens.expressions) if whens is not None else []
    reading = [node.args["on"], *[n for w in clauses for n in _merge_texts(w)]]
    _refuse_subqueries(view, reading)
    _check_names(spark, view, alias, [written(text, n) for n in reading], source)
    rewriter = _Rewriter(view, alias, case_sensitive(spark), list(source.columns))
    tree = node.copy()
    tree.set("on", rewriter.expression(node.args["on"]))
    if whens is not None:
        tree.set("whens", exp.Whens(expressions=[_merge_clause(w, rewriter, source_alias) for w in clauses]))
    return _run(spark, view, _on_table(tree, view, alias), runner, **kwargs)
