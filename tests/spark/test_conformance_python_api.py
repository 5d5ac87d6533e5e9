"""The Python API's argument checks and read options, by delta-spark's ``delta.tables`` and ``DeltaOptions`` rules.

Rules checked:

- A condition (``delete``, ``update``, ``merge`` and every merge clause) is a SQL string or a Column; any other type
  is a ``TypeError`` when the method is called.
- ``set`` / ``values`` are required (``None``: ``ValueError`` "cannot be None"), are a ``dict`` (else ``TypeError``)
  with string keys and string-or-Column values (else ``TypeError``). They are checked before the condition, so
  ``update({...})`` with the mapping in the condition's place is a ``ValueError`` (``set`` is missing).
- ``merge(source, condition)``: a ``DataFrame`` source (else ``TypeError``) and a condition (None: ``ValueError``).
- The table builder's setters and the protocol/restore calls check their argument types (see the test's docstring).
- A refused call changes nothing.
- ``readChangeData`` is delta-spark's older name of the ``readChangeFeed`` read option: either reads the change feed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.errors import DvlakeError


def _table(spark: SparkSession, path: str) -> DeltaTable:
    dvlake.write(spark.createDataFrame([("a", 1), ("b", 2)], "key string, value int"), path,
                 properties={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"})
    return DeltaTable.forPath(spark, path)


def _bad_calls(dt: DeltaTable, source: Any) -> list[tuple[str, Callable[[], Any], type[Exception], str]]:
    m = lambda: dt.merge(source, "key = k")  # noqa: E731 - a fresh builder per call
    calls: list[tuple[str, Callable[[], Any], type[Exception], str]] = [
        ("delete(1)", lambda: dt.delete(condition=1), TypeError, "Column or a string"),
        ("update(dict)", lambda: dt.update({"value": "200"}), ValueError, "cannot be None"),
        ("update(condition only)", lambda: dt.update(condition="key = 'a'"), ValueError, "cannot be None"),
        ("update(set=1)", lambda: dt.update(set=1), TypeError, "must be a dict"),
        ("update(1, {})", lambda: dt.update(1, {}), TypeError, "Column or a string"),
        ("update(set value 1)", lambda: dt.update(set={"value": 1}), TypeError, "Values of dict in .* must contain only"),
        ("update(set key 1)", lambda: dt.update(set={1: ""}), TypeError, "Keys of dict in .* must contain only"),
        ("merge(1, …)", lambda: dt.merge(1, "key = k"), TypeError, "must be DataFrame"),
        ("merge(None, …)", lambda: dt.merge(None, "key = k"), ValueError, "cannot be None"),
        ("merge(src, 1)", lambda: dt.merge(source, 1), TypeError, "Column or a string"),
        ("merge(src, None)", lambda: dt.merge(source, None), ValueError, "cannot be None"),
        ("whenMatchedDelete(1)", lambda: m().whenMatchedDelete(1), TypeError, "Column or a string"),
        ("whenMatchedUpdateAll(1)", lambda: m().whenMatchedUpdateAll(1), TypeError, "Column or a string"),
        ("whenNotMatchedInsertAll(1)", lambda: m().whenNotMatchedInsertAll(1), TypeError, "Column or a string"),
        ("whenNotMatchedBySourceDelete(1)", lambda: m().whenNotMatchedBySourceDelete(1), TypeError, "Column or a string"),
    ]
    for name, key in (("whenMatchedUpdate", "set"), ("whenNotMatchedInsert", "values"),
                      ("whenNotMatchedBySourceUpdate", "set")):
        def clause(*args: Any, _name: str = name, **kwargs: Any) -> Any:
            return getattr(m(), _name)(*args, **kwargs)
        calls += [
            (f"{name}(dict)", lambda c=clause: c({"value": "v"}), ValueError, "cannot be None"),
            (f"{name}(1)", lambda c=clause: c(1), ValueError, "cannot be None"),
            (f"{name}(condition only)", lambda c=clause: c(condition="key = 'a'"), ValueError, "cannot be None"),
            (f"{name}(1, dict)", lambda c=clause: c(1, {"value": "v"}), TypeError, "Column or a string"),
            (f"{name}(cond, 1)", lambda c=clause: c("k = 'a'", 1), TypeError, "must be a dict"),
            (f"{name}(value 1)", lambda c=clause, k=key: c(**{k: {"value": 1}}), TypeError, "Values of dict"),
            (f"{name}(key 1)", lambda c=clause, k=key: c(**{k: {1: ""}}), TypeError, "Keys of dict"),
            (f"{name}(swapped)", lambda c=clause, k=key: c(**{k: "k = 'a'", "condition": {"value": 1}}), TypeError,
             "must be a dict"),
        ]
    return calls


def test_bad_arguments_raise_what_delta_spark_raises_and_change_nothing(spark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    dt = _table(spark, path)
    source = spark.createDataFrame([("a", 5)], "k string, v int")
    version = dt.snapshot().version
    for name, call, error, message in _bad_calls(dt, source):
        with pytest.raises(error, match=message) as err:
            call()
        assert isinstance(err.value, DvlakeError), name  # typed, and still the builtin type delta-spark raises
    assert dt.snapshot().version == version


def test_builder_and_protocol_arguments(spark: SparkSession, tmp_path) -> None:
    """The table builder's setters take str names, a str or DataType type, a bool nullable, a StructType or list of
    StructFields, str partition columns and str properties (``TypeError`` otherwise); the protocol and restore calls
    take an int version and a str feature name, a bool truncateHistory (``ValueError`` otherwise)."""
    from pyspark.sql.types import IntegerType, StructField

    builder = DeltaTable.create(spark).location(str(tmp_path / "new"))
    for call in (lambda: builder.tableName(1), lambda: builder.location(1), lambda: builder.comment(1),
                 lambda: builder.addColumn(1, "int"), lambda: builder.addColumn("a", 1),
                 lambda: builder.addColumn("a", "int", comment=1), lambda: builder.addColumn("a", "int", nullable=1),
                 lambda: builder.addColumn("a", "int", generatedAlwaysAs=1), lambda: builder.addColumns(1),
                 lambda: builder.addColumns([StructField("x", IntegerType()), 1]), lambda: builder.partitionedBy(1),
                 lambda: builder.partitionedBy(1, "x"), lambda: builder.partitionedBy([1]),
                 lambda: builder.property(1, "v"), lambda: builder.property("k", 1)):
        with pytest.raises(TypeError):
            call()
    dt = _table(spark, str(tmp_path / "t"))
    for call, message in ((lambda: dt.upgradeTableProtocol("abc", 3), "readerVersion"),
                          (lambda: dt.upgradeTableProtocol([1], 3), "readerVersion"),
                          (lambda: dt.upgradeTableProtocol(1, {}), "writerVersion"),
                          (lambda: dt.addFeatureSupport(12345), "featureName needs to be a string"),
                          (lambda: dt.dropFeatureSupport([]), "featureName needs to be a string"),
                          (lambda: dt.dropFeatureSupport("deletionVectors", 1), "truncateHistory needs to be a boolean"),
                          (lambda: dt.restoreToVersion("0"), "version needs to be an int")):
        with pytest.raises(ValueError, match=message):
            call()
    assert dt.snapshot().version == 0


def test_good_arguments_still_run(spark: SparkSession, tmp_path) -> None:
    dt = _table(spark, str(tmp_path / "t"))
    dt.update(F.col("key") == "a", {"value": F.lit(10)})
    dt.update(set={"value": "value + 1"})
    source = spark.createDataFrame([("a", 5), ("c", 7)], "k string, v int")
    (dt.alias("t").merge(source.alias("s"), F.expr("t.key = s.k"))
     .whenMatchedUpdate(F.col("s.v") > 0, {"value": F.col("s.v")})
     .whenNotMatchedInsert(values={"key": "s.k", "value": "s.v"}).execute())
    assert sorted(tuple(r) for r in dt.toDF().collect()) == [("a", 5), ("b", 3), ("c", 7)]


def test_read_change_data_is_the_change_feed(dspark: SparkSession, tmp_path) -> None:
    path = str(tmp_path / "t")
    dt = _table(dspark, path)
    dt.delete("key = 'a'")
    legacy = dspark.read.format("delta").option("readChangeData", "true").option("startingVersion", 1).load(path)
    current = dspark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(path)
    assert "_change_type" in legacy.columns
    rows = sorted(tuple(r) for r in legacy.select("key", "value", "_change_type").collect())
    assert rows == [("a", 1, "delete")]
    assert rows == sorted(tuple(r) for r in current.select("key", "value", "_change_type").collect())
