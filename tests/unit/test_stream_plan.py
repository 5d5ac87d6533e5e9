"""Streaming source planning from the log alone: offsets, rate limits and delta-spark's commit rules (no Spark)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from dvlake.commands.write import create_table
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import (
    DeltaOptionError,
    DeltaSourceIgnoreChangesError,
    DeltaSourceIgnoreDeleteError,
    DifferentTableReadByStreamError,
    StreamingSchemaChangedError,
)
from dvlake.log.actions import AddFile, Metadata
from dvlake.log.snapshot import Snapshot
from dvlake.log.stream_plan import SourceOffset, StreamPlanner, parse_options
from dvlake.txn.transaction import OptimisticTransaction

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def add(path: str, mtime: int = 1, size: int = 100, data_change: bool = True,
        dv: DeletionVectorDescriptor | None = None) -> AddFile:
    return AddFile(path=path, partition_values={}, size=size, modification_time=mtime, data_change=data_change,
                   stats=json.dumps({"numRecords": 10, "tightBounds": dv is None}), deletion_vector=dv)


def inline_dv(n: int) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor.from_json({"storageType": "i", "pathOrInlineDv": "0" * 5 * n, "sizeInBytes": 4 * n,
                                               "cardinality": n})


def commit(root: str, actions: list, operation: str = "WRITE") -> int:
    return OptimisticTransaction(root, Snapshot.load(root)).commit(actions, operation)


@pytest.fixture
def table(tmp_path) -> str:
    root = str(tmp_path / "t")
    create_table(root, SCHEMA, [], {"delta.enableDeletionVectors": "true"})
    commit(root, [add("c.parquet", mtime=3), add("a.parquet", mtime=5), add("b.parquet", mtime=3)])  # v1
    return root


def planner(root: str, **options: str) -> StreamPlanner:
    snap = Snapshot.load(root)
    return StreamPlanner(root, snap.storage, parse_options(options), snap.schema, snap.metadata.id)


def batches(p: StreamPlanner, start: SourceOffset, max_files: int | None = None) -> list[list[str]]:
    """Run micro-batches until the source has nothing new: each batch's file paths."""
    out = []
    for _ in range(20):
        end = p.latest_offset(start, max_files, None)
        if end == start:
            return out
        out.append([str(f.add["path"]) for f in p.files_between(start, end)])  # type: ignore[index]
        start = end
    raise AssertionError("the source never caught up")


def test_initial_snapshot_in_modification_order_then_new_commits(table: str) -> None:
    p = planner(table)
    start = p.initial_offset(Snapshot.load(table))
    assert (start.version, start.index, start.initial) == (1, -1, True)
    assert batches(p, start, max_files=2) == [["b.parquet", "c.parquet"], ["a.parquet"]]
    commit(table, [add("d.parquet"), add("e.parquet")])  # v2
    # resuming from the offset after the snapshot reads only the new commit
    resumed = SourceOffset(start.table_id, 2, -1, False)
    assert batches(p, resumed) == [["d.parquet", "e.parquet"]]
    assert batches(p, start) == [["b.parquet", "c.parquet", "a.parquet", "d.parquet", "e.parquet"]]


def test_offsets_round_trip_and_resume_mid_version(table: str) -> None:
    p = planner(table, maxFilesPerTrigger="1")
    start = p.initial_offset(Snapshot.load(table))
    first = p.latest_offset(start, 1, None)
    assert SourceOffset.from_json(json.loads(json.dumps(first.to_json()))) == first
    assert [f.add["path"] for f in p.files_between(first, p.latest_offset(first, 1, None))] == ["c.parquet"]  # type: ignore[index]


def test_byte_limit_admits_at_least_one_file(table: str) -> None:
    commit(table, [add("big.parquet", size=10_000), add("small.parquet", size=10)])  # v2
    p = planner(table)
    start = SourceOffset(Snapshot.load(table).metadata.id, 2, -1, False)
    end = p.latest_offset(start, None, 50)
    assert [f.add["path"] for f in p.files_between(start, end)] == ["big.parquet"]  # type: ignore[index]


def test_data_change_false_commits_emit_nothing(table: str) -> None:
    snap = Snapshot.load(table)
    rewritten = [f.remove(data_change=False) for f in snap.add_files()] + [add("compacted.parquet", data_change=False)]
    commit(table, rewritten, "OPTIMIZE")  # v2
    commit(table, [add("new.parquet")])  # v3
    p = planner(table)
    assert batches(p, SourceOffset(snap.metadata.id, 2, -1, False)) == [["new.parquet"]]


def _dv_delete(root: str) -> int:
    """A DELETE with deletion vectors: the file is removed and added back with a DV, both dataChange."""
    f = next(a for a in Snapshot.load(root).add_files() if a.path == "a.parquet")
    return commit(root, [f.remove(), add("a.parquet", mtime=5, dv=inline_dv(2))], "DELETE")


def test_dv_delete_fails_the_stream_after_the_rows_before_it(table: str) -> None:
    commit(table, [add("d.parquet")])  # v2
    _dv_delete(table)  # v3
    p = planner(table)
    start = SourceOffset(Snapshot.load(table).metadata.id, 2, -1, False)
    end = p.latest_offset(start, None, None)
    assert [f.add["path"] for f in p.files_between(start, end)] == ["d.parquet"]  # type: ignore[index]
    with pytest.raises(DeltaSourceIgnoreChangesError) as info:
        p.latest_offset(end, None, None)
    assert info.value.error_class == "DELTA_SOURCE_TABLE_IGNORE_CHANGES" and "version 3" in str(info.value)


def test_change_options(table: str) -> None:
    _dv_delete(table)  # v2
    commit(table, [add("d.parquet")])  # v3
    start = SourceOffset(Snapshot.load(table).metadata.id, 2, -1, False)
    assert batches(planner(table, skipChangeCommits="true"), start) == [["d.parquet"]]
    assert batches(planner(table, ignoreChanges="true"), start) == [["a.parquet", "d.parquet"]]
    with pytest.raises(DeltaSourceIgnoreChangesError):
        batches(planner(table, ignoreDeletes="true"), start)


def test_remove_only_commit(table: str) -> None:
    f = Snapshot.load(table).add_files()[0]
    commit(table, [f.remove()], "DELETE")  # v2
    commit(table, [add("d.parquet")])  # v3
    start = SourceOffset(Snapshot.load(table).metadata.id, 2, -1, False)
    with pytest.raises(DeltaSourceIgnoreDeleteError) as info:
        batches(planner(table), start)
    assert info.value.error_class == "DELTA_SOURCE_IGNORE_DELETE"
    for option in ("ignoreDeletes", "ignoreChanges", "skipChangeCommits"):
        assert batches(planner(table, **{option: "true"}), start) == [["d.parquet"]]


def test_schema_change_names_the_version(table: str) -> None:
    snap = Snapshot.load(table)
    p = planner(table)  # the stream's schema is the one at its start
    wider = {"type": "struct", "fields": [*SCHEMA["fields"], {"name": "x", "type": "string", "nullable": True,
                                                              "metadata": {}}]}
    txn = OptimisticTransaction(table, snap)
    txn.update_metadata(Metadata(**{**snap.metadata.__dict__, "schema_string": json.dumps(wider)}))
    txn.commit([], "ADD COLUMNS")  # v2
    with pytest.raises(StreamingSchemaChangedError, match="version 2"):
        batches(p, SourceOffset(snap.metadata.id, 2, -1, False))


def test_property_change_is_not_a_schema_change(table: str) -> None:
    snap = Snapshot.load(table)
    p = planner(table)
    txn = OptimisticTransaction(table, snap)
    txn.update_metadata(Metadata(**{**snap.metadata.__dict__,
                                    "configuration": {**snap.configuration, "delta.logRetentionDuration": "interval 1 day"}}))
    txn.commit([], "SET TBLPROPERTIES")  # v2
    commit(table, [add("d.parquet")])  # v3
    assert batches(p, SourceOffset(snap.metadata.id, 2, -1, False)) == [["d.parquet"]]


def test_starting_version_and_latest(table: str) -> None:
    commit(table, [add("d.parquet")])  # v2
    snap = Snapshot.load(table)
    p = planner(table, startingVersion="2")
    assert p.initial_offset(snap) == SourceOffset(snap.metadata.id, 2, -1, False)
    assert batches(p, p.initial_offset(snap)) == [["d.parquet"]]
    latest = planner(table, startingVersion="latest")
    assert batches(latest, latest.initial_offset(snap)) == []
    commit(table, [add("e.parquet")])  # v3
    assert batches(latest, latest.initial_offset(snap)) == [["e.parquet"]]


def test_available_now_stops_at_the_version_it_started_with(table: str) -> None:
    commit(table, [add("d.parquet")])  # v2
    p = planner(table)
    start = SourceOffset(Snapshot.load(table).metadata.id, 2, -1, False)
    commit(table, [add("e.parquet")])  # v3, after the query started
    end = p.latest_offset(start, None, None, max_version=2)
    assert [f.add["path"] for f in p.files_between(start, end)] == ["d.parquet"]  # type: ignore[index]
    assert p.latest_offset(end, None, None, max_version=2) == end


def test_exclude_regex(table: str) -> None:
    p = planner(table, excludeRegex="^a")
    assert batches(p, p.initial_offset(Snapshot.load(table))) == [["b.parquet", "c.parquet"]]


def test_offset_of_another_table_is_refused(table: str) -> None:
    with pytest.raises(DifferentTableReadByStreamError):
        planner(table).latest_offset(SourceOffset("another-id", 1, -1, True), None, None)


@pytest.mark.parametrize("options", [{"maxFilesPerTrigger": "0"}, {"maxBytesPerTrigger": "x"},
                                     {"startingVersion": "-1"}, {"ignoreChanges": "yes"},
                                     {"startingVersion": "1", "startingTimestamp": "2024-01-01"}])
def test_bad_options(options: dict[str, str]) -> None:
    with pytest.raises(DeltaOptionError):
        parse_options(options)


def test_option_values() -> None:
    o = parse_options({"MAXBYTESPERTRIGGER": "10m", "startingversion": "latest"})
    assert (o.max_bytes, o.files_limit, o.starting_version) == (10 << 20, None, "latest")
    assert parse_options({}).files_limit == 1000


def test_starting_timestamp(table: str) -> None:
    commit(table, [add("d.parquet")])  # v2
    snap = Snapshot.load(table)
    def iso(ms: int) -> str:  # options reach the source as strings
        return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat()

    at_v2 = snap.commit_timestamp(2)
    p = planner(table, startingTimestamp=iso(at_v2))
    assert p.initial_offset(snap) == SourceOffset(snap.metadata.id, 2, -1, False)
    later = planner(table, startingTimestamp=iso(at_v2 + 60_000))  # after the last commit: only what comes next
    assert later.initial_offset(snap) == SourceOffset(snap.metadata.id, 3, -1, False)
