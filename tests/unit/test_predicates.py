"""Pure pruning logic over a parsed Condition: stats skipping and partition evaluation, without Spark.

The property tests build random files (rows → Delta stats) and random conditions (the language of
``condition_language``), evaluate the condition on the rows with Spark's semantics and check that
pruning never drops a file holding a matching row (and is exact on partitions when it says so).
``test_pruning_soundness`` does the same over float, decimal and truncated-string edges.
"""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvlake.errors import InvalidArgumentError
from dvlake.log.condition import Condition
from dvlake.log.predicates import FileFacts, prune
from dvlake.log.schema import column_types
from tests.unit.condition_language import INTS, PROPERTY, STRS, leaves, predicates, render, stats_json, truth

# --- random files and their Delta stats -----------------------------------------------------------

TYPES = {"a": "long", "s": "string"}
ROWS = st.fixed_dictionaries({"a": st.one_of(st.none(), INTS), "s": st.one_of(st.none(), STRS)})
FILES = st.lists(st.lists(ROWS, min_size=1, max_size=6), min_size=1, max_size=6)


def keep_mask(text: str, files: list[list[dict[str, Any]]]) -> list[bool]:
    stats = pa.array([stats_json(rows, TYPES) for rows in files], pa.string())
    facts = FileFacts(stats, [], [() for _ in files], TYPES, {"a": "a", "s": "s"})
    return list(prune(Condition.parse(text), facts).keep)


@PROPERTY
@given(FILES, predicates(st.one_of(leaves("a", INTS), leaves("s", STRS))))
def test_stats_skipping_never_drops_a_file_with_a_matching_row(files: list[list[dict[str, Any]]], pred: Any) -> None:
    text = render(pred)
    keep = keep_mask(text, files)
    for i, rows in enumerate(files):
        if any(truth(pred, r, TYPES) is True for r in rows):
            assert keep[i], f"file {i} holds a row matching {text!r} but was pruned; rows {rows}"


@PROPERTY
@given(st.lists(st.one_of(st.none(), INTS), min_size=1, max_size=8), predicates(leaves("p", INTS)))
def test_partition_evaluation_is_sound_and_exact_when_decided(values: list[int | None], pred: Any) -> None:
    text = render(pred)
    result = prune(Condition.parse(text), FileFacts(None, ["p"], [(v,) for v in values], {"p": "long"}, {}))
    for i, v in enumerate(values):
        matches = truth(pred, {"p": v}) is True
        if matches:
            assert result.keep[i], f"partition p={v} satisfies {text!r} but was pruned"
        if result.exact:
            assert bool(result.keep[i]) == matches, f"p={v}: exact mask {result.keep[i]} but {text!r} is {matches}"


# --- timestamps: stats truncated to milliseconds, literals in the session time zone --------------

ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata"]
INSTANTS = st.integers(0, 4_000_000).map(lambda us: dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us * 997))


def _ms_floor(t: dt.datetime) -> str:
    return t.replace(microsecond=t.microsecond // 1000 * 1000).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@PROPERTY
@given(st.lists(st.lists(INSTANTS, min_size=1, max_size=5), min_size=1, max_size=5), INSTANTS,
       st.sampled_from(["=", "<", "<=", ">", ">="]), st.sampled_from(ZONES))
def test_timestamp_stats_and_session_zone_literals(files: list[list[dt.datetime]], literal: dt.datetime, op: str,
                                                   zone: str) -> None:
    local = literal.astimezone(zoneinfo.ZoneInfo(zone)).replace(tzinfo=None)
    text = f"ts {op} TIMESTAMP'{local.isoformat(sep=' ')}'"
    stats = pa.array([json.dumps({"numRecords": len(f), "minValues": {"ts": _ms_floor(min(f))},
                                  "maxValues": {"ts": _ms_floor(max(f))}, "nullCount": {"ts": 0}}) for f in files])
    facts = FileFacts(stats, [], [() for _ in files], {"ts": "timestamp"}, {"ts": "ts"}, zone)
    keep = prune(Condition.parse(text), facts).keep
    compare = {"=": lambda v: v == literal, "<": lambda v: v < literal, "<=": lambda v: v <= literal,
               ">": lambda v: v > literal, ">=": lambda v: v >= literal}[op]
    for i, f in enumerate(files):
        if any(compare(v) for v in f):
            assert keep[i], f"file {i} {f} holds a row matching {text!r} in {zone} but was pruned"


def test_timestamp_max_is_a_floor_of_the_true_max() -> None:
    stats = pa.array(['{"numRecords": 1, "minValues": {"ts": "2024-01-01T00:16:39.123Z"}, '
                      '"maxValues": {"ts": "2024-01-01T00:16:39.123Z"}, "nullCount": {"ts": 0}}'])
    facts = FileFacts(stats, [], [()], {"ts": "timestamp"}, {"ts": "ts"})
    assert prune(Condition.parse("ts > TIMESTAMP'2024-01-01 00:16:39.1234'"), facts).keep[0]
    assert not prune(Condition.parse("ts > TIMESTAMP'2024-01-01 00:16:39.124'"), facts).keep[0]


def test_truncated_string_max_is_only_a_prefix() -> None:
    stats = pa.array(['{"numRecords": 2, "minValues": {"s": "abc"}, "maxValues": {"s": "abd"}, "nullCount": {"s": 0}}'])
    facts = FileFacts(stats, [], [()], {"s": "string"}, {"s": "s"})
    assert prune(Condition.parse("s = 'abdzzz'"), facts).keep[0]  # the true max may be "abdzzzz…"
    assert not prune(Condition.parse("s = 'abe'"), facts).keep[0]


def test_float_max_says_nothing_about_nan() -> None:
    stats = pa.array(['{"numRecords": 2, "minValues": {"f": 1.0}, "maxValues": {"f": 2.0}, "nullCount": {"f": 0}}'])
    facts = FileFacts(stats, [], [()], {"f": "double"}, {"f": "f"})
    assert prune(Condition.parse("f > 5"), facts).keep[0]  # a NaN row matches f > 5 in Spark
    assert not prune(Condition.parse("f < 0.5"), facts).keep[0]


# --- the reproductions of the conditions issue (pruning half; Spark half in tests/spark) ----------


def _issue_files() -> FileFacts:
    """8 files: partition p = id // 1000 (two files each), v = id * 7 % 1000 with its true bounds."""
    rows, stats = [], []
    for f in range(8):
        ids = range(f * 500, f * 500 + 500)
        vs = [i * 7 % 1000 for i in ids]
        rows.append((f // 2,))
        stats.append(json.dumps({"numRecords": 500, "minValues": {"id": min(ids), "v": min(vs)},
                                 "maxValues": {"id": max(ids), "v": max(vs)}, "nullCount": {"id": 0, "v": 0}}))
    return FileFacts(pa.array(stats), ["p"], rows, {"id": "long", "v": "long", "p": "long", "note": "string"},
                     {"id": "id", "v": "v"})


@pytest.mark.parametrize("text, must_keep", [
    ("id = 5 OR v = 3 AND id = 3999", [0]),
    ("p = 0 OR v = 7 AND p = 3", [0, 1, 6]),
    ("p = 1 AND v < 10 OR p = 2", [2, 3, 4, 5]),
    ("v = 7 -- AND p = 2\n OR p = 1", [0, 1, 2, 3, 4, 5, 6, 7]),
    ("p = 1 AND hash(*) % 2 = 0", [2, 3]),
    ("x_and_y > 3 OR p = 3", [0, 1, 2, 3, 4, 5, 6, 7]),
    ("a /* AND p = 2 */ = 1 OR p = 0", [0, 1, 2, 3, 4, 5, 6, 7]),
    ("IDENTIFIER('v') > 500", [0, 1, 2, 3, 4, 5, 6, 7]),
])
def test_issue_reproductions_keep_every_file_with_a_match(text: str, must_keep: list[int]) -> None:
    keep = prune(Condition.parse(text), _issue_files()).keep
    assert all(keep[i] for i in must_keep), f"{text!r} pruned a file that holds matches: {list(keep)}"


def test_star_and_unknown_functions_are_never_partition_only() -> None:
    assert not Condition.parse("p = 1 AND hash(*) % 2 = 1").references_only({"p"})
    assert not Condition.parse("p = 1 AND my_udf(p)").references_only({"p"})
    assert not Condition.parse("p = 1 AND rand() < 0.5").references_only({"p"})
    assert not Condition.parse("p IN (SELECT p FROM other)").references_only({"p"})
    assert Condition.parse("p = 1 OR substring(p, 1, 1) = 'x'").references_only({"p"})
    assert Condition.parse("t.p = 1", alias="t").references_only({"p"})


def test_star_arguments_are_spelled_as_the_table_columns() -> None:
    c = Condition.parse("p = 1 AND hash(*) % 2 = 0 AND a * b > 1 AND struct(t.*) IS NOT NULL", alias="t")
    assert c.spark_text(["a", "b", "p"]) == ("p = 1 AND hash(`a`, `b`, `p`) % 2 = 0 AND a * b > 1 AND "
                                             "struct(`t`.`a`, `t`.`b`, `t`.`p`) IS NOT NULL")
    assert Condition.parse("EXISTS (SELECT * FROM s)").spark_text(["a"]) == "EXISTS (SELECT * FROM s)"


def test_statements_are_refused_as_conditions() -> None:
    with pytest.raises(InvalidArgumentError, match="2 statements"):
        Condition.parse("id = 1; DROP TABLE x")
    with pytest.raises(InvalidArgumentError, match="empty"):
        Condition.parse("  ")


def test_doubled_quotes_are_one_quote() -> None:
    c = Condition.parse("note = 'it''s'")
    assert c.spark_text(["note"]) == "note = 'it''s'"  # the user's text reaches Spark as written
    stats = pa.array(['{"numRecords": 1, "minValues": {"note": "it\'s"}, "maxValues": {"note": "it\'s"}}'])
    assert prune(c, FileFacts(stats, [], [()], {"note": "string"}, {"note": "note"})).keep[0]


def test_unparseable_stats_skip_nothing() -> None:
    stats = pa.array(['{"numRecords": 1, "minValues": {"a": "not a number"}}', None], pa.string())
    facts = FileFacts(stats, [], [(), ()], {"a": "long"}, {"a": "a"})
    assert list(prune(Condition.parse("a = 3"), facts).keep) == [True, True]


# --- Spark's comparison semantics (audit of the visitor: each case once pruned rows Spark matches) -----


def _partitions(delta_type: str, values: list[Any], text: str) -> Any:
    return prune(Condition.parse(text), FileFacts(None, ["p"], [(v,) for v in values], {"p": delta_type}, {}))


def _one_file(delta_type: str, lo: Any, hi: Any, text: str, nulls: int = 0, rows: int = 2) -> bool:
    stats = pa.array([json.dumps({"numRecords": rows, "minValues": {"c": lo}, "maxValues": {"c": hi},
                                  "nullCount": {"c": nulls}})])
    return bool(prune(Condition.parse(text), FileFacts(stats, [], [()], {"c": delta_type}, {"c": "c"})).keep[0])


def test_double_partition_and_decimal_literal_compare_as_doubles() -> None:
    # Spark casts the decimal literal 0.1 to double: p = 0.1 holds for the partition p=0.1
    result = _partitions("double", [0.1, 0.2, None], "p = 0.1")
    assert result.keep[0]
    if result.exact:
        assert list(result.keep) == [True, False, False]
    assert _partitions("double", [0.30000000000000004], "p > 0.3").keep[0]


def test_nan_partition_is_above_every_number_and_equal_to_itself() -> None:
    nan = float("nan")
    for text, expected in [("p > 5", [True, True, False, False]), ("p >= 1e0 OR p < 0", [True, True, False, False]),
                        ("p <= 5", [False, False, True, False]), ("p BETWEEN 0 AND 10", [False, False, True, False]),
                        ("p IN (1, 2)", [False, False, True, False])]:
        result = _partitions("double", [nan, nan, 1.0, None], text)
        assert all(result.keep[i] for i, t in enumerate(expected) if t), f"{text!r} pruned a NaN partition: {result.keep}"
        if result.exact:
            assert list(result.keep) == expected, text


def test_bigint_and_decimal_literal_compare_exactly() -> None:
    # Spark widens both to decimal: 2 < 2.0000000000000001 is true (not 2.0 < 2.0)
    assert _one_file("long", 2, 5, "c < 2.0000000000000001")
    assert _one_file("long", 2, 5, "c <= 1.99999999999999999 OR c = 2")
    assert _one_file("long", 2, 5, "c BETWEEN 4.5 AND 4.99999999999999999 OR c > 4.99999999999999999")
    assert not _one_file("long", 2, 5, "c < 1.99999999999999999")  # no integer in [2, 5] is below it
    assert not _one_file("long", 2, 5, "c = 2.5")


def test_float_column_stats_are_float32_values() -> None:
    # a float column's value 0.7f is 0.699999988 as a double, and Spark compares it as a double with 0.7;
    # Delta's stats write it as 0.7
    assert _one_file("float", 0.7, 0.7, "c < 0.7")
    assert _one_file("float", 0.7, 0.7, "c <= 0.69999999")
    result = _partitions("float", [0.7, 0.1], "p < 0.7")  # the partition value "0.7" is 0.7f: true in Spark
    assert result.keep[0]
    result = _partitions("float", [0.7, 0.1], "p = 0.1")  # 0.1f = 0.1 is false in Spark
    assert not result.exact or not result.keep[1]


def test_dates_beyond_four_digit_years_in_stats_are_not_compared_as_text() -> None:
    assert _one_file("date", "2020-01-01", "+10000-01-01", "c > DATE'2024-01-01'")
    assert _one_file("date", "-0001-01-01", "2020-01-01", "c < DATE'0001-01-01'")
    assert not _one_file("date", "2020-01-01", "2020-12-31", "c > DATE'2024-01-01'")


def test_double_quoted_text_is_not_taken_for_a_string() -> None:
    # with spark.sql.ansi.doubleQuotedIdentifiers "b" names a column, so the visitor cannot read it as a value
    result = _partitions("string", ["a", "b"], 'p = "b"')
    assert not result.exact
    assert list(result.keep) == [True, True]
    assert list(_partitions("string", ["a", "b"], "p = 'b'").keep) == [False, True]


def test_double_widened_from_float_keeps_float_stats_semantics() -> None:
    # type widening float -> double rewrites no file: older stats still print float32 values (0.7f as 0.7)
    schema = {"type": "struct", "fields": [{"name": "c", "type": "double", "nullable": True, "metadata": {
        "delta.typeChanges": [{"fromType": "float", "toType": "double"}]}}]}
    delta_type = column_types(schema)["c"]
    assert _one_file(delta_type, 0.7, 0.7, "c < 0.7")
    assert column_types({"type": "struct", "fields": [{"name": "c", "type": "double", "nullable": True,
                                                       "metadata": {}}]})["c"] == "double"


def test_char_columns_are_left_to_spark() -> None:
    # CHAR(5) stores 'ab   ' and Spark pads the literal: p = 'ab' holds there, though 'ab   ' != 'ab' as text
    schema = {"type": "struct", "fields": [{"name": "p", "type": "string", "nullable": True,
                                            "metadata": {"__CHAR_VARCHAR_TYPE_STRING": "char(5)"}}]}
    result = _partitions(column_types(schema)["p"], ["ab   ", "cd   "], "p = 'ab'")
    assert list(result.keep) == [True, True] and not result.exact
    assert _one_file(column_types(schema)["p"], "ab   ", "ab   ", "c = 'ab'")  # stats hold padded values too
