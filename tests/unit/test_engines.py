"""Engines that replace Spark's Parquet scan are found in a session's settings and refused (``dvlake.spark.engines``).

A stand-in session (``conf.get`` over a dict) is enough: the check reads settings only. The Spark test that a real
session refuses is in tests/spark/test_native_scan.py (a child process: ``spark.sql.extensions`` is static).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from dvlake.errors import NativeEngineScanError, UnsupportedEnvironmentError
from dvlake.spark.engines import refuse_scan_replacing_engines, scan_replacing_engines


def _session(**settings: str) -> Any:
    conf = {k.replace("__", "."): v for k, v in settings.items()}
    return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: conf.get(key, default)))


@pytest.mark.parametrize(("setting", "value", "engine"), [
    ("spark.plugins", "org.apache.spark.CometPlugin", "Comet"),
    ("spark.sql.extensions", "org.apache.comet.CometSparkSessionExtensions", "Comet"),
    ("spark.plugins", "org.apache.gluten.GlutenPlugin", "Gluten"),
    ("spark.plugins", "io.glutenproject.GlutenPlugin", "Gluten"),
    ("spark.plugins", "com.nvidia.spark.SQLPlugin", "RAPIDS"),
    ("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension, org.apache.spark.sql.blaze.BlazeSparkSessionExtension",
     "Blaze"),
])
def test_each_known_engine_is_found_and_refused(setting: str, value: str, engine: str) -> None:
    spark = _session(**{setting.replace(".", "__"): value})
    found = scan_replacing_engines(spark)
    assert len(found) == 1 and engine in found[0][0].name and found[0][1] == setting
    with pytest.raises(NativeEngineScanError) as caught:
        refuse_scan_replacing_engines(spark, "reading 3 file(s) with a DV would return deleted rows")
    assert isinstance(caught.value, UnsupportedEnvironmentError)
    assert caught.value.error_class == "DVLAKE_SCAN_REPLACED_BY_NATIVE_ENGINE"
    assert value in str(caught.value) and "3 file(s)" in str(caught.value)


def test_sessions_without_such_an_engine_pass() -> None:
    refuse_scan_replacing_engines(_session(), "x")
    refuse_scan_replacing_engines(_session(spark__sql__extensions="io.delta.sql.DeltaSparkSessionExtension",
                                           spark__plugins="com.example.MetricsPlugin"), "x")


@pytest.mark.parametrize("switch", ["spark.comet.enabled", "spark.comet.scan.enabled"])
def test_an_engine_whose_scans_are_switched_off_passes(switch: str) -> None:
    spark = _session(spark__plugins="org.apache.spark.CometPlugin", **{switch.replace(".", "__"): "False"})
    assert scan_replacing_engines(spark) == []
    spark = _session(spark__plugins="org.apache.spark.CometPlugin", **{switch.replace(".", "__"): "true"})
    assert len(scan_replacing_engines(spark)) == 1


def test_the_message_says_how_to_switch_it_off() -> None:
    spark = _session(spark__plugins="com.nvidia.spark.SQLPlugin")
    with pytest.raises(NativeEngineScanError, match="spark.rapids.sql.enabled=false"):
        refuse_scan_replacing_engines(spark, "x")
