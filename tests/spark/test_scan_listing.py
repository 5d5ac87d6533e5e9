"""The native scan's listing by reference (``spark/scan_listing.py``, ``ScanListings.java``): a large read's file
listing goes into a file the plan names by location and SHA-256, so the plan does not grow with the DV files.

Rows are exact through the new path (with and without a partition filter, and for DML's scans); a plan whose listing
file names 100,000 DV files stays a few KB; a missing or changed listing file is ``ScanListingError``, never rows read
without their DV.
"""

from __future__ import annotations

import gzip
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from pyspark.sql import DataFrame, SparkSession

import dvlake
from bench.table_scale import connect_chars
from dvlake.config import INLINE_LISTING_MAX_FILES
from dvlake.errors import ScanListingError
from dvlake.spark import native, scan_listing
from tests.conftest import require_native_jar
from tests.helpers import DV_PROPS


@pytest.fixture(autouse=True)
def by_reference(spark: SparkSession) -> Iterator[None]:
    """Native scan on, and every listing through a file (the bound at 0), whatever the table's size."""
    require_native_jar(spark.version)
    spark.conf.set(native.SETTING, "true")
    spark.conf.set(INLINE_LISTING_MAX_FILES, "0")
    yield
    spark.conf.unset(native.SETTING)
    spark.conf.unset(INLINE_LISTING_MAX_FILES)


def _table(spark: SparkSession, path: str) -> str:
    """``id`` 0..59, ``p = id % 3`` as the partition column, two files per partition; DELETE ``id % 4 = 0`` by DV."""
    df = spark.range(60).selectExpr("id", "cast(id % 3 as int) as p").repartition(2)
    dvlake.write(df, path, partitionBy=["p"], properties=DV_PROPS)
    dvlake.DeltaTable.forPath(spark, path).delete("id % 4 = 0")
    return path


def _options(df: DataFrame) -> list[dict[str, str]]:
    """The read options of every file relation in ``df``'s analysed plan."""
    found = []
    nodes = [df._jdf.queryExecution().analyzed()]
    while nodes:
        node = nodes.pop()
        if node.getClass().getName().endswith("LogicalRelation"):
            options = node.relation().options()
            found.append({k: str(options.get(k).get()) for k in (native.FILES_OPTION, "dvlake.scan.listing")
                          if options.contains(k)})
        children = node.children()
        nodes += [children.apply(i) for i in range(children.size())]
    return found


def test_rows_are_exact_through_the_listing_file(spark: SparkSession, tmp_path: Path) -> None:
    path = _table(spark, str(tmp_path / "t"))
    df = dvlake.read(spark, path)
    relations = _options(df)
    assert relations and all(list(o) == ["dvlake.scan.listing"] for o in relations)
    assert sorted(tuple(r) for r in df.collect()) == [(i, i % 3) for i in range(60) if i % 4]
    assert sorted(tuple(r) for r in dvlake.read(spark, path).filter("p = 1").collect()) == \
        [(i, 1) for i in range(60) if i % 3 == 1 and i % 4]
    written = os.listdir(os.path.join(path, "_delta_log", "_dvlake", "scan"))
    assert len(written) == 1 and written[0].endswith(".listing.gz")  # the same read again wrote nothing new


def test_dml_scans_read_the_listing_file(spark: SparkSession, tmp_path: Path) -> None:
    path = _table(spark, str(tmp_path / "t"))
    dvlake.DeltaTable.forPath(spark, path).update("id % 5 = 0", {"id": "id + 1000"})
    expected = sorted((i + 1000 if i % 5 == 0 else i, i % 3) for i in range(60) if i % 4)
    assert sorted(tuple(r) for r in dvlake.read(spark, path).collect()) == expected


def test_small_reads_keep_the_inline_listing(spark: SparkSession, tmp_path: Path) -> None:
    path = _table(spark, str(tmp_path / "t"))
    spark.conf.set(INLINE_LISTING_MAX_FILES, "1000")
    df = dvlake.read(spark, path)
    assert all(list(o) == [native.FILES_OPTION] for o in _options(df))
    assert df.count() == 45


def _fake_lines(n: int) -> list[str]:
    """``n`` listing lines shaped like a warehouse table's: a data file and its DV in a shared DV file."""
    root = "/data/warehouse/sales/events"
    return [f"{quote(f'{root}/part-{i % 1000:05d}-{uuid.UUID(int=i)}-c000.snappy.parquet', safe='')}\tf\t"
            f"{quote(f'{root}/deletion_vector_{uuid.UUID(int=i // 100)}.bin', safe='')}\t{1 + (i % 100) * 48}\t40\t3\t=0"
            for i in range(n)]


def _written(df: DataFrame) -> tuple[str, list[str]]:
    """The listing file ``df``'s scans name, and its lines (header dropped)."""
    (option,) = {o["dvlake.scan.listing"] for o in _options(df)}
    location = unquote(option.split("\t")[0])
    with open(location, "rb") as f:
        return location, gzip.decompress(f.read()).decode("utf-8").split("\n")[1:]


def test_the_plan_stays_small_at_100000_dv_files(spark: SparkSession, tmp_path: Path) -> None:
    """A real DV table's files read with a listing that names 100,000 more DV files: by reference, what the plan
    carries (options and paths) stays under 20 KB; inline, the same listing is ~21 MB. The rows are the table's."""
    path = _table(spark, str(tmp_path / "t"))
    _, real = _written(dvlake.read(spark, path))
    lines = real + _fake_lines(100_000)
    ref = scan_listing.write(spark, path, lines)
    assert ref is not None and ref.entries == len(real) + 100_000
    paths = [unquote(line.split("\t")[0]) for line in real]
    big = native.reader(spark, "id long", ref).load(paths)
    assert connect_chars(big) < 20_000, connect_chars(big)
    assert sorted(r[0] for r in big.collect()) == [i for i in range(60) if i % 4]
    assert connect_chars(native.reader(spark, "id long", "\n".join(lines)).load(paths)) > 20_000_000  # the measure sees it


def _planned(spark: SparkSession, tmp_path: Path) -> tuple[DataFrame, str]:
    """A read planned (its listing file written) but not run yet, and that file's path."""
    df = dvlake.read(spark, _table(spark, str(tmp_path / "t")))
    return df, _written(df)[0]


def test_a_missing_listing_file_is_a_typed_error(spark: SparkSession, tmp_path: Path) -> None:
    df, listing = _planned(spark, tmp_path)
    os.remove(listing)
    with pytest.raises(ScanListingError, match="does not exist"):
        df.collect()


def test_a_changed_listing_file_is_a_typed_error(spark: SparkSession, tmp_path: Path) -> None:
    df, listing = _planned(spark, tmp_path)
    with open(listing, "r+b") as f:  # same length, one byte different: only the digest can tell
        data = bytearray(f.read())
        data[-1] ^= 1
        f.seek(0)
        f.write(bytes(data))
    with pytest.raises(ScanListingError, match="SHA-256"):
        df.collect()
