"""Row tracking in the log and the transaction (no Spark): the feature, the hidden column names, the high-water
mark, the assignment of ``baseRowId``/``defaultRowCommitVersion`` at commit, and its redo after a lost race."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace

import pytest

from dvlake.commands.writes.write import create_table
from dvlake.errors import ConcurrentTransactionException, RowTrackingError
from dvlake.log import row_tracking as rt
from dvlake.log.actions import AddFile, DomainMetadata, Metadata, Protocol
from dvlake.log.features import protocol_for_new_table, with_features
from dvlake.log.replay import read_commit
from dvlake.log.segment import list_log
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def add(path: str, rows: int | None = 10, **kw) -> AddFile:
    stats = None if rows is None else json.dumps({"numRecords": rows})
    return AddFile(path=path, partition_values={}, size=100, modification_time=1, stats=stats, **kw)


@pytest.fixture
def root() -> str:
    path = f"memory://{uuid.uuid4().hex}/t"
    create_table(path, SCHEMA, [], {rt.ENABLE_KEY: "true"})
    return path


def start(root: str) -> OptimisticTransaction:
    return OptimisticTransaction(root, Snapshot.load(root))


def adds_of(root: str, version: int) -> list[dict]:
    listing = list_log(Snapshot.load(root).storage, Snapshot.load(root).table_root)
    return [a["add"] for a in read_commit(Snapshot.load(root).storage, listing.commits[version][0]) if "add" in a]


def test_new_table_gets_writer_feature_domain_metadata_and_column_names(root: str) -> None:
    snap = Snapshot.load(root)
    assert snap.protocol == Protocol(1, 7, None, ("appendOnly", "domainMetadata", "invariants", "rowTracking"))
    assert rt.is_enabled(snap.protocol, snap.metadata)
    rid, rcv = rt.materialized_columns_or_raise(snap.metadata)
    assert rid.startswith("_row-id-col-") and rcv.startswith("_row-commit-version-col-") and rid != rcv
    assert rt.high_water_mark(snap.domains) == -1  # nothing assigned yet
    # another table gets other names (a UUID each)
    other = f"memory://{uuid.uuid4().hex}/t"
    create_table(other, SCHEMA, [], {rt.ENABLE_KEY: "true"})
    assert rt.materialized_columns(Snapshot.load(other).metadata) != (rid, rcv)


def test_protocol_for_new_table_and_with_features_add_domain_metadata() -> None:
    assert "domainMetadata" in (protocol_for_new_table({rt.ENABLE_KEY: "true"}).writer_features or ())
    assert set(with_features(Protocol(1, 2), writer=["rowTracking"]).writer_features or ()) == {
        "appendOnly", "invariants", "rowTracking", "domainMetadata"}


def test_names_are_kept_across_metadata_changes(root: str) -> None:
    before = rt.materialized_columns(Snapshot.load(root).metadata)
    txn = start(root)
    conf = {k: v for k, v in txn.metadata.configuration.items() if not k.startswith("delta.rowTracking.")}
    txn.update_metadata(replace(txn.metadata, configuration={**conf, "owner": "me"}))  # a writer that lost the names
    txn.commit([], "SET TBLPROPERTIES")
    assert rt.materialized_columns(Snapshot.load(root).metadata) == before


def test_name_equal_to_a_column_is_refused() -> None:
    protocol = protocol_for_new_table({rt.ENABLE_KEY: "true"})
    schema = {"type": "struct", "fields": [{"name": "_row-id-col-x", "type": "long", "nullable": True, "metadata": {}}]}
    md = Metadata("id", json.dumps(schema), configuration={rt.ENABLE_KEY: "true", rt.ROW_ID_COLUMN_KEY: "_row-id-col-x"})
    with pytest.raises(RowTrackingError) as err:
        rt.with_column_names(protocol, None, md)
    assert err.value.error_class == "DELTA_ADDING_COLUMN_WITH_INTERNAL_NAME_FAILED"


def test_assign_is_consecutive_from_the_mark_and_keeps_existing_ids() -> None:
    kept = add("old.parquet", 5, base_row_id=3, default_row_commit_version=1)
    out, mark = rt.assign([add("a", 10), kept, add("b", 7)], 99, 4)
    a, old, b, domain = out
    assert (a.base_row_id, a.default_row_commit_version) == (100, 4)
    assert old == kept
    assert (b.base_row_id, b.default_row_commit_version) == (110, 4)
    assert mark == 116 and domain == DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":116}')
    assert rt.assign([kept], 99, 4) == ([kept], 99)  # nothing fresh: the mark and the domain stay


def test_assign_refuses_a_file_without_num_records_and_a_hand_set_mark() -> None:
    with pytest.raises(RowTrackingError) as err:
        rt.assign([add("nostats.parquet", None)], -1, 1)
    assert err.value.error_class == "DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS" and "nostats.parquet" in str(err.value)
    with pytest.raises(RowTrackingError):
        rt.assign([rt.domain_action(5)], -1, 1)


def test_commits_assign_ids_and_raise_the_mark(root: str) -> None:
    v1 = start(root).commit([add("a", 10), add("b", 5)], "WRITE")
    v2 = start(root).commit([add("c", 3, data_change=False)], "WRITE")  # every add, dataChange or not
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds_of(root, v1)] == [(0, 1), (10, 1)]
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds_of(root, v2)] == [(15, 2)]
    snap = Snapshot.load(root)
    assert rt.high_water_mark(snap.domains) == 17
    assert json.loads(snap.domains["delta.rowTracking"].configuration) == {"rowIdHighWaterMark": 17}
    # a re-added file (a new DV, RESTORE) keeps its ids, and its remove carries them too
    old = next(a for a in snap.add_files() if a.path == "a")
    v3 = start(root).commit([old.remove(), replace(old, tags={"x": "y"})], "DELETE")
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds_of(root, v3)] == [(0, 1)]
    assert rt.high_water_mark(Snapshot.load(root).domains) == 17


def test_a_lost_race_reassigns_above_the_winner(root: str) -> None:
    start(root).commit([add("a", 10)], "WRITE")
    loser, winner = start(root), start(root)
    vw = winner.commit([add("w", 4)], "WRITE")
    vl = loser.commit([add("l1", 2), add("l2", 3)], "WRITE")
    assert vl == vw + 1
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds_of(root, vw)] == [(10, vw)]
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds_of(root, vl)] == [(14, vl), (16, vl)]
    assert rt.high_water_mark(Snapshot.load(root).domains) == 18
    ids = sorted((a.base_row_id, a.base_row_id + json.loads(a.stats)["numRecords"]) for a in Snapshot.load(root).add_files())
    assert all(e <= s for (_, e), (s, _) in zip(ids, ids[1:], strict=False))  # no two files share an id


def test_concurrent_commits_of_one_user_domain_conflict_but_the_mark_does_not(root: str) -> None:
    a, b = start(root), start(root)
    a.commit([DomainMetadata("app.owner", "x"), add("a", 1)], "WRITE")
    with pytest.raises(ConcurrentTransactionException, match="app.owner"):
        b.commit([DomainMetadata("app.owner", "y")], "WRITE")
    c, d = start(root), start(root)
    c.commit([DomainMetadata("app.one", "x")], "WRITE")
    d.commit([DomainMetadata("app.two", "y")], "WRITE")  # other domains: no conflict
    assert {"app.one", "app.two"} <= set(Snapshot.load(root).domains)


def test_supported_but_not_enabled_still_assigns_and_suspended_does_not() -> None:
    root = f"memory://{uuid.uuid4().hex}/t"
    create_table(root, SCHEMA, [], {})
    txn = start(root)
    txn.update_protocol(with_features(txn.protocol, writer=["rowTracking"]))
    txn.commit([add("a", 4)], "WRITE")
    snap = Snapshot.load(root)
    assert not rt.is_enabled(snap.protocol, snap.metadata)
    assert snap.add_files()[0].base_row_id == 0
    txn = start(root)
    txn.update_metadata(snap.metadata.with_configuration(**{rt.SUSPENDED_KEY: "true"}))
    txn.commit([add("b", 4, base_row_id=77)], "WRITE")
    assert next(a for a in Snapshot.load(root).add_files() if a.path == "b").base_row_id is None
    txn = start(root)
    txn.update_metadata(Snapshot.load(root).metadata.with_configuration(**{rt.ENABLE_KEY: "true"}))
    with pytest.raises(RowTrackingError) as err:  # enabled and suspended together
        txn.commit([], "SET TBLPROPERTIES")
    assert err.value.error_class == "DELTA_ROW_TRACKING_ILLEGAL_PROPERTY_COMBINATION"


def test_enabling_needs_every_live_file_to_have_ids() -> None:
    root = f"memory://{uuid.uuid4().hex}/t"
    create_table(root, SCHEMA, [], {})
    start(root).commit([add("a", 4)], "WRITE")
    txn = start(root)
    txn.update_protocol(with_features(txn.protocol, writer=["rowTracking"]))
    txn.update_metadata(txn.metadata.with_configuration(**{rt.ENABLE_KEY: "true"}))
    with pytest.raises(RowTrackingError) as err:
        txn.commit([], "SET TBLPROPERTIES")
    assert err.value.error_class == "DVLAKE_ROW_TRACKING_BACKFILL_REQUIRED" and "a" in str(err.value)


def test_enabled_without_the_feature_is_refused() -> None:
    md = Metadata("id", json.dumps(SCHEMA), configuration={rt.ENABLE_KEY: "true"})
    with pytest.raises(RowTrackingError, match="rowTracking"):
        rt.is_enabled(Protocol(1, 2), md)


def test_enabling_on_a_table_with_data_backfills_then_sets_the_property() -> None:
    from dvlake.commands.ddl.properties import set_properties
    from dvlake.commands.ddl.row_tracking_backfill import backfill

    root = f"memory://{uuid.uuid4().hex}/t"
    create_table(root, SCHEMA, [], {})
    start(root).commit([add("a", 4), add("b", 6)], "WRITE")
    start(root).commit([add("c", 5)], "WRITE")
    before = Snapshot.load(root).version
    assert backfill(root, max_files_per_commit=2) is not None  # steps 1-2 alone, in batches of two files
    history = [h["operation"] for h in reversed(Snapshot.load(root).history())][before + 1:]
    assert history == ["UPGRADE PROTOCOL", rt.BACKFILL_OPERATION, rt.BACKFILL_OPERATION]
    snap = Snapshot.load(root)
    assert not rt.is_enabled(snap.protocol, snap.metadata)  # supported, not yet enabled
    spans = sorted((a.base_row_id, a.base_row_id + json.loads(a.stats)["numRecords"] - 1) for a in snap.add_files())
    assert spans[0][0] == 0 and all(e < s for (_, e), (s, _) in zip(spans, spans[1:], strict=False))
    assert rt.high_water_mark(snap.domains) == 14
    assert all(not a["dataChange"] for a in adds_of(root, snap.version))  # re-adds, no data change

    set_properties(root, {rt.ENABLE_KEY: "true"})
    snap = Snapshot.load(root)
    assert rt.is_enabled(snap.protocol, snap.metadata) and rt.materialized_columns(snap.metadata) is not None
    assert snap.history(1)[0]["operation"] == "SET TBLPROPERTIES"
    assert backfill(root) is None  # nothing left to do


def test_alter_on_a_table_with_data_runs_the_backfill() -> None:
    from dvlake.commands.ddl.properties import set_properties

    root = f"memory://{uuid.uuid4().hex}/t"
    create_table(root, SCHEMA, [], {})
    start(root).commit([add("a", 4)], "WRITE")
    version = set_properties(root, {rt.ENABLE_KEY: "true"})
    ops = [h["operation"] for h in Snapshot.load(root).history(3)]
    assert ops == ["SET TBLPROPERTIES", rt.BACKFILL_OPERATION, "UPGRADE PROTOCOL"]
    snap = Snapshot.load(root)
    assert snap.version == version and snap.add_files()[0].base_row_id == 0
    assert {"rowTracking", "domainMetadata"} <= set(snap.protocol.writer_features or ())


def test_ids_and_the_mark_survive_a_checkpoint(root: str) -> None:
    from dvlake.txn.transaction import checkpoint

    start(root).commit([add("a", 3)], "WRITE")
    start(root).commit([add("b", 2)], "WRITE")
    checkpoint(root)
    start(root).commit([add("c", 1)], "WRITE")  # replayed on top of the checkpoint: above its mark
    snap = Snapshot.load(root)
    assert [c.version for c in snap.listing.checkpoints] == [2]
    assert sorted((a.path, a.base_row_id, a.default_row_commit_version) for a in snap.add_files()) == [
        ("a", 0, 1), ("b", 3, 2), ("c", 5, 3)]
    assert rt.high_water_mark(snap.domains) == 5


def test_row_preserving_commands_tag_their_commits(root: str) -> None:
    start(root).commit([add("a", 3)], "WRITE")
    start(root).commit([], "UPDATE")
    assert Snapshot.load(root).history(1)[0]["tags"] == {rt.PRESERVED_TAG: "true"}
    start(root).commit([add("b", 1)], "WRITE")
    assert "tags" not in Snapshot.load(root).history(1)[0]


def test_a_recommit_that_loses_to_a_backfill_keeps_the_backfilled_ids() -> None:
    from dvlake.commands.ddl.row_tracking_backfill import backfill

    root = f"memory://{uuid.uuid4().hex}/t"
    create_table(root, SCHEMA, [], {})
    start(root).commit([add("a", 4), add("b", 3)], "WRITE")
    txn = start(root)
    txn.update_protocol(with_features(txn.protocol, writer=["rowTracking"]))
    txn.commit([], "UPGRADE PROTOCOL")
    loser = start(root)  # re-commits "b" (as a new DV would), read before the backfill
    old_b = next(a for a in Snapshot.load(root).add_files() if a.path == "b")
    backfill(root)
    b_ids = next((a.base_row_id, a.default_row_commit_version) for a in Snapshot.load(root).add_files() if a.path == "b")
    version = loser.commit([old_b.remove(), replace(old_b, tags={"k": "v"})], "DELETE")
    committed = next(a for a in adds_of(root, version) if a["path"] == "b")
    assert (committed["baseRowId"], committed["defaultRowCommitVersion"]) == b_ids
    assert rt.high_water_mark(Snapshot.load(root).domains) == 6  # no fresh ids were taken
