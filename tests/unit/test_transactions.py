"""Commits and Delta's conflict rules, with transactions interleaved by hand (no Spark)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import uuid

import pytest

from dvlake.commands.writes.write import create_table
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    DeletionVectorsNotAllowedError,
    DeltaConcurrentModificationException,
    MetadataChangedException,
    ProtocolChangedException,
    TableAlreadyExistsError,
)
from dvlake.log import features
from dvlake.log.actions import AddFile, Txn
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                       {"name": "part", "type": "string", "nullable": True, "metadata": {}}]}


def add(path: str, part: str = "a", dv: DeletionVectorDescriptor | None = None, rows: int = 10) -> AddFile:
    stats = {"numRecords": rows, "minValues": {"id": 0}, "maxValues": {"id": rows - 1}, "nullCount": {"id": 0},
             "tightBounds": dv is None}
    return AddFile(path=path, partition_values={"part": part}, size=100, modification_time=1, stats=json.dumps(stats),
                   deletion_vector=dv)


def dv(n: int) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor.from_json({"storageType": "i", "pathOrInlineDv": "0" * 5 * n, "sizeInBytes": 4 * n,
                                               "cardinality": n})


@pytest.fixture(params=["local", "memory"])
def table(request, tmp_path):
    """The same table on disk and in the in-memory storage: the log and txn layers see no difference."""
    root = str(tmp_path / "t") if request.param == "local" else f"memory://{uuid.uuid4().hex}/t"
    create_table(root, SCHEMA, ["part"], {"delta.enableDeletionVectors": "true"})
    txn = OptimisticTransaction(root, Snapshot.load(root))
    txn.commit([add("a1.parquet", "a"), add("b1.parquet", "b")], "WRITE")
    return root


def start(root):
    return OptimisticTransaction(root, Snapshot.load(root))


def test_create_sets_dv_protocol(table):
    snap = Snapshot.load(table)
    assert snap.protocol.min_reader_version == 3 and snap.protocol.min_writer_version == 7
    assert "deletionVectors" in snap.protocol.reader_features and "deletionVectors" in snap.protocol.writer_features
    assert features.dvs_enabled(snap.protocol, snap.metadata)
    assert snap.version == 1 and snap.num_files == 2


def test_create_twice_refused(table):
    with pytest.raises(TableAlreadyExistsError):
        create_table(table, SCHEMA, ["part"])


def test_commit_file_is_never_overwritten(table):
    t1, t2 = start(table), start(table)
    v2 = t2.commit([add("x.parquet")], "WRITE")
    v1 = t1.commit([add("y.parquet")], "WRITE")  # blind appends rebase
    assert (v2, v1) == (2, 3)
    snap = Snapshot.load(table)
    assert {r["path"] for r in snap.files.to_pylist()} >= {"x.parquet", "y.parquet"}


def test_concurrent_append_conflicts_with_whole_table_read(table):
    reader = start(table)
    reader.read_whole_table()
    writer = start(table)
    writer.read_whole_table()  # makes the winner a non-blind append
    writer.commit([add("a2.parquet")], "MERGE")
    with pytest.raises(ConcurrentAppendException, match="a2.parquet"):
        reader.commit([add("a1.parquet").remove()], "DELETE")


def test_blind_append_does_not_conflict_under_write_serializable(table):
    reader = start(table)
    reader.read_whole_table()
    start(table).commit([add("a3.parquet")], "WRITE")
    assert reader.commit([add("a1.parquet").remove()], "DELETE") == 3


def test_blind_append_conflicts_under_serializable(table):
    reader = OptimisticTransaction(table, Snapshot.load(table), isolation_level="Serializable")
    reader.read_whole_table()
    start(table).commit([add("a3.parquet")], "WRITE")
    with pytest.raises(ConcurrentAppendException):
        reader.commit([add("a1.parquet").remove()], "DELETE")


def test_append_outside_read_predicate_commits(table):
    reader = start(table)
    reader.read_predicate(lambda a: a["partitionValues"].get("part") == "a")
    other = start(table)
    other.read_predicate(lambda a: a["partitionValues"].get("part") == "b")
    other.commit([add("b2.parquet", "b")], "MERGE")
    assert reader.commit([add("a1.parquet").remove()], "DELETE") == 3


def test_append_inside_read_predicate_conflicts(table):
    reader = start(table)
    reader.read_predicate(lambda a: a["partitionValues"].get("part") == "a")
    other = start(table)
    other.read_predicate(lambda a: True)
    other.commit([add("a9.parquet", "a")], "MERGE")
    with pytest.raises(ConcurrentAppendException):
        reader.commit([add("a1.parquet").remove()], "DELETE")


def test_delete_read_conflict(table):
    reader = start(table)
    reader.read_files([add("a1.parquet")])
    start(table).commit([add("a1.parquet").remove()], "DELETE")
    with pytest.raises(ConcurrentDeleteReadException, match="a1.parquet"):
        reader.commit([add("new.parquet")], "UPDATE")


def test_two_writers_replacing_the_same_dv_conflict(table):
    t1, t2 = start(table), start(table)
    base = add("a1.parquet")
    t2.commit([base.remove(), add("a1.parquet", dv=dv(1))], "DELETE")
    with pytest.raises(ConcurrentDeleteDeleteException, match="a1.parquet"):
        t1.commit([base.remove(), add("a1.parquet", dv=dv(2))], "DELETE")
    snap = Snapshot.load(table)
    [row] = [r for r in snap.files.to_pylist() if r["path"] == "a1.parquet"]
    assert row["deletionVector"]["cardinality"] == 1


def test_dv_replacement_on_other_file_commits(table):
    t1, t2 = start(table), start(table)
    t1.read_files([add("a1.parquet")])
    t2.read_files([add("b1.parquet")])
    t2.commit([add("b1.parquet", "b").remove(), add("b1.parquet", "b", dv=dv(1))], "DELETE")
    assert t1.commit([add("a1.parquet").remove(), add("a1.parquet", dv=dv(1))], "DELETE") == 3
    assert Snapshot.load(table).dv_count() == 2


def test_metadata_changed(table):
    t1 = start(table)
    t1.read_whole_table()
    t2 = start(table)
    t2.update_metadata(Snapshot.load(table).metadata.with_configuration(x="1"))
    t2.commit([], "SET TBLPROPERTIES")
    with pytest.raises(MetadataChangedException):
        t1.commit([add("z.parquet")], "WRITE")


def test_protocol_changed(table):
    t1 = start(table)
    t2 = start(table)
    snap = Snapshot.load(table)
    t2.update_protocol(features.with_features(snap.protocol, writer={"changeDataFeed"}))
    t2.commit([], "UPGRADE PROTOCOL")
    with pytest.raises(ProtocolChangedException):
        t1.commit([add("z.parquet")], "WRITE")


def test_concurrent_transaction_id(table):
    t1, t2 = start(table), start(table)
    assert t1.read_app_txn("app") is None
    t2.read_app_txn("app")
    t2.commit([Txn("app", 1), add("p.parquet")], "STREAMING UPDATE")
    with pytest.raises(ConcurrentTransactionException, match="app"):
        t1.commit([Txn("app", 1), add("q.parquet")], "STREAMING UPDATE")
    assert Snapshot.load(table).txns["app"].version == 1


def test_dv_needs_enabled_feature(tmp_path):
    root = str(tmp_path / "plain")
    create_table(root, SCHEMA, ["part"])
    with pytest.raises(DeletionVectorsNotAllowedError):
        start(root).commit([add("a.parquet", dv=dv(1))], "DELETE")


def test_dv_add_needs_loose_bounds(table):
    bad = add("a1.parquet", dv=dv(1))
    bad = AddFile(**{**bad.__dict__, "stats": json.dumps({"numRecords": 10, "tightBounds": True})})
    with pytest.raises(Exception, match="tightBounds"):
        start(table).commit([add("a1.parquet").remove(), bad], "DELETE")


def test_failed_commit_leaves_table_readable(table, monkeypatch):
    before = Snapshot.load(table)
    txn = start(table)
    monkeypatch.setattr(txn.storage, "write_if_absent", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        txn.commit([add("never.parquet")], "WRITE")
    after = Snapshot.load(table)
    assert after.version == before.version and after.num_files == before.num_files


def test_checkpoint_every_interval(tmp_path):
    root = str(tmp_path / "cp")
    create_table(root, SCHEMA, ["part"], {"delta.enableDeletionVectors": "true", "delta.checkpointInterval": "3"})
    for i in range(7):
        start(root).commit([add(f"f{i}.parquet", dv=dv(1) if i % 2 else None)], "WRITE")
    names = sorted(os.listdir(os.path.join(root, "_delta_log")))
    assert "00000000000000000003.checkpoint.parquet" in names and "00000000000000000006.checkpoint.parquet" in names
    snap = Snapshot.load(root)
    assert snap.state.checkpoint_version == 6 and snap.num_files == 7 and snap.dv_count() == 3
    hint = json.load(open(os.path.join(root, "_delta_log", "_last_checkpoint")))
    assert hint["version"] == 6


# --- many processes, one table ------------------------------------------------------------------

def _committer(root: str, worker: int, n: int, queue) -> None:
    results = []
    for i in range(n):
        for _ in range(50):
            txn = OptimisticTransaction(root, Snapshot.load(root))
            if i % 5 == 4:
                txn.read_whole_table()  # a reading writer: may lose races with a typed error, then retries
            try:
                v = txn.commit([add(f"w{worker}-{i}.parquet", part=str(worker))], "WRITE", tags={"who": f"{worker}-{i}"})
                results.append(("ok", v))
                break
            except DeltaConcurrentModificationException as exc:
                results.append(("conflict", type(exc).__name__))
        else:
            results.append(("gave-up", None))
    queue.put((worker, results))


@pytest.mark.slow
def test_four_processes_commit_contiguously(tmp_path):
    root = str(tmp_path / "mp")
    create_table(root, SCHEMA, ["part"])
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_committer, args=(root, w, 25, queue)) for w in range(4)]
    for p in procs:
        p.start()
    outcomes = dict(queue.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    oks = [v for res in outcomes.values() for kind, v in res if kind == "ok"]
    assert not [r for res in outcomes.values() for r in res if r[0] == "gave-up"]
    assert sorted(oks) == list(range(1, 101))
    conflicts = {v for res in outcomes.values() for kind, v in res if kind == "conflict"}
    assert conflicts <= {"ConcurrentAppendException", "ConcurrentDeleteReadException"}
    snap = Snapshot.load(root)
    assert snap.version == 100 and snap.num_files == 100
    tags = []
    for v in range(1, 101):
        with open(os.path.join(root, "_delta_log", f"{v:020d}.json")) as f:
            info = json.loads(f.readline())["commitInfo"]
        tags.append(info["tags"]["who"])
    assert len(set(tags)) == 100
