"""The argument checks of the Python API (``DeltaTable.delete/update/merge``, the merge builder's clauses), made the
way delta-spark's ``delta.tables`` makes them, so a program that relies on them fails the same way here.

The rules (delta-spark's Python API): a condition is a ``str`` or a ``Column`` (anything else: ``TypeError``); a
``set``/``values`` mapping is required (None: ``ValueError``), must be a ``dict`` (else ``TypeError``) whose keys are
``str`` column names and whose values are ``str`` expressions or ``Column`` (else ``TypeError``); a merge source is
a ``DataFrame`` (else ``TypeError``; None: ``ValueError``) and its condition is required. The mapping is checked
before the condition, as there. Checks run when the method is called, not at ``execute()``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame

from dvlake.errors import InvalidArgumentError, InvalidArgumentTypeError


def check_condition(value: Any, what: str = "'condition'") -> None:
    """``None``, a SQL string or a Column; anything else is a ``TypeError``."""
    if value is None or isinstance(value, (str, Column)):
        return
    raise InvalidArgumentTypeError(f"{what} must be a Spark SQL Column or a string (expression in SQL syntax); got a "
                                   f"value of type {type(value).__name__}: {value!r}")


def check_mapping(value: Any, what: str) -> dict[str, str | Column]:
    """A required ``{column name: SQL string or Column}`` dict, returned as given.

    Raises:
        InvalidArgumentError: ``value`` is None (a ``ValueError``).
        InvalidArgumentTypeError: not a dict, a key that is not a string, or a value that is neither a string nor a
            Column (a ``TypeError``).
    """
    if value is None:
        raise InvalidArgumentError(f"{what} cannot be None: give {{'column': <SQL string or Column>, ...}}")
    if type(value) is not dict:
        raise InvalidArgumentTypeError(f"{what} must be a dict of column names to expressions; got {type(value).__name__}")
    for key, expression in value.items():
        if type(key) is not str:
            raise InvalidArgumentTypeError(f"Keys of dict in {what} must contain only strings with column names; got "
                                           f"{key!r} of type {type(key).__name__}")
        if not isinstance(expression, (str, Column)):
            raise InvalidArgumentTypeError(f"Values of dict in {what} must contain only Spark SQL Columns or strings "
                                           f"(expressions in SQL syntax); got {expression!r} of type "
                                           f"{type(expression).__name__} for {key!r}")
    return value


def check_merge_start(source: Any, condition: Any) -> None:
    """``merge(source, condition)``: a DataFrame and a required condition."""
    if source is None:
        raise InvalidArgumentError("'source' in merge cannot be None")
    if not isinstance(source, DataFrame):
        raise InvalidArgumentTypeError(f"Type of 'source' in merge must be DataFrame; got {type(source).__name__}")
    if condition is None:
        raise InvalidArgumentError("'condition' in merge cannot be None")
    check_condition(condition)


def require_type(value: Any, types: type | tuple[type, ...], what: str) -> None:
    """The builder's setters (``tableName(1)``, ``addColumn("a", 1)``, ``property("k", 1)``): a ``TypeError``."""
    if not isinstance(value, types):
        raise InvalidArgumentTypeError(f"{what}; got {value!r} of type {type(value).__name__}")


def require_value(value: Any, types: type | tuple[type, ...], what: str) -> None:
    """``upgradeTableProtocol("abc", 3)``, ``addFeatureSupport(1)``, ``restoreToVersion("0")``: delta-spark's Python
    API raises a ``ValueError`` for these ("readerVersion needs to be an int …")."""
    if not isinstance(value, types):
        raise InvalidArgumentError(f"{what}; got {value!r} of type {type(value).__name__}")
