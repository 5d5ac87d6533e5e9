"""delta-spark's MERGE name-resolution and refusal rules, one rule per test, through the Python builder and SQL.

Each test's docstring states the rule. Rows are checked against a plain-Spark oracle computed from the
pre-image; writing cases run with deletion vectors and with copy-on-write (the table property; each form once per
mode); every refusal leaves the table unchanged and names no internal ``__dvlake_…`` column.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.errors import (
    AggregationNotSupportedError,
    AmbiguousReferenceError,
    DvlakeError,
    InvalidNonDeterministicExpressionsError,
    MergeUnresolvedExpressionError,
    NonDeterministicConditionError,
    NonLastClauseOmitConditionError,
)
from tests.helpers import table_rows

TARGET = [(1, 10), (2, 20), (3, 30), (4, 40), (5, 50)]
SOURCE = [(2, 200), (4, 400), (6, 600), (7, 700)]
#: Names resolve before anything is written (the mode does not enter), and the write does not depend on the form:
#: each form runs once, one with DVs and the other with copy-on-write.
MODE_FORMS = pytest.mark.parametrize(("dvs", "form"), [("true", "python"), ("false", "sql")],
                                     ids=["dv-python", "copy_on_write-sql"])


def _tables(spark: SparkSession, tmp_path, dvs: str, tcols: str, scols: str) -> tuple[str, DataFrame]:
    """A target (3 files) and a source view ``rules_src`` with our own rows; column names as given."""
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame(TARGET, tcols).repartition(3), path,
                 properties={"delta.enableDeletionVectors": dvs})
    source = spark.createDataFrame(SOURCE, scols)
    source.createOrReplaceTempView("rules_src")
    return path, source



def _oracle(spark: SparkSession, pre: list[tuple[int, int]], src: list[tuple[int, int]],
            matched: Callable[[int, int, int], tuple[int, int] | None] | None,
            not_matched: Callable[[int, int], tuple[int, int] | None] | None,
            by_source: Callable[[int, int], tuple[int, int] | None] | None) -> list[tuple[int, ...]]:
    """The MERGE as a plain-Spark full outer join; each callable returns the new row, or None to drop/skip it."""
    t = spark.createDataFrame(pre, "tk long, tv long")
    s = spark.createDataFrame(src, "sk long, sv long")
    out: list[tuple[int, ...]] = []
    for r in t.join(s, F.col("tk") == F.col("sk"), "full_outer").collect():
        if r.tk is not None and r.sk is not None:
            row = matched(r.tk, r.tv, r.sv) if matched else (r.tk, r.tv)
        elif r.tk is not None:
            row = by_source(r.tk, r.tv) if by_source else (r.tk, r.tv)
        else:
            row = not_matched(r.sk, r.sv) if not_matched else None
        if row is not None:
            out.append(tuple(row))
    return sorted(out)


def _refused(spark: SparkSession, path: str, error: type[DvlakeError], error_class: str, run: Callable[[], object],
             *texts: str) -> DvlakeError:
    """``run`` raises ``error`` with ``error_class``, its message holds ``texts`` and no internal name; no change."""
    before = table_rows(spark, path)
    with pytest.raises(error) as info:
        run()
    message = str(info.value)
    assert info.value.error_class == error_class, message
    assert "__dvlake" not in message, message
    for text in texts:
        assert text in message, message
    assert table_rows(spark, path) == before
    return info.value


# --- resolution that must work ---------------------------------------------------------------------------


@MODE_FORMS
def test_insert_sees_only_the_source_so_shared_names_resolve_unqualified(spark, tmp_path, dvs, form):
    """Rule: WHEN NOT MATCHED clauses are resolved against the source alone, so an unqualified name both sides
    have is the source's column there; the INSERT column list names target columns, bare or alias-qualified."""
    path, source = _tables(spark, tmp_path, dvs, "key long, value long", "key long, value long")
    if form == "python":
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key")
         .whenMatchedUpdate(set={"t.value": "s.value + t.value"})
         .whenNotMatchedInsert("value > 600", {"key": "key", "t.value": "value + 1"}).execute())
    else:
        dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING rules_src s ON t.key = s.key "
                          "WHEN MATCHED THEN UPDATE SET t.value = s.value + t.value "
                          "WHEN NOT MATCHED AND value > 600 THEN INSERT (key, t.value) VALUES (key, value + 1)")
    expected = _oracle(spark, TARGET, SOURCE, lambda k, tv, sv: (k, sv + tv),
                       lambda k, sv: (k, sv + 1) if sv > 600 else None, None)
    assert table_rows(spark, path) == expected


@MODE_FORMS
def test_names_one_side_has_resolve_unqualified_where_both_sides_are_seen(spark, tmp_path, dvs, form):
    """Rule: in the ON condition and WHEN MATCHED clauses a name only one side has needs no qualifier; WHEN NOT
    MATCHED BY SOURCE clauses see the target alone, so its names (the join key too) resolve unqualified there."""
    path, source = _tables(spark, tmp_path, dvs, "key long, tv long", "key long, sv long")
    if form == "python":
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key AND sv > 0")
         .whenMatchedUpdate("tv < 30", {"tv": "sv - tv"})
         .whenMatchedDelete()
         .whenNotMatchedBySourceUpdate("key > 4", {"tv": "key * 1000"}).execute())
    else:
        dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING rules_src s ON t.key = s.key AND sv > 0 "
                          "WHEN MATCHED AND tv < 30 THEN UPDATE SET tv = sv - tv WHEN MATCHED THEN DELETE "
                          "WHEN NOT MATCHED BY SOURCE AND key > 4 THEN UPDATE SET tv = key * 1000")
    expected = _oracle(spark, TARGET, SOURCE, lambda k, tv, sv: (k, sv - tv) if tv < 30 else None, None,
                       lambda k, tv: (k, k * 1000) if k > 4 else (k, tv))
    assert table_rows(spark, path) == expected


@MODE_FORMS
def test_columns_named_like_the_aliases_are_read_through_their_qualifier(spark, tmp_path, dvs, form):
    """Rule: ``t.s`` is the target's column ``s`` and ``s.t`` the source's column ``t`` even when the target has a
    column named like the source's alias and the source one named like the target's (the benchmark's tables do):
    the qualifier names the side, the rest is that side's column."""
    path, source = _tables(spark, tmp_path, dvs, "key long, s long", "key long, t long")
    if form == "python":
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key AND s.t > t.s")
         .whenMatchedUpdate(set={"s": "s.t + t.s"})
         .whenNotMatchedInsert(values={"key": "s.key", "s": "s.t"}).execute())
    else:
        dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING rules_src s ON t.key = s.key AND s.t > t.s "
                          "WHEN MATCHED THEN UPDATE SET s = s.t + t.s "
                          "WHEN NOT MATCHED THEN INSERT (key, s) VALUES (s.key, s.t)")
    expected = _oracle(spark, TARGET, SOURCE, lambda k, tv, sv: (k, sv + tv), lambda k, sv: (k, sv), None)
    assert table_rows(spark, path) == expected


def test_a_non_deterministic_insert_value_is_allowed(spark, tmp_path):
    """Rule: only conditions must be deterministic; an inserted value may come from rand() (each row gets one). An
    insert-only MERGE adds files and marks nothing, so it writes alike with DVs and copy-on-write."""
    path, source = _tables(spark, tmp_path, "true", "key long, value long", "key long, value long")
    (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key")
     .whenNotMatchedInsert(values={"key": "s.key", "value": "CAST(rand() * 0 AS BIGINT) + s.value"}).execute())
    expected = _oracle(spark, TARGET, SOURCE, None, lambda k, sv: (k, sv), None)
    assert table_rows(spark, path) == expected


# --- names a clause cannot see -------------------------------------------------------------------------


def _merge_py(spark: SparkSession, path: str, source: DataFrame) -> Callable[..., Callable[[], object]]:
    def build(on: str = "t.key = s.key", **clauses: object) -> Callable[[], object]:
        def run() -> object:
            b = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), on)
            for name, args in clauses.items():
                b = getattr(b, name.rstrip("_0123456789"))(*args)  # type: ignore[arg-type]
            return b.execute()
        return run
    return build


def _merge_sql(spark: SparkSession, path: str, when: str, on: str = "t.key = s.key") -> Callable[[], object]:
    return lambda: dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING rules_src s ON {on} {when}")


def test_an_unqualified_name_both_sides_have_is_ambiguous_where_both_are_seen(spark, tmp_path):
    """Rule: in WHEN MATCHED conditions and values, a name both sides have must be qualified (AMBIGUOUS_REFERENCE)."""
    path, source = _tables(spark, tmp_path, "true", "key long, value long", "key long, value long")
    py = _merge_py(spark, path, source)
    cases = [(py(whenMatchedDelete=("key > 1",)), "WHEN MATCHED AND key > 1 THEN DELETE", "key"),
             (py(whenMatchedUpdate=(None, {"value": "value + 1"})), "WHEN MATCHED THEN UPDATE SET value = value + 1",
              "value")]
    # both forms on one table: a refusal writes nothing
    for form, (run_py, when, name) in product(("python", "sql"), cases):
        _refused(spark, path, AmbiguousReferenceError, "AMBIGUOUS_REFERENCE",
                 run_py if form == "python" else _merge_sql(spark, path, when), f"[`s`.`{name}`, `t`.`{name}`]")


def test_a_name_the_clause_cannot_see_names_the_expression_clause_and_visible_columns(spark, tmp_path):
    """Rule: DELTA_MERGE_UNRESOLVED_EXPRESSION names the expression, the clause and the columns that clause sees:
    both sides for MATCHED, the source for NOT MATCHED, the target for NOT MATCHED BY SOURCE and for the columns
    SET assigns."""
    path, source = _tables(spark, tmp_path, "true", "key long, tv long", "key long, sv long")
    py = _merge_py(spark, path, source)
    both, src, tgt = "t.key, t.tv, s.key, s.sv", "s.key, s.sv", "t.key, t.tv"
    cases = [
        (py(whenMatchedDelete=("nope > 1",)), "WHEN MATCHED AND nope > 1 THEN DELETE", "nope", "DELETE condition", both),
        (py(whenMatchedUpdate=(None, {"tv": "s.nope"})), "WHEN MATCHED THEN UPDATE SET tv = s.nope", "s.nope",
         "UPDATE clause", both),
        (py(whenMatchedUpdate=(None, {"s.sv": "1"})), "WHEN MATCHED THEN UPDATE SET s.sv = 1", "s.sv", "UPDATE clause",
         tgt),
        (py(whenMatchedUpdate=(None, {"sv": "1"})), "WHEN MATCHED THEN UPDATE SET sv = 1", "sv", "UPDATE clause", tgt),
        (py(whenNotMatchedInsert=("tv > 1", {"key": "s.key", "tv": "s.sv"})),
         "WHEN NOT MATCHED AND tv > 1 THEN INSERT (key, tv) VALUES (s.key, s.sv)", "tv", "INSERT condition", src),
        (py(whenNotMatchedInsert=(None, {"key": "s.key", "tv": "t.tv"})),
         "WHEN NOT MATCHED THEN INSERT (key, tv) VALUES (s.key, t.tv)", "t.tv", "INSERT clause", src),
        (py(whenNotMatchedBySourceUpdate=("sv > 1", {"tv": "0"})),
         "WHEN NOT MATCHED BY SOURCE AND sv > 1 THEN UPDATE SET tv = 0", "sv", "UPDATE condition", tgt),
        (py(on="t.key = s.nope", whenMatchedDelete=()), "WHEN MATCHED THEN DELETE", "s.nope", "search condition", both),
    ]
    # both forms on one table: a refusal writes nothing
    for form, (run_py, when, expr, clause, cols) in product(("python", "sql"), cases):
        on = "t.key = s.nope" if clause == "search condition" else "t.key = s.key"
        run = run_py if form == "python" else _merge_sql(spark, path, when, on)
        _refused(spark, path, MergeUnresolvedExpressionError, "DELTA_MERGE_UNRESOLVED_EXPRESSION", run,
                 f"Cannot resolve {expr} in {clause} given columns {cols}")


# --- clause order, aggregates, non-determinism -----------------------------------------------------------


def test_only_the_last_clause_of_a_kind_may_omit_its_condition(spark, tmp_path):
    """Rule: of several clauses of one kind only the last may be unconditional, one error class per kind."""
    path, source = _tables(spark, tmp_path, "true", "key long, value long", "key long, value long")
    py = _merge_py(spark, path, source)
    cases = [
        ("NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION", py(whenMatchedDelete=(), whenMatchedDelete_2=("s.key > 3",)),
         "WHEN MATCHED THEN DELETE WHEN MATCHED AND s.key > 3 THEN DELETE"),
        ("NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION",
         py(whenNotMatchedInsertAll=(), whenNotMatchedInsertAll_2=("s.key > 6",)),
         "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY TARGET AND s.key > 6 THEN INSERT *"),
        ("NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION",
         py(whenNotMatchedBySourceDelete=(), whenNotMatchedBySourceDelete_2=("t.key > 1",)),
         "WHEN NOT MATCHED BY SOURCE THEN DELETE WHEN NOT MATCHED BY SOURCE AND t.key > 1 THEN DELETE"),
    ]
    # both forms on one table: a refusal writes nothing
    for form, (error_class, run_py, when) in product(("python", "sql"), cases):
        _refused(spark, path, NonLastClauseOmitConditionError, error_class,
                 run_py if form == "python" else _merge_sql(spark, path, when))


def test_aggregate_and_window_functions_are_refused_in_merge_clauses(spark, tmp_path):
    """Rule: an aggregate in a MERGE condition is DELTA_AGGREGATION_NOT_SUPPORTED (SQLSTATE 42903); a window function
    anywhere, or an aggregate in a SET or INSERT value, is Spark's UNSUPPORTED_EXPR_FOR_OPERATOR (42K0E), which
    delta-spark lets through (its MergeIntoSuite expects "unsupported … Invalid expressions" there)."""
    path, source = _tables(spark, tmp_path, "true", "key long, value long", "key long, value long")
    py = _merge_py(spark, path, source)
    cases = [
        (py(whenMatchedDelete=("max(s.value) > 0",)), "WHEN MATCHED AND max(s.value) > 0 THEN DELETE",
         "DELETE condition of MERGE operation", "DELTA_AGGREGATION_NOT_SUPPORTED", "42903"),
        (py(whenNotMatchedInsert=(None, {"key": "s.key", "value": "sum(s.value)"})),
         "WHEN NOT MATCHED THEN INSERT (key, value) VALUES (s.key, sum(s.value))", "INSERT clause of MERGE operation",
         "UNSUPPORTED_EXPR_FOR_OPERATOR", "42K0E"),
        (py(whenMatchedUpdate=(None, {"value": "row_number() OVER (ORDER BY s.key)"})),
         "WHEN MATCHED THEN UPDATE SET value = row_number() OVER (ORDER BY s.key)", "UPDATE clause of MERGE operation",
         "UNSUPPORTED_EXPR_FOR_OPERATOR", "42K0E"),
        (py(whenMatchedDelete=("row_number() OVER (ORDER BY s.key) > 1",)),
         "WHEN MATCHED AND row_number() OVER (ORDER BY s.key) > 1 THEN DELETE", "Invalid expressions",
         "UNSUPPORTED_EXPR_FOR_OPERATOR", "42K0E"),
    ]
    # both forms on one table: a refusal writes nothing
    for form, (run_py, when, text, error_class, state) in product(("python", "sql"), cases):
        error = _refused(spark, path, AggregationNotSupportedError, error_class,
                         run_py if form == "python" else _merge_sql(spark, path, when), text)
        assert error.getSqlState() == state


def test_non_deterministic_merge_conditions_are_refused(spark, tmp_path):
    """Rule: the ON condition and every clause condition of a MERGE must be deterministic
    (DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED)."""
    path, source = _tables(spark, tmp_path, "true", "key long, value long", "key long, value long")
    py = _merge_py(spark, path, source)
    cases = [
        (py(on="t.key = s.key AND rand() < 2", whenMatchedDelete=()), "t.key = s.key AND rand() < 2",
         "WHEN MATCHED THEN DELETE", "search condition of MERGE operation"),
        (py(whenMatchedUpdate=("rand() > 0.5", {"value": "0"})), "t.key = s.key",
         "WHEN MATCHED AND rand() > 0.5 THEN UPDATE SET value = 0", "UPDATE condition of MERGE operation"),
        (py(whenNotMatchedInsertAll=("uuid() > 'a'",)), "t.key = s.key", "WHEN NOT MATCHED AND uuid() > 'a' THEN INSERT *",
         "INSERT condition of MERGE operation"),
    ]
    # both forms on one table: a refusal writes nothing
    for form, (run_py, on, when, operation) in product(("python", "sql"), cases):
        _refused(spark, path, NonDeterministicConditionError, "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED",
                 run_py if form == "python" else _merge_sql(spark, path, when, on), operation)


def test_non_deterministic_delete_and_update_conditions_are_refused(spark, tmp_path):
    """Rule: a DELETE or UPDATE condition must be deterministic (Spark's INVALID_NON_DETERMINISTIC_EXPRESSIONS,
    which delta-spark lets through); a deterministic one on the same table still runs."""
    path, _ = _tables(spark, tmp_path, "true", "key long, value long", "key long, value long")
    dt = DeltaTable.forPath(spark, path)
    cls = "INVALID_NON_DETERMINISTIC_EXPRESSIONS"
    _refused(spark, path, InvalidNonDeterministicExpressionsError, cls, lambda: dt.delete("rand() > 0.5"), "DELETE")
    _refused(spark, path, InvalidNonDeterministicExpressionsError, cls,
             lambda: dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE key > rand() * 10"), "DELETE")
    _refused(spark, path, InvalidNonDeterministicExpressionsError, cls,
             lambda: dt.update(F.rand() > 0.5, {"value": "0"}), "UPDATE")
    _refused(spark, path, InvalidNonDeterministicExpressionsError, cls,
             lambda: dvlake.sql(spark, f"UPDATE delta.`{path}` SET value = 0 WHERE uuid() > 'a'"), "UPDATE")
    dt.update("key > 3", {"value": "value + 1"})
    assert table_rows(spark, path) == sorted((k, v + 1 if k > 3 else v) for k, v in TARGET)
