"""Which columns each part of a MERGE may name, checked before any data is read (delta-spark's rules).

- The ON condition and the WHEN MATCHED clauses see the target and the source: ``t.key`` and ``s.key``
  by alias, and unqualified the names only one side has; a name both sides have is ambiguous unqualified
  (Spark's ``AMBIGUOUS_REFERENCE``).
- WHEN NOT MATCHED [BY TARGET] clauses see only the source (there is no target row), so an unqualified
  name is the source column even when the target has one of the same name.
- WHEN NOT MATCHED BY SOURCE clauses see only the target.
- The columns a SET or an INSERT list assigns are target columns, unqualified or qualified by the target alias.
- A name a clause cannot see raises ``DELTA_MERGE_UNRESOLVED_EXPRESSION`` naming the expression, the clause
  and the columns that clause can use; conditions must be deterministic and no clause may aggregate.

The expressions are analysed by Spark over empty frames shaped as the frames the command evaluates them
on (the same struct per alias and unqualified columns), so what passes here resolves there the same way.
Only user-visible names reach a message: the command's bookkeeping columns are never listed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from dvlake.commands.dml.checks import (
    ExpressionKind,
    display,
    expression_kind,
    refuse_aggregates,
    refuse_non_deterministic,
    refuse_subquery_kind,
)
from dvlake.commands.dml.shared import as_column, split_name, unqualified
from dvlake.errors import AmbiguousReferenceError, MergeUnresolvedExpressionError
from dvlake.log.condition import Condition
from dvlake.spark.names import case_sensitive, name_key
from dvlake.spark.pruning import column_of

BOTH, SOURCE_ONLY, TARGET_ONLY = "both", "source", "target"


@dataclass(frozen=True)
class MergeNames:
    """The two sides of a MERGE as its expressions address them."""

    src: str                        # struct column (the source alias, or an internal name without one)
    tgt: str
    src_alias: str | None           # the alias as the user gave it (None: the source has none)
    tgt_alias: str | None
    src_schema: StructType
    tgt_schema: StructType
    assignable: list[str]           # target columns a SET / INSERT list may name (with schema evolution: new ones too)

    def shared(self) -> set[str]:
        """Names (lower case) both sides have: ambiguous unqualified where both sides are seen."""
        return {f.name.lower() for f in self.src_schema.fields} & {f.name.lower() for f in self.tgt_schema.fields}

    def unqualified(self, scope: str) -> tuple[list[str], list[str]]:
        """(source columns, target columns) a scope sees unqualified, alias-named columns left out."""
        reserved = {self.src.lower(), self.tgt.lower()}
        src = [f.name for f in self.src_schema.fields if f.name.lower() not in reserved]
        tgt = [f.name for f in self.tgt_schema.fields if f.name.lower() not in reserved]
        if scope == SOURCE_ONLY:
            return src, []
        if scope == TARGET_ONLY:
            return [], tgt
        shared = self.shared()
        return [c for c in src if c.lower() not in shared], [c for c in tgt if c.lower() not in shared]

    def visible(self, scope: str) -> str:
        """The columns a scope can use, as a message lists them (``t.key, t.v, s.key``)."""
        def named(alias: str | None, schema: StructType) -> list[str]:
            return [f"{alias}.{f.name}" if alias else f.name for f in schema.fields]
        out = [] if scope == SOURCE_ONLY else named(self.tgt_alias, self.tgt_schema)
        out += [] if scope == TARGET_ONLY else named(self.src_alias, self.src_schema)
        return ", ".join(out)


def probe_frame(spark: SparkSession, names: MergeNames, scope: str) -> DataFrame:
    """An empty frame with the columns a scope's expressions are evaluated on."""
    src_cols, tgt_cols = names.unqualified(scope)
    fields: list[StructField] = []
    if scope != TARGET_ONLY:
        fields.append(StructField(names.src, names.src_schema))
    if scope != SOURCE_ONLY:
        fields.append(StructField(names.tgt, names.tgt_schema))
    fields += [names.src_schema[c] for c in src_cols] + [names.tgt_schema[c] for c in tgt_cols]
    return spark.createDataFrame([], StructType(fields))


def _unquote(name: str) -> str:
    return ".".join(p.replace("``", "`") for p in re.findall(r"`((?:[^`]|``)*)`", name)) or name


def _qualified_field(text: str, field: str) -> str:
    """The ``q.field`` the user wrote (Spark's FIELD_NOT_FOUND names only the field)."""
    m = re.search(rf"([A-Za-z_]\w*|`[^`]+`)\s*\.\s*`?{re.escape(field)}\b`?", text)
    return re.sub(r"\s+", "", m.group(0)).replace("`", "") if m else field


class MergeNameCheck:
    """Checks one MERGE's expressions, clause by clause, against the scope each one is evaluated in."""

    def __init__(self, spark: SparkSession, names: MergeNames) -> None:
        self._names = names
        self._sensitive = case_sensitive(spark)
        self._probes = {s: probe_frame(spark, names, s) for s in (BOTH, SOURCE_ONLY, TARGET_ONLY)}

    def expression(self, value: str | Column | Condition, scope: str, clause: str) -> ExpressionKind | None:
        """Analyse ``value`` in ``scope``; a name it cannot see raises the typed error naming ``clause``.
        None when Spark refuses it for another reason (the command then reports that error itself)."""
        try:
            if isinstance(value, Condition):
                return expression_kind(self._probes[scope], column_of(value), value)
            return expression_kind(self._probes[scope], as_column(value), value if isinstance(value, str) else None)
        except AnalysisException as exc:
            self._translate(exc, value, scope, clause)
            return None

    def _translate(self, exc: AnalysisException, value: str | Column | Condition, scope: str, clause: str) -> None:
        condition = str(exc.getCondition() or "")
        params: dict[str, str] = dict(exc.getMessageParameters() or {})
        if condition.startswith("UNRESOLVED_COLUMN"):
            name = _unquote(params.get("objectName", ""))
        elif condition == "FIELD_NOT_FOUND":
            name = _qualified_field(display(value), _unquote(params.get("fieldName", "")))
        elif condition == "AMBIGUOUS_REFERENCE":
            name = _unquote(params.get("name", ""))
        else:
            return
        if "." not in name and name.lower() in self._names.shared() and scope == BOTH:
            self._ambiguous(name)
        raise MergeUnresolvedExpressionError(
            f"Cannot resolve {name} in {clause} given columns {self._names.visible(scope)}.") from None

    def _ambiguous(self, name: str) -> None:
        s, t = self._names.src_alias, self._names.tgt_alias
        refs = [f"`{q}`.`{name}`" for q in (s, t) if q] or [f"`{name}` (source)", f"`{name}` (target)"]
        raise AmbiguousReferenceError(
            f"Reference `{name}` is ambiguous, could be: [{', '.join(refs)}]. Qualify it with the source or the "
            "target alias.") from None

    def condition(self, value: Condition | None, scope: str, what: str) -> None:
        """A condition (``what``: ``search``, ``UPDATE``, ``DELETE``, ``INSERT``): resolvable, deterministic, no aggregate."""
        if value is None:
            return
        kind = self.expression(value, scope, f"{what} condition")
        if kind is not None:
            operation = f"{what} condition of MERGE operation"
            refuse_non_deterministic(kind, operation, value)
            refuse_aggregates(kind, operation, value)
            refuse_subquery_kind(kind, "MERGE", value, operation)

    def assignments(self, assignments: dict[str, Any] | None, scope: str, action: str) -> None:
        """Each assigned column is a target column; each value resolves in ``scope`` and does not aggregate."""
        if assignments is None:
            return
        clause = f"{action} clause"
        for key, value in assignments.items():
            self.target_column(key, clause)
            kind = self.expression(value, scope, clause)
            if kind is not None:
                refuse_aggregates(kind, f"{clause} of MERGE operation", value, condition=False)

    def target_column(self, key: str, clause: str) -> None:
        alias, sensitive = self._names.tgt_alias, self._sensitive
        parts = unqualified(split_name(key), [(alias,)] if alias else [], sensitive)
        if not parts or name_key(parts[0], sensitive) not in {name_key(c, sensitive) for c in self._names.assignable}:
            raise MergeUnresolvedExpressionError(
                f"Cannot resolve {key} in {clause} given columns {self._names.visible(TARGET_ONLY)}: the columns an "
                "UPDATE SET or an INSERT list assigns are target columns.")


def checked(spark: SparkSession, names: MergeNames, on: Condition,
            clauses: Iterable[tuple[str, str, Condition | None, dict[str, Any] | None]]) -> None:
    """Check the ON condition and every (scope, action, condition, assignments) clause before the command runs."""
    check = MergeNameCheck(spark, names)
    check.condition(on, BOTH, "search")
    for scope, action, condition, assignments in clauses:
        check.condition(condition, scope, action.upper())
        check.assignments(assignments, scope, action.upper())
