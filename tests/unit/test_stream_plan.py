"""Streaming source planning from the log alone: offsets, rate limits and delta-spark's commit rules (no Spark)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from dvlake.commands.writes.write import create_table
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import (
    DeltaOptionError,
    DeltaSourceIgnoreChangesError,
    DeltaSourceIgnoreDeleteError,
    DifferentTableReadByStreamError,
    StreamingIncompatibleSchemaChangeError,
    StreamingSchemaChangedError,
    StreamingSchemaChangedWithStartingOptionsError,
    TimestampGreaterThanCommitError,
)
from dvlake.log.actions import AddFile, Metadata
from dvlake.log.snapshot import Snapshot
from dvlake.log.stream_plan import SourceOffset, StreamPlanner, parse_options
from dvlake.spark.stream_driver import StreamDriver
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
    return StreamPlanner(root, snap.storage, parse_options(options), snap.schema, snap.metadata.id,
                         schema_version=snap.version, partition_columns=snap.partition_columns,
                         mapping_mode=snap.column_mapping_mode)


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
    # after the last commit: delta-spark's DELTA_TIMESTAMP_GREATER_THAN_COMMIT, or with
    # changeDataFeed.timestampOutOfRange.enabled only what comes next
    with pytest.raises(TimestampGreaterThanCommitError):
        planner(table, startingTimestamp=iso(at_v2 + 60_000)).initial_offset(snap)
    later = planner(table, startingTimestamp=iso(at_v2 + 60_000))
    later.timestamp_out_of_range = True
    assert later.initial_offset(snap) == SourceOffset(snap.metadata.id, 3, -1, False)
    # no offset in the text: wall-clock time in the session time zone (UTC+2 here: two hours earlier as an instant)
    wall = dt.datetime.fromtimestamp(at_v2 / 1000 + 2 * 3600, dt.UTC).replace(tzinfo=None).isoformat()
    zoned = planner(table, startingTimestamp=wall)
    zoned.time_zone = "+02:00"
    assert zoned.initial_offset(snap) == SourceOffset(snap.metadata.id, 2, -1, False)


# -- schema changes: delta-spark's read-compatibility rules (log/stream_schema.py) ------------------------------
def _set_schema(root: str, schema: dict, operation: str) -> int:
    snap = Snapshot.load(root)
    txn = OptimisticTransaction(root, snap)
    txn.update_metadata(Metadata(**{**snap.metadata.__dict__, "schema_string": json.dumps(schema)}))
    return txn.commit([], operation)


def _field(name: str, type_: str = "string", physical: str | None = None, nullable: bool = True) -> dict:
    meta = {} if physical is None else {"delta.columnMapping.id": 1 + len(physical), "delta.columnMapping.physicalName": physical}
    return {"name": name, "type": type_, "nullable": nullable, "metadata": meta}


def test_older_version_before_an_added_column_is_read_with_the_new_schema(table: str) -> None:
    """startingVersion before ADD COLUMN: the old files read with the latest schema (the column is null), as
    delta-spark backfills; the schema change at v2 must not stop the stream forever."""
    _set_schema(table, {"type": "struct", "fields": [*SCHEMA["fields"], _field("x")]}, "ADD COLUMNS")  # v2
    commit(table, [add("d.parquet")])  # v3
    p = planner(table, startingVersion="1")
    assert batches(p, p.initial_offset(Snapshot.load(table))) == [["c.parquet", "a.parquet", "b.parquet", "d.parquet"]]


def test_a_change_after_the_read_schema_fails_until_restarted(table: str) -> None:
    p = planner(table)  # read schema: v1's
    _set_schema(table, {"type": "struct", "fields": [*SCHEMA["fields"], _field("x")]}, "ADD COLUMNS")  # v2
    commit(table, [add("d.parquet")])  # v3
    start = SourceOffset(Snapshot.load(table).metadata.id, 2, -1, False)
    with pytest.raises(StreamingSchemaChangedError) as info:
        batches(p, start)
    assert info.value.error_class == "DELTA_SCHEMA_CHANGED_WITH_VERSION" and "version 2" in str(info.value)
    assert batches(planner(table), start) == [["d.parquet"]]  # restarted: the new schema covers it


def test_type_change_behind_the_read_schema_with_starting_version(table: str) -> None:
    _set_schema(table, {"type": "struct", "fields": [_field("id", "string")]}, "CHANGE COLUMN")  # v2
    p = planner(table, startingVersion="1")
    with pytest.raises(StreamingSchemaChangedWithStartingOptionsError) as info:
        batches(p, p.initial_offset(Snapshot.load(table)))
    assert info.value.error_class == "DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS"
    assert "long" in str(info.value) and "version 1" in str(info.value)
    assert batches(planner(table, startingVersion="2"), SourceOffset(Snapshot.load(table).metadata.id, 2, -1, False)) == [[]]


@pytest.fixture
def mapped(tmp_path) -> str:
    """A column-mapping (name) table with columns id, a (physical col-a) and one file (v1)."""
    root = str(tmp_path / "m")
    schema = {"type": "struct", "fields": [_field("id", "long", "col-id"), _field("a", "string", "col-a")]}
    create_table(root, schema, [], {"delta.enableDeletionVectors": "true", "delta.columnMapping.mode": "name",
                                    "delta.columnMapping.maxColumnId": "10"})
    commit(root, [add("f1.parquet")])  # v1
    return root


@pytest.mark.parametrize("change", ["rename", "drop"])
def test_a_query_behind_a_rename_or_drop_never_reads_old_files_with_the_new_names(mapped: str, change: str) -> None:
    """Restarted after RENAME/DROP COLUMN landed behind its position: reading v1's file with the new schema would give
    column a's values under the new name (or drop them silently), so the stream fails at once."""
    table_id = Snapshot.load(mapped).metadata.id
    fields = [_field("id", "long", "col-id")] + ([_field("b", "string", "col-a")] if change == "rename" else [])
    _set_schema(mapped, {"type": "struct", "fields": fields}, change.upper() + " COLUMN")  # v2
    commit(mapped, [add("f3.parquet")])  # v3
    behind = SourceOffset(table_id, 1, -1, False)
    with pytest.raises(StreamingIncompatibleSchemaChangeError) as info:
        planner(mapped).latest_offset(behind, None, None)
    assert info.value.error_class == "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG"
    assert ("renamed to 'b'" if change == "rename" else "'a' was dropped") in str(info.value)
    with pytest.raises(StreamingIncompatibleSchemaChangeError):  # files_between (a batch replayed at restart) too
        planner(mapped).files_between(behind, SourceOffset(table_id, 3, 0, False))
    # a new query from the version of the change reads only files with the new schema
    assert batches(planner(mapped), SourceOffset(table_id, 2, -1, False)) == [["f3.parquet"]]


def test_a_rename_while_streaming_stops_after_the_rows_before_it(mapped: str) -> None:
    table_id = Snapshot.load(mapped).metadata.id
    p = planner(mapped)  # read schema: v1's
    commit(mapped, [add("f2.parquet")])  # v2
    _set_schema(mapped, {"type": "struct", "fields": [_field("id", "long", "col-id"), _field("b", "string", "col-a")]},
                "RENAME COLUMN")  # v3
    start = SourceOffset(table_id, 2, -1, False)
    end = p.latest_offset(start, None, None)
    assert [f.add["path"] for f in p.files_between(start, end)] == ["f2.parquet"]  # type: ignore[index]
    with pytest.raises(StreamingIncompatibleSchemaChangeError, match="version 3"):
        p.latest_offset(end, None, None)


def test_read_compatibility_rules() -> None:
    from dvlake.log.stream_schema import read_incompatibility

    def struct(*fields: dict) -> dict:
        return {"type": "struct", "fields": list(fields)}

    base = struct(_field("id", "long"), _field("s", {"type": "struct", "fields": [_field("x", "int")]}))  # type: ignore[arg-type]
    assert read_incompatibility(base, base) is None
    wider = struct(*base["fields"], _field("y"))
    assert read_incompatibility(base, wider) is None  # old files, newer schema with an added column
    assert "y is not in the read schema" in str(read_incompatibility(wider, base))
    nested_missing = struct(_field("id", "long"), _field("s", {"type": "struct", "fields": []}))  # type: ignore[arg-type]
    assert "s.x" in str(read_incompatibility(base, nested_missing))
    tighter = struct(_field("id", "long", nullable=False), base["fields"][1])
    assert "not null" in str(read_incompatibility(base, tighter))
    assert read_incompatibility(tighter, base) is None  # relaxing nullability is fine
    assert "type long" in str(read_incompatibility(base, struct(_field("id", "int"), base["fields"][1])))
    assert read_incompatibility(struct(_field("ID", "long")), struct(_field("id", "long"))) is not None


def test_read_change_data_is_the_change_feed() -> None:
    assert parse_options({"readChangeData": "true"}).read_change_feed
    assert not parse_options({"readChangeData": "false"}).read_change_feed


@pytest.mark.parametrize("options", [{"schemaTrackingLocation": "/chk/schema"}, {"withEventTimeOrder": "true"},
                                     {"failOnDataLoss": "false"}, {"allowSourceColumnRenameAndDrop": "true"},
                                     {"allowSourceColumnTypeChange": "true"}])
def test_unsupported_options_are_refused_not_ignored(options: dict[str, str]) -> None:
    with pytest.raises(DeltaOptionError, match="not supported|only with"):
        parse_options(options)


def test_harmless_values_of_unsupported_options_pass() -> None:
    o = parse_options({"failOnDataLoss": "true", "withEventTimeOrder": "false", "ignoreFileDeletion": "true"})
    assert o.ignore_changes  # delta-spark's deprecated ignoreFileDeletion reads as ignoreChanges


def test_initial_snapshot_file_list_is_dropped_once_served(table: str) -> None:
    p = planner(table)
    start = p.initial_offset(Snapshot.load(table))
    end = p.latest_offset(start, None, None)
    assert p._snapshot_files is not None  # kept while the snapshot is being read (one log replay)
    assert (end.version, end.initial) == (2, False)
    p.latest_offset(end, None, None)
    assert p._snapshot_files is None


def _driver(root: str, **options: str) -> StreamDriver:
    """A query start's planning as either engine of the source holds it (the layout ``open_stream`` builds)."""
    snap = Snapshot.load(root)
    layout = {"root": root, "tableId": snap.metadata.id, "deltaSchema": snap.schema, "schemaVersion": snap.version,
              "partitionColumns": snap.partition_columns, "mode": snap.column_mapping_mode, "confine": True}
    return StreamDriver(layout, options)


def test_restart_before_the_first_commit_replays_the_logged_batch(table: str) -> None:
    """delta-spark's rule for a batch Spark asks for without a committed start: it begins at the initial snapshot the
    logged end belongs to (the end's version, or the one before when the end is past that snapshot), not at the
    snapshot of the restart, after which the replayed batch would be empty."""
    first = _driver(table)
    whole = first.latest_offset(first.initial_offset(), all_available=True)  # the snapshot of v1, read whole
    limited = _driver(table, maxFilesPerTrigger="1")
    part = limited.latest_offset(limited.initial_offset(), all_available=False)  # the snapshot's first file
    assert part == SourceOffset(part.table_id, 1, 0, True)
    assert whole == SourceOffset(whole.table_id, 2, -1, False)
    commit(table, [add("d.parquet", mtime=9)])  # v2 lands before the restart
    for end, expected in ((whole, ["b.parquet", "c.parquet", "a.parquet"]), (part, ["b.parquet"])):
        restarted = _driver(table)
        fresh = restarted.initial_offset()
        assert fresh.version == 2 and fresh.initial
        # the JVM source gets no start; the Python source gets the fresh initial offset: the same batch either way
        for start in (None, fresh):
            begin = restarted.batch_start(start, end)
            assert begin == SourceOffset(end.table_id, 1, -1, True)
            got = [str(f.add["path"]) for f in restarted.files_between(begin, end)]  # type: ignore[index]
            assert got == expected
    committed = SourceOffset(whole.table_id, 1, 0, True)
    assert _driver(table).batch_start(committed, whole) == committed  # a committed start is taken as it is


def test_restart_with_a_starting_version_starts_there(table: str) -> None:
    commit(table, [add("d.parquet", mtime=9)])  # v2
    driver = _driver(table, startingVersion="2")
    end = driver.latest_offset(driver.initial_offset(), all_available=True)
    assert _driver(table, startingVersion="2").batch_start(None, end) == SourceOffset(end.table_id, 2, -1, False)
