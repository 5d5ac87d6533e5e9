"""Shared fixtures: one local Spark session for the whole run, and the shared test tables."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from dvlake import native_jar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parent.parent


def find_testdata() -> Path | None:
    """The folder of delta-spark-written DV tables, or None when it is absent."""
    root = Path(os.environ.get("DVLAKE_TESTDATA", REPO_ROOT.parent / "shared" / "testdata"))
    return root if (root / "MANIFEST.json").exists() else None


@pytest.fixture(scope="session")
def testdata() -> Path:
    """Path of ../shared/testdata; skips locally when missing, fails in CI (CI=true)."""
    root = find_testdata()
    if root is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the shared test tables are missing: set DVLAKE_TESTDATA or put shared/ beside the repo")
        pytest.skip("shared/testdata not found (set DVLAKE_TESTDATA)")
    return root


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """One local[2] SparkSession for the whole test run (starting Spark costs seconds).

    Its warehouse is this run's (or pytest-xdist worker's, ``make test TEST_WORKERS=2``) own temporary folder, so
    managed tables never land in the checkout's ``spark-warehouse`` and two workers' tables never meet.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("TZ", "UTC")
    from dvlake.spark.session import local_session

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = local_session(app_name="dvlake-tests", shuffle_partitions=4,
                            extra_conf={"spark.sql.warehouse.dir": str(warehouse)})
    yield session
    session.stop()


@pytest.fixture
def table_dir(tmp_path: Path) -> str:
    """A fresh directory path for a table (not created)."""
    return str(tmp_path / "table")


def copy_table(src: Path, dst: Path) -> Path:
    """Copy a read-only shared table to a writable scratch place."""
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    dst.chmod(0o755)
    return dst


def require_native_jar(spark_version: str) -> Path:
    """The native scan's jar for ``spark_version``. Missing, it skips only where it cannot be built: with ``javac`` on
    PATH (so ``make test`` built it, or should have) or in CI (CI=true) the test fails, so that no run that could test
    the native scan passes without testing it."""
    from dvlake.spark import native

    jar = native.jar_for(spark_version)
    if jar is None:
        why = native_jar.find_jar(spark_version, build=False).why
        if os.environ.get("CI") == "true" or native_jar.javac() is not None:
            pytest.fail(f"the native scan's jar is missing although javac is here (or CI=true): {why}")
        pytest.skip(f"the native scan's jar is not built and cannot be: {why}")
    return jar


@pytest.fixture(params=["native", "python"])
def scan_path(request: pytest.FixtureRequest, spark: SparkSession) -> Iterator[str]:
    """Run a test on both read paths: the native scan (dvlake/jvm/, DVs applied in Spark's Parquet reader) and the
    pure-Python path (Spark's reader and an anti join). The native jar must be there or buildable: a run fails
    without it unless no JDK is there to build it (``require_native_jar``)."""
    from dvlake.spark import native

    if request.param == "native":
        require_native_jar(spark.version)
    spark.conf.set(native.SETTING, "true" if request.param == "native" else "false")
    try:
        yield request.param
    finally:
        spark.conf.unset(native.SETTING)
