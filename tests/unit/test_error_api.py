"""dvlake's errors answer PySpark 4's PySparkException API, with delta-spark's SQLSTATE for each class."""

from __future__ import annotations

import pytest

import dvlake.errors as E


def test_class_and_sqlstate_through_pyspark_names() -> None:
    err = E.MultipleSourceRowMatchingTargetRowError("a target row matched 2 source rows")
    assert err.getCondition() == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert err.getSqlState() == err.sql_state == "21506"
    with pytest.warns(FutureWarning, match="getCondition"):  # deprecated in PySpark 4.0, warned about there too
        assert err.getErrorClass() == err.getCondition()
    assert err.getMessage().startswith("[DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE] ")
    assert err.getMessageParameters() == {}
    assert err.getQueryContext() == []


def test_sqlstate_follows_the_class_an_instance_carries() -> None:
    """A Python class raised with another error class (one per clause kind, Spark's class instead of
    delta-spark's) reports that class's SQLSTATE; a sub-class has its parent's."""
    assert E.NonDeterministicConditionError("x").getSqlState() == "0AKDC"
    assert E.InvalidNonDeterministicExpressionsError("x").getSqlState() == "42K0E"
    assert E.AggregationNotSupportedError("x", "UNSUPPORTED_EXPR_FOR_OPERATOR").getSqlState() == "42K0E"
    assert E.UnresolvedAssignmentError("x").getSqlState() == "42703"
    assert E.UnresolvedAssignmentError("x", error_class="DELTA_CONFLICT_SET_COLUMN").getSqlState() == "42701"
    assert E.UnsafeAssignmentCastError("x", error_class="DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION").getSqlState() \
        == "42K09"
    assert E.DeltaAnalysisException("x").getCondition() == "DELTA_MERGE_MISSING_WHEN"
    assert E.DeltaAnalysisException("x").getSqlState() == "42601"
    assert E.InvalidArgumentError("no class").getSqlState() is None


def test_every_dml_class_has_delta_sparks_sqlstate() -> None:
    """The DML classes with the SQLSTATEs delta-spark's ``delta-error-classes.json`` and Spark's
    ``error-conditions.json`` give them (read from both files when this test was written)."""
    expected = {
        "DELTA_UNSUPPORTED_SUBQUERY": "0AKDC", "DELTA_MERGE_MISSING_WHEN": "42601", "DELTA_CONFLICT_SET_COLUMN": "42701",
        "DELTA_MERGE_UNRESOLVED_EXPRESSION": "42601", "DELTA_AGGREGATION_NOT_SUPPORTED": "42903",
        "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED": "0AKDC", "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION": "42846",
        "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION": "0AKDC", "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT": "0AKDC",
        "DELTA_NOT_NULL_CONSTRAINT_VIOLATED": "23502", "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE": "22003",
        "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE": "21506", "DELTA_UNSUPPORTED_SOURCE": "0AKDD",
        "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION": "42613", "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION": "42613",
        "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION": "42613", "AMBIGUOUS_REFERENCE": "42704",
        "UNRESOLVED_COLUMN.WITH_SUGGESTION": "42703", "FIELD_NOT_FOUND": "42704", "CAST_INVALID_INPUT": "22018",
        "INVALID_NON_DETERMINISTIC_EXPRESSIONS": "42K0E", "UNSUPPORTED_EXPR_FOR_OPERATOR": "42K0E",
        "MERGE_WITHOUT_WHEN": "42601", "PARSE_SYNTAX_ERROR": "42601", "CANNOT_UP_CAST_DATATYPE": "42846",
    }
    assert {c: E.sql_state_of(c) for c in expected} == expected


def test_the_class_is_shown_once_in_front_by_the_types_that_show_it() -> None:
    """``[CLASS] message`` is written in one place (errors.with_error_class), from the class an instance carries."""
    assert str(E.PathOutsideTableRootError("x")) == "[DVLAKE_PATH_OUTSIDE_TABLE_ROOT] x"
    assert str(E.UnsupportedTableFeaturesError("x", "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE")) \
        == "[DELTA_UNSUPPORTED_FEATURES_FOR_WRITE] x"
    assert str(E.DeletionVectorIntegrityError("[DELTA_DELETION_VECTOR_SIZE_MISMATCH] x",
                                              error_class="DELTA_DELETION_VECTOR_SIZE_MISMATCH")) \
        == "[DELTA_DELETION_VECTOR_SIZE_MISMATCH] x"  # a rebuilt message keeps one prefix
    assert str(E.VersionNotFoundError("x")) == "x"  # a type that does not show its class
    assert E.VersionNotFoundError("x").getMessage() == "[DELTA_VERSION_NOT_FOUND] x"


def test_no_raise_site_writes_the_class_into_its_message() -> None:
    """The class is given once (``error_class=`` or the type's default), never hand-written as a prefix as well."""
    import pathlib
    import re

    import dvlake

    prefix = re.compile(r"""\bf?["'](?:\[[A-Z][A-Z0-9]*_[A-Z0-9_.]+\] |(?:DELTA|DVLAKE)_[A-Z0-9_]+: )""")
    root = pathlib.Path(dvlake.__file__).parent
    found = [f"{p.relative_to(root)}:{n}" for p in sorted(root.rglob("*.py")) if p.name != "errors.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if prefix.search(line)]
    assert found == []
