"""Fixtures shared by the Spark tests (the session itself is tests/conftest.py's ``spark``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import faces


@pytest.fixture
def dspark(spark: SparkSession) -> Iterator[SparkSession]:
    """The shared session with the faces on; off again afterwards, so other test files see plain Spark."""
    dvlake.configure_spark(spark)
    try:
        yield spark
    finally:
        faces.disable(spark)


@pytest.fixture(params=["native", "python"])
def scan_path(request: pytest.FixtureRequest, spark: SparkSession) -> Iterator[str]:
    """Run a test on both read paths: the native scan (jvm/, DVs applied in Spark's Parquet reader) and the
    pure-Python path (Spark's reader and an anti join). The native jar must be built (``make jar``): CI fails
    without it, a local run skips."""
    import os

    from dvlake.spark import native

    if request.param == "native" and not native.jar_for(spark.version).is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"the native scan's jar is missing ({native.jar_for(spark.version)}): run make jar")
        pytest.skip("the native scan's jar is not built (make jar)")
    spark.conf.set(native.SETTING, "true" if request.param == "native" else "false")
    try:
        yield request.param
    finally:
        spark.conf.unset(native.SETTING)
