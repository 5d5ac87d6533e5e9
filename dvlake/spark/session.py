"""Spark session helpers: a quiet local session for tests, demos and benchmarks."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from dvlake.errors import UnsupportedEnvironmentError

#: Spark 3.5 added ``_metadata.row_index`` to the Parquet source; DVs are applied by it.
MIN_SPARK_VERSION = (3, 5)


def local_session(app_name: str = "dvlake", *, cores: int = 2, shuffle_partitions: int = 4,
                  driver_memory: str = "4g", extra_conf: dict[str, str] | None = None) -> SparkSession:
    """Start (or reuse) a quiet ``local[cores]`` session with the settings dvlake expects.

    The UI and console progress bar are off and logs are at WARN, so test and demo output stays
    readable. Python workers use this interpreter, so executors see the same packages.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    import pyspark

    from dvlake.spark.native import jar_for

    jar = jar_for(pyspark.__version__)
    if jar is not None:  # on the driver's class path from the start: every thread finds the native scan's format
        builder = builder.config("spark.jars", str(jar))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")  # a local (classic) session always has a SparkContext
    check_version(session)
    return session


def check_version(session: SparkSession) -> None:
    """Refuse Spark versions without ``_metadata.row_index`` (needed to apply DVs exactly)."""
    parts = tuple(int(p) for p in session.version.split(".")[:2])
    if parts < MIN_SPARK_VERSION:
        raise UnsupportedEnvironmentError(
            f"dvlake needs Spark >= {MIN_SPARK_VERSION[0]}.{MIN_SPARK_VERSION[1]} for _metadata.row_index; "
            f"found {session.version}"
        )
