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
