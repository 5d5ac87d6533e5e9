"""GENERATE symlink_format_manifest: manifests a plain Parquet reader follows; refused while DVs hide rows."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dvlake
from dvlake import DeltaTable
from dvlake.errors import TablePropertyValidationError, UnsupportedModeError, UnsupportedWithDeletionVectorsError

AUTO = "delta.compatibility.symlinkFormatManifest.enabled"


def _manifests(path):
    base = os.path.join(path, "_symlink_format_manifest")
    out = {}
    for d, _, names in os.walk(base):
        if "manifest" in names:
            with open(os.path.join(d, "manifest")) as f:
                out[os.path.relpath(d, base)] = [ln for ln in f.read().splitlines() if ln]
    return out


def _read_through_manifests(path):
    """What Presto/Athena would see: every Parquet file the manifests list, read whole."""
    tables = []
    for lines in _manifests(path).values():
        for line in lines:
            assert line.startswith("file:/")
            tables.append(pq.read_table(line[len("file:"):]).select(["id"]))  # Hadoop Path form: not URL-encoded
    return sorted(pa.concat_tables(tables).column("id").to_pylist()) if tables else []


def _ids(spark, path):
    return sorted(r.id for r in dvlake.read(spark, path).select("id").collect())


def test_manifests_per_partition_read_back_by_a_plain_parquet_reader(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(i, None if i % 5 == 0 else f"a/b={i % 2}") for i in range(40)], "id long, p string")
    dvlake.write(df, path, partitionBy="p")
    DeltaTable.forPath(spark, path).generate("symlink_format_manifest")
    parts = _manifests(path)
    assert set(parts) == {"p=__HIVE_DEFAULT_PARTITION__", "p=a%2Fb%3D0", "p=a%2Fb%3D1"}
    assert _read_through_manifests(path) == list(range(40))
    # a partition that disappears loses its manifest on the next generation
    dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE p IS NULL")
    dvlake.sql(spark, f"GENERATE symlink_format_manifest FOR TABLE delta.`{path}`")
    assert set(_manifests(path)) == {"p=a%2Fb%3D0", "p=a%2Fb%3D1"}
    assert _read_through_manifests(path) == _ids(spark, path)
    with pytest.raises(UnsupportedModeError):
        DeltaTable.forPath(spark, path).generate("iceberg_manifest")


def test_generate_refused_with_live_dvs_and_auto_manifest_refused_with_dvs(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.range(20).repartition(2), path, properties={"delta.enableDeletionVectors": "true"})
    t = DeltaTable.forPath(spark, path)
    t.generate("symlink_format_manifest")  # the feature alone is fine: no file has a DV yet
    assert _read_through_manifests(path) == list(range(20))
    t.delete("id = 3")
    with pytest.raises(UnsupportedWithDeletionVectorsError, match="PURGE") as err:
        dvlake.sql(spark, f"GENERATE symlink_format_manifest FOR TABLE delta.`{path}`")
    assert err.value.error_class == "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS"
    with pytest.raises(TablePropertyValidationError, match="PERSISTENT_DELETION_VECTORS"):
        t.setProperties({AUTO: "true"})
    t.setProperties({"delta.enableDeletionVectors": "false"})
    with pytest.raises(TablePropertyValidationError, match="EXISTING_DELETION_VECTORS") as err:
        t.setProperties({AUTO: "true"})
    assert err.value.error_class.startswith("DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED")


def test_auto_manifest_is_rewritten_after_each_commit(spark, tmp_path):
    path = str(tmp_path / "t")
    dvlake.write(spark.range(10), path, properties={AUTO: "true"})
    assert _read_through_manifests(path) == list(range(10))
    dvlake.write(spark.range(10, 15), path, mode="append")
    assert _read_through_manifests(path) == list(range(15))
    with pytest.raises(TablePropertyValidationError):
        DeltaTable.forPath(spark, path).setProperties({"delta.enableDeletionVectors": "true"})
