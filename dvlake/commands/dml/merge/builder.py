"""delta-spark's ``DeltaMergeBuilder``: the Python face that collects clauses into a ``MergeSpec`` and runs it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession

from dvlake.commands.dml.api_args import check_condition, check_mapping
from dvlake.commands.dml.merge.command import merge
from dvlake.commands.dml.merge.evolution import evolves
from dvlake.commands.dml.merge.spec import MATCHED, NOT_MATCHED, NOT_MATCHED_BY_SOURCE, RESULT_SCHEMA, MergeClause, MergeSpec
from dvlake.log.condition import Condition


class DeltaMergeBuilder:
    """delta-spark's DeltaMergeBuilder: ``dt.alias("t").merge(src.alias("s"), "t.id = s.id")…execute()``."""

    def __init__(self, spark: SparkSession, path: str, target_alias: str | None, source: DataFrame,
                 condition: str | Column, source_alias: str | None = None, *,
                 on_schema_evolution: Callable[[], None] | None = None) -> None:
        self._spark = spark
        self._path = path
        self._on_schema_evolution = on_schema_evolution  # after an evolving MERGE (a name's catalog columns follow)
        on = Condition.of(condition)
        assert on is not None  # ``check_condition`` of the face refused None
        self._spec = MergeSpec(source, on, [], target_alias, source_alias)

    def _add(self, clause: MergeClause) -> DeltaMergeBuilder:
        self._spec.clauses.append(clause)
        return self

    def whenMatchedUpdate(self, condition: str | Column | None = None,
                          set: dict[str, str | Column] | None = None) -> DeltaMergeBuilder:  # noqa: A002
        mapping = check_mapping(set, "'set' in whenMatchedUpdate")
        check_condition(condition)
        return self._add(MergeClause.of(MATCHED, "update", condition, dict(mapping)))

    def whenMatchedUpdateAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause.of(MATCHED, "update", condition, None))

    def whenMatchedDelete(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause.of(MATCHED, "delete", condition))

    def whenNotMatchedInsert(self, condition: str | Column | None = None,
                             values: dict[str, str | Column] | None = None) -> DeltaMergeBuilder:
        mapping = check_mapping(values, "'values' in whenNotMatchedInsert")
        check_condition(condition)
        return self._add(MergeClause.of(NOT_MATCHED, "insert", condition, dict(mapping)))

    def whenNotMatchedInsertAll(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause.of(NOT_MATCHED, "insert", condition, None))

    def whenNotMatchedBySourceUpdate(self, condition: str | Column | None = None,
                                     set: dict[str, str | Column] | None = None) -> DeltaMergeBuilder:  # noqa: A002
        mapping = check_mapping(set, "'set' in whenNotMatchedBySourceUpdate")
        check_condition(condition)
        return self._add(MergeClause.of(NOT_MATCHED_BY_SOURCE, "update", condition, dict(mapping)))

    def whenNotMatchedBySourceDelete(self, condition: str | Column | None = None) -> DeltaMergeBuilder:
        check_condition(condition)
        return self._add(MergeClause.of(NOT_MATCHED_BY_SOURCE, "delete", condition))

    def withSchemaEvolution(self) -> DeltaMergeBuilder:
        """With ``*`` clauses, the source's new columns and new nested struct fields are added to the table (as does
        ``spark.databricks.delta.schema.autoMerge.enabled``), and struct values may lack fields of their column."""
        self._spec.schema_evolution = True
        return self

    def execute(self) -> DataFrame:
        """Run the MERGE; returns delta-spark's one-row result (affected, updated, deleted, inserted)."""
        metrics = merge(self._spark, self._path, self._spec)
        if self._on_schema_evolution is not None and evolves(self._spark, self._spec):
            self._on_schema_evolution()
        return result_frame(self._spark, metrics)


def result_frame(spark: SparkSession, metrics: dict[str, Any]) -> DataFrame:
    upd, dele, ins = (int(metrics.get(k, 0)) for k in ("numTargetRowsUpdated", "numTargetRowsDeleted",
                                                         "numTargetRowsInserted"))
    return spark.createDataFrame([(upd + dele + ins, upd, dele, ins)], RESULT_SCHEMA)
