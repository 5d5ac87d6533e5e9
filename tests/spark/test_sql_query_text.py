"""A query over Delta tables reaches Spark as the user wrote it (issue 21): only the table references change.

Each query runs twice, once through ``dvlake.sql`` over Delta tables (a path and a catalog name) and once in
plain Spark over parquet copies of the same rows; the answers (or the errors) must agree. sqlglot's own Spark
text changes meaning (a double-quoted literal with ``""`` becomes CONCAT, ``x::int`` a TRY_CAST that returns
NULL where Spark 4 raises, a ``--`` comment holding ``*/`` a broken block comment), so these fail on any
query rebuilt from the tree.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import DeltaSqlError
from dvlake.sql import sql
from tests.spark.catalog_helpers import rows

NOTES = [(1, 'say "hi"', "12"), (2, "it's", "oops"), (3, "back\\slash", "7"), (4, "{braces}", "8"), (5, "tab\there", "9")]
SCHEMA = "id BIGINT, note STRING, x STRING"


@pytest.fixture(scope="module")
def tables(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The same rows as a Delta path, a Delta catalog name and two parquet tables: {placeholder: table text}. Built
    once for the module: the tests only read them (a test that changes a table writes its own)."""
    if importlib.util.find_spec("dvlake.spark.catalog") is None:
        pytest.skip("dvlake.spark.catalog (catalog table names) is not in this build")
    root = tmp_path_factory.mktemp("query-text")
    p, named = str(root / "notes"), str(root / "named")
    df = spark.createDataFrame(NOTES, SCHEMA)
    dvlake.write(df, p)
    dvlake.write(df, named)
    sql(spark, f"CREATE TABLE qt_named USING delta LOCATION '{named}'")
    df.write.format("parquet").saveAsTable("qt_plain_a")
    df.write.format("parquet").saveAsTable("qt_plain_b")
    try:
        yield {"delta": f"delta.`{p}`", "named": "qt_named", "plain_a": "qt_plain_a", "plain_b": "qt_plain_b"}
    finally:
        for name in ("qt_named", "qt_plain_a", "qt_plain_b"):
            spark.sql(f"DROP TABLE IF EXISTS {name}")


QUERIES = {
    "doubled double quote": 'SELECT id FROM <A> WHERE note = "say ""hi"""',
    "doubled single quote": "SELECT id FROM <A> WHERE note = 'it''s'",
    "backslash escapes": "SELECT id, 'a\\tb' AS t FROM <A> WHERE note = 'back\\\\slash' OR note = 'tab\\there'",
    "braces in literals": "SELECT id, '{id}' AS s FROM <A> WHERE note = '{braces}'",
    "cast shorthand": "SELECT id, x::int AS n FROM <A> WHERE id <> 2",
    "comments": "SELECT id -- the key */ not a block\n, /* a {block} */ note FROM <A> a /* trailing */ WHERE a.id > 1",
    "hint": "SELECT /*+ REPARTITION(3) */ id, note FROM <A>",
    "join path and name": "SELECT a.id, b.note FROM <A> a JOIN <B> AS b ON a.id = b.id WHERE b.note <> \"it's\"",
    "unaliased name qualifies its columns": "SELECT <B>.id, <B>.note FROM <B> WHERE <B>.id < 3",
    "database-qualified column": "SELECT default.<B>.id FROM default.<B> WHERE default.<B>.x = '7'",
    "cte": ("WITH c AS (SELECT id, note FROM <A> WHERE note <> 'back\\\\slash') "
            "SELECT c.id, <B>.x FROM c JOIN <B> ON c.id = <B>.id"),
    "subquery": 'SELECT id FROM <A> WHERE id IN (SELECT id FROM <B> WHERE note = "say ""hi""")',
}


def _text(query: str, a: str, b: str) -> str:
    return query.replace("<A>", a).replace("<B>", b)


@pytest.mark.parametrize("shape", list(QUERIES))
def test_query_over_delta_tables_answers_as_plain_spark(spark: SparkSession, tables: dict[str, str], shape: str) -> None:
    query = QUERIES[shape]
    want = spark.sql(_text(query, tables["plain_a"], tables["plain_b"]))
    got = sql(spark, _text(query, tables["delta"], tables["named"]))
    assert rows(got) == rows(want)
    assert rows(want), "the comparison must see rows"
    if shape == "hint":
        assert got.rdd.getNumPartitions() == want.rdd.getNumPartitions() == 3


def test_cast_shorthand_on_a_bad_value_raises_as_in_plain_spark(spark: SparkSession, tables: dict[str, str]) -> None:
    """Spark 4 (ANSI) raises on ``'oops'::int``; a TRY_CAST would answer NULL instead."""
    query = "SELECT id, x::int AS n FROM <A>"
    with pytest.raises(Exception) as plain:
        spark.sql(_text(query, tables["plain_a"], tables["plain_b"])).collect()
    with pytest.raises(type(plain.value)) as ours:
        sql(spark, _text(query, tables["delta"], tables["named"])).collect()
    assert "CAST_INVALID_INPUT" in str(plain.value)
    assert "CAST_INVALID_INPUT" in str(ours.value)


def test_time_travel_suffixes_are_replaced_with_the_reference(spark: SparkSession, tmp_path) -> None:
    p = str(tmp_path / "notes")
    dvlake.write(spark.createDataFrame(NOTES, SCHEMA), p)  # its own table: the DELETE below changes it
    sql(spark, f"DELETE FROM delta.`{p}` WHERE note = 'it''s'")
    old = sql(spark, f"SELECT id FROM delta.`{p}` VERSION AS OF 0 AS v WHERE v.note = \"it's\"")
    assert rows(old) == [(2,)]
    suffix = sql(spark, f"SELECT id FROM delta.`{p}@v0` WHERE note = 'it''s' -- {{v0}}")
    assert rows(suffix) == [(2,)]
    assert rows(sql(spark, f"SELECT id FROM delta.`{p}` WHERE note = 'it''s'")) == []


def test_update_set_subquery_reads_the_users_text(spark: SparkSession, tables: dict[str, str], tmp_path) -> None:
    """UPDATE … SET v = (SELECT … FROM <Delta table>) splices the same way (``""`` inside a double-quoted literal)."""
    target = str(tmp_path / "target")
    dvlake.write(spark.createDataFrame([(1, "")], "id BIGINT, note STRING"), target)
    sql(spark, f'UPDATE delta.`{target}` SET note = (SELECT max(note) FROM qt_named WHERE note = "say ""hi""")')
    assert rows(dvlake.read(spark, target)) == [(1, 'say "hi"')]


def test_an_unreadable_reference_is_a_typed_error(spark: SparkSession, tables: dict[str, str]) -> None:
    """A reference whose text cannot be found is refused, never rebuilt from the tree."""
    from sqlglot import exp

    from dvlake.sqlfront.parse import parse_statement
    from dvlake.sqlfront.refs import run_query

    text = f"SELECT id FROM {tables['delta']}"
    tree = parse_statement(text)
    table = tree.find(exp.Table)
    assert table is not None
    for node in table.walk():  # positions lost, as in a tree that was not parsed from this text
        node.meta.pop("start", None)
        node.meta.pop("end", None)
    with pytest.raises(DeltaSqlError, match="cannot find the text"):
        run_query(spark, tree, text, whole=True)
