"""A partition filter as delta-spark writes it into OPTIMIZE's ``operationParameters.predicate``.

delta-spark parses each ``where(...)`` text into an unresolved Catalyst expression and records its
``simpleString``, not the text: ``key = 'a'`` becomes ``('key = a)`` (attributes get a leading quote, string
literals lose theirs, every binary operator is parenthesised). Tools that read the history (and delta-spark's
own tests) compare that string, so dvlake writes the same for the expressions a partition filter is made of:
comparisons, AND/OR/NOT, IN, IS [NOT] NULL, arithmetic, column names and literals. For anything else
:func:`catalyst_text` answers None and the caller records the user's text unchanged (a different rendering of
the same predicate, never a different predicate).
"""

from __future__ import annotations

import re

from sqlglot import exp

_BINARY: dict[type[exp.Expr], str] = {
    exp.EQ: "=", exp.NullSafeEQ: "<=>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">=",
    exp.And: "AND", exp.Or: "OR", exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/",
}


class _Unsupported(Exception):
    """An expression this module does not render as Catalyst would."""


def catalyst_text(tree: exp.Expr | None) -> str | None:
    """``tree`` rendered as delta-spark's unresolved expression ``simpleString``, or None when not sure."""
    if tree is None:
        return None
    try:
        return _render(tree)
    except _Unsupported:
        return None


def _literal(node: exp.Literal) -> str:
    if node.is_string:
        return node.this
    text = node.this
    if re.fullmatch(r"-?\d+", text):
        return str(int(text))
    raise _Unsupported(text)  # decimals and exponents print by their Catalyst type; not guessed here


def _render(node: exp.Expr) -> str:  # noqa: C901 - one branch per expression kind
    if isinstance(node, exp.Paren):
        return _render(node.this)
    op = _BINARY.get(type(node))
    if op is not None:
        return f"({_render(node.this)} {op} {_render(node.expression)})"
    if isinstance(node, exp.NEQ):
        return f"NOT ({_render(node.this)} = {_render(node.expression)})"
    if isinstance(node, exp.Not):
        inner = node.this.this if isinstance(node.this, exp.Paren) else node.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            return f"isnotnull({_render(inner.this)})"
        return f"NOT {_render(inner)}"
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        return f"isnull({_render(node.this)})"
    if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
        return f"{_render(node.this)} IN ({','.join(_render(e) for e in node.expressions)})"
    if isinstance(node, exp.Column):
        return "'" + ".".join(p.name for p in node.parts)  # Catalyst prints the parts unquoted
    if isinstance(node, exp.Literal):
        return _literal(node)
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + _literal(node.this)
    raise _Unsupported(type(node).__name__)
