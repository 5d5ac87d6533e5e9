"""What dvlake writes and lists besides commits, on S3 (moto) and Azure (Azurite): log cleanup after a
checkpoint, VACUUM's listing and batched deletes, UniForm's create-only ``vN.metadata.json``, CONVERT's listing."""

from __future__ import annotations

import json

import pytest

from dvlake.commands.maintenance.vacuum import RETENTION_CHECK, vacuum
from dvlake.commands.writes.write import create_table
from dvlake.log.cleanup import cleanup_expired_logs
from dvlake.log.snapshot import Snapshot
from dvlake.storage import storage_for
from dvlake.txn.transaction import OptimisticTransaction
from dvlake.uniform.convert import metadata_location, sync
from tests.objectstore.conftest import Store
from tests.objectstore.writer import data_file

pytestmark = pytest.mark.objectstore

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01: every file is older than any retention


def _names(root: str, folder: str) -> list[str]:
    return sorted(f.path.rsplit("/", 1)[1] for f in storage_for(root).list_dir(f"{root}/{folder}"))


def test_log_cleanup_after_a_checkpoint_deletes_only_versions_below_it(store: Store) -> None:
    root = store.root()
    create_table(root, SCHEMA, [], {"delta.enableDeletionVectors": "true"})
    for i in range(12):
        OptimisticTransaction(root, Snapshot.load(root)).commit([data_file("c", i)], "WRITE")
    deleted = cleanup_expired_logs(storage_for(root), root, Snapshot.load(root).configuration, now=FAR_FUTURE_MS)
    assert [p.rsplit("/", 1)[1] for p in deleted] == [f"{v:020d}.json" for v in range(10)]
    assert _names(root, "_delta_log") == [f"{10:020d}.checkpoint.parquet", f"{10:020d}.json", f"{11:020d}.json",
                                          f"{12:020d}.json", "_last_checkpoint"]
    snap = Snapshot.load(root)
    assert snap.version == 12 and snap.num_files == 12


def test_vacuum_lists_and_deletes_in_batches_only_what_no_version_needs(store: Store) -> None:
    root = store.root()
    s = storage_for(root)
    create_table(root, SCHEMA, [], {"delta.enableDeletionVectors": "true",
                                    "delta.deletedFileRetentionDuration": "interval 0 hours"})
    files = [data_file("v", i) for i in range(5)]
    for f in files:
        s.write(f"{root}/{f.path}", b"PAR1")
    s.write(f"{root}/part=1/orphan.parquet", b"PAR1")  # written by a failed job: never committed
    s.write(f"{root}/_hidden/kept.parquet", b"PAR1")  # hidden folders are not VACUUM's
    OptimisticTransaction(root, Snapshot.load(root)).commit(files, "WRITE")
    snap = Snapshot.load(root)
    OptimisticTransaction(root, snap).commit([snap_file.remove() for snap_file in files[:2]], "DELETE")
    result = vacuum({RETENTION_CHECK: "false"}, root, retention_hours=0, now=FAR_FUTURE_MS)
    gone = {files[0].path, files[1].path, "part=1/orphan.parquet"}
    assert result.num_deleted == 3
    left = sorted(f.path[len(root) + 1:] for f in s.walk(root) if not f.path.startswith(f"{root}/_delta_log/"))
    assert left == sorted({f.path for f in files} - gone | {"_hidden/kept.parquet"})
    assert Snapshot.load(root).num_files == 3


def test_uniform_metadata_is_created_once_per_version(store: Store) -> None:
    root = store.root()
    create_table(root, SCHEMA, (), {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"})
    OptimisticTransaction(root, Snapshot.load(root)).commit([data_file("u", i) for i in range(3)], "WRITE")
    assert sync(root) == 1
    s = storage_for(root)
    first = s.read_bytes(metadata_location(root, 1))
    meta = json.loads(first)
    assert meta["properties"]["delta-version"] == "1" and meta["format-version"] in (2, 3)
    with pytest.raises(FileExistsError):  # the same create-only write as a commit
        s.write_if_absent(metadata_location(root, 1), b"{}")
    assert s.read_bytes(metadata_location(root, 1)) == first
    OptimisticTransaction(root, Snapshot.load(root)).commit([data_file("u", 3)], "WRITE")
    assert sync(root) == 2
    assert json.loads(s.read_bytes(metadata_location(root, 2)))["properties"]["delta-version"] == "2"


def test_convert_lists_the_store_and_commits_once(store: Store) -> None:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.types import IntegerType, StructField, StructType

    from dvlake.commands.ddl.convert import convert_to_delta

    root = store.root()
    s = storage_for(root)
    for rel, ids in (("p=1/a.parquet", [1, 2, 3]), ("p=2/b.parquet", [4, 5]), ("_tmp/hidden.parquet", [9])):
        buf = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), buf)
        s.write(f"{root}/{rel}", buf.getvalue())
    partition = StructType([StructField("p", IntegerType())])
    assert convert_to_delta(None, root, partition) == 0  # type: ignore[arg-type]  # no Spark: the schema is given
    snap = Snapshot.load(root)
    rows = sorted((r["path"], dict(r["partitionValues"])["p"], json.loads(r["stats"])["numRecords"])
                  for r in snap.files.to_pylist())
    assert rows == [("p=1/a.parquet", "1", 3), ("p=2/b.parquet", "2", 2)]
    assert _names(root, "_delta_log") == [f"{0:020d}.json"]
