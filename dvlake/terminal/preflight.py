"""Checks that need no Spark, run before a CLI command starts it (a Spark start costs tens of seconds).

Each check raises the error the command itself would raise later, so running it first changes
when the user hears about a mistake, never what they hear: a missing table is dvlake's
``TableNotFoundError`` either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dvlake.log.snapshot import Snapshot

#: Statements whose ``delta.`<path>``` tables must already exist. Others (CREATE, REPLACE, CONVERT, INSERT, and
#: whatever dvlake hands to Spark) may create one, or are not dvlake's to judge: they are not checked here.
_READS_EXISTING = {"SELECT", "WITH", "FROM", "DESCRIBE", "DESC", "DELETE", "UPDATE", "MERGE", "OPTIMIZE", "REORG",
                   "VACUUM", "RESTORE", "ALTER", "SHOW", "GENERATE"}


def load_table(path: str) -> Snapshot:
    """The table's latest snapshot (log only); ``TableNotFoundError`` when PATH holds no Delta table."""
    from dvlake.log.snapshot import Snapshot
    from dvlake.storage.paths import normalize_table_root

    return Snapshot.load(normalize_table_root(path))


def statement_tables(statement: str) -> list[str]:
    """The paths of the ``delta.`<path>``` tables a statement names, in order (string literals and comments
    are skipped by the tokenizer); [] when the statement does not tokenize (Spark will report it)."""
    from sqlglot.tokens import TokenType

    from dvlake.errors import DeltaSqlError
    from dvlake.sqlfront.parse import is_word, tokenize

    try:
        tokens = tokenize(statement.strip().rstrip(";"))
    except DeltaSqlError:
        return []
    paths: list[str] = []
    for i, tok in enumerate(tokens):
        if (is_word(tok, "delta") and i + 2 < len(tokens) and tokens[i + 1].token_type == TokenType.DOT
                and tokens[i + 2].token_type == TokenType.IDENTIFIER and (i == 0 or tokens[i - 1].token_type != TokenType.DOT)):
            paths.append(tokens[i + 2].text)
    return paths


def first_word(statement: str) -> str:
    words = statement.strip().split(None, 1)
    return words[0].upper().strip("(") if words else ""


def check_statement_tables(statement: str) -> None:
    """Refuse, before Spark starts, a statement that reads or changes a ``delta.`<path>``` with no table there.

    A time-travel suffix (``/p@v3``) names the table at ``/p``, unless a table really lives at ``/p@v3``.
    """
    from dvlake.errors import TableNotFoundError
    from dvlake.sqlfront.parse import split_time_suffix

    if first_word(statement) not in _READS_EXISTING:
        return
    for path in statement_tables(statement):
        try:
            load_table(path)
        except TableNotFoundError:
            bare, version, timestamp = split_time_suffix(path)
            if version is None and timestamp is None:
                raise
            load_table(bare)
