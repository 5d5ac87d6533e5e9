"""delta-spark's rules for fitting UPDATE and MERGE values to their columns, one rule per test.

Structs are matched by field name (nested, in arrays and in maps too), nested fields can be assigned one by
one, and atomic values are cast under Spark's store-assignment policy. Each test's docstring states the rule;
expected rows are written out from the rule itself. Writing cases run with deletion vectors and with
copy-on-write (each form once per mode, not every form in every mode); every refusal leaves the table unchanged,
carries delta-spark's (or Spark's) error class and names no internal ``__dvlake_…`` column.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from itertools import product
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.errors import (
    CastInvalidInputError,
    CastOverflowInTableWriteError,
    NestedFieldUpdateError,
    UnsafeAssignmentCastError,
)
from dvlake.log.snapshot import Snapshot
from tests.spark.test_merge_rules import _refused

MODES = pytest.mark.parametrize("dvs", ["true", "false"], ids=["dv", "copy_on_write"])
#: How a value is fitted to its column is resolved before the write and does not depend on the mode, and the write
#: does not depend on the form: each form runs once, one with DVs and the other with copy-on-write.
MODE_FORMS = pytest.mark.parametrize(("dvs", "form"), [("true", "python"), ("false", "sql")],
                                     ids=["dv-python", "copy_on_write-sql"])

# value.a holds two fields of one type in the table's order (x, y): a positional cast would swap them silently
NESTED = "key long, value struct<a:struct<x:int,y:int>,b:string>"
NESTED_ROWS = [(1, ((10, 11), "one")), (2, ((20, 21), "two")), (3, None), (4, ((40, 41), "four"))]
# the same fields, every struct in another order
REORDERED = "key long, value struct<b:string,a:struct<y:int,x:int>>"


def _plain(v: Any) -> Any:
    """Rows as nested tuples, maps as dicts, so whole values compare with ==."""
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def _table(spark: SparkSession, tmp_path, dvs: str, ddl: str, rows: list[tuple], **props: str) -> str:
    path = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame(rows, ddl).repartition(2), path,
                 properties={"delta.enableDeletionVectors": dvs, **props})
    return path


def _by_key(spark: SparkSession, path: str) -> dict[int, Any]:
    """key → the row's other columns (one value, or a tuple of them)."""
    out = {}
    for r in dvlake.read(spark, path).collect():
        rest = _plain(tuple(r)[1:])
        out[r[0]] = rest[0] if len(rest) == 1 else rest
    return out


@contextmanager
def _conf(spark: SparkSession, **settings: str) -> Iterator[None]:
    """Session settings for one block (keys with ``__`` for dots), restored afterwards."""
    keys = {k.replace("__", "."): v for k, v in settings.items()}
    before = {k: spark.conf.get(k, None) for k in keys}
    for k, v in keys.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def _merge_star(spark: SparkSession, path: str, form: str, source_ddl: str, source_rows: list[tuple],
                evolve: bool = False) -> Callable[[], object]:
    """A MERGE with UPDATE SET * and INSERT *, through the Python builder or SQL."""
    source = spark.createDataFrame(source_rows, source_ddl)
    source.createOrReplaceTempView("struct_src")

    def run() -> object:
        if form == "python":
            b = DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key")
            b = b.whenMatchedUpdateAll().whenNotMatchedInsertAll()
            return (b.withSchemaEvolution() if evolve else b).execute()
        evolution = "WITH SCHEMA EVOLUTION " if evolve else ""
        return dvlake.sql(spark, f"MERGE {evolution}INTO delta.`{path}` t USING struct_src s ON t.key = s.key "
                                 "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    return run


# --- structs by name -----------------------------------------------------------------------------------


@MODE_FORMS
def test_star_actions_match_struct_fields_by_name_at_every_depth(spark, tmp_path, dvs, form):
    """Rule: UPDATE SET * and INSERT * assign each column from the source column of the same name, and a struct
    value goes into the column field by field by name (not by position), nested structs too; a NULL source
    struct stays NULL."""
    path = _table(spark, tmp_path, dvs, NESTED, NESTED_ROWS)
    source = [(2, ("TWO", (221, 220))), (3, ("THREE", (331, 330))), (5, ("FIVE", (551, 550))), (6, None)]
    _merge_star(spark, path, form, REORDERED, source)()
    assert _by_key(spark, path) == {1: ((10, 11), "one"), 2: ((220, 221), "TWO"), 3: ((330, 331), "THREE"),
                                    4: ((40, 41), "four"), 5: ((550, 551), "FIVE"), 6: None}


@MODE_FORMS
def test_arrays_and_maps_of_structs_are_matched_by_name(spark, tmp_path, dvs, form):
    """Rule: inside arrays (each element) and map values, structs are matched by field name too, for an explicit
    ``SET t.c = s.c`` as for ``INSERT *``; NULL elements and NULL maps stay NULL."""
    ddl = "key long, items array<struct<x:int,y:int>>, tags map<string,struct<x:int,y:int>>"
    path = _table(spark, tmp_path, dvs, ddl, [(1, [(1, 2)], {"a": (1, 2)}), (2, [(3, 4), (5, 6)], {"b": (3, 4)})])
    source = spark.createDataFrame([(2, [(40, 30), None], {"c": (60, 50)}), (3, [(80, 70)], None)],
                                   "key long, items array<struct<y:int,x:int>>, tags map<string,struct<y:int,x:int>>")
    source.createOrReplaceTempView("struct_src")
    if form == "python":
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key")
         .whenMatchedUpdate(set={"t.items": "s.items", "tags": F.col("s.tags")}).whenNotMatchedInsertAll().execute())
    else:
        dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING struct_src s ON t.key = s.key "
                          "WHEN MATCHED THEN UPDATE SET t.items = s.items, tags = s.tags WHEN NOT MATCHED THEN INSERT *")
    assert _by_key(spark, path) == {1: ([(1, 2)], {"a": (1, 2)}), 2: ([(30, 40), None], {"c": (50, 60)}),
                                    3: ([(70, 80)], None)}


@MODE_FORMS
def test_update_assigns_a_whole_struct_by_field_name(spark, tmp_path, dvs, form):
    """Rule: UPDATE ``SET value = <struct>`` matches the struct's fields to the column's by name, at every depth."""
    path = _table(spark, tmp_path, dvs, NESTED, NESTED_ROWS)
    if form == "python":
        DeltaTable.forPath(spark, path).update("key = 2", {
            "value": F.struct(F.lit("new").alias("b"), F.struct(F.lit(8).alias("y"), F.lit(7).alias("x")).alias("a"))})
    else:
        dvlake.sql(spark, f"UPDATE delta.`{path}` SET value = named_struct('b', 'new', 'a', named_struct('y', 8, 'x', 7)) "
                          "WHERE key = 2")
    assert _by_key(spark, path) == {1: ((10, 11), "one"), 2: ((7, 8), "new"), 3: None, 4: ((40, 41), "four")}


def test_struct_fields_the_column_lacks_or_misses_need_schema_evolution(spark, tmp_path):
    """Rule: without schema evolution a struct value must have exactly the column's fields (by name): an extra
    field would be lost and a missing one is not invented, so either is refused with
    DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION before anything is written (both forms on one table)."""
    path = _table(spark, tmp_path, "true", "key long, value struct<a:int,b:int>", [(1, (1, 2)), (2, (3, 4))])
    values = [("key long, value struct<b:int,a:int,c:int>", [(2, (30, 40, 50))]),
              ("key long, value struct<a:int>", [(2, (30,))])]
    for form, (ddl, rows) in product(("python", "sql"), values):
        _refused(spark, path, UnsafeAssignmentCastError, "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION",
                 _merge_star(spark, path, form, ddl, rows), "All nested columns must match")
    with pytest.raises(UnsafeAssignmentCastError, match="All nested columns must match"):
        DeltaTable.forPath(spark, path).update("key = 1", {"value": "named_struct('a', 1, 'b', 2, 'c', 3)"})


@pytest.mark.parametrize(("how", "dvs"), [("builder", "true"), ("sql_clause", "false"), ("session_conf", "true")],
                         ids=["builder-dv", "sql_clause-copy_on_write", "session_conf-dv"])
def test_schema_evolution_adds_new_nested_fields_and_star_update_keeps_the_others(spark, tmp_path, dvs, how):
    """Rule: with schema evolution (withSchemaEvolution, MERGE WITH SCHEMA EVOLUTION or
    spark.databricks.delta.schema.autoMerge.enabled) a source struct field the column lacks is added to the
    table's struct (after its fields); UPDATE SET * keeps the target's value of a field the source lacks,
    INSERT * leaves it NULL, and rows not touched read NULL for the new field."""
    props = {"delta.columnMapping.mode": "name"} if how == "builder" else {}
    path = _table(spark, tmp_path, dvs, "key long, value struct<a:int,b:int>", [(1, (1, 2)), (2, (3, 4)), (3, None)],
                  **props)
    run = _merge_star(spark, path, "python" if how == "builder" else "sql",
                      "key long, value struct<a:int,c:string>", [(2, (30, "c2")), (3, (50, "c3")), (4, (40, "c4"))],
                      evolve=how != "session_conf")
    if how == "session_conf":
        with _conf(spark, spark__databricks__delta__schema__autoMerge__enabled="true"):
            run()
    else:
        run()
    value = next(f for f in Snapshot.load(path).schema["fields"] if f["name"] == "value")
    assert [f["name"] for f in value["type"]["fields"]] == ["a", "b", "c"]
    if props:  # the new field got a column id and physical name like the others
        assert all("delta.columnMapping.id" in f["metadata"] for f in value["type"]["fields"])
    assert _by_key(spark, path) == {1: (1, 2, None), 2: (30, 4, "c2"), 3: (50, None, "c3"), 4: (40, None, "c4")}


def test_schema_evolution_follows_an_explicit_whole_struct_assignment(spark, tmp_path):
    """Rule: with schema evolution an explicit ``SET t.value = s.value`` brings the source struct's new fields into
    the table too (only assigned source fields count: an unassigned new column is not added); unlike SET *, the
    field the value lacks is NULL, not kept. Without evolution the same MERGE is refused. (DVs; a schema-evolving
    MERGE with copy-on-write: test_schema_evolution_adds_new_nested_fields…[sql_clause-copy_on_write].)"""
    path = _table(spark, tmp_path, "true", "key long, value struct<a:int,b:int>", [(1, (1, 2)), (2, (3, 4))])
    source = spark.createDataFrame([(2, (30, "c2"), 7)], "key long, value struct<a:int,c:string>, extra int")

    def run() -> object:
        return (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.key = s.key")
                .whenMatchedUpdate(set={"t.value": "s.value"}).execute())
    _refused(spark, path, UnsafeAssignmentCastError, "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION", run)
    with _conf(spark, spark__databricks__delta__schema__autoMerge__enabled="true"):
        run()
    assert [f["name"] for f in Snapshot.load(path).schema["fields"]] == ["key", "value"]
    assert _by_key(spark, path) == {1: (1, 2, None), 2: (30, None, "c2")}


# --- nested field assignment --------------------------------------------------------------------------


def test_nested_fields_are_assigned_one_by_one_and_a_null_parent_becomes_a_struct(spark, tmp_path):
    """Rule: ``SET value.a.x = …`` replaces that field only, its siblings at every level are kept; the parent
    is rebuilt as a struct, so a row whose struct was NULL gets a struct with the assigned field set and the
    others NULL (delta-spark rebuilds the struct; it does not keep it NULL). Alias-qualified names work in
    UPDATE and MERGE, and through the Python API as dotted keys. (DVs: the assignment is an expression built before
    the write; copy-on-write writes struct values in the MODE_FORMS tests.)"""
    path = _table(spark, tmp_path, "true", NESTED, NESTED_ROWS)
    dvlake.sql(spark, f"UPDATE delta.`{path}` t SET t.value.a.x = t.value.a.x + 100, value.b = 'changed' "
                      "WHERE key IN (1, 3)")
    DeltaTable.forPath(spark, path).update("key = 4", {"value.a.y": F.lit(-1)})
    assert _by_key(spark, path) == {1: ((110, 11), "changed"), 2: ((20, 21), "two"), 3: ((None, None), "changed"),
                                    4: ((40, -1), "four")}
    spark.createDataFrame([(2, 7), (5, 9)], "key long, n int").createOrReplaceTempView("nested_src")
    dvlake.sql(spark, f"MERGE INTO delta.`{path}` t USING nested_src s ON t.key = s.key "
                      "WHEN MATCHED THEN UPDATE SET t.value.a.y = s.n WHEN NOT MATCHED THEN INSERT (key) VALUES (s.key)")
    assert _by_key(spark, path) == {1: ((110, 11), "changed"), 2: ((20, 7), "two"), 3: ((None, None), "changed"),
                                    4: ((40, -1), "four"), 5: None}


def test_a_field_inside_a_map_or_an_array_or_in_an_insert_list_cannot_be_assigned(spark, tmp_path):
    """Rule: only fields of structs can be assigned one by one; a path through a map or an array is refused with
    DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT, and a MERGE INSERT list names whole columns only
    (DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION), before anything is written."""
    path = _table(spark, tmp_path, "true", "key long, m map<string,int>, items array<struct<x:int>>",
                  [(1, {"k": 1}, [(1,)])])
    _refused(spark, path, NestedFieldUpdateError, "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
             lambda: dvlake.sql(spark, f"UPDATE delta.`{path}` SET m.k = 2"), "StructType")
    _refused(spark, path, NestedFieldUpdateError, "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT",
             lambda: DeltaTable.forPath(spark, path).update(set={"items.x": "2"}), "items")
    nested = _table(spark, tmp_path / "n", "true", NESTED, NESTED_ROWS)
    spark.createDataFrame([(9, 1)], "key long, n int").createOrReplaceTempView("nested_src")
    _refused(spark, nested, NestedFieldUpdateError, "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION",
             lambda: dvlake.sql(spark, f"MERGE INTO delta.`{nested}` t USING nested_src s ON t.key = s.key "
                                       "WHEN NOT MATCHED THEN INSERT (key, value.a.x) VALUES (s.key, s.n)"),
             "`value`.`a`.`x`")


# --- implicit casts ----------------------------------------------------------------------------------


CASTS = "key long, n int, w int, d decimal(5,2)"


@MODE_FORMS
def test_values_are_cast_to_the_column_type_as_ansi_store_assignment(spark, tmp_path, dvs, form):
    """Rule: under spark.sql.storeAssignmentPolicy=ANSI (the default) a value of another type is cast with
    Spark's ANSI cast: text to a number, a wider number to a narrower one (fractions rounded into a decimal
    column), in MERGE SET *, INSERT * and UPDATE alike."""
    path = _table(spark, tmp_path, dvs, CASTS, [(1, 1, 1, Decimal("1.00")), (2, 2, 2, Decimal("2.00"))])
    _merge_star(spark, path, form, "key long, n string, w long, d double",
                [(2, "22", 2200, 3.14159), (3, "-33", 33, 7.5)])()
    if form == "python":
        DeltaTable.forPath(spark, path).update("key = 1", {"n": "'7'", "w": F.lit(5).cast("bigint")})
    else:
        dvlake.sql(spark, f"UPDATE delta.`{path}` SET n = '7', w = CAST(5 AS BIGINT) WHERE key = 1")
    assert _by_key(spark, path) == {1: (7, 5, Decimal("1.00")), 2: (22, 2200, Decimal("3.14")),
                                    3: (-33, 33, Decimal("7.50"))}


@MODES
def test_a_value_that_does_not_fit_fails_the_command_with_spark_and_delta_classes(spark, tmp_path, dvs):
    """Rule: under ANSI store assignment a number too large for its column fails the command with
    DELTA_CAST_OVERFLOW_IN_TABLE_WRITE naming the column (the field, inside a struct), and text that is not a
    number with CAST_INVALID_INPUT; nothing is committed."""
    path = _table(spark, tmp_path, dvs, "key long, n int, s struct<v:int>", [(1, 1, (1,)), (2, 2, (2,))])
    big = spark.createDataFrame([(2, 2 ** 40, (2 ** 40,))], "key long, n long, s struct<v:long>")
    merge = (DeltaTable.forPath(spark, path).alias("t").merge(big.alias("s"), "t.key = s.key")
             .whenMatchedUpdate(set={"n": "s.n"}))
    _refused(spark, path, CastOverflowInTableWriteError, "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE", merge.execute,
             "`n`", "BIGINT")
    _refused(spark, path, CastOverflowInTableWriteError, "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE",
             lambda: DeltaTable.forPath(spark, path).update("key = 1", {"s": F.struct(F.lit(2 ** 40).alias("v"))}),
             "`v`")
    _refused(spark, path, CastInvalidInputError, "CAST_INVALID_INPUT",
             lambda: dvlake.sql(spark, f"UPDATE delta.`{path}` SET n = 'abc' WHERE key = 2"), "`n`")
    # inside an array or a map one element that does not fit fails the whole command (no NULL element left behind)
    nested = _table(spark, tmp_path / "nested", dvs, "key long, a array<int>, m map<string,int>",
                    [(1, [1], {"k": 1})])
    for column, value in [("a", f"array(1, {2 ** 40})"), ("m", f"map('k', 1, 'big', {2 ** 40})")]:
        _refused(spark, nested, CastOverflowInTableWriteError, "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE",
                 lambda column=column, value=value: DeltaTable.forPath(spark, nested).update(set={column: value}),
                 f"`{column}`")
    DeltaTable.forPath(spark, nested).update(set={"a": "array(CAST(2 AS BIGINT), NULL)", "m": "map('j', 3L)"})
    assert _by_key(spark, nested) == {1: ([2, None], {"j": 3})}


def test_casts_the_policy_does_not_allow_are_refused_before_reading(spark, tmp_path):
    """Rule: a cast Spark's ANSI cast does not do (a date into an int column) is refused with Spark's
    DATATYPE_MISMATCH class; spark.sql.storeAssignmentPolicy=STRICT allows only up-casts (int into bigint, not
    bigint into int: CANNOT_UP_CAST_DATATYPE); LEGACY casts as Spark's legacy cast (a too-large number wraps
    around), which dvlake can only do with spark.sql.ansi.enabled=false, and refuses otherwise."""
    path = _table(spark, tmp_path, "true", "key long, n int, w bigint", [(1, 1, 1), (2, 2, 2)])
    dt = DeltaTable.forPath(spark, path)
    _refused(spark, path, UnsafeAssignmentCastError, "DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION",
             lambda: dt.update(set={"n": "DATE'2024-01-02'"}), "'n'")
    with _conf(spark, spark__sql__storeAssignmentPolicy="STRICT"):
        _refused(spark, path, UnsafeAssignmentCastError, "CANNOT_UP_CAST_DATATYPE",
                 lambda: dt.update(set={"n": "CAST(3 AS BIGINT)"}), "'n'")
        dt.update("key = 1", {"w": "CAST(30 AS INT)"})
    with _conf(spark, spark__sql__storeAssignmentPolicy="LEGACY"):
        _refused(spark, path, UnsafeAssignmentCastError, "DVLAKE_LEGACY_STORE_ASSIGNMENT_UNSUPPORTED",
                 lambda: dt.update(set={"n": "CAST(3 AS BIGINT)"}), "spark.sql.ansi.enabled")
        with _conf(spark, spark__sql__ansi__enabled="false"):
            dt.update("key = 2", {"n": f"CAST({2 ** 32 + 5} AS BIGINT)"})
    assert _by_key(spark, path) == {1: (1, 30), 2: (5, 2)}
