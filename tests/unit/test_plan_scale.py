"""Planning grows with the files pruning keeps, not with the table (issue 44 item 3), counted rather than timed.

A synthetic log of 20,000 files in 100 partitions plus a 'hot' partition of 10 files. Planning a DELETE-like
condition on the hot partition must build per-file Python objects (add actions, DV descriptors, typed partition
tuples) and parse stats for the hot files only: each counter below is compared with the kept files, so a step that
goes back to whole-table work fails here whatever the machine's speed. The phantom files do not exist on disk, so a
plan that kept one would also fail the existence check. No Spark session: ``plan_scan`` only reads session keys.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from dvlake.commands.dml import template
from dvlake.dv import descriptor
from dvlake.errors import CorruptLogError
from dvlake.log import actions, partition_index, predicates, snapshot_cache, stats
from dvlake.log import snapshot as snapshot_module
from dvlake.log.arrow import any_value_contains, take_rows
from dvlake.log.condition import Condition
from dvlake.log.replay import replay_onto
from dvlake.log.segment import list_log
from dvlake.log.snapshot import Snapshot
from dvlake.spark import layout, scan

PHANTOM = 20_000
HOT = 10
SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}},
                                       {"name": "part", "type": "string", "nullable": True, "metadata": {}}]}


class _Conf:
    def get(self, key: str, default: Any = None) -> Any:
        return default


class _Session:
    """What ``plan_scan`` asks of a session: its conf (every key at its default)."""

    conf = _Conf()


def _add(path: str, part: str, lo: int, dv: bool) -> dict[str, Any]:
    add: dict[str, Any] = {"path": path, "partitionValues": {"part": part}, "size": 100, "modificationTime": 0,
                           "dataChange": True,
                           "stats": json.dumps({"numRecords": 100, "minValues": {"id": lo}, "maxValues": {"id": lo + 99},
                                                "nullCount": {"id": 0}, "tightBounds": not dv})}
    if dv:
        add["deletionVector"] = {"storageType": "u", "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA", "offset": 1 + lo % 997,
                                 "sizeInBytes": 36, "cardinality": 2}
    return {"add": add}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("scale")
    log = root / "_delta_log"
    log.mkdir()
    head = [{"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                          "writerFeatures": ["deletionVectors"]}},
            {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(SCHEMA),
                          "partitionColumns": ["part"], "configuration": {"delta.enableDeletionVectors": "true"},
                          "createdTime": 0}}]
    hot = []
    for i in range(HOT):
        rel = f"part=hot/hot-{i}.parquet"
        (root / "part=hot").mkdir(exist_ok=True)
        Path(root / rel).touch()  # the hot files exist (the plan checks them); the phantom ones never do
        hot.append(_add(rel, "hot", i * 100, dv=i % 2 == 0))
    phantom = [_add(f"part=p{i % 100}/f-{i}.parquet", f"p{i % 100}", i * 100, dv=i % 5 == 0) for i in range(PHANTOM)]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in head + phantom[: PHANTOM // 2]) + "\n")
    (log / f"{1:020d}.json").write_text("\n".join(json.dumps(x) for x in phantom[PHANTOM // 2:] + hot) + "\n")
    return str(root)


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of per-file work: add actions and DV descriptors built, partition tuples typed, stats rows parsed."""
    counts: Counter[str] = Counter()

    def counting(name: str, fn: Any, size: Any = None) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1 if size is None else size(*args)
            return fn(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(actions.AddFile, "from_json", counting("adds", actions.AddFile.from_json))
    monkeypatch.setattr(descriptor.DeletionVectorDescriptor, "from_json",
                        counting("dvs", descriptor.DeletionVectorDescriptor.from_json))
    monkeypatch.setattr(layout.TableLayout, "typed_partitions",
                        counting("partition tuples", layout.TableLayout.typed_partitions))
    monkeypatch.setattr(predicates, "_read_stats",
                        counting("stats rows", predicates._read_stats, lambda s, _n: 0 if s is None else len(s)))
    monkeypatch.setattr(snapshot_module, "num_records_array",
                        counting("numRecords rows", stats.num_records_array, len))
    return counts


def test_a_hot_partition_plan_builds_per_kept_file(table: str, counted: Counter[str]) -> None:
    snapshot = Snapshot.load(table)
    assert snapshot.num_files == PHANTOM + HOT
    plan = scan.plan_scan(_Session(), snapshot, "part = 'hot' AND id >= 500")  # type: ignore[arg-type]
    adds = template.candidates_of(snapshot, plan)
    # stats skip hot-0..hot-4 (ids below 500); the 20,000 phantom files go on partition values alone
    assert [os.path.basename(a.path) for a in adds] == [f"hot-{i}.parquet" for i in range(5, HOT)]
    assert [f.dv is not None for f in plan.files] == [i % 2 == 0 for i in range(5, HOT)]
    assert [f.partition_values for f in plan.files] == [("hot",)] * 5
    assert counted == Counter({"adds": 5, "numRecords rows": 5,
                               "dvs": 4,                      # hot-6 and hot-8, once for the plan, once as adds
                               "stats rows": HOT,             # the hot partition's stats, not the table's
                               "partition tuples": 101})      # one per distinct partition, not per file


def test_pruning_answers_stay_the_one_pass_answers(table: str) -> None:
    """Partition leaves judged once per distinct tuple and stats read for the partition survivors give the
    mask a one-pass visitor over every file gives (an OR across partitions and stats, a stats-only condition)."""
    snapshot = Snapshot.load(table)
    files = snapshot.files
    names = [os.path.basename(p).removesuffix(".parquet") for p in files.column("path").to_pylist()]
    facts = predicates.FileFacts(files.column("stats"), ["part"],
                                 [(dict(pv)["part"],) for pv in files.column("partitionValues").to_pylist()],
                                 {"id": "long", "part": "string"}, {"id": "id"})
    p7 = {f"f-{i}" for i in range(7, PHANTOM, 100)}
    for text, expected in [("part = 'p7' OR id < 250", p7 | {"f-0", "f-1", "f-2", "hot-0", "hot-1", "hot-2"}),
                           ("(part = 'p7' AND id < 70000) OR (part = 'hot' AND id > 899)",
                            {f"f-{i}" for i in range(7, 700, 100)} | {"hot-9"}),
                           ("id BETWEEN 199950 AND 200050", {"f-1999", "f-2000"})]:
        cond = Condition.parse(text)
        assert cond is not None and cond.tree is not None
        one_pass = predicates._Pruner(cond, facts).visit(cond.tree)  # every file's stats, one pass
        assert {n for n, k in zip(names, one_pass, strict=True) if k} == expected
        assert list(predicates.prune(cond, facts).keep) == list(one_pass)
    plan = scan.plan_scan(_Session(), snapshot, "(part = 'p7' AND id < 0) OR (part = 'hot' AND id > 899)")  # type: ignore[arg-type]
    assert [os.path.basename(f.path) for f in plan.files] == ["hot-9.parquet"]


def test_replay_onto_a_known_state_matches_a_fresh_load(table: str, tmp_path: Path) -> None:
    """The incremental replay (rows dropped by slicing, only touched paths keyed) gives the state a full replay
    gives: a DV replaced on a hot file, a phantom file removed, a new file added."""
    snapshot_cache.enable(False)
    try:
        base = Snapshot.load(table)
        log = Path(table) / "_delta_log"
        old = json.loads((log / f"{1:020d}.json").read_text().splitlines()[-HOT])["add"]  # hot-0, with a DV
        new = dict(old, deletionVector=dict(old["deletionVector"], offset=900, cardinality=3))
        lines = [{"remove": {"path": old["path"], "deletionTimestamp": 1, "dataChange": True,
                             "deletionVector": old["deletionVector"]}}, {"add": new},
                 {"remove": {"path": "part=p3/f-3.parquet", "deletionTimestamp": 1, "dataChange": True}},
                 _add("part=p3/g-1.parquet", "p3", 5, dv=False)]
        (log / f"{2:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
        try:
            moved = replay_onto(base.storage, base.table_root, list_log(base.storage, base.table_root), base.state, 2)
            fresh = Snapshot.load(table)
            assert moved.files.num_rows == fresh.num_files == PHANTOM + HOT
            assert sorted(moved.files.to_pylist(), key=lambda r: r["path"]) == \
                sorted(fresh.files.to_pylist(), key=lambda r: r["path"])
            assert sorted(r["path"] for r in moved.tombstones.to_pylist()) == \
                ["part=hot/hot-0.parquet", "part=p3/f-3.parquet"]
        finally:
            (log / f"{2:020d}.json").unlink()
    finally:
        snapshot_cache.enable(None)


def test_replay_onto_moves_partition_codes_and_url_encoded_paths_forward(table: str) -> None:
    """The partition codes a plan computed ride along an incremental replay (the dropped rows out, the added files
    coded, a new partition appended) and equal codes computed afresh; a URL-encoded path in a commit turns the
    state's 'no path needs decoding' off, so a later remove naming the decoded path still drops that file."""
    snapshot_cache.enable(False)
    log = Path(table) / "_delta_log"
    try:
        base = Snapshot.load(table)
        assert base.state.encoded_paths is False
        base.partition_codes(("part",))
        commits = {2: [{"remove": {"path": "part=p3/f-3.parquet", "deletionTimestamp": 1, "dataChange": True}},
                       _add("part=new/n-1.parquet", "new", 7, dv=False), _add("part=p4/a%20b.parquet", "p4", 8, dv=False)],
                   3: [{"remove": {"path": "part=p4/a b.parquet", "deletionTimestamp": 1, "dataChange": True}},
                       {"remove": {"path": "part=new/n-1.parquet", "deletionTimestamp": 1, "dataChange": True}}]}
        state = base.state
        try:
            for version, lines in commits.items():
                (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
                state = replay_onto(base.storage, base.table_root, list_log(base.storage, base.table_root), state,
                                    version)
                carried = state.derived.codes_for(state.files)
                assert carried is not None and state.encoded_paths is True
                fresh = partition_index.partition_codes(state.files.column("partitionValues"), ("part",))
                assert [carried.raw[c] for c in carried.codes] == [fresh.raw[c] for c in fresh.codes]
                if version == 2:
                    assert state.files.num_rows == PHANTOM + HOT + 1 and ("new",) in carried.raw
            paths = set(state.files.column("path").to_pylist())
            assert state.files.num_rows == PHANTOM + HOT - 1 and not paths & {"part=p4/a%20b.parquet", "part=new/n-1.parquet"}
            index = partition_index.partition_index(state.derived.codes_for(state.files), lambda v: (v["part"],))
            assert ("new",) not in index.rows and len(index.rows) == 101  # a partition no file has is not judged
            assert sorted(state.files.to_pylist(), key=lambda r: r["path"]) == \
                sorted(Snapshot.load(table).files.to_pylist(), key=lambda r: r["path"])
        finally:
            for version in commits:
                (log / f"{version:020d}.json").unlink(missing_ok=True)
    finally:
        snapshot_cache.enable(None)


def test_partition_codes_of_several_keys_match_each_files_values() -> None:
    """Each file's codes give back its own values under every key: a first key with one value, nulls, a missing key,
    a null map, and codes moved forward over a new tuple."""
    values = pa.array([[("p", "a"), ("d", "1")], [("p", "a"), ("d", "2")], [("p", "a")], None, [("p", "a"), ("d", None)]],
                      pa.map_(pa.string(), pa.string()))
    expected = [("a", "1"), ("a", "2"), ("a", None), (None, None), ("a", None)]
    codes = partition_index.partition_codes(values, ("p", "d"))
    assert [codes.raw[c] for c in codes.codes] == expected
    one_first = partition_index.partition_codes(values.slice(0, 3), ("p", "d"))  # 'p' has a single value here
    assert [one_first.raw[c] for c in one_first.codes] == expected[:3]
    moved = partition_index.moved_forward(codes, np.array([1]), pa.array([[("p", "b"), ("d", "1")]], values.type))
    assert [moved.raw[c] for c in moved.codes] == [expected[0], *expected[2:], ("b", "1")]
    index = partition_index.partition_index(moved, lambda v: (v.get("p"), v.get("d")))
    assert [index.rows[c] for c in index.codes] == [expected[0], *expected[2:], ("b", "1")] and len(index.rows) == 4


def test_any_value_contains_reads_only_the_values_of_a_slice() -> None:
    """The byte search behind 'does a path need URL-decoding' sees exactly a (sliced, chunked) column's values."""
    values = pa.array(["a%b", "plain", "c", "d%"])
    assert any_value_contains(values, b"%")
    assert not any_value_contains(values.slice(1, 2), b"%")
    assert any_value_contains(pa.chunked_array([values.slice(1, 2), values.slice(3)]), b"%")
    assert not any_value_contains(pa.chunked_array([], pa.string()), b"%")
    assert any_value_contains(pa.array(["x%"], pa.large_string()), b"%")
    assert not any_value_contains(pa.array([None, "x"]), b"%")


def test_replay_onto_a_known_state_still_refuses_a_path_live_twice(table: str) -> None:
    """The incremental check of added paths against the kept ones finds an add of a live path without its remove."""
    snapshot_cache.enable(False)
    try:
        base = Snapshot.load(table)
        log = Path(table) / "_delta_log"
        (log / f"{2:020d}.json").write_text(json.dumps(_add("part=p3/f-3.parquet", "p3", 300, dv=True)) + "\n")
        try:
            with pytest.raises(CorruptLogError, match="part=p3/f-3.parquet"):
                replay_onto(base.storage, base.table_root, list_log(base.storage, base.table_root), base.state, 2)
        finally:
            (log / f"{2:020d}.json").unlink()
    finally:
        snapshot_cache.enable(None)


def test_take_rows_slices_across_chunks_as_take_would() -> None:
    """A few rows of a chunked table or column taken by slices come out as Arrow's take gives them, in order."""
    table = pa.concat_tables([pa.table({"a": [0, 1, 2]}), pa.table({"a": [3, 4]}), pa.table({"a": [5]})])
    assert take_rows(table, [5, 2, 3, 0]).column("a").to_pylist() == [5, 2, 3, 0]
    assert take_rows(table.column("a"), np.array([3, 2])).to_pylist() == [3, 2]
    assert take_rows(table, []).num_rows == 0
    assert take_rows(pa.array(["x", "y"]), [1]).to_pylist() == ["y"]


def test_merge_plans_the_files_its_conditions_keep_and_no_other(table: str, counted: Counter[str]) -> None:
    """MERGE's plan (``plan_scan_any``: a file is kept where one of its target-only conditions may hold) describes
    the kept files alone, and keeps what pruning the whole table's plan kept."""
    snapshot = Snapshot.load(table)
    conditions = [Condition.parse("part = 'hot' AND id > 899"), Condition.parse("part = 'hot' AND id < 100")]
    assert all(c is not None for c in conditions)
    plan = scan.plan_scan_any(_Session(), snapshot, [c for c in conditions if c is not None])  # type: ignore[arg-type]
    assert [os.path.basename(f.path) for f in plan.files] == ["hot-0.parquet", "hot-9.parquet"]
    assert list(plan.rows_indexes) == [PHANTOM, PHANTOM + 9]
    assert counted == Counter({"dvs": 1, "numRecords rows": 2, "partition tuples": 101, "stats rows": 2 * HOT})
    assert scan.schema_plan(_Session(), snapshot).files == []  # type: ignore[arg-type]
