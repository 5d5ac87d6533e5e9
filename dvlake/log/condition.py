"""A row condition, parsed once where a command receives it and then passed down.

A condition arrives as SQL text (API strings, SQL ``WHERE``, ``replaceWhere``) or as a PySpark
``Column``. Text is parsed by sqlglot (Spark 4 dialect: precedence, comments, quoting, escapes)
into a tree that pruning visits (``dvlake.log.predicates``); the rows themselves are always
decided by Spark evaluating the user's own text, never a regenerated or split form of it.

A ``Column`` is kept opaque: dvlake does not read Spark's internal expression, so a Column
condition prunes nothing and is never taken as partition-only — correct, only slower.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from dvlake.errors import InvalidArgumentError, UnsupportedSubqueryError
from dvlake.log.sql_dialect import SparkSQL

#: Functions whose value changes from row to row or run to run: a condition using one is never
#: decided per file (a file's rows may differ), whatever columns it names.
NON_DETERMINISTIC = frozenset({
    "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id", "spark_partition_id",
    "input_file_name", "input_file_block_start", "input_file_block_length", "randstr", "uniform",
})

_STATEMENTS = (exp.Query, exp.DDL, exp.DML, exp.Command, exp.Block, exp.Use, exp.Set)


@dataclass(frozen=True, eq=False)
class Condition:
    """One row condition: the user's text (or Column), its parsed tree and the table alias it may use.

    ``tree`` is None when the condition is a Column or text sqlglot cannot parse (Spark may still
    accept it): such a condition prunes nothing.
    """

    text: str | None
    column: Any = None
    tree: exp.Expr | None = None
    alias: str | None = None
    _columns: frozenset[str] | None = field(default=None, repr=False)
    #: the SQL front end's form of a condition whose subqueries read Delta tables: the user's text with each such
    #: table reference replaced by a ``{key}`` placeholder (braces of the user's own doubled), run by Spark as
    #: ``spark.sql`` with DataFrame arguments. None when Spark reads the condition's text as written.
    query_text: str | None = field(default=None, repr=False)
    #: placeholder key → the DataFrame it stands for (a Delta table read by dvlake), for ``query_text``
    query_frames: tuple[tuple[str, Any], ...] = field(default=(), repr=False)
    #: the placeholder keys that name the command's own target: read at the command's snapshot, never a newer one
    target_keys: frozenset[str] = field(default=frozenset(), repr=False)

    @classmethod
    def of(cls, condition: str | Any | None, alias: str | None = None) -> Condition | None:
        """A Condition from text, a Column or a Condition (returned as is); None stays None."""
        if condition is None or isinstance(condition, Condition):
            return condition
        if isinstance(condition, str):
            return cls.parse(condition, alias)
        return cls(text=None, column=condition, alias=alias)

    @classmethod
    def parse(cls, text: str, alias: str | None = None) -> Condition:
        """Parse ``text``; refuses several statements or a statement where a condition belongs."""
        if not text.strip():
            raise InvalidArgumentError("the condition is empty; give a boolean SQL expression such as \"id = 3\"")
        try:
            trees = [t for t in sqlglot.parse(text, read=SparkSQL) if t is not None]
        except (ParseError, TokenError):
            return cls(text=text, alias=alias)  # Spark has the last word on syntax sqlglot does not know
        if len(trees) > 1:
            raise InvalidArgumentError(f"the condition {text!r} holds {len(trees)} statements; give one boolean "
                                       "expression (no ';')")
        tree = trees[0] if trees else None
        if isinstance(tree, _STATEMENTS):
            raise InvalidArgumentError(f"the condition {text!r} is a statement, not a boolean expression")
        return cls(text=text, alias=alias, tree=tree, _columns=_referenced(tree, alias) if tree is not None else None)

    @classmethod
    def from_tree(cls, text: str, tree: exp.Expr, offset: int, alias: str | None = None) -> Condition:
        """A Condition from a tree already parsed as part of a larger text (the SQL front end's statement), so the
        condition is not parsed a second time.

        ``text`` is the user's own slice of the statement the tree was parsed from (``sqlfront.parse.written``,
        which checks that the slice parses to this very tree), starting at character ``offset`` of the statement.
        The tree is copied with its recorded positions moved to count from the slice, as ``parse`` would have
        recorded them (``single_quoted`` reads the text at them)."""
        own = tree.copy()
        for node in own.walk():
            meta = node.meta if node.meta else None  # ``meta`` creates an empty dict on first access
            if meta is None:
                continue
            for key in ("start", "end"):
                if isinstance(meta.get(key), int):
                    meta[key] -= offset
        return cls(text=text, alias=alias, tree=own, _columns=_referenced(own, alias))

    # --- what the condition reads ---------------------------------------------------------

    @property
    def columns(self) -> frozenset[str] | None:
        """Lower-cased top-level column names it reads (alias stripped), or None when not known."""
        return self._columns

    def column_path(self, node: exp.Column) -> str:
        """``t.a.b`` → ``a.b`` (alias stripped), lower-cased and dotted."""
        return ".".join(_parts(node, self.alias))

    def single_quoted(self, literal: exp.Literal) -> bool:
        """Whether a string literal is written in single quotes in the user's text.

        ``"text"`` is a column name when ``spark.sql.ansi.doubleQuotedIdentifiers`` is on, which the
        parser cannot know; without a position in the text the answer is False (not known).
        """
        start = literal.meta.get("start") if literal.meta else None
        return self.text is not None and isinstance(start, int) and self.text[start:start + 1] == "'"

    def references_only(self, names: set[str] | frozenset[str]) -> bool:
        """Whether the condition's value is provably a function of ``names`` alone.

        True only for a parsed, deterministic condition without ``*``, subqueries or functions
        sqlglot does not know (a user function may be non-deterministic): the condition then holds
        for all rows of a file or for none, given those columns are constant in the file.
        """
        if self.tree is None or self._columns is None:
            return False
        allowed = {n.lower() for n in names}
        for node in self.tree.walk():
            if isinstance(node, exp.Star | exp.Subquery | exp.Exists | exp.Query | exp.Placeholder | exp.Parameter):
                return False
            if isinstance(node, exp.Anonymous | exp.Rand | exp.Randn | exp.Uuid):
                return False
            if isinstance(node, exp.Func) and node.sql_name().lower() in NON_DETERMINISTIC:
                return False
        return self._columns <= allowed

    def with_tables(self, query_text: str, frames: dict[str, Any], target_keys: set[str]) -> Condition:
        """This condition with the SQL front end's placeholder form of its subqueries (``query_text``)."""
        return replace(self, query_text=query_text, query_frames=tuple(frames.items()),
                       target_keys=frozenset(target_keys))

    def pruning_part(self) -> Condition | None:
        """The condition to prune files with: its subquery-free top-level conjuncts only (None when there are none).

        A row is changed only where every conjunct is TRUE, so a file where one plain conjunct can never hold has no
        such row; a conjunct with a subquery says nothing about a file (its value depends on other rows and tables),
        and a disjunction holding one could be TRUE anywhere. The text stays the user's whole text (the literals'
        positions point into it), so the part must never be evaluated by Spark: its columns are left unknown, which
        keeps ``references_only`` False (no partition-only evaluation of the text), and it is for ``prune`` only."""
        if self.tree is None or not self.has_subquery:  # a Column or unparsed text prunes nothing anyway
            return self
        plain = [c for c in self.conjuncts() if not _holds_subquery(c)]
        if not plain:
            return None
        tree = plain[0] if len(plain) == 1 else exp.and_(*(c.copy() for c in plain))
        return replace(self, tree=tree, _columns=None, query_text=None, query_frames=(), target_keys=frozenset())

    def conjuncts(self) -> list[exp.Expr]:
        """The parsed tree's top-level AND-ed parts (``a AND (b AND c)`` → a, b, c); none when not parsed."""
        return _conjuncts(self.tree) if self.tree is not None else []

    def qualifiers(self) -> list[str]:
        """The qualifiers its column references use (``s`` of ``s.id``), in order of appearance: how MERGE learns
        the alias a source DataFrame was given. A Column's rendering is parsed for this only (never pruned with)."""
        if self.tree is not None:
            return qualifiers_of(self.tree)
        return text_qualifiers(self.display())

    # --- what Spark evaluates ---------------------------------------------------------------

    def spark_text(self, table_columns: list[str]) -> str:
        """The user's text for Spark, with ``*`` arguments (``hash(*)``) spelled as the table's columns.

        The frames dvlake filters carry internal columns (file and row positions) beside the
        table's; a bare ``*`` would hash those too. Stars inside subqueries are the subquery's own
        and are left alone (the whole text is then left as written).
        """
        assert self.text is not None
        if self.tree is None or not any(isinstance(n, exp.Star) for n in self.tree.walk()):
            return self.text
        if any(isinstance(n, exp.Query | exp.Subquery) for n in self.tree.walk()):
            return self.text
        tokens = list(SparkSQL().tokenize(self.text))
        listed = ", ".join(f"`{c.replace('`', '``')}`" for c in table_columns)
        out, last = [], 0
        for i, tok in enumerate(tokens):
            if tok.token_type != TokenType.STAR:
                continue
            before = tokens[i - 1] if i > 0 else None
            after = tokens[i + 1] if i + 1 < len(tokens) else None
            start = tok.start
            if before is not None and before.token_type == TokenType.DOT and i >= 2:
                qualifier = tokens[i - 2]
                opener = tokens[i - 3] if i >= 3 else None
                if opener is None or opener.token_type not in (TokenType.L_PAREN, TokenType.COMMA):
                    continue
                start = qualifier.start
                name = qualifier.text.strip("`")
                piece = ", ".join(f"`{name}`.`{c.replace('`', '``')}`" for c in table_columns)
            elif before is not None and before.token_type in (TokenType.L_PAREN, TokenType.COMMA):
                piece = listed
            else:
                continue  # multiplication
            if after is None or after.token_type not in (TokenType.R_PAREN, TokenType.COMMA):
                continue
            out.append(self.text[last:start])
            out.append(piece)
            last = tok.end + 1
        out.append(self.text[last:])
        return "".join(out)

    @property
    def has_subquery(self) -> bool:
        """Whether the condition's text holds a subquery. For a Column this is a first look only: its rendering
        (``=(a, 1)`` in Spark 4) is seldom SQL, so False proves nothing; DELETE, UPDATE and MERGE also ask Spark's
        analyzer about every condition (``commands/dml_checks.py``), which decides for Columns."""
        tree = self.tree
        if tree is None and self.text is None:
            try:
                tree = sqlglot.parse_one(self.display(), read=SparkSQL)
            except (ParseError, TokenError):
                return False
        return tree is not None and _holds_subquery(tree)

    @cached_property
    def plainly_deterministic(self) -> bool:
        """Whether the text is provably deterministic and free of subqueries, aggregates and windows
        (``plain_row_expression``): DML then needs no analyzer probe to tell (a Column: never known here)."""
        # the tree stands for the whole text unless ``pruning_part`` narrowed it (it leaves the columns unknown then)
        whole = self.tree if self._columns is not None else None
        return self.text is not None and plain_row_expression(self.text, whole)

    def refuse_subqueries(self, command: str, operation: str | None = None) -> None:
        """``refuse_subquery`` for this condition, from its parsed text (a Column: from its rendering, a first look;
        Spark's analyzer decides later, ``commands/dml_checks.py``)."""
        refuse_subquery(command, self.has_subquery, self.display(), operation)

    def predicate_param(self) -> str:
        """``operationParameters.predicate`` as delta-spark records it: a JSON list of the condition's text."""
        return json.dumps([self.display()])

    def display(self) -> str:
        """The condition as the user wrote it (a Column's own rendering)."""
        return self.text if self.text is not None else render(self.column)


#: The commands whose conditions may not hold a subquery: delta-spark's DELTA_UNSUPPORTED_SUBQUERY for UPDATE and
#: MERGE. Every refusal (parsed text at the command's entry, the SQL front end, Spark's analyzer for a Column)
#: goes through ``refuse_subquery``. DELETE runs them as delta-spark does: Spark evaluates the whole condition
#: (EXISTS, IN, scalar subqueries) over the target's live rows at the command's snapshot (``spark.bound``).
SUBQUERIES_REFUSED = frozenset({"UPDATE", "MERGE"})


def _holds_subquery(tree: exp.Expr) -> bool:
    return any(isinstance(n, exp.Query | exp.Subquery | exp.Exists) for n in tree.walk())


def refuse_subquery(command: str, found: bool, shown: str, operation: str | None = None) -> None:
    """Raise ``UnsupportedSubqueryError`` when ``found`` (a subquery in the condition ``shown``) and ``command``
    (DELETE, UPDATE, MERGE) refuses subqueries. ``operation`` names where in the message (``search condition of
    MERGE operation``; the command's name by default)."""
    if found and command in SUBQUERIES_REFUSED:
        raise UnsupportedSubqueryError(
            f"Subqueries are not supported in the {operation or command} (condition = "
            f"{shown!r}). Join the other table in a MERGE instead (MERGE INTO … USING (subquery) ON …), or "
            "collect the values first and list them (IN (1, 2, 3)).")


#: The nodes a plain row expression is built of: column references, literals, operators, CAST and CASE.
_PLAIN_NODES = (
    exp.Column, exp.Identifier, exp.Dot, exp.Bracket, exp.Literal, exp.Boolean, exp.Null, exp.Paren,
    exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ, exp.And, exp.Or, exp.Not,
    exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor,
    exp.BitwiseNot, exp.Is, exp.In, exp.Between, exp.Like, exp.ILike, exp.Cast, exp.TryCast, exp.DataType,
    exp.DataTypeParam, exp.Case, exp.If,
)
#: Tokens an opening parenthesis may follow in a plain row expression: grouping and IN lists, never a call.
_PAREN_AFTER = frozenset({
    TokenType.L_PAREN, TokenType.COMMA, TokenType.IN, TokenType.NOT, TokenType.AND, TokenType.OR, TokenType.WHEN,
    TokenType.THEN, TokenType.ELSE, TokenType.BETWEEN, TokenType.IS, TokenType.EQ, TokenType.NEQ, TokenType.GT,
    TokenType.GTE, TokenType.LT, TokenType.LTE, TokenType.NULLSAFE_EQ, TokenType.PLUS, TokenType.DASH, TokenType.STAR,
    TokenType.SLASH, TokenType.MOD, TokenType.AMP, TokenType.PIPE, TokenType.CARET,
})


def plain_row_expression(text: str, tree: exp.Expr | None = None) -> bool:
    """Whether ``text`` is built only of column references, literals, operators, ``CAST`` and ``CASE``.

    Such an expression is deterministic and holds no subquery, aggregate or window function, so the
    DML checks that ask Spark's analyzer about those (``commands/dml_checks.py``: four analyses) can be
    skipped. A whitelist on purpose: any function call (``f(...)``), however harmless its name, makes
    it False, because a session may register a UDF under a built-in's name; only ``CAST(`` is
    syntax, not a call. False answers nothing: the analyzer decides then. ``tree``: ``text`` already parsed (a
    ``Condition``'s), so it is not parsed again.
    """
    try:
        tokens = list(SparkSQL().tokenize(text))
        if tree is None:
            tree = sqlglot.parse_one(text, read=SparkSQL)
    except (ParseError, TokenError):
        return False
    for before, tok in zip([None, *tokens], tokens, strict=False):
        if tok.token_type != TokenType.L_PAREN or before is None or before.token_type in _PAREN_AFTER:
            continue
        if not (before.token_type == TokenType.VAR and before.text.lower() == "cast"):
            return False
    return tree is not None and all(isinstance(node, _PLAIN_NODES) for node in tree.walk()) and \
        not any(isinstance(node, exp.In) and node.args.get("query") is not None for node in tree.walk())


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _parsed(text: str) -> exp.Expr | None:
    try:
        return sqlglot.parse_one(text, read=SparkSQL)
    except (ParseError, TokenError):
        return None


def qualifiers_of(tree: exp.Expr | None) -> list[str]:
    """The first name of every qualified column reference in ``tree`` (``s`` of ``s.a.b``), once each, in order."""
    seen: list[str] = []
    for node in (tree.walk(bfs=False) if tree is not None else []):
        if isinstance(node, exp.Column):
            parts = [p.name for p in node.parts]
            if len(parts) > 1 and parts[0] not in seen:
                seen.append(parts[0])
    return seen


def text_qualifiers(text: str) -> list[str]:
    """The qualifiers of an expression's text: from its tree when sqlglot parses it, else from its tokens (a name
    followed by a dot and not itself after one), as a Column's rendering of a subquery (``exists(…)``) needs."""
    tree = _parsed(text)
    if tree is not None:
        return qualifiers_of(tree)
    try:
        tokens = list(SparkSQL().tokenize(text))
    except TokenError:
        return []
    seen: list[str] = []
    names = (TokenType.VAR, TokenType.IDENTIFIER)
    for i, tok in enumerate(tokens[:-1]):
        after_dot = i > 0 and tokens[i - 1].token_type == TokenType.DOT
        if tok.token_type in names and tokens[i + 1].token_type == TokenType.DOT and not after_dot \
                and tok.text not in seen:
            seen.append(tok.text)
    return seen


def value_qualifiers(value: str | Any) -> list[str]:
    """The qualifiers of an expression given as text or a Column (an assignment's value)."""
    return text_qualifiers(value if isinstance(value, str) else render(value))


def _parts(node: exp.Column, alias: str | None) -> list[str]:
    parts = [p.name.lower() for p in node.parts]
    if alias and len(parts) > 1 and parts[0] == alias.lower():
        parts = parts[1:]
    return parts


def _referenced(tree: exp.Expr, alias: str | None) -> frozenset[str]:
    """Top-level column names read outside subqueries (a subquery's columns are its tables')."""
    names: set[str] = set()
    for node in tree.walk(prune=lambda n: isinstance(n, exp.Query | exp.Subquery)):
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            parts = _parts(node, alias)
            if parts:
                names.add(parts[0])
    return frozenset(names)


def render(value: str | Any) -> str:
    """An expression as the user wrote it: SQL text as is, a Condition's display, a Column's own rendering
    (``Column<'(id = 1)'>`` → ``(id = 1)``). The one place a Column is turned into text, for the log and messages
    only: the rendering is not SQL in every Spark version, so it is never evaluated."""
    if isinstance(value, str):
        return value
    if isinstance(value, Condition):
        return value.display()
    rendered = repr(value)
    return rendered[len("Column<'"):-2] if rendered.startswith("Column<'") and rendered.endswith("'>") else rendered


def display_text(condition: str | Any | None) -> str | None:
    """A condition's text for the log and messages (``render``), None for no condition."""
    return None if condition is None else render(condition)


def conjunction(texts: list[str]) -> str:
    """Several condition texts as one that holds where all of them hold.

    Each part goes in its own parentheses and ends its own line, so a ``--`` comment in one cannot
    swallow the next; a part must be one whole expression whose parentheses balance, or
    ``p = 1) OR (true`` would turn the conjunction into a disjunction.
    """
    for text in texts:
        Condition.parse(text)  # empty text or several statements are refused as they are everywhere
        try:
            tokens = list(SparkSQL().tokenize(text))
        except TokenError as e:
            raise InvalidArgumentError(f"cannot read the condition {text!r}: {e}") from e
        depth = 0
        for tok in tokens:
            depth += (tok.token_type == TokenType.L_PAREN) - (tok.token_type == TokenType.R_PAREN)
            if depth < 0:
                break
        if depth != 0:
            raise InvalidArgumentError(f"the parentheses of the condition {text!r} do not balance; give one whole expression")
    return texts[0] if len(texts) == 1 else " AND ".join(f"({text}\n)" for text in texts)
