"""How a constraint's expression is named in delta-spark's violation message (Spark's ``Expression.sql``) and which
columns' values the message lists."""

from __future__ import annotations

import pytest

from dvlake.log.actions import Metadata
from dvlake.log.constraints import all_checks, non_deterministic_call, property_key, referenced_columns, spark_sql


@pytest.mark.parametrize(("text", "expected"), [
    ("temp < 10 and zone < 'g'", "((temp < 10) AND (zone < 'g'))"),
    ("length(zone) < 10", "(LENGTH(zone) < 10)"),
    ("probe.depth[0] < 100", "(probe.depth[0] < 100)"),
    ("zone <> 'x' or temp is not null", "((NOT (zone = 'x')) OR (temp IS NOT NULL))"),
    ("`odd name` in (1, 2)", "(`odd name` IN (1, 2))"),
    ("(((temp)))", "temp"),
    ("temp > -40 AND -temp < 3", "((temp > -40) AND ((- temp) < 3))"),
])
def test_expressions_print_as_spark_prints_them(text, expected):
    assert spark_sql(text) == expected


def test_text_sqlglot_cannot_read_is_kept_as_written():
    assert spark_sql("temp >>>< 3") == "temp >>>< 3"


def test_referenced_columns_are_sorted_dotted_and_unique():
    assert referenced_columns("zone = 'a' OR probe.depth > temp OR zone = 'b'") == ["probe.depth", "temp", "zone"]


def test_non_deterministic_calls_are_found():
    assert non_deterministic_call("rand() < 0.5") is not None
    assert non_deterministic_call("temp < 0.5") is None


def test_checks_come_from_properties_then_invariants():
    schema = ('{"type":"struct","fields":[{"name":"temp","type":"double","nullable":true,"metadata":'
              '{"delta.invariants":"{\\"expression\\":{\\"expression\\":\\"temp < 90\\"}}"}}]}')
    md = Metadata(id="x", schema_string=schema, configuration={"delta.constraints.warm": "temp > 0", "other": "1"})
    assert [(c.name, c.text) for c in all_checks(md)] == [("warm", "temp > 0"), ("EXPRESSION((temp < 90))", "temp < 90")]
    assert property_key("Warm") == "delta.constraints.warm"
