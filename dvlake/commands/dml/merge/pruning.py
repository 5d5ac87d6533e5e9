"""Which target files a MERGE must read: the ON condition's target-only conjuncts, proven false from file stats.

A target row can be matched only where every conjunct of ON holds, so a file where some conjunct that reads
the target alone (``t.date = '2026-01-01'``, ``t.region IN ('eu', 'us')``) is provably false for every row
has no matched row. Without a NOT MATCHED BY SOURCE clause such a file is not read at all: nothing in it is
updated, deleted or decides whether a source row is inserted. With NOT MATCHED BY SOURCE clauses, an
unmatched target row matters where a clause condition may hold, so a file is read where ON's target part
*or* some clause's condition may hold (never pruned when a clause has no condition).

Soundness first: a conjunct is used only when every column it names resolves to the target (qualified by the
target alias, or a name only the target has); anything unparsed, a ``Column`` condition, or a conjunct inside
an OR is never used; and ``log/predicates.py`` keeps a file unless stats or partition values prove the
conjunct false for every row. The conjuncts only choose files: the rows are still decided by Spark
evaluating the user's whole condition.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from dvlake.log.condition import Condition


def target_only(condition: Condition, target_alias: str | None, target_columns: list[str],
                unqualified: list[str]) -> Condition | None:
    """The conjunction of ``condition``'s top-level conjuncts that read only the target, as a Condition to prune
    with; None when there is none (or the condition is a Column / text sqlglot cannot parse).

    ``unqualified``: the target column names an unqualified reference resolves to (in the ON condition, the
    names the source does not have; in a NOT MATCHED BY SOURCE condition, all of them).
    """
    if condition.tree is None:
        return None
    parsed = replace(condition, alias=target_alias)  # the tree parsed at entry, read with the target's alias
    columns = {c.lower() for c in target_columns}
    bare = {c.lower() for c in unqualified}
    alias = target_alias.lower() if target_alias else None
    kept = [c for c in parsed.conjuncts() if _reads_target_only(c, alias, columns, bare)]
    if not kept:
        return None
    tree: exp.Expr = kept[0]
    for c in kept[1:]:
        tree = exp.And(this=tree, expression=c)
    return replace(parsed, tree=tree, _columns=None)


def _reads_target_only(node: exp.Expr, alias: str | None, columns: set[str], bare: set[str]) -> bool:
    """Whether every column ``node`` names is the target's (and it names at least one)."""
    refs = [n for n in node.walk() if isinstance(n, exp.Column)]
    if not refs or any(isinstance(n, exp.Star | exp.Subquery | exp.Query | exp.Placeholder | exp.Parameter)
                       for n in node.walk()):
        return False
    for ref in refs:
        if isinstance(ref.this, exp.Star):
            return False
        parts = [p.name.lower() for p in ref.parts]
        if alias is not None and len(parts) > 1 and parts[0] == alias:
            if parts[1] not in columns:
                return False
        elif parts[0] not in bare:
            return False
    return True
