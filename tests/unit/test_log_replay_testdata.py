"""Log replay of every delta-spark-written table at every version, against MANIFEST.json."""

from __future__ import annotations

import pytest

from dvlake.log.replay import replay
from dvlake.log.segment import list_log
from dvlake.log.snapshot import Snapshot
from dvlake.storage.base import storage_for
from tests.conftest import find_testdata
from tests.testdata_util import tables

ROOT = find_testdata()
CASES = [(t["name"], int(v)) for t in (tables(ROOT) if ROOT else []) for v in t["versions"]]


def _entry(name):
    return next(t for t in tables(ROOT) if t["name"] == name)


def _pairs(files):
    out = set()
    for row in files.to_pylist():
        dv = row["deletionVector"]
        uid = None
        if dv and dv.get("storageType"):
            uid = dv["storageType"] + dv["pathOrInlineDv"] + (f"@{dv['offset']}" if dv.get("offset") is not None else "")
        out.add((row["path"], uid))
    return out


@pytest.mark.parametrize("name,version", CASES)
def test_replay_matches_manifest(testdata, name, version):
    entry = _entry(name)
    expected = entry["versions"][str(version)]
    snap = Snapshot.load(str(testdata / entry["path"]), version=version)
    assert snap.version == version
    assert snap.num_files == expected["active_files"]
    assert snap.dv_count() == expected["active_files_with_dv"]
    assert int(snap.dv_cardinalities().sum()) == expected["rows_deleted_by_dvs"]
    nr = snap.num_records()
    if (nr >= 0).all():
        assert int(nr.sum() - snap.dv_cardinalities().sum()) == expected["row_count"]


@pytest.mark.parametrize("name", sorted({n for n, _ in CASES if _entry(n)["features"].get("checkpoints")}))
def test_json_only_replay_agrees_with_checkpoint_replay(testdata, name):
    entry = _entry(name)
    root = str(testdata / entry["path"])
    storage = storage_for(root)
    listing = list_log(storage, root)
    assert listing.checkpoints, "this table is expected to have checkpoints"
    for version in (int(v) for v in entry["versions"]):
        with_cp = replay(storage, root, listing, version)
        json_listing = list_log(storage, root)
        json_listing.checkpoints = []
        json_only = replay(storage, root, json_listing, version)
        assert _pairs(with_cp.files) == _pairs(json_only.files)
        assert {r["path"] for r in with_cp.tombstones.to_pylist()} <= {r["path"] for r in json_only.tombstones.to_pylist()}
        assert with_cp.protocol == json_only.protocol
        assert with_cp.metadata.schema_string == json_only.metadata.schema_string


def test_checkpoint_is_used(testdata):
    snap = Snapshot.load(str(testdata / "basic-dv-with-checkpoint"))
    assert snap.state.checkpoint_version == 40
    assert snap.version == 46
