"""What each column of a temporary view shows of the Delta table it reads (``SELECT value AS key, key AS value``).

delta-spark lets DELETE, UPDATE and MERGE run through a temporary view whose projection renames, reorders or
drops the table's columns, and (DELETE with deletion vectors) adds computed ones. dvlake runs the statement on the
table instead, with each column of the view replaced by what it shows; for that it needs the view's projection.

How dvlake learns it without JVM handles (Spark Connect has none): the top ``Project`` of the view's optimized plan
(``explain``'s text) gives a guess per column; the guess is then rebuilt on a fresh read of the table and kept only
when the rebuilt frame's optimized plan is the view's plan (the caller compares them), so a misread guess can only
lead to a refusal, never to a statement that changes other columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class ShownColumn:
    """One column of a view: its name, and the table column it shows unchanged (``plain``) or the SQL expression
    over the table's columns that computes it (``expression``)."""

    name: str
    plain: str | None
    expression: str

    @property
    def sql(self) -> str:
        """The column as SQL over the table's columns."""
        return quoted(self.plain) if self.plain is not None else f"({self.expression})"


def quoted(name: str) -> str:
    """A column name as a backquoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def _split_top_level(body: str) -> list[str]:
    """``a# AS b#, (c# + 1) AS d#`` → its items: commas inside brackets or quotes do not split."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(body):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    items.append(body[start:].strip())
    return items


def guess_projection(plan: str, columns: list[str], table_columns: list[str]) -> list[ShownColumn] | None:
    """The view's columns read off the top ``Project`` of its optimized plan (expression ids blanked to ``#``), or
    None when the plan has no such line or it does not list exactly the view's columns. Only a guess: the caller
    keeps it only when :func:`project` of it rebuilds the same plan."""
    lines = [line for line in plan.splitlines() if line.strip() and not line.startswith("==")]
    if not lines or not lines[0].startswith("Project [") or not lines[0].endswith("]"):
        return None
    items = _split_top_level(lines[0][len("Project ["):-1])
    if len(items) != len(columns):
        return None
    by_name = {c: c for c in table_columns}
    shown = []
    for item, column in zip(items, columns, strict=True):
        suffix = f" AS {column}#"
        if item.endswith(suffix):
            source = item[: -len(suffix)]
        elif item == f"{column}#":
            source = item
        else:
            return None
        text = source.replace("#", "")
        plain = by_name.get(text) if source.endswith("#") and source.count("#") == 1 else None
        shown.append(ShownColumn(column, plain, text))
    return shown


def project(frame: DataFrame, shown: list[ShownColumn]) -> DataFrame:
    """``frame`` (a read of the table) projected as the view projects it.

    Raises:
        pyspark.errors.AnalysisException: a guessed expression does not resolve (the guess was wrong).
    """
    from pyspark.sql import functions as F

    return frame.select(*[(F.col(quoted(c.plain)) if c.plain is not None else F.expr(c.expression)).alias(c.name)
                          for c in shown])
