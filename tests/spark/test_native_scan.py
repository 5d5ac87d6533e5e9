"""The native scan (DVs applied inside Spark's Parquet reader, jvm/) against the pure-Python path, shape by shape.

Every case reads one table both ways and compares the rows (a differential test: the native reader's row
indexes, batch mapping and row projection have nowhere to hide). The conformance corpus runs on both paths
too (tests/spark/test_conformance.py, ``scan_path`` fixture).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.errors import CorruptDeletionVectorError
from dvlake.spark import native

DV_PROPS = {"delta.enableDeletionVectors": "true"}


@pytest.fixture(autouse=True)
def jar_built(spark: SparkSession) -> Iterator[None]:
    if not native.jar_for(spark.version).is_file():
        if os.environ.get("CI") == "true":
            pytest.fail("the native scan's jar is missing: run make jar")
        pytest.skip("the native scan's jar is not built (make jar)")
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
    """A table of ``files`` Parquet files with small row groups (pyarrow), converted in place, DVs on."""
    os.makedirs(path)
    for f in range(files):
        ids = pa.array(range(f * rows, (f + 1) * rows), pa.int64())
        table = pa.table({"id": ids, "v": pa.compute.multiply(ids, 3), "s": pa.array([f"s{i}" for i in ids.to_pylist()])})
        pq.write_table(table, os.path.join(path, f"part-{f}.parquet"), row_group_size=row_group, write_page_index=True,
                       data_page_size=1024)
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
    monkeypatch.setattr(native, "jar_for", lambda version: tmp_path / "missing.jar")
    monkeypatch.setattr(native, "_ready", {})
    monkeypatch.setattr(native, "_threads", threading.local())
    spark.conf.set(native.SETTING, "auto")
    df = dvlake.read(spark, path)
    assert "DvlakeParquet" not in df._jdf.queryExecution().executedPlan().toString()
    assert sorted(r.id for r in df.collect()) == list(range(10, 100))
    spark.conf.set(native.SETTING, "true")
    with pytest.raises(Exception, match="native scan cannot be used"):
        dvlake.read(spark, path)
