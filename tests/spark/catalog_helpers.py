"""Helpers shared by the catalog-name tests: sorted rows, the catalog's own column list, and databases that live
under ``spark.sql.warehouse.dir`` (as a managed table's database does by default) and are removed afterwards."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from urllib.parse import urlparse

from pyspark.sql import SparkSession

import dvlake
from dvlake import faces


def rows(df: object) -> list[tuple[object, ...]]:
    """A DataFrame's rows as sorted tuples (order-free comparisons)."""
    return sorted((tuple(r) for r in df.collect()), key=repr)  # type: ignore[attr-defined]


def local_path(uri: str) -> str:
    """``file:/a/b`` or ``/a/b`` → ``/a/b``."""
    parsed = urlparse(str(uri))
    return parsed.path if parsed.scheme in ("file", "") else str(uri)


def warehouse_dir(spark: SparkSession) -> str:
    """The local directory behind ``spark.sql.warehouse.dir``."""
    return os.path.realpath(local_path(str(spark.conf.get("spark.sql.warehouse.dir"))))


def catalog_columns(spark: SparkSession, name: str) -> tuple[list[str], list[str]]:
    """What the catalog itself says about ``name``'s columns, read with dvlake's faces off (as another client of the
    metastore sees them): (``spark.catalog.listColumns``, ``DESCRIBE TABLE``)."""
    on = faces.enabled(spark)
    faces.disable(spark)
    try:
        listed = [c.name for c in spark.catalog.listColumns(name)]
        described = [r[0] for r in spark.sql(f"DESCRIBE TABLE {name}").collect() if r[0] and not r[0].startswith("#")]
    finally:
        if on:
            dvlake.configure_spark(spark)
    return listed, described


@contextlib.contextmanager
def warehouse_databases(spark: SparkSession, *names: str, use_first: bool = False) -> Iterator[list[str]]:
    """Create databases without LOCATION (so under the warehouse directory), drop them and their directories after;
    ``use_first`` makes the first one the current database meanwhile (names without a database land there)."""
    dirs = [os.path.join(warehouse_dir(spark), f"{n}.db") for n in names]

    def clear() -> None:
        for n, d in zip(names, dirs, strict=True):
            spark.sql(f"DROP DATABASE IF EXISTS {n} CASCADE")
            shutil.rmtree(d, ignore_errors=True)

    clear()  # a run that crashed may have left one behind
    for n in names:
        spark.sql(f"CREATE DATABASE {n}")
    try:
        if use_first:
            spark.catalog.setCurrentDatabase(names[0])
        yield dirs
    finally:
        spark.catalog.setCurrentDatabase("default")
        clear()


@contextlib.contextmanager
def configured_with_database(spark: SparkSession, name: str, location: str) -> Iterator[SparkSession]:
    """Faces on and a database ``name`` at ``location`` (a test's tmp_path: managed tables never land in the
    checkout); the database dropped and the faces off afterwards, so other test files see plain Spark."""
    dvlake.configure_spark(spark)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS {name} LOCATION '{location}'")
    try:
        yield spark
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {name} CASCADE")
        faces.disable(spark)


def target_location(spark: SparkSession, target: str) -> str:
    """The table root of a SQL target: ``delta.`<path>``` or a catalog name."""
    from dvlake.spark.catalog import table_location

    return target[len("delta.`"):-1] if target.startswith("delta.`") else table_location(spark, target)


def location_and_writer_features(spark: SparkSession, target: str) -> tuple[str, set[str]]:
    """A SQL target's table root and the writer features its protocol demands (legacy versions expanded)."""
    from dvlake.log import features
    from dvlake.log.snapshot import Snapshot

    path = target_location(spark, target)
    return path, features.writer_features(Snapshot.load(path).protocol)
