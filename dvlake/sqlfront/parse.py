"""Tokens, positions and a small cursor over sqlglot's Spark tokens.

sqlglot's Spark dialect parses queries, CREATE/INSERT/DELETE/UPDATE/MERGE/ALTER … SET into an AST.
Delta's utility statements (OPTIMIZE, VACUUM, RESTORE, REORG, GENERATE, CONVERT, DESCRIBE HISTORY,
ALTER … UNSET / DROP FEATURE) it only knows as opaque commands, so those are read token by token
with :class:`Cursor`, and every embedded condition or expression is handed back to sqlglot's
expression parser. Positions are kept as character offsets into the statement so errors can say
"line L, column C".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

from dvlake.errors import DeltaSqlError, DeltaSqlParseError
from dvlake.log.condition import Condition
from dvlake.log.sql_dialect import SparkSQL

DIALECT = SparkSQL  # Spark 4: a doubled quote inside a string literal is one quote
_VERSION_SUFFIX = re.compile(r"^(?P<path>.+)@v(?P<version>\d+)$")
_TIMESTAMP_SUFFIX = re.compile(r"^(?P<path>.+)@(?P<ts>\d{17})$")


def position(text: str, offset: int) -> tuple[int, int]:
    """(line, column), both 1-based, of a character offset."""
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def statement_name(text: str) -> str:
    """The first words of a statement, for messages (``ALTER TABLE``, ``DESCRIBE HISTORY``, ``SELECT``)."""
    words = re.findall(r"[A-Za-z_]+", text[:80])
    if not words:
        return "statement"
    first = words[0].upper()
    if first in ("ALTER", "CREATE", "DESCRIBE", "DESC", "INSERT", "MERGE", "REORG", "CONVERT") and len(words) > 1:
        return f"{first} {words[1].upper()}"
    return first


def sql_error(text: str, offset: int, problem: str, *, parse: bool = False, error_class: str | None = None) -> DeltaSqlError:
    """A typed error naming the statement and the position of ``offset`` within it."""
    line, column = position(text, offset)
    name = statement_name(text)
    near = text[offset:offset + 30].split("\n")[0]
    message = f"{name} (line {line}, column {column}, near {near!r}): {problem}"
    cls = DeltaSqlParseError if parse else DeltaSqlError
    return cls(message, error_class, statement=name, line=line, column=column)


class _WholeTokenizer(SparkSQL.Tokenizer):
    """Spark's tokenizer without "commands": it normally folds everything after OPTIMIZE, VACUUM, SHOW …
    into one string token; dvlake reads those statements token by token instead."""

    COMMANDS: ClassVar[set[TokenType]] = set()


def tokenize(text: str) -> list[Token]:
    """sqlglot's Spark tokens of ``text``; a tokenizer error becomes a typed parse error."""
    try:
        return list(_WholeTokenizer().tokenize(text))
    except TokenError as e:
        raise sql_error(text, 0, f"cannot tokenize the statement: {e}", parse=True) from e


def parse_statement(text: str) -> exp.Expr:
    """The AST of one statement, or a typed parse error at sqlglot's position."""
    try:
        trees = [t for t in sqlglot.parse(text, read=DIALECT) if t is not None]
    except ParseError as e:
        if _merge_without_when(text):  # Spark's parser names this one
            raise sql_error(text, 0, "There must be at least one WHEN clause in a MERGE statement.", parse=True,
                            error_class="MERGE_WITHOUT_WHEN") from e
        raise from_parse_error(text, e, 0) from e
    if len(trees) != 1:
        raise sql_error(text, 0, f"expected one statement, found {len(trees)}; run them one at a time", parse=True)
    return trees[0]


def _merge_without_when(text: str) -> bool:
    """A MERGE statement (``[WITH …] MERGE INTO …``) without any WHEN clause."""
    try:
        tokens = tokenize(text)
    except DeltaSqlError:
        return False
    merges = bool(tokens) and (is_word(tokens[0], "MERGE") or (is_word(tokens[0], "WITH")
                                                               and any(is_word(t, "MERGE") for t in tokens)))
    return merges and not any(is_word(t, "WHEN") for t in tokens)


def from_parse_error(text: str, error: ParseError, base: int) -> DeltaSqlError:
    """Turn sqlglot's ParseError (positions relative to a slice that starts at ``base``) into a typed error."""
    detail = error.errors[0] if error.errors else {}
    line, col = int(detail.get("line") or 1), int(detail.get("col") or 1)
    highlight = str(detail.get("highlight") or "")
    description = str(detail.get("description") or error).split("\n")[0]
    # "missing for <class 'sqlglot.expressions.query.Where'>" reads as "missing for WHERE"
    description = re.sub(r"<class '(?:\w+\.)*(\w+)'>", lambda m: m.group(1).upper(), description)
    sub = text[base:]
    # sqlglot's column is where the highlighted token ends; step back to its start
    line_start = 0
    for _ in range(line - 1):
        line_start = sub.find("\n", line_start) + 1
    offset = base + max(line_start + col - len(highlight), 0)
    return sql_error(text, offset, f"cannot parse near {highlight!r}: {description}", parse=True)


def looks_like_delta(tokens: list[Token]) -> int | None:
    """Offset of the first ``delta.`<path>``` reference or ``table_changes(`` call in the tokens, else None."""
    for i, tok in enumerate(tokens):
        if (is_word(tok, "delta") and i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT
                and tokens[i + 2].token_type == TokenType.IDENTIFIER and (i == 0 or tokens[i - 1].token_type != TokenType.DOT)):
            return tok.start
        if is_word(tok, "table_changes") and i + 1 < len(tokens) and tokens[i + 1].token_type == TokenType.L_PAREN:
            return tok.start
    return None


def is_word(tok: Token, *words: str) -> bool:
    """Whether the token is one of ``words`` as an unquoted word (keyword or name), case-insensitively."""
    return tok.token_type != TokenType.IDENTIFIER and tok.token_type != TokenType.STRING and tok.text.upper() in {
        w.upper() for w in words}


@dataclass(frozen=True)
class TableRef:
    """A table a statement names: a path (``delta.`/p```, with an optional ``@v<n>`` suffix) or a catalog name."""

    path: str | None
    name: str | None
    version: int | None = None
    timestamp: str | None = None
    offset: int = 0
    provider: str = "delta"

    @property
    def text(self) -> str:
        return f"{self.provider}.`{self.path}`" if self.path is not None else str(self.name)


def split_time_suffix(path: str) -> tuple[str, int | None, str | None]:
    """``/p@v3`` → (/p, 3, None); ``/p@20240101000000000`` → (/p, None, '2024-01-01 00:00:00.000')."""
    m = _VERSION_SUFFIX.match(path)
    if m:
        return m.group("path"), int(m.group("version")), None
    m = _TIMESTAMP_SUFFIX.match(path)
    if m:
        t = m.group("ts")
        return m.group("path"), None, f"{t[0:4]}-{t[4:6]}-{t[6:8]} {t[8:10]}:{t[10:12]}:{t[12:14]}.{t[14:17]}"
    return path, None, None


class Cursor:
    """Reads a statement token by token; expressions are sliced from the text and parsed by sqlglot."""

    def __init__(self, text: str, tokens: list[Token] | None = None) -> None:
        self.text = text
        self.tokens = tokens if tokens is not None else tokenize(text)
        self.i = 0

    # -- looking -----------------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def _match(self, words: tuple[str, ...]) -> int:
        """How many tokens spell ``words`` from here (0 when they do not); sqlglot keeps some keyword pairs
        such as ``PARTITIONED BY`` as one token, so words are compared across token boundaries."""
        wanted = [w.upper() for w in words]
        k = 0
        while wanted:
            tok = self.peek(k)
            if tok is None or tok.token_type in (TokenType.IDENTIFIER, TokenType.STRING):
                return 0
            parts = tok.text.upper().split()
            if parts != wanted[:len(parts)] or not parts:
                return 0
            wanted = wanted[len(parts):]
            k += 1
        return k

    def at(self, *words: str) -> bool:
        """Whether the next tokens are exactly ``words`` (a sequence, e.g. ``at("DRY", "RUN")``)."""
        return self._match(words) > 0

    def done(self) -> bool:
        return self.i >= len(self.tokens)

    def offset(self) -> int:
        tok = self.peek()
        return tok.start if tok is not None else len(self.text)

    # -- consuming ---------------------------------------------------------------------------------
    def accept(self, *words: str) -> bool:
        n = self._match(words)
        self.i += n
        return n > 0

    def expect(self, *words: str, form: str = "") -> None:
        if not self.accept(*words):
            hint = f"; the form is {form}" if form else ""
            raise self.error(f"expected {' '.join(words)}{hint}", parse=True)

    def next(self) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.error("the statement ends too early", parse=True)
        self.i += 1
        return tok

    def expect_end(self, form: str = "") -> None:
        if not self.done():
            hint = f"; the form is {form}" if form else ""
            raise self.error(f"unexpected {self.peek().text!r}{hint}", parse=True)  # type: ignore[union-attr]

    def error(self, problem: str, *, parse: bool = False, offset: int | None = None) -> DeltaSqlError:
        return sql_error(self.text, self.offset() if offset is None else offset, problem, parse=parse)

    # -- pieces ------------------------------------------------------------------------------------
    def table(self, providers: tuple[str, ...] | None = ("delta",)) -> TableRef:
        """``delta.`<path>``` (or another provider in ``providers``, any word when None) or a dotted catalog name."""
        start = self.offset()
        first = self.next()
        if (first.token_type != TokenType.IDENTIFIER and (providers is None or first.text.lower() in providers)
                and self.peek() is not None
                and self.peek().token_type == TokenType.DOT  # type: ignore[union-attr]
                and self.peek(1) is not None and self.peek(1).token_type == TokenType.IDENTIFIER):  # type: ignore[union-attr]
            self.i += 1
            path, version, ts = split_time_suffix(self.next().text)
            return TableRef(path, None, version, ts, start, first.text.lower())
        if first.token_type not in (TokenType.IDENTIFIER, TokenType.VAR) and not first.text.isidentifier():
            raise sql_error(self.text, start, "expected a table: delta.`<path>` or a table name", parse=True)
        parts = [first.text]
        while self.peek() is not None and self.peek().token_type == TokenType.DOT:  # type: ignore[union-attr]
            self.i += 1
            parts.append(self.next().text)
        return TableRef(None, ".".join(f"`{p}`" if not p.isidentifier() else p for p in parts), offset=start)

    def integer(self, what: str) -> int:
        tok = self.next()
        if tok.token_type != TokenType.NUMBER or not tok.text.isdigit():
            raise sql_error(self.text, tok.start, f"{what} must be a whole number, got {tok.text!r}", parse=True)
        return int(tok.text)

    def number(self, what: str) -> float:
        start = self.offset()
        sign = -1.0 if self.peek() is not None and self.peek().token_type == TokenType.DASH else 1.0  # type: ignore[union-attr]
        if sign < 0:
            self.i += 1
        tok = self.next()
        try:
            return sign * float(tok.text)
        except ValueError:
            raise sql_error(self.text, start, f"{what} must be a number, got {tok.text!r}", parse=True) from None

    def span_until(self, *stops: tuple[str, ...], angles: bool = False) -> tuple[str, int]:
        """The raw text from here up to (not including) the first top-level occurrence of a stop sequence.
        ``angles``: ``<…>`` nests too (a type such as ``MAP<STRING, BIGINT>``, whose comma is not a stop)."""
        start = self.offset()
        depth = 0
        opens = (TokenType.L_PAREN, TokenType.LT) if angles else (TokenType.L_PAREN,)
        closes = (TokenType.R_PAREN, TokenType.GT) if angles else (TokenType.R_PAREN,)
        while not self.done():
            tok = self.peek()
            assert tok is not None
            if tok.token_type in opens:
                depth += 1
            elif tok.token_type in closes:
                depth -= 1
            elif depth == 0 and any(self.at(*s) for s in stops):
                break
            self.i += 1
        end = self.tokens[self.i - 1].end + 1 if self.i > 0 and self.offset() > start else start
        return self.text[start:end], start

    def condition(self, *stops: tuple[str, ...]) -> tuple[str, exp.Expr]:
        """An expression up to a stop sequence, validated by sqlglot; returns (Spark SQL text, AST)."""
        text, start = self.span_until(*stops)
        if not text.strip():
            raise sql_error(self.text, start, "expected a condition", parse=True)
        return text.strip(), parse_expression(self.text, text, start)

    def paren_list(self) -> list[tuple[str, int]]:
        """``( a, b.c, `d` )`` → [(raw item text, offset), …]."""
        if self.peek() is None or self.peek().token_type != TokenType.L_PAREN:  # type: ignore[union-attr]
            raise self.error("expected (", parse=True)
        self.i += 1
        items: list[tuple[str, int]] = []
        depth = 0
        start = self.offset()
        while True:
            tok = self.next()
            if tok.token_type == TokenType.L_PAREN:
                depth += 1
            elif tok.token_type == TokenType.R_PAREN and depth > 0:
                depth -= 1
            elif depth == 0 and tok.token_type in (TokenType.COMMA, TokenType.R_PAREN):
                piece = self.text[start:tok.start].strip()
                if piece:
                    items.append((piece, start))
                if tok.token_type == TokenType.R_PAREN:
                    return items
                start = self.offset()


def parse_expression(text: str, piece: str, base: int) -> exp.Expr:
    """Parse one expression slice of ``text`` (starting at ``base``) with sqlglot's Spark dialect."""
    try:
        tree = sqlglot.parse_one(piece, read=DIALECT, into=exp.Condition)
    except ParseError as e:
        raise from_parse_error(text, e, base) from e
    return tree


def column_name(text: str, piece: str, base: int) -> str:
    """A (possibly dotted, backquoted) column name as Spark SQL text; refuses anything else."""
    tree = parse_expression(text, piece, base)
    if not isinstance(tree, exp.Column | exp.Dot | exp.Identifier):
        raise sql_error(text, base, f"expected a column name, got {piece!r}", parse=True)
    return ".".join(p.name for p in tree.parts) if isinstance(tree, exp.Column) else tree.sql(DIALECT)


def written(text: str, node: exp.Expr) -> str:
    """The user's own text of an expression node of ``text``'s AST: the slice of ``text`` it was parsed from.

    Regenerating an expression from sqlglot's tree changes what Spark reads (the double-quoted literal
    ``"say ""hi"" "`` becomes ``CONCAT('say ', 'hi', ' ')``, ``x::int`` a TRY_CAST, a ``--`` comment a block
    comment), so every condition, value and query dvlake hands to Spark is the original slice. A node without
    names or literals (``NULL``, ``TRUE``, ``current_date()``) has no spelling to lose and is regenerated.
    """
    span = written_span(text, node)
    return node.sql(DIALECT) if span is None else text[span[0]:span[1]]


def written_condition(text: str, node: exp.Expr, alias: str | None = None) -> Condition:
    """The condition ``node`` of ``text``'s AST (a WHERE) as the commands take it: the user's own slice of the
    statement (``written``, whose check parses the slice once) with the tree the statement's parse already made,
    so no command parses the condition again. A node without names or literals has no slice and no positions: its
    regenerated text (``written``) goes with it."""
    span = written_span(text, node)
    if span is None:
        return Condition.from_tree(node.sql(DIALECT), node, 0, alias)
    return Condition.from_tree(text[span[0]:span[1]], node, span[0], alias)


def written_span(text: str, node: exp.Expr, tokens: list[Token] | None = None) -> tuple[int, int] | None:
    """The character span [start, end) of ``text`` that ``node`` was parsed from; None when the node has no
    names or literals (sqlglot records positions only for those), a typed error when no span parses back to it."""
    into = None if isinstance(node, exp.Query | exp.Values) else exp.Condition

    def same(piece: str) -> bool:
        return sqlglot.parse_one(piece, read=DIALECT, into=into) == node

    return grown_span(text, node, same, tokens)


def grown_span(text: str, node: exp.Expr, same: Callable[[str], bool], tokens: list[Token] | None = None,
               ) -> tuple[int, int] | None:
    """The shortest run of whole, bracket-balanced tokens around the positions sqlglot recorded within ``node``
    (its names and literals) whose text ``same`` accepts, as a character span [start, end); None when the node
    records no position; a typed error when no run within reach is accepted (dvlake then never guesses)."""
    # a hint's (``/*+ COALESCE(1) */``) positions count from the hint's own text, not the statement's: left out
    spans = [(int(n.meta["start"]), int(n.meta["end"])) for n in node.walk(prune=lambda n: isinstance(n, exp.Hint))
             if not isinstance(n, exp.Hint) and n.meta and n.meta.get("start") is not None]
    if not spans:
        return None
    tokens = tokenize(text) if tokens is None else tokens
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    i = next((k for k, t in enumerate(tokens) if t.start <= first <= t.end), None)
    j = next((k for k, t in enumerate(tokens) if t.start <= last <= t.end), None)
    if i is not None and j is not None:
        depth = [0]
        for t in tokens:
            depth.append(depth[-1] + (t.token_type == TokenType.L_PAREN) - (t.token_type == TokenType.R_PAREN))
        for grow in range(_MAX_GROW + 1):
            for left in range(grow + 1):
                s, e = i - left, j + grow - left
                if s < 0 or e >= len(tokens) or depth[s] != depth[e + 1] or min(depth[s:e + 2]) < depth[s]:
                    continue
                try:
                    if same(text[tokens[s].start:tokens[e].end + 1]):
                        return tokens[s].start, tokens[e].end + 1
                except (ParseError, TokenError):
                    continue
    raise sql_error(text, first, f"cannot find the text of the expression {node.sql(DIALECT)[:60]!r} in the statement; "
                                 "write it more plainly", parse=True)


_MAX_GROW = 24  # tokens around a node's names and literals (CAST(… AS type), CASE … END, function names)
