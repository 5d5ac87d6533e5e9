"""Conditions read and change exactly the rows Spark's own filter selects (the conditions issue).

The table is the issue's: 4,000 rows in 8 files, partition ``p = id / 1000``, ``v = id * 7 % 1000``,
a ``note`` with quotes in it, a microsecond ``ts`` and a column named ``x_and_y``. The oracle is
Spark filtering the table's unpruned rows with the same text; every case is a condition that once
read or deleted the wrong rows. The SQL forms (MERGE, INSERT … REPLACE WHERE, UPDATE, DELETE) must hand
Spark the user's own text. Random conditions run over that table, over a second one with nulls, dates,
doubles with NaN, quoted strings and deletion vectors in three session time zones (also as SQL DELETE
and UPDATE), and over a delta-spark-written table of ../shared/testdata (read only).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.errors import InvalidArgumentError
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS

CASES = [
    "id = 5 OR v = 3 AND id = 3999",
    "p = 0 OR v = 7 AND p = 3",
    "p = 1 AND v < 10 OR p = 2",
    "v = 7 -- AND p = 2\n OR p = 1",
    "note = 'it''s' AND p = 1",
    "note <> 'it''s' AND p = 1",
    "p = 1 AND hash(*) % 2 = 0",
    "p = 2 AND hash(*) % 2 = 1",
    "ts > TIMESTAMP'2024-01-01 00:16:39.8734'",
    "x_and_y > 3990 OR p = 0 AND v < 3",
    "v /* AND p = 2 */ = 7 OR p = 3",
    "IDENTIFIER('v') > 990 AND p = 0",
    "p = 3 OR 1 = 0",
    "1 = 0",
]


def _rows(spark: SparkSession) -> DataFrame:
    return (spark.range(4000)
            .withColumn("p", (F.col("id") / 1000).cast("int"))
            .withColumn("v", F.col("id") * 7 % 1000)
            .withColumn("note", F.when(F.col("id") % 50 == 7, F.lit("it's")).otherwise(F.concat(F.lit("n"), F.col("id"))))
            .withColumn("ts", F.timestamp_micros(F.lit(1704067200000000) + F.col("id") * 250000 + 123456))
            .withColumn("x_and_y", F.col("id")))


@pytest.fixture(scope="module")
def source(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("conditions") / "t")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    dvlake.write(_rows(spark).repartition(8, "p", (F.col("id") % 2)), path, properties=DV_PROPS, partitionBy="p")
    yield path


@pytest.fixture
def table(source: str, tmp_path: Path) -> str:
    dst = str(tmp_path / "t")
    shutil.copytree(source, dst)
    return dst


def _ids(df: DataFrame) -> list[int]:
    return sorted(r[0] for r in df.select("id").collect())


def _expected(spark: SparkSession, path: str, condition: str) -> list[int]:
    """Spark's own filter over every live row (no pruning anywhere)."""
    return _ids(dvlake.read(spark, path).filter(condition))


def _read_and_expected(spark: SparkSession, path: str, condition: str,
                       columns: tuple[str, ...] = ("id",)) -> tuple[list[tuple], list[tuple]]:
    """(dvlake's read with ``condition``, Spark's own filter over every live row), both as sorted tuples of
    ``columns``, read as one Spark job (the union of the two, each row tagged with its side)."""
    side = F.lit(0).alias("_side")
    got = dvlake.read(spark, path, condition=condition).select(side, *columns)
    want = dvlake.read(spark, path).filter(condition).select(F.lit(1).alias("_side"), *columns)
    both = got.unionAll(want).collect()
    return (sorted(tuple(r[1:]) for r in both if r[0] == 0), sorted(tuple(r[1:]) for r in both if r[0] == 1))


def _before_and_chosen(spark: SparkSession, path: str, condition: str) -> tuple[list[int], set[int]]:
    """(every live id, the ids Spark's own filter with ``condition`` keeps), from one read: the condition is
    evaluated per row beside its id, and a row is chosen where it is true (as ``filter`` keeps it; null is not)."""
    got = dvlake.read(spark, path).select("id", F.expr(condition).alias("_chosen")).collect()
    return sorted(r[0] for r in got), {r[0] for r in got if r[1] is True}


@pytest.mark.parametrize("condition", CASES)
def test_read_returns_exactly_the_matching_rows(spark: SparkSession, source: str, condition: str) -> None:
    got, expected = _read_and_expected(spark, source, condition)
    assert got == expected


@pytest.mark.parametrize("condition", CASES)
def test_delete_removes_exactly_the_matching_rows(spark: SparkSession, table: str, condition: str) -> None:
    before, doomed = _before_and_chosen(spark, table, condition)
    DeltaTable.forPath(spark, table).delete(condition)
    assert _ids(dvlake.read(spark, table)) == [i for i in before if i not in doomed]


def test_sql_delete_and_update_keep_doubled_quotes(spark: SparkSession, table: str) -> None:
    target = f"delta.`{table}`"
    quoted = _expected(spark, table, "note = 'it''s' AND p = 1")
    assert len(quoted) == 20
    dvlake.sql(spark, f"UPDATE {target} SET note = 'that''s' WHERE note = 'it''s' AND p = 1")
    assert _ids(dvlake.read(spark, table).filter("note = 'that''s'")) == quoted
    others = _expected(spark, table, "note <> 'that''s' AND p = 1")
    dvlake.sql(spark, f"DELETE FROM {target} t WHERE t.note <> 'that''s' AND t.p = 1")
    assert _ids(dvlake.read(spark, table).filter("p = 1")) == quoted
    assert not set(others) & set(_ids(dvlake.read(spark, table)))


# Literals Spark and sqlglot read differently: a doubled quote inside a double-quoted literal is one quote for
# Spark and two adjacent literals for sqlglot (CONCAT('say ', 'hi', '') = "say hi"); such text must reach Spark as written.
SAY_HI = '"say ""hi"""'
LATER = "TIMESTAMP'2030-01-01 00:00:00'"


def _frozen(spark: SparkSession, path: str) -> DataFrame:
    """The table's rows now, detached from its files (the pre-image an oracle reads after the table changes)."""
    df = dvlake.read(spark, path)
    return spark.createDataFrame(df.collect(), df.schema)


def _rows_of(df: DataFrame) -> list[tuple]:
    return sorted((tuple(r) for r in df.select("id", "p", "v", "note", "ts", "x_and_y").collect()), key=lambda r: r[0])


def test_sql_merge_keeps_quoted_text_in_on_clauses_set_and_insert(spark: SparkSession, table: str) -> None:
    pre = _frozen(spark, table)
    pre.createOrReplaceTempView("cond_pre")
    source = (pre.filter("p = 1").select("id", "note")
              .union(spark.range(4000, 4010).select("id", F.when(F.col("id") % 2 == 0, F.lit('say "hi"'))
                                                            .otherwise(F.lit("it's")).alias("note"))))
    source = spark.createDataFrame(source.collect(), source.schema)
    source.createOrReplaceTempView("cond_src")
    on = "t.id = s.id AND t.note = 'it''s'"
    dvlake.sql(spark, f"""MERGE INTO delta.`{table}` t USING cond_src s
        ON {on}
        WHEN MATCHED AND t.note <> 'it''s' THEN DELETE
        WHEN MATCHED THEN UPDATE SET note = {SAY_HI}, v = -1
        WHEN NOT MATCHED AND s.note = {SAY_HI}
            THEN INSERT (id, p, v, note, ts, x_and_y) VALUES (s.id, 9, 0, 'it''s', {LATER}, s.id)
        WHEN NOT MATCHED BY SOURCE AND t.p = 2 AND t.note = 'it''s' THEN DELETE""")
    # delta-spark's MERGE semantics spelled as a plain Spark query over the pre-image: first matching clause wins
    expected = spark.sql(f"""
        SELECT t.id, t.p, IF(m.id IS NULL, t.v, -1) AS v, IF(m.id IS NULL, t.note, {SAY_HI}) AS note, t.ts, t.x_and_y
        FROM cond_pre t LEFT JOIN (SELECT t.id FROM cond_pre t JOIN cond_src s ON {on}) m ON t.id = m.id
        WHERE NOT (m.id IS NOT NULL AND t.note <> 'it''s') AND NOT (m.id IS NULL AND t.p = 2 AND t.note = 'it''s')
        UNION ALL
        SELECT s.id, 9, 0, 'it''s', {LATER}, s.id FROM cond_src s
        WHERE NOT EXISTS (SELECT 1 FROM cond_pre t WHERE {on}) AND s.note = {SAY_HI}""")
    want = _rows_of(expected)
    assert sum(1 for r in want if r[3] == 'say "hi"') == 20 and sum(1 for r in want if r[2] == 0 and r[1] == 9) == 5
    assert _rows_of(dvlake.read(spark, table)) == want


def test_sql_insert_and_replace_where_keep_quoted_text(spark: SparkSession, table: str) -> None:
    pre = _frozen(spark, table)
    target = f"delta.`{table}`"
    dvlake.sql(spark, f"INSERT INTO {target} VALUES (5000, 9, 1, 'it''s', {LATER}, 5000), "
                      f"(5001, 9, 2, {SAY_HI}, {LATER}, 5001)")
    assert [(r.id, r.note) for r in dvlake.read(spark, table).filter("p = 9").orderBy("id").collect()] == [
        (5000, "it's"), (5001, 'say "hi"')]
    dvlake.sql(spark, f"DELETE FROM {target} WHERE p = 9")
    replaced = pre.filter("note = 'it''s'")
    assert replaced.count() == 80
    dvlake.sql(spark, f"INSERT INTO {target} REPLACE WHERE note = 'it''s' "
                      f"SELECT id, p, v + 1 AS v, note, ts, x_and_y FROM VALUES {_values(replaced.collect())} "
                      "AS s(id, p, v, note, ts, x_and_y)")
    want = _rows_of(pre.filter("NOT (note = 'it''s')").union(replaced.withColumn("v", F.col("v") + 1)))
    assert _rows_of(dvlake.read(spark, table)) == want


def _values(rows: list) -> str:
    """Rows as a VALUES list (quotes doubled, timestamps as UTC literals)."""
    def lit(x: object) -> str:
        if isinstance(x, str):
            return "'" + x.replace("'", "''") + "'"
        if hasattr(x, "isoformat"):
            return f"TIMESTAMP'{x.isoformat(sep=' ')}'"
        return str(x)
    return ", ".join("(" + ", ".join(lit(v) for v in r) + ")" for r in rows)


def test_update_with_hash_star_changes_only_matching_rows(spark: SparkSession, table: str) -> None:
    condition = "p = 2 AND hash(*) % 2 = 1"
    chosen = _expected(spark, table, condition)
    DeltaTable.forPath(spark, table).update(condition, {"v": "-1"})
    assert _ids(dvlake.read(spark, table).filter("v = -1")) == chosen


def test_literals_are_read_in_the_session_time_zone(spark: SparkSession, table: str) -> None:
    with _session_zone(spark, "America/Los_Angeles"):
        one = "ts = TIMESTAMP'2023-12-31 16:00:05.123456'"
        window = "ts >= TIMESTAMP'2023-12-31 16:10:00' AND ts < TIMESTAMP'2023-12-31 16:15:00'"
        assert _ids(dvlake.read(spark, table, condition=one)) == _expected(spark, table, one) == [20]
        expected = _expected(spark, table, window)
        assert len(expected) == 1200
        assert _ids(dvlake.read(spark, table, condition=window)) == expected
        DeltaTable.forPath(spark, table).delete(window)
        assert not set(expected) & set(_ids(dvlake.read(spark, table)))
        assert len(_ids(dvlake.read(spark, table))) == 4000 - 1200


def test_replace_where_with_or_and_leaves_no_duplicates(dspark: SparkSession, table: str) -> None:
    spark = dspark
    condition = "p = 0 OR v = 7 AND p = 3"
    replaced = dvlake.read(spark, table).filter(condition).withColumn("note", F.lit("new"))
    replaced.write.format("parquet").mode("overwrite").save(table + "_staging")  # detach from the table's files
    new_rows = spark.read.parquet(table + "_staging")
    new_rows.write.format("delta").mode("overwrite").option("replaceWhere", condition).save(table)
    ids = _ids(dvlake.read(spark, table))
    assert len(ids) == len(set(ids)) == 4000
    assert _ids(dvlake.read(spark, table).filter("note = 'new'")) == _expected(spark, table, condition)


@pytest.mark.parametrize("call", ["read", "delete", "update"])
def test_several_statements_are_refused_everywhere(spark: SparkSession, source: str, call: str) -> None:
    condition = "id = 1; DROP TABLE x"
    with pytest.raises(InvalidArgumentError, match="statements"):
        if call == "read":
            dvlake.read(spark, source, condition=condition).collect()
        elif call == "delete":
            DeltaTable.forPath(spark, source).delete(condition)
        else:
            DeltaTable.forPath(spark, source).update(condition, {"v": "0"})


def _set_timestamp_bounds(path: str, column: str, low: str, high: str) -> None:
    """Give the one add action of version 0 timestamp bounds as delta-spark writes them: milliseconds, truncated.

    (dvlake's writer keeps none for Spark's default INT96 timestamps, and rounds a max up where it keeps one.)
    """
    log = Path(path) / "_delta_log" / "00000000000000000000.json"
    lines = log.read_text().splitlines()
    adds = 0
    for k, line in enumerate(lines):
        action = json.loads(line)
        if "add" in action:
            stats = json.loads(action["add"]["stats"])
            stats.setdefault("minValues", {})[column] = low
            stats.setdefault("maxValues", {})[column] = high
            action["add"]["stats"] = json.dumps(stats)
            lines[k] = json.dumps(action)
            adds += 1
    assert adds == 1
    log.write_text("\n".join(lines) + "\n")


def test_timestamp_max_truncated_to_milliseconds_is_a_floor(spark: SparkSession, tmp_path: Path) -> None:
    """delta-spark's timestamp stats are truncated to milliseconds: the row at 00:00:02.123456 lives in a file whose
    max says 00:00:02.123, and ``ts > 00:00:02.1234`` must still read it."""
    path = str(tmp_path / "ms")
    rows = spark.range(3).select("id", F.timestamp_micros(F.lit(1704067200123456) + F.col("id") * 1000000).alias("ts"))
    dvlake.write(rows.coalesce(1), path, properties=DV_PROPS)
    _set_timestamp_bounds(path, "ts", "2024-01-01T00:00:00.123Z", "2024-01-01T00:00:02.123Z")
    assert _ids(dvlake.read(spark, path, condition="ts > TIMESTAMP'2024-01-01 00:00:02.124'")) == []
    for condition in ["ts > TIMESTAMP'2024-01-01 00:00:02.1234'", "ts = TIMESTAMP'2024-01-01 00:00:02.123456'",
                      "ts >= TIMESTAMP'2024-01-01 00:00:02.123001'", "ts IN (TIMESTAMP'2024-01-01 00:00:02.123456')"]:
        assert _ids(dvlake.read(spark, path, condition=condition)) == _expected(spark, path, condition) == [2], condition
    DeltaTable.forPath(spark, path).delete("ts > TIMESTAMP'2024-01-01 00:00:02.1234'")
    assert _ids(dvlake.read(spark, path)) == [0, 1]


def _files_by_partition(path: str) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for add in Snapshot.load(path).add_files():
        out.setdefault(str(add.partition_values["p"]), set()).add(add.path)
    return out


def test_optimize_filters_each_hold_even_after_a_line_comment(spark: SparkSession, table: str) -> None:
    dvlake.write(_rows(spark).filter("id % 1000 = 1").coalesce(1), table, mode="append")  # a small file in each partition
    before = _files_by_partition(table)
    assert all(len(before[p]) > 1 for p in "0123"), before
    rows = _ids(dvlake.read(spark, table))
    DeltaTable.forPath(spark, table).optimize().where("p >= 1 -- the later partitions").where("p < 3").executeCompaction()
    after = _files_by_partition(table)
    assert after["0"] == before["0"] and after["3"] == before["3"]
    assert len(after["1"]) == len(after["2"]) == 1 and not after["1"] & before["1"]
    assert _ids(dvlake.read(spark, table)) == rows
    with pytest.raises(InvalidArgumentError, match="parentheses"):
        DeltaTable.forPath(spark, table).optimize().where("p = 1) OR (true")


# --- random conditions: dvlake's pruning + Spark's filter equal Spark's filter alone ---------------

EXAMPLES = int(os.environ.get("DVLAKE_PROPERTY_EXAMPLES", "0")) or 25
PROPERTY = settings(max_examples=EXAMPLES, derandomize=os.environ.get("DVLAKE_PROPERTY_RANDOM") != "1", deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

_INT = st.integers(-5, 4100).map(str)
_LEAF = st.one_of(
    st.builds(lambda c, op, n: f"{c} {op} {n}", st.sampled_from(["id", "v", "x_and_y"]),
              st.sampled_from(["=", "<", "<=", ">", ">=", "<>", "<=>"]), _INT),
    st.builds(lambda op, n: f"p {op} {n}", st.sampled_from(["=", "<", ">=", "<>"]), st.integers(-1, 4).map(str)),
    st.builds(lambda ns: f"id IN ({', '.join(ns)})", st.lists(_INT, min_size=1, max_size=4)),
    st.builds(lambda a, b: f"v BETWEEN {a} AND {b}", _INT, _INT),
    st.sampled_from(["note = 'it''s'", "note <> 'it''s'", "note IN ('n5', 'it''s')", "note > 'n3'", "note IS NULL",
                     "v IS NOT NULL", "hash(*) % 2 = 0", "coalesce(v, 0) > 500", "CAST(v AS string) = '7'",
                     "ts > TIMESTAMP'2024-01-01 00:16:39.8734'", "ts <= TIMESTAMP'2024-01-01 00:05:00.123456'",
                     "ts = TIMESTAMP'2024-01-01 00:00:05.123456'", "DATE(ts) = DATE'2024-01-01'", "1 = 0", "true"]),
)
_JOIN = st.sampled_from([" AND ", " OR ", " /* AND */ OR ", " -- OR p = 1\n AND "])


@st.composite
def conditions(draw: st.DrawFn, leaf: st.SearchStrategy[str] = _LEAF, depth: int = 0) -> str:
    if depth >= 2 or draw(st.booleans()):
        text = draw(leaf)
        return f"NOT ({text})" if draw(st.integers(0, 5)) == 0 else text
    parts = [draw(conditions(leaf, depth + 1)) for _ in range(draw(st.integers(2, 3)))]
    text = parts[0]
    for part in parts[1:]:
        text += draw(_JOIN) + part
    return f"({text})" if draw(st.booleans()) else text


@pytest.mark.slow  # the longest of the random-condition searches (make test-quick keeps the other three)
@PROPERTY
@given(condition=conditions())
def test_random_conditions_read_the_rows_spark_selects(spark: SparkSession, source: str, condition: str) -> None:
    got, expected = _read_and_expected(spark, source, condition)
    assert got == expected, condition


@settings(max_examples=max(EXAMPLES // 5, 4), derandomize=os.environ.get("DVLAKE_PROPERTY_RANDOM") != "1",
          deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(condition=conditions())
def test_random_conditions_delete_exactly_the_rows_spark_selects(spark: SparkSession, source: str, tmp_path: Path,
                                                                 condition: str) -> None:
    table = str(tmp_path / f"t{abs(hash(condition))}")
    shutil.copytree(source, table)
    before, doomed = _before_and_chosen(spark, table, condition)
    DeltaTable.forPath(spark, table).delete(condition)
    after = _ids(dvlake.read(spark, table))
    assert after == [i for i in before if i not in doomed], condition


# --- comparisons at Spark's coercion edges (pruning once decided these unlike Spark) -------------------

EDGE_CASES = {
    "double-partition-decimal": "d = 0.1",            # Spark casts 0.1 to double: the partition d=0.1 matches
    "nan-partition-above-all": "d > 5",                # NaN is above every number
    "double-above-its-decimal": "d > 0.1",             # 0.1 as double is not above itself
    "negative-zero": "d = 0",                          # -0.0 = 0
    "float-stats-minimum": "f < 0.7",                  # 0.7f is 0.699999988 as a double; stats print 0.7
    "bigint-vs-long-decimal": "id < 2.0000000000000001",   # compared exactly: 2 matches
    "bigint-between-decimals": "id > 1.9999999999999999 AND id < 3",
}
_EDGE_D = [0.1, 0.30000000000000004, float("nan"), None, -0.0, 1.0]


@pytest.fixture(scope="module")
def edges(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """12 rows, one file per double partition d (NaN, null, -0.0 among them), a float f of 0.7f everywhere."""
    path = str(tmp_path_factory.mktemp("edges") / "t")
    df = spark.createDataFrame([(i, _EDGE_D[i % 6], 0.7) for i in range(12)], "id long, d double, f float")
    dvlake.write(df.repartition(1), path, properties=DV_PROPS, partitionBy="d")
    return path


@pytest.mark.parametrize("condition", list(EDGE_CASES.values()), ids=list(EDGE_CASES))
def test_edge_comparisons_read_and_delete_the_rows_spark_selects(spark: SparkSession, edges: str, tmp_path: Path,
                                                                 condition: str) -> None:
    got, want = _read_and_expected(spark, edges, condition)
    expected = [r[0] for r in want]
    assert expected, f"{condition!r} selects no row: the case tests nothing"
    assert [r[0] for r in got] == expected
    copy = str(tmp_path / "t")
    shutil.copytree(edges, copy)
    DeltaTable.forPath(spark, copy).delete(condition)
    assert _ids(dvlake.read(spark, copy)) == [i for i in range(12) if i not in set(expected)]


# --- nulls, dates, doubles with NaN, quoted strings, deletion vectors and session time zones ----------------

NOTES = ["it's", "a\\b", 'say "hi"', "n1", "n2", "", None]
ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata"]


def _rich_rows(spark: SparkSession) -> DataFrame:
    """600 rows over 10 hours of ``ts``; ``v``, ``d``, ``x`` and ``note`` have nulls, ``x`` has NaN."""
    notes = F.array(*[F.lit(n).cast("string") for n in NOTES])
    return (spark.range(600)
            .withColumn("p", (F.col("id") % 3).cast("int"))
            .withColumn("v", F.when(F.col("id") % 11 == 0, F.lit(None)).otherwise(F.col("id") * 7 % 100))
            .withColumn("d", F.when(F.col("id") % 13 == 0, F.lit(None).cast("date"))
                        .otherwise(F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 60).cast("int"))))
            .withColumn("x", F.when(F.col("id") % 17 == 0, F.lit(float("nan")))
                        .when(F.col("id") % 19 == 0, F.lit(None).cast("double")).otherwise(F.col("id") / 8.0))
            .withColumn("note", F.element_at(notes, (F.col("id") % len(NOTES) + 1).cast("int")))
            .withColumn("ts", F.timestamp_micros(F.lit(1704067200000000) + F.col("id") * 60000000 + 123456)))


@pytest.fixture(scope="module")
def rich(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """18 files with narrow ranges (6 row ranges × 3 partitions), then a DELETE: DVs, so bounds are not tight."""
    path = str(tmp_path_factory.mktemp("rich") / "t")
    with _session_zone(spark, "UTC"), _conf(spark, "spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"):
        dvlake.write(_rich_rows(spark).repartitionByRange(6, "id"), path, properties=DV_PROPS, partitionBy="p")
        DeltaTable.forPath(spark, path).delete("id % 7 = 3")
    snapshot = Snapshot.load(path)
    assert snapshot.dv_count() > 0
    stats = [json.loads(a.stats or "{}") for a in snapshot.add_files()]
    assert all({"ts", "d", "note"} <= set(one.get("maxValues", {})) for one in stats), stats  # the stats prune (x: NaN has none)
    yield path


@contextmanager
def _conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _session_zone(spark: SparkSession, zone: str) -> AbstractContextManager[None]:
    return _conf(spark, "spark.sql.session.timeZone", zone)


def _sql_string(value: str, quote: str = "'") -> str:
    """A Spark SQL literal: backslashes escaped, the quote doubled (Spark 4 reads a doubled quote as one)."""
    return quote + value.replace("\\", "\\\\").replace(quote, quote * 2) + quote


_STRINGS = [n for n in NOTES if n is not None] + ["a", "n", "it", "say"]
_START = dt.datetime(2023, 12, 31, 14)  # 14:00 in Los Angeles and 10 hours past the rows' end in Kolkata, as local times
_MOMENT = st.integers(0, 1800).map(lambda m: f"TIMESTAMP'{_START + dt.timedelta(minutes=m)}'")


def _day(k: int) -> str:
    return f"DATE'{dt.date(2024, 1, 1) + dt.timedelta(days=k)}'"


_RICH_LEAF = st.one_of(
    st.builds(lambda c, op, n: f"{c} {op} {n}", st.sampled_from(["id", "v"]), st.sampled_from(["=", "<", ">=", "<>", "<=>"]),
              st.integers(-5, 605).map(str)),
    st.builds(lambda op, n: f"p {op} {n}", st.sampled_from(["=", "<", ">="]), st.integers(-1, 3).map(str)),
    st.builds(lambda c, n: f"{c} IS {n}NULL", st.sampled_from(["v", "d", "x", "note"]), st.sampled_from(["", "NOT "])),
    st.builds(lambda op, k: f"d {op} {_day(k)}", st.sampled_from(["=", "<", ">", "<=>"]), st.integers(-2, 62)),
    st.builds(lambda a, b: f"d BETWEEN {_day(a)} AND {_day(b)}", st.integers(0, 60), st.integers(0, 60)),
    st.builds(lambda op, n: f"x {op} {n}", st.sampled_from(["=", "<", ">", ">=", "<>"]),
              st.one_of(st.integers(-8, 640).map(lambda k: f"{k / 8}D"),
                        st.just("CAST('NaN' AS DOUBLE)"), st.just("double('NaN')"))),
    st.sampled_from(["isnan(x)", "NOT isnan(x)", "x IS NULL OR isnan(x)", "coalesce(v, -1) < 0", "hash(*) % 3 = 0"]),
    st.builds(lambda op, s, q: f"note {op} {_sql_string(s, q)}", st.sampled_from(["=", "<>", "<", ">=", "<=>"]),
              st.sampled_from(_STRINGS), st.sampled_from(["'", '"'])),
    st.builds(lambda ss: f"note IN ({', '.join(_sql_string(s) for s in ss)})", st.lists(st.sampled_from(_STRINGS), min_size=1,
                                                                                     max_size=3)),
    st.sampled_from([r"note LIKE 'a\\\\%'", r"note = r'a\b'", "note LIKE 'it''%'", "startswith(note, 'say')"]),
    st.builds(lambda op, m: f"ts {op} {m}", st.sampled_from(["<", ">=", ">", "<="]), _MOMENT),
    st.builds(lambda op, k: f"CAST(ts AS DATE) {op} {_day(k)}", st.sampled_from(["=", "<"]), st.integers(-1, 1)),
    st.builds(lambda k: f"ts = TIMESTAMP'{dt.datetime(2024, 1, 1, 0, 0, 0, 123456) + dt.timedelta(minutes=k)}'",
              st.integers(-1, 600)),
)


def _normal(rows: list) -> list[tuple]:
    """Rows as sortable, comparable tuples (NaN is not equal to itself in Python)."""
    def key(x: object) -> object:
        return "NaN" if isinstance(x, float) and math.isnan(x) else x
    return sorted((tuple(key(x) for x in r) for r in rows), key=repr)


@pytest.mark.slow  # the longest of the random-condition searches (make test-quick keeps the other three)
@PROPERTY
@given(condition=conditions(_RICH_LEAF), zone=st.sampled_from(ZONES))
def test_random_conditions_over_nulls_dates_doubles_and_dvs_in_each_zone(spark: SparkSession, rich: str, condition: str,
                                                                          zone: str) -> None:
    with _session_zone(spark, zone):
        got, expected = _read_and_expected(spark, rich, condition)
        assert got == expected, (zone, condition)


@settings(max_examples=max(EXAMPLES // 4, 6), derandomize=os.environ.get("DVLAKE_PROPERTY_RANDOM") != "1",
          deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(condition=conditions(_RICH_LEAF), zone=st.sampled_from(ZONES), statement=st.sampled_from(["DELETE", "UPDATE"]))
def test_random_conditions_sql_delete_and_update_change_exactly_the_rows_spark_selects(
        spark: SparkSession, rich: str, tmp_path: Path, condition: str, zone: str, statement: str) -> None:
    table = str(tmp_path / f"t{abs(hash((condition, zone, statement)))}")
    shutil.copytree(rich, table)
    with _session_zone(spark, zone):
        read = dvlake.read(spark, table).select("*", F.expr(condition).alias("_chosen")).collect()  # Spark's own filter
        before = {r.id: {k: v for k, v in r.asDict().items() if k != "_chosen"} for r in read}
        chosen = {r.id for r in read if r._chosen is True}  # as filter() keeps a row: where the condition is true
        if statement == "DELETE":
            dvlake.sql(spark, f"DELETE FROM delta.`{table}` WHERE {condition}")
            after = _ids(dvlake.read(spark, table))
            assert after == sorted(set(before) - chosen), (zone, condition)  # kept and removed are exact complements
        else:
            dvlake.sql(spark, f"UPDATE delta.`{table}` SET v = -1000, note = 'it''s\\\\' WHERE {condition}")
            want = [r | ({"v": -1000, "note": "it's\\"} if i in chosen else {}) for i, r in before.items()]
            got = [r.asDict() for r in dvlake.read(spark, table).collect()]
            assert _normal([tuple(r.values()) for r in got]) == _normal([tuple(r.values()) for r in want]), (zone, condition)


_TESTDATA_LEAF = st.one_of(
    st.builds(lambda op, n: f"part {op} {n}", st.sampled_from(["=", "<", ">=", "<>"]), st.integers(-1, 10).map(str)),
    st.builds(lambda op, n: f"col1 {op} {n}", st.sampled_from(["=", "<", ">", "<=", "<>"]), st.integers(-2, 52).map(str)),
    st.builds(lambda op, n: f"col2 {op} 'foo{n}'", st.sampled_from(["=", "<", ">=", "<>"]), st.integers(0, 10).map(str)),
    st.sampled_from(["col2 IS NULL", "col1 IS NOT NULL", "col2 LIKE 'foo1%'", "col1 % 10 = part", "hash(*) % 2 = 0",
                     "col1 BETWEEN 10 AND 30", "col1 IN (0, 11, 22, 49)"]),
)


@settings(max_examples=max(EXAMPLES // 3, 8), derandomize=os.environ.get("DVLAKE_PROPERTY_RANDOM") != "1",
          deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(condition=conditions(_TESTDATA_LEAF))
def test_random_conditions_on_a_delta_spark_table(spark: SparkSession, testdata: Path, condition: str) -> None:
    """delta-spark's own stats (column mapping, partition values, DVs), read in place: read only."""
    path = str(testdata / "dv-with-columnmapping")
    got, expected = _read_and_expected(spark, path, condition, ("part", "col1", "col2"))
    assert got == expected, condition
