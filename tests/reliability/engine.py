"""Spark-free appends and DELETEs built from dvlake's own pieces, for fast crash children.

A Spark child costs a JVM start per kill; these children start in well under a second, so a CI
run can afford dozens of kills. They drive the code a crash can tear — Parquet file placement,
``DeletionVectorWriter`` (the same writer executors use), ``OptimisticTransaction.commit``
(create-if-absent of the commit file) and the checkpoint after it — with the same actions the
real commands commit. The Spark tier of ``test_crash.py`` kills the real commands too.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dvlake.dv.roaring import from_indexes
from dvlake.dv.store import DeletionVectorWriter, load_bitmap
from dvlake.log import features
from dvlake.log.actions import AddFile, Metadata, now_ms
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import with_loose_bounds
from dvlake.spark.file_stats import footer_stats
from dvlake.txn.transaction import OptimisticTransaction

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                       {"name": "v", "type": "long", "nullable": True, "metadata": {}}]}


def _write_file(table: str, ids: list[int]) -> AddFile:
    name = f"part-{uuid.uuid4()}.parquet"
    path = os.path.join(table, name)
    tmp = os.path.join(table, f".{name}.tmp")
    os.makedirs(table, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([0] * len(ids), pa.int64())}), tmp)
    os.rename(tmp, path)  # Spark's committer also renames a finished file into place
    stats, _ = footer_stats(path, ["id", "v"], 32, True)
    return AddFile(path=name, partition_values={}, size=os.path.getsize(path), modification_time=now_ms(),
                   data_change=True, stats=stats)


def engine_create(table: str, ids: list[int], checkpoint_interval: int) -> int:
    conf = {"delta.enableDeletionVectors": "true", "delta.checkpointInterval": str(checkpoint_interval)}
    metadata = Metadata(id=str(uuid.uuid4()), schema_string=json.dumps(SCHEMA), configuration=conf, created_time=now_ms())
    protocol = features.protocol_for_new_table(conf, column_mapping=False, schema_string=metadata.schema_string)
    txn = OptimisticTransaction(table, None)
    txn.update_metadata(metadata)
    txn.update_protocol(protocol)
    return txn.commit([_write_file(table, ids)], "CREATE TABLE AS SELECT", {"partitionBy": "[]"})


def engine_append(table: str, ids: list[int]) -> int:
    txn = OptimisticTransaction(table, Snapshot.load(table))
    return txn.commit([_write_file(table, ids)], "WRITE", {"mode": "Append"})


def engine_delete(table: str, condition: str) -> int | None:
    """DELETE with DVs: per touched file remove + add with the OR-ed DV (or a plain remove when all rows go)."""
    from tests.reliability.commands import eval_condition

    snap = Snapshot.load(table)
    txn = OptimisticTransaction(table, snap)
    txn.read_whole_table()
    adds = snap.add_files()
    txn.read_files(adds)
    actions: list = []
    ts = now_ms()
    with DeletionVectorWriter(table) as writer:
        for add in adds:
            ids = pq.read_table(os.path.join(table, add.path), columns=["id"]).column("id").to_numpy()
            hits = np.array([i for i, x in enumerate(ids.tolist()) if eval_condition(condition, x)], dtype=np.uint64)
            bitmap = from_indexes(hits)
            previous = 0
            if add.deletion_vector is not None:
                old = load_bitmap(add.deletion_vector, table)
                previous = len(old)
                bitmap |= old
            if len(bitmap) == previous:
                continue
            actions.append(add.remove(ts))
            if len(bitmap) < len(ids):
                actions.append(replace(add, deletion_vector=writer.add(bitmap), stats=with_loose_bounds(add.stats)))
    if not actions:
        return None
    return txn.commit(actions, "DELETE", {"predicate": json.dumps([condition])})
