"""``DeltaTable.addFeatureSupport`` / ``dropFeatureSupport`` / ``upgradeTableProtocol`` as delta-spark 4.x's Python API.

delta-spark's own test of ``dropFeatureSupport`` uses features that exist only in its test build; here the same
expectations are checked with real features of each kind: a writer-only removable one (``checkConstraints``), a
reader-writer removable one with nothing to clean up (``vacuumProtocolCheck``) and a non-removable one
(``timestampNtz``). After a drop the protocol is normalized back to the legacy (1, 2) it came from.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.config import FAST_DROP
from dvlake.errors import DvlakeError
from dvlake.log.snapshot import Snapshot


def _legacy_table(spark: SparkSession, path: str) -> DeltaTable:
    """A (1, 2) table, as delta-spark's tests make it with minReaderVersion 1 / minWriterVersion 2."""
    dvlake.write(spark.createDataFrame([("a", 1), ("b", 2)], "key string, value long"), path,
                 properties={"delta.minReaderVersion": "1", "delta.minWriterVersion": "2"})
    dt = DeltaTable.forPath(spark, path)
    assert _protocol(dt) == (1, 2, ["appendOnly", "invariants"])
    return dt


def _protocol(dt: DeltaTable) -> tuple[int, int, list[str]]:
    d = dt.detail().first()
    return d.minReaderVersion, d.minWriterVersion, sorted(d.tableFeatures)


def _error_class(call: object) -> str | None:
    with pytest.raises(DvlakeError) as err:
        call()  # type: ignore[operator]
    return getattr(err.value, "error_class", None)


def test_drop_feature_support_as_delta_spark(spark: SparkSession, tmp_path: Path) -> None:
    spark.conf.set(FAST_DROP, "false")  # the truncate-history drop: no checkpointProtection is added
    try:
        dt = _legacy_table(spark, str(tmp_path / "t"))
        dt.addFeatureSupport("checkConstraints")
        assert _protocol(dt) == (1, 7, ["appendOnly", "checkConstraints", "invariants"])
        # a writer-only feature needs no history truncation, and asking for it is refused before anything runs
        assert _error_class(lambda: dt.dropFeatureSupport("checkConstraints", True)) == \
            "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED"
        dt.dropFeatureSupport("checkConstraints")
        assert _protocol(dt) == (1, 2, ["appendOnly", "invariants"])

        dt.addFeatureSupport("vacuumProtocolCheck")
        assert _protocol(dt) == (3, 7, ["appendOnly", "invariants", "vacuumProtocolCheck"])
        version = Snapshot.load(str(tmp_path / "t")).version
        dt.dropFeatureSupport("vacuumProtocolCheck")
        assert _protocol(dt) == (1, 2, ["appendOnly", "invariants"])
        last = dt.history(1).first()
        # one empty commit (with its checkpoint, for the history truncation to cut at), then the downgrade
        assert (last.version, last.operation, last.operationParameters["featureName"]) == (
            version + 2, "DROP FEATURE", "vacuumProtocolCheck")

        assert _error_class(lambda: dt.dropFeatureSupport("__invalid_feature__")) == \
            "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"
        assert _error_class(lambda: dt.dropFeatureSupport("vacuumProtocolCheck")) == "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"
        dt.addFeatureSupport("timestampNtz")
        assert _error_class(lambda: dt.dropFeatureSupport("timestampNtz")) == "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE"
    finally:
        spark.conf.unset(FAST_DROP)
    for bad in (12345, [12345], {}, []):
        with pytest.raises(ValueError, match="featureName needs to be a string"):
            dt.dropFeatureSupport(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="truncateHistory needs to be a boolean"):
        dt.dropFeatureSupport("vacuumProtocolCheck", 12345)  # type: ignore[arg-type]
    assert [r.key for r in dt.toDF().orderBy("key").collect()] == ["a", "b"]


def test_fast_drop_of_vacuum_protocol_check_adds_checkpoint_protection(spark: SparkSession, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    dt = _legacy_table(spark, path)
    dt.addFeatureSupport("vacuumProtocolCheck")
    dt.dropFeatureSupport("vacuumProtocolCheck")
    snapshot = Snapshot.load(path)
    assert _protocol(dt) == (1, 7, ["appendOnly", "checkpointProtection", "invariants"])
    assert snapshot.configuration["delta.requireCheckpointProtectionBeforeVersion"] == str(snapshot.version)


def test_add_feature_support_and_upgrade_protocol_as_delta_spark(spark: SparkSession, tmp_path: Path) -> None:
    dt = _legacy_table(spark, str(tmp_path / "t"))
    assert _error_class(lambda: dt.addFeatureSupport("abc")) == "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"
    dt.addFeatureSupport("appendOnly")  # already implied by (1, 2): no change
    assert _protocol(dt) == (1, 2, ["appendOnly", "invariants"])
    dt.upgradeTableProtocol(1, 3)
    dt.upgradeTableProtocol(1, 2)  # lower than the table's: ignored, as delta-spark ignores a downgrade
    assert _protocol(dt) == (1, 3, ["appendOnly", "checkConstraints", "invariants"])
    dt.addFeatureSupport("deletionVectors")
    assert _protocol(dt) == (3, 7, ["appendOnly", "checkConstraints", "deletionVectors", "invariants"])
