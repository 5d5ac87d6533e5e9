"""The native scan (DVs applied inside Spark's Parquet reader, jvm/) against the pure-Python path, shape by shape.

Every case reads one table both ways and compares the rows (a differential test: the native reader's row
indexes, batch mapping and row projection have nowhere to hide). The conformance corpus runs on both paths
too (tests/spark/test_conformance.py, ``scan_path`` fixture).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pyroaring
import pytest
from pyspark.sql import DataFrame, SparkSession

import dvlake
from dvlake import DeltaTable, native_jar
from dvlake.dv import roaring
from dvlake.dv.descriptor import DeletionVectorDescriptor, dv_file_name
from dvlake.dv.store import dv_bytes
from dvlake.errors import CorruptDeletionVectorError, DeletionVectorIntegrityError, DeletionVectorNotFoundError
from dvlake.spark import native
from tests.conftest import REPO_ROOT, require_native_jar
from tests.helpers import DV_PROPS
from tests.reliability.tables import LIVE, build_dv_table, data_files, dv_files, edit_dv_adds, read_actions


@pytest.fixture(autouse=True)
def jar_built(spark: SparkSession) -> Iterator[None]:
    require_native_jar(spark.version)
    yield
    spark.conf.unset(native.SETTING)


def _both(spark: SparkSession, read: object) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], str]:
    """Rows of ``read()`` on the native and the pure-Python path, and the native physical plan."""
    spark.conf.set(native.SETTING, "true")
    df: DataFrame = read()  # type: ignore[operator]
    plan = df._jdf.queryExecution().executedPlan().toString()
    fast = sorted((tuple(r) for r in df.collect()), key=repr)
    spark.conf.set(native.SETTING, "false")
    slow = sorted((tuple(r) for r in read().collect()), key=repr)  # type: ignore[operator]
    return fast, slow, plan


def _converted(spark: SparkSession, path: str, rows: int, row_group: int, files: int = 2) -> str:
    """A table of ``files`` Parquet files with small row groups (pyarrow), converted in place, DVs on. Ids are
    sorted and pages small (no dictionary, a page checked every 128 values) with a column index: filters on ``id``
    skip row groups and pages inside them."""
    os.makedirs(path)
    for f in range(files):
        ids = pa.array(range(f * rows, (f + 1) * rows), pa.int64())
        table = pa.table({"id": ids, "v": pa.compute.multiply(ids, 3), "s": pa.array([f"s{i}" for i in ids.to_pylist()])})
        pq.write_table(table, os.path.join(path, f"part-{f}.parquet"), row_group_size=row_group, write_page_index=True,
                       data_page_size=1024, write_batch_size=128, use_dictionary=False)
    DeltaTable.convertToDelta(spark, f"parquet.`{path}`")
    dvlake.sql(spark, f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    return path


def test_many_row_groups_splits_and_pushed_filters(spark: SparkSession, tmp_path: Path) -> None:
    path = _converted(spark, str(tmp_path / "rg"), rows=50_000, row_group=3_000)
    DeltaTable.forPath(spark, path).delete("id % 11 = 0 OR (id > 20000 AND id < 26000) OR id = 99999")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "65536")  # several splits per file
    try:
        for query in (lambda: dvlake.read(spark, path),
                      lambda: dvlake.read(spark, path).filter("id > 41000 AND id < 47000"),  # row groups and pages skipped
                      lambda: dvlake.read(spark, path).filter("s = 's43210'"),
                      lambda: dvlake.read(spark, path).selectExpr("sum(v)", "count(*)")):
            fast, slow, plan = _both(spark, query)
            assert fast == slow
            assert "DvlakeParquet" in plan
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")


def _row_index_counts(spark: SparkSession) -> dict[str, int]:
    """How this JVM's native reads found row indexes so far (``RowGroups.counts()``; local mode: one JVM)."""
    text = spark._jvm.io.dvlake.spark.RowGroups.counts()  # type: ignore[union-attr]
    return {k: int(v == "true") if v in ("true", "false") else int(v) for k, v in (kv.split("=") for kv in text.split())}


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in before}


# row groups of 3,000 rows in two files of 20,000 (ids 0..39,999 in order): rows at every row group's edges, each
# file's first and last rows, a run inside one group, one row group entirely
_EDGES = sorted({0, 19_999, 20_000, 39_999} | {f * 20_000 + g * 3_000 + d for f in (0, 1) for g in range(1, 7)
                                                 for d in (-1, 0, 1)})
_DELETE = (f"id IN ({', '.join(map(str, _EDGES))}) OR id % 13 = 0 OR (id > 5000 AND id < 5300)"
           " OR (id >= 30000 AND id < 33000)")
_FILTERS = [None, "id > 26100 AND id < 26500",                       # inside one row group: its other pages skipped
            "id BETWEEN 2990 AND 3010 OR id BETWEEN 20990 AND 21010",  # across row group edges, pages skipped around
            "(id BETWEEN 1000 AND 1100) OR (id BETWEEN 2500 AND 3500) OR id > 39900",  # gaps inside row groups
            "id >= 29990 AND id < 33010"]                              # around the row group that is all deleted


@pytest.fixture(scope="module")
def edges_table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The table ``_DELETE`` and ``_FILTERS`` are made for (two converted files of 20,000 ids in row groups of 3,000,
    then ``_DELETE``): built once for the tests that only read it."""
    path = _converted(spark, str(tmp_path_factory.mktemp("edges") / "rgt"), rows=20_000, row_group=3_000)
    DeltaTable.forPath(spark, path).delete(_DELETE)
    return path


def _live(condition: str | None) -> list[int]:
    """The ids the table keeps, computed in Python (the DELETE and the filter above, evaluated by hand)."""
    edges = set(_EDGES)
    keep = [i for i in range(40_000) if not (i in edges or i % 13 == 0 or 5000 < i < 5300 or 30000 <= i < 33000)]
    ranges = {None: lambda i: True, _FILTERS[1]: lambda i: 26100 < i < 26500,
              _FILTERS[2]: lambda i: 2990 <= i <= 3010 or 20990 <= i <= 21010,
              _FILTERS[3]: lambda i: 1000 <= i <= 1100 or 2500 <= i <= 3500 or i > 39900,
              _FILTERS[4]: lambda i: 29990 <= i < 33010}
    return [i for i in keep if ranges[condition](i)]


@pytest.mark.parametrize("batch", [64, 777, 4096])
def test_row_group_tracking_gives_the_exact_rows_and_row_indexes(spark: SparkSession, edges_table: str,
                                                                 batch: int) -> None:
    """Row indexes from each batch's row group (RowGroups.java), not Spark's row-index column: several row groups,
    batch sizes that do and do not divide them, splits across row groups, pushed filters that skip row groups and
    pages (the column index), DVs at every row group's edges. A wrong row index would be a wrong row, silently.
    Every read is checked against the rows computed in Python (``_live``); at Spark's default batch size (4096) the
    pure-Python path reads each query too and must agree (other sizes would only test Spark's reader there)."""
    path = edges_table

    def read(query: Callable[[], DataFrame]) -> tuple[list[tuple[object, ...]], str]:
        if batch != 4096:
            spark.conf.set(native.SETTING, "true")
            df = query()
            return sorted((tuple(r) for r in df.collect()), key=repr), df._jdf.queryExecution().executedPlan().toString()
        fast, slow, plan = _both(spark, query)
        assert fast == slow
        return fast, plan

    spark.conf.set("spark.sql.parquet.columnarReaderBatchSize", str(batch))
    spark.conf.set("spark.sql.files.maxPartitionBytes", "65536")  # several splits per file, across row groups
    try:
        before = _row_index_counts(spark)
        for condition in _FILTERS:
            def query(condition: str | None = condition) -> DataFrame:
                df = dvlake.read(spark, path)
                return df if condition is None else df.filter(condition)
            fast, plan = read(query)
            assert fast == sorted(((i, 3 * i, f"s{i}") for i in _live(condition)), key=repr), condition
            assert "DvlakeParquet" in plan and (condition is None or "PushedFilters: [" in plan)
            assert condition is None or "PushedFilters: []" not in plan  # the filter reached the Parquet reader
            # the query's own row index (DML's scans): the format fills it from the row groups; ids are in file order
            indexed, _ = read(lambda q=query: q().select("id", "_metadata.row_index"))
            assert indexed == sorted(((i, i % 20_000) for i in _live(condition)), key=repr), condition
        summed, _ = read(lambda: dvlake.read(spark, path).selectExpr("sum(v)", "count(*)"))
        assert summed == [(3 * sum(_live(None)), len(_live(None)))]
        used = _delta(before, _row_index_counts(spark))
    finally:
        spark.conf.unset("spark.sql.parquet.columnarReaderBatchSize")
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert _row_index_counts(spark)["unavailable"] == 0  # this Spark passed the version gate and the field checks
    assert used["files_spark_column"] == 0  # every native read tracked row groups
    assert used["files_tracked"] > 2 * (len(_FILTERS) + 1)  # splits: more reads than files
    assert used["files_filled"] > 2 * len(_FILTERS)  # and as many with the row-index column filled
    assert used["groups_pages_skipped"] > 0 and used["groups_whole"] > 0  # both kinds of row group were met


def test_which_row_index_source_each_read_shape_uses(spark: SparkSession, tmp_path: Path) -> None:
    """Batches of flat columns track row groups, and fill the query's own ``_metadata.row_index`` from them; row
    mode (nested columns) reads Spark's row-index column; files without a DV read no row index at all unless the
    query asks for it (DML's scans)."""
    path = _converted(spark, str(tmp_path / "src"), rows=5_000, row_group=1_000)
    plain = _converted(spark, str(tmp_path / "plain"), rows=5_000, row_group=1_000)
    DeltaTable.forPath(spark, path).delete("id % 3 = 0")
    nested = str(tmp_path / "nested")
    dvlake.write(spark.range(3000).selectExpr("id", "named_struct('a', id) AS st").coalesce(1), nested,
                 properties=DV_PROPS)
    DeltaTable.forPath(spark, nested).delete("id % 4 = 1")
    spark.conf.set(native.SETTING, "true")
    cases = {"batches": (lambda: dvlake.read(spark, path), 6_666),
             "user_row_index": (lambda: dvlake.read(spark, path).select("id", "_metadata.row_index"), 6_666),
             "dml_no_dv": (lambda: native.reader(spark, dvlake.read(spark, plain).schema, native.listing(
                               [SimpleNamespace(path=f, dv=None, partition_values=()) for f in data_files(plain)], plain, True))
                           .load(data_files(plain)).select("id", "_metadata.row_index"), 10_000),
             "rows": (lambda: dvlake.read(spark, nested), 2_250),
             # dvlake's planning reads files without a DV with Spark's plain scan; the format itself reads them too
             "no_dv": (lambda: native.reader(spark, dvlake.read(spark, plain).schema, native.listing(
                           [SimpleNamespace(path=f, dv=None, partition_values=()) for f in data_files(plain)], plain, True))
                       .load(data_files(plain)), 10_000)}
    used = {}
    for name, (read, count) in cases.items():
        before = _row_index_counts(spark)
        assert len(read().collect()) == count, name  # collect: count() would prune the query's own row index
        used[name] = {k: v for k, v in _delta(before, _row_index_counts(spark)).items() if k.startswith("files_") and v}
    assert used == {"batches": {"files_tracked": 2}, "user_row_index": {"files_filled": 2},
                    "dml_no_dv": {"files_filled": 2}, "rows": {"files_spark_column": 1}, "no_dv": {"files_without_dv": 2}}


def test_partitions_odd_paths_and_every_row_deleted_in_a_file(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "a dir with spaces%20and #")
    dvlake.write(spark.range(6000).selectExpr("id", "id % 3 AS p", "id * 2 AS v").repartition(6), path,
                 partitionBy="p", properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 5 = 0 OR (p = 2 AND id < 3000)")
    fast, slow, plan = _both(spark, lambda: dvlake.read(spark, path))
    assert fast == slow and len(fast) == 6000 - len({i for i in range(6000) if i % 5 == 0 or (i % 3 == 2 and i < 3000)})
    assert "DvlakeParquet" in plan


def test_nested_columns_are_read_as_rows(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "nested")
    dvlake.write(spark.range(3000).selectExpr("id", "named_struct('a', id, 'b', cast(id AS string)) AS st",
                                              "array(id, id + 1) AS arr", "map('k', id) AS m").repartition(2),
                 path, properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 4 = 1")
    fast, slow, _ = _both(spark, lambda: dvlake.read(spark, path))
    assert fast == slow and len(fast) == 2250
    fast, slow, _ = _both(spark, lambda: dvlake.read(spark, path).select("id", "arr", "m"))  # flat: batches
    assert fast == slow


def test_column_mapping(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "cm")
    dvlake.write(spark.range(2000).selectExpr("id", "id % 7 AS `odd name`"), path,
                 properties={**DV_PROPS, "delta.columnMapping.mode": "name"})
    DeltaTable.forPath(spark, path).delete("`odd name` = 3")
    fast, slow, plan = _both(spark, lambda: dvlake.read(spark, path))
    assert fast == slow and len(fast) == 2000 - len([i for i in range(2000) if i % 7 == 3])
    assert "DvlakeParquet" in plan


def test_a_damaged_dv_is_the_same_typed_error_on_both_paths(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "damaged")
    dvlake.write(spark.range(1000).coalesce(1), path, properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 2 = 0")
    dv_file = next(p for p in Path(path).iterdir() if p.name.startswith("deletion_vector_"))
    data = bytearray(dv_file.read_bytes())
    data[20] ^= 0xFF  # inside the bitmap: the CRC no longer matches
    dv_file.write_bytes(bytes(data))
    for setting in ("true", "false"):
        spark.conf.set(native.SETTING, setting)
        with pytest.raises(CorruptDeletionVectorError):
            dvlake.read(spark, path).collect()


def test_auto_falls_back_when_the_jar_is_missing(spark: SparkSession, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "fallback")
    dvlake.write(spark.range(100).coalesce(1), path, properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id < 10")
    monkeypatch.setattr(native, "_choice", lambda version: native_jar.JarChoice(None, "", "no jar here (test)"))
    monkeypatch.setattr(native, "_ready", {})
    monkeypatch.setattr(native, "_threads", threading.local())
    spark.conf.set(native.SETTING, "auto")
    df = dvlake.read(spark, path)
    assert "DvlakeParquet" not in df._jdf.queryExecution().executedPlan().toString()
    assert sorted(r.id for r in df.collect()) == list(range(10, 100))
    spark.conf.set(native.SETTING, "true")
    with pytest.raises(Exception, match="native scan cannot be used"):
        dvlake.read(spark, path)


# --- nulls: MappedColumnVector.numNulls counts the kept rows only ---------------------------------------------------


def test_mapped_vector_counts_the_nulls_of_kept_rows_only(spark: SparkSession) -> None:
    """The reader reuses a mapping array longer than the kept rows; numNulls must not look past them (generated
    code may skip null checks on a count of 0, or trust a count)."""
    jvm, gateway = spark._jvm, spark.sparkContext._gateway
    assert jvm is not None and gateway is not None
    long_type = jvm.org.apache.spark.sql.types.DataTypes.LongType
    base = jvm.org.apache.spark.sql.execution.vectorized.OnHeapColumnVector(4, long_type)
    base.putNull(0)
    base.putLong(1, 10)
    base.putNull(2)
    base.putLong(3, 30)
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = jvm.java.lang.Class.forName("io.dvlake.spark.MappedColumnVector", True, loader)
    vector = cls.getConstructors()[0].newInstance(_objects(gateway, jvm, [base]))
    reset = next(m for m in cls.getDeclaredMethods() if m.getName() == "reset")
    reset.setAccessible(True)

    def mapped(kept: list[int], size: int) -> int:
        rows = gateway.new_array(jvm.int, 4)  # the reader's array: n long, kept rows first, the rest left over
        for i, r in enumerate(kept + [0] * (4 - len(kept))):
            rows[i] = r
        reset.invoke(vector, _objects(gateway, jvm, [base, rows, size]))
        return int(vector.numNulls())

    assert mapped([1, 3], 2) == 0   # the nulls (rows 0 and 2) were deleted; row 0 also fills the unused slots
    assert mapped([0, 3], 2) == 1
    assert mapped([0, 1, 2], 3) == 2
    assert mapped([3], 1) == 0


def _objects(gateway: Any, jvm: Any, values: list[Any]) -> Any:
    array = gateway.new_array(jvm.java.lang.Object, len(values))
    for i, v in enumerate(values):
        array[i] = v
    return array


_NULLS_AT = {"deleted": "id % 5 = 0", "kept": "id % 5 = 1", "both": "id % 5 < 2"}


def test_nullable_columns_with_nulls_on_deleted_or_kept_rows(spark: SparkSession, tmp_path: Path) -> None:
    """One table, a pair of nullable columns (long ``n_*``, string ``s_*``) per place of the nulls: on deleted rows
    only, on kept rows only, on both; each column's vector counts its own nulls."""
    path = str(tmp_path / "nulls")
    columns = [f"IF({cond}, NULL, {value}) AS {kind}_{at}" for at, cond in _NULLS_AT.items()
               for kind, value in (("n", "id"), ("s", "'s'"))]
    dvlake.write(spark.range(20_000).selectExpr("id", *columns).repartition(2), path, properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 5 = 0")
    queries = [lambda: dvlake.read(spark, path),
               lambda: dvlake.read(spark, path).selectExpr(*(f"{f}({c})" for at in _NULLS_AT for f, c in (
                   ("count", f"n_{at}"), ("sum", f"n_{at}"), ("count", f"s_{at}"), ("sum", f"IF(n_{at} IS NULL, 1, 0)"))))]
    for at in _NULLS_AT:
        queries += [lambda at=at: dvlake.read(spark, path).filter(f"n_{at} IS NULL").selectExpr("count(*)"),
                    lambda at=at: dvlake.read(spark, path).selectExpr(f"coalesce(n_{at}, -1) AS c").groupBy("c").count()]
    for query in queries:
        fast, slow, plan = _both(spark, query)
        assert fast == slow
        assert "DvlakeParquet" in plan
    fast, _, _ = _both(spark, lambda: dvlake.read(spark, path).selectExpr(
        "count(n_deleted)", "count(n_kept)", "count(n_both)", "count(*)"))
    assert fast == [(16_000, 12_000, 12_000, 16_000)]


# --- reader settings: row mode, off-heap vectors, wide rows -------------------------------------------------------


def _with_conf(spark: SparkSession, key: str, value: str) -> Callable[[], None]:
    """Set ``key`` in the shared session; returns what puts the old value back."""
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    return lambda: spark.conf.unset(key) if old is None else spark.conf.set(key, old)


@pytest.mark.parametrize(("key", "value", "source"), [
    ("spark.sql.parquet.enableVectorizedReader", "false", "files_spark_column"),  # parquet-mr's rows, Spark's index
    ("spark.sql.columnVector.offheap.enabled", "true", "files_tracked"),          # off-heap vectors under the mapping
])
def test_reader_settings_equal_the_python_path(spark: SparkSession, edges_table: str, key: str, value: str,
                                               source: str) -> None:
    path = edges_table
    restore = _with_conf(spark, key, value)
    try:
        before = _row_index_counts(spark)
        for condition in (None, _FILTERS[2], _FILTERS[4]):
            fast, slow, plan = _both(spark, lambda c=condition: dvlake.read(spark, path).select("id", "v", "s").filter(
                c or "true"))
            assert fast == slow == sorted(((i, 3 * i, f"s{i}") for i in _live(condition)), key=repr)
            assert "DvlakeParquet" in plan
        assert _delta(before, _row_index_counts(spark))[source] > 0
        fast, slow, _ = _both(spark, lambda: dvlake.read(spark, path).select("id", "_metadata.row_index"))
        assert fast == slow and len(fast) == len(_live(None))
    finally:
        restore()


def test_rows_wider_than_codegen_max_fields(spark: SparkSession, tmp_path: Path) -> None:
    """Above ``spark.sql.codegen.maxFields`` (100) Spark's scan returns rows, not batches (the vectorized reader still
    reads): the format must read those files with Spark's row-index column and project it away, here from 120 data
    columns plus a partition column; a narrow query of the same table reads batches again. Wide, not long: 500 rows
    per file (one batch each, as 2,000 were) keep the collects of 121 columns small."""
    path = str(tmp_path / "wide")
    columns = ["id"] + [f"id * {c} + {c} AS c{c}" for c in range(1, 120)] + ["cast(id % 3 AS int) AS p"]
    dvlake.write(spark.range(1500).selectExpr(*columns).repartition(3, "p"), path, partitionBy="p", properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 7 = 0 OR (id > 250 AND id < 300)")
    live = [i for i in range(1500) if not (i % 7 == 0 or 250 < i < 300)]
    for query, shape in ((lambda: dvlake.read(spark, path), "files_spark_column"),
                         (lambda: dvlake.read(spark, path).filter("id > 225 AND id < 325"), "files_spark_column"),
                         (lambda: dvlake.read(spark, path).select("id", "c7", "p"), "files_tracked")):
        before = _row_index_counts(spark)
        fast, slow, plan = _both(spark, query)
        assert fast == slow and "DvlakeParquet" in plan
        assert {r[0] for r in fast} <= set(live) and all(r[7] == 7 * r[0] + 7 for r in fast if len(r) > 7)
        assert _delta(before, _row_index_counts(spark))[shape] > 0, shape
    assert sorted(r[0] for r in _both(spark, lambda: dvlake.read(spark, path))[0]) == live
    single = str(tmp_path / "wide1")  # one scan (no partitions): the query's own _metadata columns resolve
    dvlake.write(spark.range(1000).selectExpr(*columns[:-1]).coalesce(1), single, properties=DV_PROPS)
    DeltaTable.forPath(spark, single).delete("id % 5 = 2")
    fast, slow, plan = _both(spark, lambda: dvlake.read(spark, single).select("*", "_metadata.row_index"))
    assert fast == slow and len(fast) == 800 and all(r[0] == r[120] for r in fast)


# --- DV kinds and damage: the same rows, or the same typed error, on both paths --------------------------------------


def _both_or_errors(spark: SparkSession, path: str) -> tuple[object, object]:
    """Per path (native, pure-Python): the sorted rows of ``dvlake.read``, or the exception it raised."""
    out: list[object] = []
    for setting in ("true", "false"):
        spark.conf.set(native.SETTING, setting)
        try:
            out.append(sorted(tuple(r) for r in dvlake.read(spark, path).collect()))
        except Exception as exc:  # noqa: BLE001 - compared by the caller
            out.append(exc)
    return out[0], out[1]


def _dv_table(spark: SparkSession, tmp_path: Path) -> str:
    """tests/reliability's small DV table: ids 0..199 in two files, every 7th deleted (version 1)."""
    return build_dv_table(spark, str(tmp_path / "t"))


def _rewrite_dvs_as(root: str, change: Callable[[bytes], bytes]) -> None:
    """Every DV of version 1 rewritten into a DV file of its own with a correct size and CRC: only the bitmap bytes
    ``change`` returns are wrong (or odd)."""
    def go(a: dict[str, Any]) -> None:
        dv = DeletionVectorDescriptor.from_json(a["deletionVector"])
        raw, _ = dv_bytes(dv, root)
        assert raw is not None
        bitmap = change(raw)
        file_uuid = uuid.uuid4()
        frame = struct.pack(">I", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))
        Path(root, dv_file_name(file_uuid)).write_bytes(b"\x01" + frame)
        a["deletionVector"] = DeletionVectorDescriptor.on_disk(file_uuid, 1, len(bitmap), dv.cardinality).to_json()
    edit_dv_adds(root, 1, go)


def _legacy_native_layout(bitmap: bytes) -> bytes:
    """The same rows in delta-spark's in-memory layout (magic 1681511376: u32 count, per bucket u32 size + bitmap)."""
    rows = roaring.deserialize(bitmap)
    assert rows.max() < 1 << 32
    body = pyroaring.BitMap(list(rows)).serialize()
    return struct.pack("<I", roaring.MAGIC_NATIVE) + struct.pack("<I", 1) + struct.pack("<I", len(body)) + body


def _inline(root: str, change: Callable[[bytes], bytes] = lambda b: b) -> None:
    """Every DV of version 1 moved into the log (storage type ``i``), its bitmap bytes passed through ``change``."""
    def go(a: dict[str, Any]) -> None:
        dv = DeletionVectorDescriptor.from_json(a["deletionVector"])
        raw, _ = dv_bytes(dv, root)
        assert raw is not None
        a["deletionVector"] = DeletionVectorDescriptor.inline(change(raw), dv.cardinality).to_json()
    edit_dv_adds(root, 1, go)


def _absolute(root: str) -> None:
    """Every DV of version 1 named by its absolute path (storage type ``p``)."""
    def go(a: dict[str, Any]) -> None:
        dv = DeletionVectorDescriptor.from_json(a["deletionVector"])
        a["deletionVector"].update(storageType="p", pathOrInlineDv=Path(dv.absolute_path(root)).as_uri())
    edit_dv_adds(root, 1, go)


@pytest.mark.parametrize("kind", ["u", "i", "p"])
def test_inline_and_absolute_path_dvs(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    root = _dv_table(spark, tmp_path)
    {"u": lambda r: None, "i": _inline, "p": _absolute}[kind](root)
    kinds = {DeletionVectorDescriptor.from_json(a["add"]["deletionVector"]).storage_type
             for a in read_actions(root, 1) if "add" in a and a["add"].get("deletionVector")}
    assert kinds == {kind}
    fast, slow = _both_or_errors(spark, root)
    assert fast == slow and [r[0] for r in fast] == LIVE  # type: ignore[union-attr]


@pytest.mark.parametrize("where", ["file", "inline"])
def test_legacy_native_bitmap_layout_is_refused_alike(spark: SparkSession, tmp_path: Path, where: str) -> None:
    """Magic 1681511376 is not a DV layout PROTOCOL.md allows: both paths refuse it with the same typed error."""
    root = _dv_table(spark, tmp_path)
    if where == "file":
        _rewrite_dvs_as(root, _legacy_native_layout)
    else:
        _inline(root, _legacy_native_layout)
    fast, slow = _both_or_errors(spark, root)
    for exc in (fast, slow):
        assert isinstance(exc, CorruptDeletionVectorError) and "1681511376" in str(exc), exc


def _bump(field: str) -> Callable[[str], None]:
    return lambda root: edit_dv_adds(root, 1, lambda a: a["deletionVector"].__setitem__(field, a["deletionVector"][field] + 1))


DAMAGE: dict[str, tuple[Callable[[str], None], type[Exception]]] = {
    "size-in-log": (_bump("sizeInBytes"), DeletionVectorIntegrityError),  # delta-spark's named checks: their class
    "size-in-file": (lambda root: [_poke(f, 1, struct.pack(">I", 7)) for f in dv_files(root)], DeletionVectorIntegrityError),
    "magic": (lambda root: _rewrite_dvs_as(root, lambda b: b"\x00" + b[1:]), CorruptDeletionVectorError),
    "cardinality": (_bump("cardinality"), DeletionVectorIntegrityError),
    "missing-file": (lambda root: [os.unlink(f) for f in dv_files(root)], DeletionVectorNotFoundError),
}


def _poke(file: str, at: int, data: bytes) -> None:
    raw = bytearray(Path(file).read_bytes())
    raw[at:at + len(data)] = data
    Path(file).write_bytes(bytes(raw))


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_dvs_give_the_same_typed_error_on_both_paths(spark: SparkSession, tmp_path: Path, damage: str) -> None:
    root = _dv_table(spark, tmp_path)
    damage_fn, error = DAMAGE[damage]
    damage_fn(root)
    fast, slow = _both_or_errors(spark, root)
    assert type(fast) is type(slow) is error, (fast, slow)
    assert "deletion_vector_" in str(fast) and "deletion_vector_" in str(slow)  # both name the DV file
    assert getattr(fast, "error_class", None) == getattr(slow, "error_class", None)  # and the same class


def _rewrite_dvs_in_place(root: str, change: Callable[[int], int]) -> None:
    """Every DV of version 1 rewritten where it is (same file, offset, size and cardinality: the log is untouched)
    with the rows ``change`` gives for its rows, size and CRC correct."""
    for a in read_actions(root, 1):
        if "add" not in a or not a["add"].get("deletionVector"):
            continue
        dv = DeletionVectorDescriptor.from_json(a["add"]["deletionVector"])
        raw, _ = dv_bytes(dv, root)
        assert raw is not None and dv.offset is not None
        bitmap = roaring.serialize(pyroaring.BitMap64([change(r) for r in roaring.deserialize(raw)]))
        assert len(bitmap) == len(raw), "the rewrite must keep the DV's size"
        _poke(dv.absolute_path(root), dv.offset, struct.pack(">I", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap)))


def test_a_dv_file_replaced_in_place_is_read_again(spark: SparkSession, tmp_path: Path) -> None:
    """Each executor JVM caches decoded DVs: a DV file that changed at the same path, offset, size and cardinality
    (rewritten in place) must be read again, not answered from the decoding of the old bytes."""
    root = _dv_table(spark, tmp_path)
    fast, slow = _both_or_errors(spark, root)
    assert fast == slow and [r[0] for r in fast] == LIVE  # type: ignore[union-attr]
    _rewrite_dvs_in_place(root, lambda row: row + 1)  # each deleted row index, one later in its file
    fast, slow = _both_or_errors(spark, root)
    assert isinstance(fast, list) and fast == slow  # the pure-Python path reads the DV's bytes every time
    assert len(fast) == len(LIVE) and [r[0] for r in fast] != LIVE


@pytest.mark.parametrize("rewrite", ["checksum-broken", "rows-changed"])
def test_a_dv_file_rewritten_with_the_same_length_and_mtime_is_verified_again(spark: SparkSession, tmp_path: Path,
                                                                              rewrite: str) -> None:
    """Issue 39: the JVM cache keyed a DV file's decoding by its length and modification time, so bytes rewritten in
    place with both kept were answered from the old decoding, where the pure-Python path (which reads and CRC-checks
    the bytes every time) raised a checksum error or read the new rows. Both paths must now agree."""
    root = _dv_table(spark, tmp_path)
    fast, slow = _both_or_errors(spark, root)
    assert fast == slow and [r[0] for r in fast] == LIVE  # type: ignore[union-attr]  # the JVM has decoded the DVs
    files = dv_files(root)
    times = {f: (os.stat(f).st_atime_ns, os.stat(f).st_mtime_ns) for f in files}
    if rewrite == "checksum-broken":  # one bitmap byte flipped, the stored CRC left as it was
        for f in files:
            raw = Path(f).read_bytes()
            _poke(f, len(raw) - 5, bytes([raw[-5] ^ 0x01]))
    else:
        _rewrite_dvs_in_place(root, lambda row: row + 1)
    for f, (atime, mtime) in times.items():
        os.utime(f, ns=(atime, mtime))
        assert os.stat(f).st_mtime_ns == mtime
    fast, slow = _both_or_errors(spark, root)
    if rewrite == "checksum-broken":
        for exc in (fast, slow):
            assert isinstance(exc, DeletionVectorIntegrityError), exc
            assert exc.error_class == "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH"
    else:
        assert isinstance(fast, list) and fast == slow
        assert len(fast) == len(LIVE) and [r[0] for r in fast] != LIVE


def _dv_cache(spark: SparkSession) -> dict[str, int]:
    text = spark._jvm.io.dvlake.spark.DeletionVectors.cacheStats()  # type: ignore[union-attr]
    return {k: int(v) for k, v in (kv.split("=") for kv in text.split())}


def test_the_dv_cache_is_bounded_by_bytes(spark: SparkSession, tmp_path: Path) -> None:
    """``spark.dvlake.scan.dvCacheBytes`` bounds the decoded DVs each JVM keeps, by their size in memory."""
    setting = "spark.dvlake.scan.dvCacheBytes"
    root = _dv_table(spark, tmp_path)
    restore = _with_conf(spark, setting, "0")
    try:
        fast, slow = _both_or_errors(spark, root)
        assert fast == slow and [r[0] for r in fast] == LIVE  # type: ignore[union-attr]
        assert _dv_cache(spark) == {"entries": 0, "bytes": 0}  # nothing kept, and older entries dropped
        spark.conf.set(setting, "64m")
        _both_or_errors(spark, root)
        full = _dv_cache(spark)
        assert full["entries"] == 2 and full["bytes"] > 0  # the table's two DVs
        spark.conf.set(setting, str(full["bytes"] - 1))  # room for one of them
        fast, _ = _both_or_errors(spark, _dv_table(spark, tmp_path / "other"))
        assert [r[0] for r in fast] == LIVE  # type: ignore[union-attr]
        now = _dv_cache(spark)
        assert 1 <= now["entries"] < 2 + 2 and now["bytes"] <= full["bytes"] - 1
        spark.conf.set(setting, "a lot")
        with pytest.raises(Exception, match="dvCacheBytes must be a size in bytes"):
            _both(spark, lambda: dvlake.read(spark, root))
    finally:
        restore()


# --- _metadata columns the user asks for ---------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [["_metadata.file_path"], ["_metadata.row_index"],
                                     ["_metadata.file_name", "_metadata.row_index", "_metadata.file_size"]])
def test_user_metadata_columns(spark: SparkSession, edges_table: str, columns: list[str]) -> None:
    """The query's own ``_metadata.row_index`` is the physical row index, as on the pure-Python path, and does not
    collide with the row-index column the native reader needs for the DVs."""
    path = edges_table
    for query in (lambda: dvlake.read(spark, path).select("id", *columns),
                  lambda: dvlake.read(spark, path).select("id", "s", *columns).filter("id > 15000"),
                  lambda: dvlake.read(spark, path).select(*columns)):
        fast, slow, plan = _both(spark, query)
        assert fast == slow and len(fast) > 0
        assert "DvlakeParquet" in plan
    if "_metadata.row_index" in columns:  # ids were written in order: the physical row index is id - file's first id
        fast, _, _ = _both(spark, lambda: dvlake.read(spark, path).selectExpr("id", "_metadata.row_index AS r"))
        assert all(r == i % 20_000 for i, r in fast)  # type: ignore[operator]
        assert sorted(i for i, _ in fast) == _live(None)  # type: ignore[type-var]


def test_user_row_index_in_row_mode(spark: SparkSession, tmp_path: Path) -> None:
    """Nested schemas are read as rows: the query's own row index must still be each row's physical index."""
    path = str(tmp_path / "nested-meta")
    dvlake.write(spark.range(3000).selectExpr("id", "named_struct('a', id, 'b', cast(id AS string)) AS st").coalesce(1),
                 path, properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 4 = 1")
    fast, slow, plan = _both(spark, lambda: dvlake.read(spark, path).select("id", "st", "_metadata.row_index"))
    assert fast == slow and len(fast) == 2250 and "DvlakeParquet" in plan
    assert all(r[0] == r[2] for r in fast)  # one file written in id order


# --- how the listing travels ---------------------------------------------------------------------------------------


def test_the_listing_is_broadcast_not_in_the_task_binary(spark: SparkSession, tmp_path: Path) -> None:
    """Spark copies read options into the Hadoop conf its reader functions keep; the listing (one line per file, 20k
    here) must travel once in the broadcast, not in the serialized scan every task deserializes."""
    root = _dv_table(spark, tmp_path)
    spark.conf.set(native.SETTING, "true")
    df = dvlake.read(spark, root)
    assert sorted(r.id for r in df.collect()) == LIVE
    plan = df._jdf.queryExecution().executedPlan()
    listing = _listing_of(plan)
    fake = "\n".join(f"{quote(f'/nowhere/part-{i:05d}-{uuid.UUID(int=i)}.c000.snappy.parquet', safe='')}\tf\t"
                     f"{quote(f'{root}/deletion_vector_{uuid.UUID(int=i)}.bin', safe='')}\t1\t40\t3\t" for i in range(20_000))
    big = listing + "\n" + fake
    assert len(big) > 4_000_000
    data_schema = dvlake.read(spark, root).schema
    big_df = native.reader(spark, data_schema, big).load(data_files(root))
    assert sorted(r.id for r in big_df.collect()) == LIVE
    size = _task_binary_bytes(big_df)
    assert size < 1_000_000, f"the serialized scan holds {size} bytes: the listing rides in every task"


def _listing_of(plan: Any) -> str:
    """The ``dvlake.scan.files`` option of the (only) native scan in ``plan``."""
    text = plan.toString()
    assert "DvlakeParquet" in text
    scan = _native_scan_node(plan)
    return str(scan.relation().options().get(native.FILES_OPTION).get())


def _native_scan_node(plan: Any) -> Any:
    nodes = [plan]
    while nodes:
        node = nodes.pop()
        name = node.getClass().getName()
        if name.endswith("FileSourceScanExec") and "DvlakeParquet" in node.toString():
            return node
        if name.endswith("AdaptiveSparkPlanExec"):
            nodes.append(node.executedPlan())
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    raise AssertionError("no native scan in the plan")


def _task_binary_bytes(df: DataFrame) -> int:
    """Bytes of the native scan's RDD as Spark's closure serializer writes it (what each task deserializes)."""
    scan = _native_scan_node(df._jdf.queryExecution().executedPlan())
    rdd = scan.inputRDD()
    jvm = df.sparkSession._jvm
    assert jvm is not None
    return len(jvm.org.apache.commons.lang3.SerializationUtils.serialize(rdd))


# --- scans that keep each row's file and row index: DML and the change feed's whole files ---------------------------


def test_keyed_scan_gives_each_rows_file_and_physical_row_index(spark: SparkSession, edges_table: str) -> None:
    """``logical_frame(include_row_index=True)`` (what MERGE and copy-on-write DML read): the native reader drops the
    deleted rows and the row index stays the physical one (MERGE marks it in a DV: a shifted index deletes the wrong
    row). Ids were written in order, so a row's physical index is its id minus its file's first id."""
    from dvlake.log.snapshot import Snapshot
    from dvlake.spark.dv_scan import FILE_INDEX_COL, ROW_INDEX_COL
    from dvlake.spark.scan import logical_frame, plan_scan

    path = edges_table

    def keyed() -> DataFrame:
        snapshot = Snapshot.load(path)
        plan = plan_scan(spark, snapshot)
        first_id = {i: int(Path(f.path).name.split("-")[1].split(".")[0]) * 20_000 for i, f in enumerate(plan.files)}
        df = logical_frame(spark, snapshot, plan, include_row_index=True)
        offsets = spark.createDataFrame(list(first_id.items()), f"{FILE_INDEX_COL} int, first long")
        return df.join(offsets, FILE_INDEX_COL).selectExpr("id", "s", f"{ROW_INDEX_COL} + first AS physical_id")

    fast, slow, plan = _both(spark, keyed)
    assert fast == slow and "DvlakeParquet" in plan
    assert sorted(r[0] for r in fast) == _live(None)  # type: ignore[type-var]
    assert all(r[0] == r[2] for r in fast)


def _same_table_twice(spark: SparkSession, tmp_path: Path, properties: dict[str, str]) -> dict[str, str]:
    """Two identical tables (one per read path): ids 0..5999 with a string, in 3 files, then a DV DELETE."""
    paths = {}
    for setting in ("true", "false"):
        path = str(tmp_path / f"native-{setting}")
        dvlake.write(spark.range(0, 6000, numPartitions=3).selectExpr("id", "id % 10 AS k", "cast(id AS string) AS s"),
                     path, properties={**DV_PROPS, **properties})
        spark.conf.set(native.SETTING, setting)
        DeltaTable.forPath(spark, path).delete("id % 7 = 0")
        paths[setting] = path
    return paths


def _act_on_both(spark: SparkSession, paths: dict[str, str], act: Callable[[str], None]) -> dict[str, dict[str, int]]:
    """``act`` on each table under its path's setting; how the native reader found row indexes meanwhile."""
    used = {}
    for setting, path in paths.items():
        spark.conf.set(native.SETTING, setting)
        before = _row_index_counts(spark)
        act(path)
        used[setting] = {k: v for k, v in _delta(before, _row_index_counts(spark)).items() if k.startswith("files_")}
    return used


def _table_rows(spark: SparkSession, path: str) -> list[tuple[object, ...]]:
    spark.conf.set(native.SETTING, "false")
    return sorted((tuple(r) for r in dvlake.read(spark, path).collect()), key=repr)


def test_merge_with_dvs_marks_the_same_rows_on_both_paths(spark: SparkSession, tmp_path: Path) -> None:
    """MERGE in DV mode reads its target with each row's file and physical row index (native: the reader's own
    ``_metadata.row_index``, which the format fills from the row groups) and marks the matched rows in new DVs: a
    wrong index would delete other rows."""
    paths = _same_table_twice(spark, tmp_path, {})
    source = spark.range(0, 6000, 3).selectExpr("id", "CAST(-1 AS BIGINT) AS k", "'merged' AS s").union(
        spark.range(7000, 7010).selectExpr("id", "CAST(-2 AS BIGINT) AS k", "'new' AS s"))

    def merge(path: str) -> None:
        (DeltaTable.forPath(spark, path).alias("t").merge(source.alias("src"), "t.id = src.id")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())

    used = _act_on_both(spark, paths, merge)
    native_rows, python_rows = _table_rows(spark, paths["true"]), _table_rows(spark, paths["false"])
    assert native_rows == python_rows
    expected = ([(i, i % 10, str(i)) for i in range(6000) if i % 7 and i % 3] + [(i, -1, "merged") for i in range(0, 6000, 3)]
                + [(i, -2, "new") for i in range(7000, 7010)])  # deleted ids the source has are inserted again
    assert native_rows == sorted(expected, key=repr)
    assert used["true"]["files_filled"] >= 3 and used["false"] == dict.fromkeys(used["false"], 0)


def test_copy_on_write_update_and_delete_read_natively(spark: SparkSession, tmp_path: Path) -> None:
    """With DVs switched off, UPDATE and DELETE rewrite whole files; they find the matching files through the keyed
    scan (file index only: Spark prunes the row index and the native reader tracks row groups)."""
    paths = _same_table_twice(spark, tmp_path, {})
    for path in paths.values():
        DeltaTable.forPath(spark, path).setProperties({"delta.enableDeletionVectors": "false"})

    def update_and_delete(path: str) -> None:
        DeltaTable.forPath(spark, path).update("k = 3", {"s": "'updated'"})
        DeltaTable.forPath(spark, path).delete("k = 4")

    used = _act_on_both(spark, paths, update_and_delete)
    native_rows, python_rows = _table_rows(spark, paths["true"]), _table_rows(spark, paths["false"])
    assert native_rows == python_rows
    assert native_rows == sorted(((i, i % 10, "updated" if i % 10 == 3 else str(i)) for i in range(6000)
                                  if i % 7 and i % 10 != 4), key=repr)
    assert used["true"]["files_tracked"] >= 3 and used["false"] == dict.fromkeys(used["false"], 0)


def test_change_feed_whole_files_with_dvs_read_natively(spark: SparkSession, tmp_path: Path) -> None:
    """A partition DELETE removes whole files that carry DVs: the change feed reads them (DVs applied) as deletes."""
    path = str(tmp_path / "cdf")
    dvlake.write(spark.range(0, 4000, numPartitions=4).selectExpr("id", "id % 2 AS p", "cast(id AS string) AS s"),
                 path, partitionBy="p", properties={**DV_PROPS, "delta.enableChangeDataFeed": "true"})
    DeltaTable.forPath(spark, path).delete("id % 5 = 0")  # v1: DVs
    DeltaTable.forPath(spark, path).delete("p = 1")       # v2: whole files (with their DVs) removed
    fast, slow, plan = _both(spark, lambda: dvlake.read_changes(spark, path, startingVersion=2).select(
        "id", "p", "s", "_change_type", "_commit_version"))
    assert fast == slow and "DvlakeParquet" in plan
    assert fast == sorted(((i, 1, str(i), "delete", 2) for i in range(4000) if i % 2 == 1 and i % 5), key=repr)


def test_many_partition_tuples_are_read_natively(spark: SparkSession, tmp_path: Path) -> None:
    """More partition tuples than the pure-Python path's literal-tagged scans (``MAX_LITERAL_PARTITION_GROUPS``): the
    native reader drops the deleted rows and fills the partition values from its listing, all files in one relation
    (no join, no union), with and without a data filter and a partition filter (which leaves more than that too)."""
    from dvlake.spark import dv_scan

    path = str(tmp_path / "many")
    tuples = dv_scan.MAX_LITERAL_PARTITION_GROUPS + 8  # a file per tuple: more files only cost time
    assert tuples > 20 > dv_scan.MAX_LITERAL_PARTITION_GROUPS
    dvlake.write(spark.range(0, 100 * tuples).selectExpr("id", f"id % {tuples} AS p", "cast(id AS string) AS s")
                 .repartition(tuples, "p"), path, partitionBy="p", properties=DV_PROPS)
    DeltaTable.forPath(spark, path).delete("id % 7 = 0")
    live = [(i, str(i), i % tuples) for i in range(100 * tuples) if i % 7]
    for query, expected in ((lambda: dvlake.read(spark, path).select("id", "s", "p"), live),
                            (lambda: dvlake.read(spark, path).filter("id > 1000").select("id", "s", "p"),
                             [r for r in live if r[0] > 1000]),
                            (lambda: dvlake.read(spark, path).filter("p < 20").select("id", "s", "p"),
                             [r for r in live if r[2] < 20])):
        fast, slow, plan = _both(spark, query)
        assert fast == slow == sorted(expected, key=repr)
        assert "DvlakeParquet" in plan and "Join" not in plan and "Union" not in plan


def test_connect_resolves_the_format_before_adding_the_jar(spark: SparkSession, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Over Connect a server started with the jar (``--jars``) already resolves the format: dvlake must use it without
    the artifact (the server may refuse artifacts; the client may not even have the jar). Here a classic session that
    resolves the format stands in for that server, and the client's jar is missing."""
    root = _dv_table(spark, tmp_path)
    spark.conf.set(native.SETTING, "true")
    assert sorted(r.id for r in dvlake.read(spark, root).collect()) == LIVE  # the format is loadable in this thread
    monkeypatch.setattr(native, "_is_connect", lambda session: True)
    monkeypatch.setattr(native, "_choice", lambda version: native_jar.JarChoice(None, "", "no jar here (test)"))
    assert native._load(spark) == (True, "")
    monkeypatch.setattr(native, "FORMAT", "io.dvlake.spark.NoSuchFormat")  # a server without the jar
    ok, why = native._load(spark)
    assert not ok and "no jar here (test)" in why


def test_a_listing_of_another_protocol_is_refused_by_the_jar(spark: SparkSession, tmp_path: Path) -> None:
    """The listing is a versioned text protocol: a jar fed a listing of another version says so instead of
    misreading it (a stale jar on a class path, a newer dvlake)."""
    root = _dv_table(spark, tmp_path)
    spark.conf.set(native.SETTING, "true")
    df = dvlake.read(spark, root)
    assert sorted(r.id for r in df.collect()) == LIVE
    files = data_files(root)
    listing = _listing_of(df._jdf.queryExecution().executedPlan())
    for wrong in ("0", "999", None):
        reader = spark.read.format(native.FORMAT).schema(df.schema).option(native.FILES_OPTION, listing)
        if wrong is not None:
            reader = reader.option(native_jar.PROTOCOL_OPTION, wrong)
        with pytest.raises(Exception, match="DVLAKE_NATIVE_SCAN_PROTOCOL_MISMATCH") as raised:
            reader.load(files).collect()
        assert f"protocol {wrong or 'null'}" in str(raised.value) and f"protocol {native_jar.SCAN_PROTOCOL}" in str(raised.value)


# --- a JVM that outlives a SparkContext ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def child_lines(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """``tests/spark/native_child.py`` in a process (and JVM) of its own, run once for the tests below (each JVM
    start costs seconds): its result lines per mode. The tables are built here, in the shared session."""
    root = tmp_path_factory.mktemp("native-child")
    contexts, engine = str(root / "contexts"), str(root / "engine")
    dvlake.write(spark.range(2000).coalesce(1), contexts, properties=DV_PROPS)
    DeltaTable.forPath(spark, contexts).delete("id % 3 = 0")  # version 1: a DV for the one data file
    DeltaTable.forPath(spark, contexts).delete("id % 5 = 0")  # version 2: another DV for the same file
    dvlake.write(spark.range(100).coalesce(1), engine, properties=DV_PROPS)  # no DV yet
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run([sys.executable, "-m", "tests.spark.native_child", "contexts", contexts, "engine", engine],
                          capture_output=True, text=True, cwd=str(REPO_ROOT), env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    lines: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("@ MODE "):
            lines[line.removeprefix("@ MODE ")] = []
        elif line.startswith("@ "):
            lines[list(lines)[-1]].append(line[2:])
    return lines


def test_a_new_spark_context_in_the_same_jvm_reads_its_own_dvs(child_lines: dict[str, list[str]]) -> None:
    """Spark numbers broadcasts from 0 in every SparkContext while the jar's classes (on the driver's class path)
    outlive it: a listing cached by broadcast id gave the second context the first one's DV for the same data file,
    silently (1333 rows of version 1 instead of version 2's 1067)."""
    expected = len([i for i in range(2000) if i % 3 and i % 5])
    assert child_lines["contexts"] == [f"ROWS {expected} {expected}"]


def test_an_engine_that_replaces_parquet_scans_is_refused(child_lines: dict[str, list[str]]) -> None:
    """Comet, Gluten, RAPIDS swap Spark's Parquet scan for their own, which applies no DV: a read of files with a DV
    (on either path) and DML's row indexes are refused with a typed error naming the engine, until its scans are off.
    A fake Comet extension class stands in (Spark skips a missing extension class with a warning)."""
    lines = {line.split(" ")[0]: line.split(" ", 1)[1] for line in child_lines["engine"]}
    assert lines.pop("PLAIN") == "100"
    assert lines.pop("DELETE_SCAN_OFF") == "None"
    assert lines.pop("READ_SCAN_OFF") == str(len([i for i in range(100) if i % 3]))
    assert sorted(lines) == ["DELETE", "READ_auto", "READ_false", "READ_true"]
    for label, result in lines.items():
        assert result.startswith("REFUSED NativeEngineScanError "), (label, result)
        assert "CometSparkSessionExtensions" in result and "spark.comet.scan.enabled=false" in result
