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
from collections.abc import Callable
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


#: called with "read" after the command loaded its snapshot and "commit" just before it commits (interleavings)
Pause = Callable[[str], None]


def _no_pause(point: str) -> None:
    del point


def _write_file(table: str, ids: list[int], vs: list[int] | None = None) -> AddFile:
    name = f"part-{uuid.uuid4()}.parquet"
    path = os.path.join(table, name)
    tmp = os.path.join(table, f".{name}.tmp")
    os.makedirs(table, exist_ok=True)
    values = vs if vs is not None else [0] * len(ids)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(values, pa.int64())}), tmp)
    os.rename(tmp, path)  # Spark's committer also renames a finished file into place
    stats, _ = footer_stats(path, ["id", "v"], 32, True)
    return AddFile(path=name, partition_values={}, size=os.path.getsize(path), modification_time=now_ms(),
                   data_change=True, stats=stats)


def engine_create(table: str, ids: list[int], checkpoint_interval: int, properties: dict[str, str] | None = None) -> int:
    conf = {"delta.enableDeletionVectors": "true", "delta.checkpointInterval": str(checkpoint_interval),
            **(properties or {})}
    metadata = Metadata(id=str(uuid.uuid4()), schema_string=json.dumps(SCHEMA), configuration=conf, created_time=now_ms())
    protocol = features.protocol_for_new_table(conf, column_mapping=False, schema_string=metadata.schema_string)
    txn = OptimisticTransaction(table, None)
    txn.update_metadata(metadata)
    txn.update_protocol(protocol)
    return txn.commit([_write_file(table, ids)], "CREATE TABLE AS SELECT", {"partitionBy": "[]"})


def engine_append(table: str, ids: list[int], pause: Pause = _no_pause) -> int:
    txn = OptimisticTransaction(table, Snapshot.load(table))
    pause("read")
    add = _write_file(table, ids)
    pause("commit")
    return txn.commit([add], "WRITE", {"mode": "Append"})


def engine_delete(table: str, condition: str, pause: Pause = _no_pause) -> int | None:
    """DELETE with DVs: per touched file remove + add with the OR-ed DV (or a plain remove when all rows go)."""
    from tests.reliability.commands import eval_condition

    snap = Snapshot.load(table)
    pause("read")
    txn = OptimisticTransaction(table, snap)
    txn.read_whole_table()
    adds = snap.add_files()
    actions: list = []
    ts = now_ms()
    with DeletionVectorWriter(table) as writer:
        for add in adds:
            ids = pq.read_table(os.path.join(table, add.path), columns=["id"]).column("id").to_numpy()
            hits = np.array([i for i, x in enumerate(ids.tolist()) if eval_condition(condition, x)], dtype=np.uint64)
            if len(hits):  # a candidate file, as the real DELETE's pruning keeps it (an ideal pruner: exact)
                txn.read_files([add])
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
    pause("commit")
    return txn.commit(actions, "DELETE", {"predicate": json.dumps([condition])})


def _live_rows(table: str, add: AddFile) -> tuple[list[int], list[int]]:
    """(ids, v) of the rows of ``add`` its DV keeps."""
    t = pq.read_table(os.path.join(table, add.path), columns=["id", "v"])
    keep = np.ones(t.num_rows, dtype=bool)
    if add.deletion_vector is not None:
        keep[np.asarray(load_bitmap(add.deletion_vector, table).to_array(), dtype=np.int64)] = False
    return t.column("id").to_numpy()[keep].tolist(), t.column("v").to_numpy()[keep].tolist()


def engine_update(table: str, condition: str, value: int, pause: Pause = _no_pause) -> int | None:
    """UPDATE, copy-on-write as dvlake's UPDATE commits it: each touched file removed, its live rows rewritten
    with ``v = value`` where the condition holds; reads registered as the real command does (files + condition)."""
    from tests.reliability.commands import eval_condition

    snap = Snapshot.load(table)
    pause("read")
    txn = OptimisticTransaction(table, snap)
    adds = snap.add_files()
    txn.read_whole_table()
    actions: list = []
    ts = now_ms()
    for add in adds:
        ids, vs = _live_rows(table, add)
        hits = [eval_condition(condition, i) for i in ids]
        if not any(hits):
            continue
        txn.read_files([add])  # a candidate file (an ideal pruner keeps exactly those with a matching row)
        actions.append(add.remove(ts))
        actions.append(_write_file(table, ids, [value if h else v for h, v in zip(hits, vs, strict=True)]))
    if not actions:
        return None
    pause("commit")
    return txn.commit(actions, "UPDATE", {"predicate": json.dumps([condition])})


def engine_optimize(table: str, pause: Pause = _no_pause) -> int | None:
    """OPTIMIZE as dvlake commits it: every file (DVs applied) compacted into one, dataChange=false, the inputs
    registered as read files, SnapshotIsolation."""
    snap = Snapshot.load(table)
    pause("read")
    adds = snap.add_files()
    if len(adds) < 2 and not any(a.deletion_vector is not None for a in adds):
        return None
    txn = OptimisticTransaction(table, snap, isolation_level="SnapshotIsolation")
    txn.read_files(adds)
    ids: list[int] = []
    vs: list[int] = []
    for add in adds:
        i, v = _live_rows(table, add)
        ids += i
        vs += v
    ts = now_ms()
    compacted = replace(_write_file(table, ids, vs), data_change=False)
    pause("commit")
    return txn.commit([*(a.remove(ts, data_change=False) for a in adds), compacted], "OPTIMIZE", {"predicate": "[]"})
