"""A table's CHECK constraints and column invariants, read from its metadata (no Spark here).

delta-spark keeps a CHECK constraint as the table property ``delta.constraints.<lower-cased name>``
whose value is the expression text, and an old-style column invariant as
``{"expression": {"expression": "<text>"}}`` under ``delta.invariants`` in a field's metadata. Every
writer must evaluate them on each row it adds (a NULL result counts as a violation); the Spark side
lives in ``dvlake.spark.constraints``. This module also renders an expression the way Spark's
``Expression.sql`` does, which is how delta-spark names a constraint in its violation message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dvlake.config import ASSUME_DROP_IF_EXISTS as ASSUME_DROP_IF_EXISTS
from dvlake.log.actions import Metadata
from dvlake.log.sql_dialect import SparkSQL, quote_identifier

PREFIX = "delta.constraints."
INVARIANTS_KEY = "delta.invariants"
FEATURE = "checkConstraints"


@dataclass(frozen=True)
class Check:
    """One rule every written row must satisfy: its name (as delta-spark reports it) and SQL text."""

    name: str
    text: str


def property_key(name: str) -> str:
    """The table property holding the constraint ``name`` (names are case-insensitive: stored lower-cased)."""
    return PREFIX + name.lower()


def check_constraints(metadata: Metadata) -> list[Check]:
    """The table's CHECK constraints, in the order of its configuration."""
    return [Check(k[len(PREFIX):], v) for k, v in metadata.configuration.items() if k.lower().startswith(PREFIX)]


def invariants(schema: dict[str, Any]) -> list[Check]:
    """Column invariants from field metadata (structs are walked; arrays and maps are not, as in delta-spark)."""
    out: list[Check] = []

    def visit(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            rule = (f.get("metadata") or {}).get(INVARIANTS_KEY)
            if rule is not None:
                text = _invariant_text(rule, f["name"])
                out.append(Check(f"EXPRESSION({spark_sql(text)})", text))
            if isinstance(f.get("type"), dict) and f["type"].get("type") == "struct":
                visit(f["type"]["fields"])

    visit(schema.get("fields", []))
    return out


def _invariant_text(rule: Any, column: str) -> str:
    from dvlake.errors import UnrecognizedInvariantError

    try:
        parsed = json.loads(rule) if isinstance(rule, str) else rule
        text = parsed["expression"]["expression"]
    except (ValueError, KeyError, TypeError):
        raise UnrecognizedInvariantError(
            f"the invariant of column {column!r} is not an expression rule "
            f"({str(rule)[:200]!r}); dvlake cannot enforce it, so it will not write the table") from None
    return str(text)


def all_checks(metadata: Metadata) -> list[Check]:
    """Every expression rule a writer must enforce, in delta-spark's order (CHECK constraints, then invariants)."""
    return check_constraints(metadata) + invariants(metadata.schema)


def parse(text: str) -> exp.Expr | None:
    """sqlglot's tree of a constraint's text, or None when sqlglot cannot read it (Spark may still)."""
    try:
        return sqlglot.parse_one(text, read=SparkSQL)
    except (ParseError, TokenError):
        return None


def referenced_columns(text: str) -> list[str]:
    """The column names the expression reads, dotted as written (delta-spark lists their values on a violation)."""
    tree = parse(text)
    if tree is None:
        return []
    names: dict[str, None] = {}
    for node in tree.walk(prune=lambda n: isinstance(n, exp.Query | exp.Subquery)):
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            names.setdefault(".".join(quote_identifier(p.name) for p in node.parts), None)
    return sorted(names)


def non_deterministic_call(text: str) -> str | None:
    """The first non-deterministic function call in the expression (delta-spark refuses one in a constraint)."""
    from dvlake.log.condition import NON_DETERMINISTIC

    tree = parse(text)
    if tree is None:
        return None
    for node in tree.walk():
        if isinstance(node, exp.Rand | exp.Randn | exp.Uuid) or (
                isinstance(node, exp.Func) and node.sql_name().lower() in NON_DETERMINISTIC) or (
                isinstance(node, exp.Anonymous) and str(node.name).lower() in NON_DETERMINISTIC):
            return node.sql(SparkSQL)
    return None


# --- Spark's Expression.sql --------------------------------------------------------------------------------

_BINARY = {
    exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.NullSafeEQ: "<=>",
    exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%", exp.And: "AND", exp.Or: "OR",
    exp.DPipe: "||", exp.Like: "LIKE",
}


def spark_sql(text: str) -> str:
    """``text`` as Spark's ``Expression.sql`` prints the parsed expression: every binary operation in
    parentheses, keywords and function names upper-case (``num < 10 and f(x)`` → ``((num < 10) AND F(x))``).
    Shapes it does not know keep sqlglot's Spark rendering; text sqlglot cannot read stays as written."""
    tree = parse(text)
    if tree is None:
        return text
    try:
        return _sql(tree)
    except Exception:  # noqa: BLE001 - a message nicety must never fail a write
        return text


def _sql(node: exp.Expr) -> str:
    """``node`` as Spark prints an expression in a constraint violation message (sqlglot's Spark SQL otherwise)."""
    for render in (_sql_operator, _sql_leaf, _sql_predicate, _sql_access, _sql_call):
        text = render(node)
        if text is not None:
            return text
    return node.sql(SparkSQL)


def _sql_operator(node: exp.Expr) -> str | None:
    """Binary operators, fully parenthesized as Spark prints them; ``<>``/``!=`` as ``NOT (a = b)``."""
    if isinstance(node, exp.NEQ):  # Spark parses <> and != as NOT (a = b)
        return f"(NOT ({_sql(node.this)} = {_sql(node.expression)}))"
    for cls, op in _BINARY.items():
        if type(node) is cls:
            return f"({_sql(node.this)} {op} {_sql(node.expression)})"
    if isinstance(node, exp.Paren):
        return _sql(node.this)
    if isinstance(node, exp.Neg):  # Spark reads -90 as one literal, -x as a unary minus
        inner = node.this
        return f"-{inner.this}" if isinstance(inner, exp.Literal) and not inner.is_string else f"(- {_sql(inner)})"
    return None


def _sql_leaf(node: exp.Expr) -> str | None:
    """Column references (back-quoted where needed) and literals."""
    if isinstance(node, exp.Column):
        return ".".join(quote_identifier(p.name) for p in node.parts)
    if isinstance(node, exp.Literal):
        return "'" + str(node.this).replace("\\", "\\\\").replace("'", "\\'") + "'" if node.is_string else str(node.this)
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Null):
        return "NULL"
    return None


def _sql_predicate(node: exp.Expr) -> str | None:
    """NOT, IS [NOT] NULL, IN and BETWEEN."""
    if isinstance(node, exp.Not):
        inner = node.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return f"({_sql(inner.this)} IS NOT NULL)"
        return f"(NOT {_sql(inner)})"
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return f"({_sql(node.this)} IS NULL)"
    if isinstance(node, exp.In) and node.expressions:
        return f"({_sql(node.this)} IN ({', '.join(_sql(e) for e in node.expressions)}))"
    if isinstance(node, exp.Between):
        return f"({_sql(node.this)} BETWEEN {_sql(node.args['low'])} AND {_sql(node.args['high'])})"
    return None


def _sql_access(node: exp.Expr) -> str | None:
    """Element and field access, and casts."""
    if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
        return f"{_sql(node.this)}[{_sql(node.expressions[0])}]"
    if isinstance(node, exp.Dot):
        return f"{_sql(node.this)}.{quote_identifier(node.name)}"
    if isinstance(node, exp.Cast):
        return f"CAST({_sql(node.this)} AS {node.to.sql(SparkSQL).upper()})"
    return None


def _sql_call(node: exp.Expr) -> str | None:
    """Function calls, names upper-cased as Spark prints them."""
    if isinstance(node, exp.Anonymous):
        return f"{str(node.name).upper()}({', '.join(_sql(a) for a in node.expressions)})"
    if isinstance(node, exp.Func) and not node.args.get("expressions") and all(
            isinstance(v, exp.Expr) or v is None for v in node.args.values()):
        args = [v for v in node.args.values() if isinstance(v, exp.Expr)]
        return f"{node.sql_name().upper()}({', '.join(_sql(a) for a in args)})"
    return None
