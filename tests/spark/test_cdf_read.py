"""Reading the change feed: range and timestamp resolution, delta-spark's errors, the output schema,
and reading only what changed (row groups holding a changed row; files whose DVs do not differ unopened)."""

from __future__ import annotations

import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, TimestampType

import dvlake
from dvlake import DeltaTable
from dvlake.dv import roaring
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import (
    CdcStartVersionAfterLatestError,
    ChangeDataFileNotFoundError,
    CorruptDeletionVectorError,
    InvalidCdcRangeError,
    MissingChangeDataError,
    MultipleCdcBoundaryError,
    NoStartForCdcReadError,
)
from dvlake.log.snapshot import Snapshot
from dvlake.spark import cdf_read
from dvlake.storage.base import storage_for


def test_ranges_timestamps_schema_and_delta_spark_errors(spark, tmp_path):
    path = str(tmp_path / "t")
    df = spark.range(10).select("id", F.col("id").cast("string").alias("s")).coalesce(1)
    dvlake.write(df, path, properties={"delta.enableDeletionVectors": "true"})           # v0: feed off
    dt = DeltaTable.forPath(spark, path)
    dt.setProperties({"delta.enableChangeDataFeed": "true"})                             # v1: feed on
    dt.delete("id in (4, 5)")                                                            # v2: DV delete
    changes = dvlake.read_changes(spark, path, startingVersion=1)
    assert [(f.name, type(f.dataType)) for f in changes.schema.fields] == [
        ("id", LongType), ("s", StringType), ("_change_type", StringType), ("_commit_version", LongType),
        ("_commit_timestamp", TimestampType)]
    rows = sorted((r.id, r.s, r._change_type, r._commit_version) for r in changes.collect())
    assert rows == [(4, "4", "delete", 2), (5, "5", "delete", 2)]
    stamp = changes.select("_commit_timestamp").first()[0]
    snap = Snapshot.load(path)
    assert int(stamp.timestamp() * 1000) == snap.commit_timestamp(2)
    assert sorted(r.id for r in dt.readChanges(2, 2).collect()) == [4, 5]
    # timestamps: the first commit at or after the start, the last at or before the end
    t1, t2 = snap.commit_timestamp(1), snap.commit_timestamp(2)
    assert dvlake.read_changes(spark, path, startingTimestamp=t1, endingTimestamp=t1).count() == 0
    assert t2 > t1 and dvlake.read_changes(spark, path, startingTimestamp=t1 + 1).count() == 2  # stamps are monotonic
    assert dvlake.read_changes(spark, path, startingVersion=1, endingVersion=99).count() == 2  # end clamped
    with pytest.raises(NoStartForCdcReadError, match="DELTA_NO_START_FOR_CDC_READ"):
        dvlake.read_changes(spark, path)
    with pytest.raises(MultipleCdcBoundaryError, match="DELTA_MULTIPLE_CDC_BOUNDARY"):
        dvlake.read_changes(spark, path, startingVersion=1, startingTimestamp=t1)
    with pytest.raises(InvalidCdcRangeError, match="DELTA_INVALID_CDC_RANGE"):
        dvlake.read_changes(spark, path, 2, 1)
    with pytest.raises(CdcStartVersionAfterLatestError, match="DELTA_CDC_START_VERSION_AFTER_LATEST"):
        dvlake.read_changes(spark, path, 3)
    with pytest.raises(MissingChangeDataError, match="DELTA_MISSING_CHANGE_DATA.*version 0"):
        dvlake.read_changes(spark, path, 0, 2)
    # a file the range needs is gone (as after VACUUM): named, with its version
    add = next(json.loads(ln)["add"] for ln in open(os.path.join(path, "_delta_log", f"{2:020d}.json"))
               if '"add"' in ln)
    os.remove(os.path.join(path, add["path"]))
    with pytest.raises(ChangeDataFileNotFoundError, match="DELTA_CHANGE_DATA_FILE_NOT_FOUND.*version 2"):
        dvlake.read_changes(spark, path, 2)


def _parquet(tmp_path, rows: int, group: int) -> str:
    location = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "x": pa.array([str(i) for i in range(rows)])}),
                   location, row_group_size=group)
    return location


def test_changed_rows_are_read_by_row_index_from_their_row_groups_only(tmp_path, monkeypatch):
    location = _parquet(tmp_path, 1000, 100)
    decoded: list[tuple[int, int]] = []  # (row group, rows decoded in it)
    original = pq.ParquetFile.iter_batches

    def spy(self, *args, **kwargs):
        for batch in original(self, *args, **kwargs):
            decoded.append((kwargs["row_groups"][0], batch.num_rows))
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    monkeypatch.setattr(cdf_read, "READ_BATCH_ROWS", 10)
    storage = storage_for(str(tmp_path))
    table = cdf_read.read_rows(storage, location, np.array([5, 550, 551, 999]), ["id", "x", "added_later"])
    assert table.column("id").to_pylist() == [5, 550, 551, 999] and table.column("x").to_pylist()[1] == "550"
    # 3 of 10 row groups, each decoded only up to the batch holding its last wanted row
    assert sorted({g for g, _ in decoded}) == [0, 5, 9]
    assert [sum(n for g, n in decoded if g == k) for k in (0, 5, 9)] == [10, 60, 100]
    with pytest.raises(CorruptDeletionVectorError, match="1000"):
        cdf_read.read_rows(storage, location, np.array([3, 1000]), ["id"])


def test_a_file_whose_dvs_do_not_differ_is_never_opened(tmp_path):
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructField, StructType

    out = StructType([StructField("id", LongType()), *cdf_read.CDC_FIELDS])
    empty = DeletionVectorDescriptor.inline(roaring.serialize(roaring.from_indexes([])), 0)
    one = DeletionVectorDescriptor.inline(roaring.serialize(roaring.from_indexes([3])), 1)
    fn = cdf_read.changed_rows_reader(str(tmp_path), True, ["id"], 0, to_arrow_schema(out, timezone="UTC"))

    def task(new: DeletionVectorDescriptor) -> pa.RecordBatch:
        return pa.RecordBatch.from_pydict({"location": [str(tmp_path / "missing.parquet")], "old": [None],
                                           "new": [json.dumps(new.to_json())], "version": [1], "ts": [0]})

    assert list(fn(iter([task(empty)]))) == []  # an empty DV delta: the (missing) file is not opened
    with pytest.raises(Exception, match="missing.parquet|No such file"):  # a real delta opens it
        list(fn(iter([task(one)])))
