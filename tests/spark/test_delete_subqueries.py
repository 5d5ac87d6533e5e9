"""DELETE conditions with subqueries, as delta-spark runs them (issue 40, item 2).

Every case deletes from a target whose earlier DELETE left rows marked deleted (DVs in DV mode, rewritten files in
copy-on-write mode), then checks the live rows left against an oracle computed by plain Spark on Parquet copies of
the same live rows: ``all rows EXCEPT ALL the rows where the condition holds``. That is DELETE's own definition (a
row goes where the condition is TRUE; where it is NULL the row stays) and shares nothing with how dvlake filters.
Subqueries read plain temporary views, another Delta table (by path) and the target itself (by path or name).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.errors import DeltaSqlError, InvalidArgumentError, UnsupportedSubqueryError
from dvlake.spark.catalog import register_table, unregister_table
from tests.helpers import table_rows

MODES = {"dv": {"delta.enableDeletionVectors": "true"}, "cow": {"delta.enableDeletionVectors": "false"}}

#: name → condition; ``{t}`` is the target (the outer one is always aliased ``t``), ``{o}`` another Delta table.
SHAPES: dict[str, str] = {
    "exists correlated by alias": "EXISTS (SELECT 1 FROM src_k s WHERE s.k = t.k)",
    "exists correlated unqualified": "EXISTS (SELECT 1 FROM src_kk WHERE kk = k)",
    "exists uncorrelated true": "EXISTS (SELECT 1 FROM src_k WHERE k > 4)",
    "exists uncorrelated false": "EXISTS (SELECT 1 FROM src_k WHERE k > 100)",
    "not exists correlated": "NOT EXISTS (SELECT 1 FROM src_k s WHERE s.k = t.k)",
    "not exists empty source": "NOT EXISTS (SELECT 1 FROM src_empty)",
    "in subquery": "k IN (SELECT k FROM src_k)",
    "not in subquery": "k NOT IN (SELECT k FROM src_k)",
    "not in with a null": "k NOT IN (SELECT k FROM src_null)",
    "not in empty": "k NOT IN (SELECT k FROM src_empty)",
    "scalar": "v > (SELECT max(k) * 5 FROM src_k)",
    "scalar null": "v > (SELECT max(k) FROM src_empty)",
    "nested": "EXISTS (SELECT 1 FROM src_k s WHERE s.k = t.k AND s.k IN (SELECT k FROM {o}))",
    "several": "EXISTS (SELECT 1 FROM src_k s WHERE s.k = t.k) OR v > (SELECT max(w) FROM {o})",
    "with plain conjuncts": "p = 1 AND k IN (SELECT k FROM {o}) AND v < 30",
    "not and plain": "NOT (k IN (SELECT k FROM src_k)) AND id > 10 OR id = 4",
    "other delta table": "k IN (SELECT k FROM {o} WHERE w > 1)",
    "self avg": "v > (SELECT avg(v) FROM {t})",
    "self correlated": "EXISTS (SELECT 1 FROM {t} b WHERE b.id = t.id + 1)",
    "self in": "id IN (SELECT id + 2 FROM {t} WHERE v < 20)",
}


def _target_rows() -> list[tuple]:
    return [(i, None if i % 11 == 0 else i % 7, (i * 37) % 50, i % 3) for i in range(60)]


def _views(spark: SparkSession) -> None:
    spark.createDataFrame([(1,), (3,), (5,)], "k long").createOrReplaceTempView("src_k")
    spark.createDataFrame([(1,), (3,)], "kk long").createOrReplaceTempView("src_kk")
    spark.createDataFrame([(1,), (None,)], "k long").createOrReplaceTempView("src_null")
    spark.createDataFrame([], "k long").createOrReplaceTempView("src_empty")


def _build(spark: SparkSession, root: str, mode: str, partitioned: bool) -> tuple[str, str]:
    """The target (after a first DELETE, so live rows differ from the files' rows) and the other Delta table."""
    target, other = os.path.join(root, "target"), os.path.join(root, "other")
    df = spark.createDataFrame(_target_rows(), "id long, k long, v long, p int").repartition(4)
    dvlake.write(df, target, properties=MODES[mode], partitionBy=["p"] if partitioned else None)
    dvlake.write(spark.createDataFrame([(2, 1), (3, 2), (4, 3), (None, 4)], "k long, w long"), other,
                 properties=MODES[mode])
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` WHERE id % 5 = 0")
    return target, other


_PRISTINE: dict[tuple[str, bool], tuple[str, str, str]] = {}
#: oracle view → the pristine target's live rows (each test's target is a byte copy of it)
_LIVE: dict[str, list[tuple]] = {}


def _make(spark: SparkSession, root: str, mode: str, partitioned: bool) -> tuple[str, str, str]:
    """A fresh copy of the (mode, layout) target, the other Delta table, and the oracle's view of the target's live
    rows. Each pre-image is built once per run (writing tables costs seconds on a shared machine) and copied."""
    _views(spark)
    key = (mode, partitioned)
    if key not in _PRISTINE:
        base = tempfile.mkdtemp(prefix=f"dvlake_subq_{mode}_{int(partitioned)}_")
        target, other = _build(spark, base, mode, partitioned)
        view = f"oracle_t_{mode}_{int(partitioned)}"
        _parquet_copy(spark, dvlake.read(spark, target), os.path.join(base, "oracle_t"), view)
        _parquet_copy(spark, dvlake.read(spark, other), os.path.join(base, "oracle_o"), "oracle_o")
        _PRISTINE[key] = (target, other, view)
        _LIVE[view] = table_rows(spark, target)
    target, other, view = _PRISTINE[key]
    copy = os.path.join(root, "target")
    shutil.copytree(target, copy)
    return copy, other, view


def _parquet_copy(spark: SparkSession, df: DataFrame, path: str, view: str) -> None:
    df.write.mode("overwrite").parquet(path)
    spark.read.parquet(path).createOrReplaceTempView(view)


def _expected(spark: SparkSession, oracle: str, condition: str) -> list[tuple]:
    """The live rows a DELETE of ``condition`` leaves, by plain Spark on Parquet copies of the live rows."""
    text = condition.format(t=oracle, o="oracle_o")
    kept = spark.sql(f"SELECT * FROM {oracle} EXCEPT ALL SELECT * FROM {oracle} AS t WHERE {text}")
    return sorted(tuple(r) for r in kept.collect())


def _last_commit(path: str) -> dict:
    log = os.path.join(path, "_delta_log")
    last = sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1]
    with open(os.path.join(log, last)) as f:
        actions = [json.loads(line) for line in f]
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


def _version(path: str) -> int:
    return max(int(n.split(".")[0]) for n in os.listdir(os.path.join(path, "_delta_log")) if n.endswith(".json"))


def _check(spark: SparkSession, made: tuple[str, str, str], condition: str, run: Callable[[str], object]) -> None:
    target, _, oracle = made
    before = _LIVE[oracle]
    expected = _expected(spark, oracle, condition)
    version = _version(target)
    run(condition)
    assert table_rows(spark, target) == expected
    deleted = len(before) - len(expected)
    if deleted:
        info = _last_commit(target)
        assert info["operation"] == "DELETE"
        assert info["operationMetrics"]["numDeletedRows"] == str(deleted)
    else:
        assert _version(target) == version  # nothing deleted: nothing committed (delta-spark's commitIfNeeded)


@pytest.fixture
def named() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        unregister_table(SparkSession.getActiveSession(), name)  # type: ignore[arg-type]


#: Every shape runs on the multi-file DV target. The shapes also run on the partitioned DV target: pruning by a plain
#: partition conjunct beside a subquery, and one of each kind (correlated, null semantics, self-reference, negation).
#: Which rows a subquery condition selects does not depend on the mode (only the final write does), so copy-on-write
#: runs the shapes whose write differs: rows of a correlated match rewritten, nothing deleted (no commit), the
#: target rewritten while its own subquery reads it, another Delta table read, and a pruned partition rewritten.
PARTITIONED_SHAPES = ("with plain conjuncts", "not and plain", "exists correlated by alias", "not in with a null",
                      "self avg", "self correlated")
COW_SHAPES = {False: ("exists correlated by alias", "not in with a null", "self correlated", "other delta table"),
              True: ("with plain conjuncts",)}
BY_PATH = [pytest.param(shape, mode, partitioned, id=f"{shape}-{mode}-{'partitioned' if partitioned else 'multi-file'}")
           for shape in SHAPES for mode in MODES for partitioned in (False, True)
           if (not partitioned or shape in PARTITIONED_SHAPES) and (mode == "dv" or shape in COW_SHAPES[partitioned])]


@pytest.mark.parametrize(("shape", "mode", "partitioned"), BY_PATH)
def test_sql_delete_by_path(spark: SparkSession, tmp_path, shape: str, mode: str, partitioned: bool) -> None:
    made = _make(spark, str(tmp_path), mode, partitioned)
    delta = {"t": f"delta.`{made[0]}`", "o": f"delta.`{made[1]}`"}
    _check(spark, made, SHAPES[shape],
           lambda c: dvlake.sql(spark, f"DELETE FROM delta.`{made[0]}` AS t WHERE {c.format(**delta)}"))


@pytest.mark.parametrize(("shape", "mode"), [(shape, "dv") for shape in ("exists correlated by alias", "self avg",
                                                                         "self correlated", "not in with a null")]
                         + [("self correlated", "cow")])
def test_sql_delete_by_catalog_name(spark: SparkSession, tmp_path, named: list[str], shape: str, mode: str) -> None:
    made = _make(spark, str(tmp_path), mode, partitioned=False)
    name = f"subq_target_{mode}"
    register_table(spark, name, made[0])
    named.append(name)
    _check(spark, made, SHAPES[shape],
           lambda c: dvlake.sql(spark, f"DELETE FROM {name} AS t WHERE {c.format(t=name, o=f'delta.`{made[1]}`')}"))


@pytest.mark.parametrize(("shape", "mode"), [(shape, "dv") for shape in ("exists correlated unqualified",
                                                                         "not exists empty source", "not in subquery",
                                                                         "scalar", "not and plain")]
                         + [("not and plain", "cow")])
def test_python_api_string_condition(spark: SparkSession, tmp_path, shape: str, mode: str) -> None:
    """``DeltaTable.delete("…")`` with subqueries over tables Spark reads itself (temporary views)."""
    made = _make(spark, str(tmp_path), mode, partitioned=True)
    _check(spark, made, SHAPES[shape], lambda c: DeltaTable.forPath(spark, made[0]).delete(c))


_COLUMNS: dict[str, tuple[str, Callable[[DataFrame], object]]] = {
    "isin": ("k IN (SELECT k FROM src_k)", lambda src: F.col("k").isin(src)),
    "scalar": ("v > (SELECT max(k) * 5 FROM src_k)", lambda src: F.col("v") > src.select(F.max("k") * 5).scalar()),
    "exists": ("EXISTS (SELECT 1 FROM src_k WHERE k > 4)", lambda src: src.where(F.col("k") > 4).exists()),
}


@pytest.mark.parametrize(("kind", "mode"), [(kind, "dv") for kind in _COLUMNS] + [("isin", "cow")])
def test_python_api_column_condition(spark: SparkSession, tmp_path, kind: str, mode: str) -> None:
    """A Column holding a subquery (PySpark 4's ``isin(DataFrame)``, ``scalar()``, ``exists()``) runs too."""
    made = _make(spark, str(tmp_path), mode, partitioned=False)
    text, column = _COLUMNS[kind]
    _check(spark, made, text, lambda _: DeltaTable.forPath(spark, made[0]).delete(column(spark.table("src_k"))))


def test_correlated_exists_deletes_only_the_matching_rows(spark: SparkSession, tmp_path) -> None:
    """The old bug: a correlated EXISTS deleted every row. Exactly the rows whose k is in the source go (written out
    here; copy-on-write's twin is test_sql_delete_by_path[exists correlated by alias-cow-multi-file])."""
    target, _, _ = _make(spark, str(tmp_path), "dv", partitioned=False)
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` AS a WHERE EXISTS (SELECT 1 FROM src_k s WHERE s.k = a.k)")
    live = [r for r in _target_rows() if r[0] % 5 != 0]
    assert table_rows(spark, target) == sorted(r for r in live if r[1] not in (1, 3, 5))


def test_self_average_is_over_the_live_rows_at_the_commands_snapshot(spark: SparkSession, tmp_path) -> None:
    """With DVs the files still hold deleted rows, so the average must be over the live ones (copy-on-write files hold
    live rows only; its self-reading DELETE is test_sql_delete_by_path[self correlated-cow-multi-file])."""
    target, _, _ = _make(spark, str(tmp_path), "dv", partitioned=True)
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` WHERE v >= 40")
    live = [r for r in _target_rows() if r[0] % 5 != 0 and r[2] < 40]
    avg = sum(r[2] for r in live) / len(live)
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` WHERE v > (SELECT avg(v) FROM delta.`{target}`)")
    assert table_rows(spark, target) == sorted(r for r in live if r[2] <= avg)
    all_rows_avg = sum(r[2] for r in _target_rows()) / 60
    assert avg != all_rows_avg  # the files' rows would give another average


def test_not_in_nulls(spark: SparkSession, tmp_path) -> None:
    """``x NOT IN (subquery)``: a NULL in the subquery deletes nothing; an empty subquery deletes every row, NULL x
    included; over a subquery without NULLs a NULL x stays. (Copy-on-write's nothing-deleted case:
    test_sql_delete_by_path[not in with a null-cow-multi-file].)"""
    target, _, _ = _make(spark, str(tmp_path), "dv", partitioned=False)
    before = table_rows(spark, target)
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` WHERE k NOT IN (SELECT k FROM src_null)")
    assert table_rows(spark, target) == before
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` WHERE k NOT IN (SELECT k FROM src_k)")
    assert table_rows(spark, target) == sorted(r for r in before if r[1] is None or r[1] in (1, 3, 5))
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` WHERE k NOT IN (SELECT k FROM src_empty)")
    assert table_rows(spark, target) == []


@pytest.mark.parametrize("mode", list(MODES))
def test_deleted_rows_reach_the_change_feed(spark: SparkSession, tmp_path, mode: str) -> None:
    props = {**MODES[mode], "delta.enableChangeDataFeed": "true"}
    target = str(tmp_path / "cdf")
    dvlake.write(spark.createDataFrame(_target_rows(), "id long, k long, v long, p int").repartition(3), target,
                 properties=props)
    _views(spark)
    dvlake.sql(spark, f"DELETE FROM delta.`{target}` AS t WHERE EXISTS (SELECT 1 FROM src_k s WHERE s.k = t.k)")
    changes = dvlake.read_changes(spark, target, startingVersion=1, endingVersion=1)
    got = sorted((r.id, r._change_type) for r in changes.collect())
    assert got == sorted((r[0], "delete") for r in _target_rows() if r[1] in (1, 3, 5))


def test_a_subquery_conjunct_prunes_no_file(spark: SparkSession, tmp_path) -> None:
    """Only plain conjuncts prune: a file is never skipped for a subquery's sake, and the read set covers every file."""
    from dvlake.commands.dml.delete import DeleteCommand
    from dvlake.log.condition import Condition
    from dvlake.log.snapshot import Snapshot

    target, _, _ = _make(spark, str(tmp_path), "dv", partitioned=True)
    snapshot = Snapshot.load(target)
    n = len(snapshot.add_files())
    for text, files in [("k IN (SELECT k FROM src_k)", n), ("p = 1 AND k IN (SELECT k FROM src_k)", None),
                        ("p = 1 OR k IN (SELECT k FROM src_k)", n), ("k = (SELECT max(k) FROM src_k)", n)]:
        prepared = DeleteCommand(spark, Condition.of(text)).prepare(snapshot)
        assert prepared.reads_every_file
        if files is not None:
            assert len(prepared.candidates) == files, text
        else:
            assert {a.partition_values["p"] for a in prepared.candidates} == {"1"}


def test_update_and_merge_keep_refusing_subqueries(spark: SparkSession, tmp_path) -> None:
    target, _, _ = _make(spark, str(tmp_path), "dv", partitioned=False)
    before = table_rows(spark, target)
    with pytest.raises(UnsupportedSubqueryError) as err:
        dvlake.sql(spark, f"UPDATE delta.`{target}` t SET v = 0 WHERE EXISTS (SELECT 1 FROM src_k s WHERE s.k = t.k)")
    assert err.value.error_class == "DELTA_UNSUPPORTED_SUBQUERY"
    with pytest.raises(UnsupportedSubqueryError):
        DeltaTable.forPath(spark, target).update("k IN (SELECT k FROM src_k)", {"v": "0"})
    src = spark.createDataFrame([(1, 100)], "id long, v long").alias("s")
    with pytest.raises(UnsupportedSubqueryError):
        (DeltaTable.forPath(spark, target).alias("t").merge(src, "t.id = s.id")
         .whenMatchedDelete("t.k IN (SELECT k FROM src_k)").execute())
    assert table_rows(spark, target) == before


def test_python_api_refuses_a_subquery_over_a_delta_table(spark: SparkSession, tmp_path, named: list[str]) -> None:
    """Spark cannot read a Delta table by itself: the API's text naming one in a subquery is a typed error before
    anything is read (SQL's DELETE reads it with dvlake instead); an unresolvable subquery is Spark's class."""
    target, other, _ = _make(spark, str(tmp_path), "dv", partitioned=False)
    register_table(spark, "subq_other", other)
    named.append("subq_other")
    before = table_rows(spark, target)
    for text in [f"k IN (SELECT k FROM delta.`{other}`)", "EXISTS (SELECT 1 FROM subq_other o WHERE o.k = k)"]:
        with pytest.raises(DeltaSqlError, match="run it as SQL"):
            DeltaTable.forPath(spark, target).delete(text)
    with pytest.raises(InvalidArgumentError) as err:
        dvlake.sql(spark, f"DELETE FROM delta.`{target}` t WHERE t.k IN (SELECT nope FROM delta.`{other}`)")
    assert err.value.error_class == "UNRESOLVED_COLUMN.WITH_SUGGESTION"
    assert table_rows(spark, target) == before
