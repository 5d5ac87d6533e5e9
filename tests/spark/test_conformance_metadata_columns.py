"""A Delta read's ``_metadata`` columns, by delta-spark's rule: a Delta scan offers Spark's file metadata columns
(``file_path``, ``file_name``, ``file_size``, ``file_modification_time``, ``row_index``) of the data file each row
was read from, and deleted rows are not there to describe.

Checked on the native scan for a table where only some files carry a deletion vector: the scan reads a partition's
files with and without DVs as one relation. The pure-Python path reads files with a DV in scans keyed by file size
(and files without one apart), whose union offers no ``_metadata`` column (Spark drops metadata columns at a union):
there a query for ``_metadata`` fails with Spark's ``UNRESOLVED_COLUMN``, never with other rows.
"""

from __future__ import annotations

import os

import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from dvlake.log.snapshot import Snapshot
from dvlake.spark.dv_scan import path_key

COLUMNS = ["_metadata.file_path", "_metadata.file_name", "_metadata.file_size", "_metadata.file_modification_time",
           "_metadata.row_index"]


def _table(spark: SparkSession, path: str, deleted: str) -> dict[int, str]:
    """Three files of ten ids each (0-9, 10-19, 20-29, written in order); rows ``deleted`` removed with DVs.
    Returns id → the data file holding it."""
    dvlake.write(spark.range(0, 30, 1, numPartitions=3), path, properties={"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(spark, path).delete(deleted)
    snap = Snapshot.load(path)
    out: dict[int, str] = {}
    for add in snap.add_files():
        location = os.path.join(snap.table_root, add.path)
        ids = [r.id for r in spark.read.parquet(location).collect()]
        out.update(dict.fromkeys(ids, location))
    return out


def _check(spark: SparkSession, path: str, where: dict[int, str], live: set[int]) -> None:
    rows = dvlake.read(spark, path).select("id", *COLUMNS).collect()
    assert sorted(r.id for r in rows) == sorted(live)
    for r in rows:
        location = where[r.id]
        assert path_key(r.file_path) == location
        assert r.file_name == os.path.basename(location)
        assert r.file_size == os.path.getsize(location)
        assert abs(r.file_modification_time.timestamp() - os.path.getmtime(location)) < 2
        assert r.row_index == r.id % 10  # the physical position in its file, deleted rows counted


def test_metadata_columns_with_dvs_on_some_files_native(spark: SparkSession, tmp_path, scan_path: str) -> None:
    if scan_path != "native":
        pytest.skip("the pure-Python path reads such a table as a union of scans (see the module docstring)")
    path = str(tmp_path / "t")
    where = _table(spark, path, "id IN (3, 4, 25)")  # two of three files get a DV
    _check(spark, path, where, set(range(30)) - {3, 4, 25})
