"""VACUUM's rules on hand-written logs (no Spark): live set with DV files, hidden names, LITE, never outside the root."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest

from dvlake.commands.maintenance.vacuum import LAST_VACUUM_INFO, vacuum
from dvlake.config import RETENTION_CHECK
from dvlake.dv import z85
from dvlake.errors import VacuumLiteError, VacuumRetentionError
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import checkpoint

NO_CHECK = {RETENTION_CHECK: "false"}
DAY_MS = 86_400_000
OLD = time.time() - 30 * 86_400  # 30 days ago: older than any default retention

PROTOCOL = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                         "writerFeatures": ["deletionVectors"]}}


def _metadata(partitions: list[str] | None = None) -> dict:
    fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
    fields += [{"name": p, "type": "string", "nullable": True, "metadata": {}} for p in partitions or []]
    return {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                         "schemaString": json.dumps({"type": "struct", "fields": fields}),
                         "partitionColumns": partitions or [],
                         "configuration": {"delta.enableDeletionVectors": "true"}, "createdTime": 0}}


def _touch(path: Path, mtime: float = OLD, data: bytes = b"x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


def _dv(prefix: str = "", absolute: str | None = None) -> tuple[dict, str]:
    """A DV descriptor and the relative path of its file."""
    u = uuid.uuid4()
    if absolute is not None:
        return {"storageType": "p", "pathOrInlineDv": absolute, "offset": 1, "sizeInBytes": 10, "cardinality": 1}, ""
    rel = (f"{prefix}/" if prefix else "") + f"deletion_vector_{u}.bin"
    return {"storageType": "u", "pathOrInlineDv": prefix + z85.encode_uuid(u), "offset": 1, "sizeInBytes": 10,
            "cardinality": 1}, rel


def _add(path: str, dv: dict | None = None, pv: dict | None = None) -> dict:
    a = {"path": path, "partitionValues": pv or {}, "size": 1, "modificationTime": 0, "dataChange": True,
         "stats": json.dumps({"numRecords": 3, "tightBounds": False})}
    if dv:
        a["deletionVector"] = dv
    return {"add": a}


def _remove(path: str, dv: dict | None = None, ts: int = 0) -> dict:
    r = {"path": path, "deletionTimestamp": ts, "dataChange": True, "size": 1}
    if dv:
        r["deletionVector"] = dv
    return {"remove": r}


def _commit(root: Path, version: int, actions: list[dict], mtime: float = OLD) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [{"commitInfo": {"timestamp": int(mtime * 1000), "operation": "WRITE"}}, *actions]
    p = log / f"{version:020d}.json"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    os.utime(p, (mtime, mtime))


def _age_dirs(root: Path) -> None:
    """Folders get the old mtime too (creating files inside made them new)."""
    for d, _, _ in os.walk(root):
        os.utime(d, (OLD, OLD))


def _exists(root: Path, rel: str) -> bool:
    return (root / rel).exists()


def test_live_and_tombstoned_dv_files_stay_stale_ones_go(tmp_path: Path) -> None:
    root = tmp_path / "t"
    live_dv, live_dv_rel = _dv()
    prefixed_dv, prefixed_rel = _dv(prefix="ab")
    stale_dv, stale_rel = _dv(prefix="cd")
    recent_tomb_dv, recent_tomb_rel = _dv(prefix="ef")
    now = int(time.time() * 1000)
    for rel in ("a.parquet", "b.parquet", "c.parquet", "d.parquet", "orphan.parquet", live_dv_rel, prefixed_rel,
                stale_rel, recent_tomb_rel, "_change_data/cdc-1.parquet", "_tmp/x.parquet", ".hidden.parquet",
                ".a.parquet.crc", "p=1/e.parquet", "_p=2/f.parquet"):
        _touch(root / rel)
    _age_dirs(root)
    _commit(root, 0, [PROTOCOL, _metadata(), _add("a.parquet", live_dv), _add("b.parquet", prefixed_dv),
                      _add("c.parquet", stale_dv), _add("d.parquet", recent_tomb_dv)])
    _commit(root, 1, [_remove("c.parquet", stale_dv, ts=now - 10 * DAY_MS),
                      _remove("d.parquet", recent_tomb_dv, ts=now - DAY_MS)])

    dry = vacuum(None, str(root), dry_run=True)
    assert all(_exists(root, p) for p in ("c.parquet", stale_rel)), "DRY RUN deleted something"
    would = {os.path.relpath(p, root) for p in dry.paths}
    result = vacuum(None, str(root))

    for kept in ("a.parquet", "b.parquet", live_dv_rel, prefixed_rel, "d.parquet", recent_tomb_rel,
                 "_tmp/x.parquet", ".hidden.parquet", ".a.parquet.crc", "_p=2/f.parquet"):  # _p is no partition column
        assert _exists(root, kept), kept
    gone = {"c.parquet", stale_rel, "orphan.parquet", "_change_data/cdc-1.parquet", "p=1/e.parquet"}
    for rel in gone:
        assert not _exists(root, rel), rel
    assert not _exists(root, "cd"), "the emptied random-prefix folder stays"
    assert would == gone | {"cd", "p=1", "_change_data"}
    assert result.num_deleted == len(would)
    Snapshot.load(str(root))  # still a table
    ops = [json.loads(ln)["commitInfo"] for v in (2, 3)
           for ln in (root / "_delta_log" / f"{v:020d}.json").read_text().splitlines() if "commitInfo" in ln]
    assert [o["operation"] for o in ops] == ["VACUUM START", "VACUUM END"]
    assert ops[0]["operationMetrics"]["numFilesToDelete"] == str(len(would))
    assert ops[0]["operationParameters"]["defaultRetentionMillis"] == str(7 * DAY_MS)
    assert ops[1]["operationParameters"]["status"] == "COMPLETED"
    assert ops[1]["operationMetrics"]["numDeletedFiles"] == str(len(would))
    info = json.loads((root / "_delta_log" / LAST_VACUUM_INFO).read_text())
    assert info == {"latestCommitVersionOutsideOfRetentionWindow": 1}


def test_partition_columns_starting_with_underscore_are_listed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _touch(root / "_p=1" / "live.parquet")
    _touch(root / "_p=1" / "stale.parquet")
    _commit(root, 0, [PROTOCOL, _metadata(["_p"]), _add("_p=1/live.parquet", pv={"_p": "1"})])
    vacuum(None, str(root))
    assert _exists(root, "_p=1/live.parquet") and not _exists(root, "_p=1/stale.parquet")


def test_nothing_outside_the_root_is_ever_deleted(tmp_path: Path) -> None:
    root = tmp_path / "t"
    outside = tmp_path / "outside"
    out_data = _touch(outside / "abs.parquet")
    out_dotdot = _touch(outside / "dotdot.parquet")
    out_dv = _touch(outside / "deletion_vector_p.bin")
    out_linked_file = _touch(outside / "linked.parquet")
    out_linked_dir_file = _touch(outside / "dir" / "in-linked-dir.parquet")
    _touch(root / "in.parquet")
    p_dv, _ = _dv(absolute=f"file://{out_dv}")
    now = int(time.time() * 1000)
    _commit(root, 0, [PROTOCOL, _metadata(), _add("in.parquet", p_dv), _add(str(out_data)),
                      _add("../outside/dotdot.parquet"), _add(f"file://{outside}/linked.parquet")])
    _commit(root, 1, [_remove("in.parquet", p_dv, ts=now - 10 * DAY_MS), _remove(str(out_data), ts=now - 10 * DAY_MS),
                      _remove("../outside/dotdot.parquet", ts=now - 10 * DAY_MS),
                      _remove(f"file://{outside}/linked.parquet", ts=now - 10 * DAY_MS),
                      _remove("sub/../../outside/dotdot.parquet", ts=now - 10 * DAY_MS)])
    os.symlink(out_linked_file, root / "link.parquet")
    os.symlink(outside / "dir", root / "linkdir")
    os.symlink(outside, root / "p=1")
    for mode in ("LITE", "FULL"):
        vacuum(NO_CHECK, str(root), retention_hours=0, mode=mode)
        for f in (out_data, out_dotdot, out_dv, out_linked_file, out_linked_dir_file):
            assert f.exists(), (mode, f)
        assert os.path.islink(root / "link.parquet") and os.path.islink(root / "linkdir")
    assert not _exists(root, "in.parquet")


def test_lite_after_full_and_lite_needs_the_log(tmp_path: Path) -> None:
    root = tmp_path / "t"
    now = int(time.time() * 1000)
    _touch(root / "a.parquet")
    _touch(root / "b.parquet")
    dv, dv_rel = _dv(prefix="zz")
    _touch(root / dv_rel)
    _commit(root, 0, [PROTOCOL, _metadata(), _add("a.parquet"), _add("b.parquet", dv)])
    _commit(root, 1, [_remove("a.parquet", ts=now - 10 * DAY_MS)])
    vacuum(None, str(root), mode="FULL")  # writes versions 2 and 3 (VACUUM START / END)
    assert not _exists(root, "a.parquet")
    assert json.loads((root / "_delta_log" / LAST_VACUUM_INFO).read_text()) == {
        "latestCommitVersionOutsideOfRetentionWindow": 1}
    # LITE starts after version 1 and finds the remove of version 4 (and its prefixed DV file)
    _commit(root, 4, [_remove("b.parquet", dv, ts=now)], mtime=time.time())
    orphan = _touch(root / "orphan.parquet")  # LITE only looks at the log: an orphan stays
    result = vacuum(None, str(root), mode="LITE", now=now + 10 * DAY_MS)
    assert not _exists(root, "b.parquet") and not _exists(root, dv_rel)
    assert orphan.exists()
    assert result.num_deleted == 2
    assert json.loads((root / "_delta_log" / LAST_VACUUM_INFO).read_text()) == {
        "latestCommitVersionOutsideOfRetentionWindow": 4}

    # a log whose first commits were cleaned up, with no _last_vacuum_info: LITE refuses, FULL works
    checkpoint(str(root))
    (root / "_delta_log" / LAST_VACUUM_INFO).unlink()
    for v in (0, 1):
        (root / "_delta_log" / f"{v:020d}.json").unlink()
    with pytest.raises(VacuumLiteError, match="VACUUM FULL"):
        vacuum(None, str(root), mode="LITE", now=now + 10 * DAY_MS)
    vacuum(None, str(root), mode="FULL", now=now + 10 * DAY_MS)
    assert not orphan.exists()


def test_retention_checks(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _touch(root / "a.parquet")
    _commit(root, 0, [PROTOCOL, _metadata(), _add("a.parquet")])
    with pytest.raises(VacuumRetentionError) as err:
        vacuum(None, str(root), retention_hours=0)
    assert err.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"
    assert f"{RETENTION_CHECK} = false" in str(err.value) and "168 hours" in str(err.value)
    with pytest.raises(VacuumRetentionError) as err:
        vacuum(None, str(root), retention_hours=0, dry_run=True)  # the check runs in DRY RUN too
    ignore_off = {"spark.databricks.delta.vacuum.retentionWindowIgnore.enabled": "false"}
    with pytest.raises(VacuumRetentionError):
        vacuum(ignore_off, str(root), retention_hours=1)
    with pytest.raises(VacuumRetentionError) as err:
        vacuum({**ignore_off, **NO_CHECK}, str(root), retention_hours=-1)
    assert err.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE"
    # delta-spark 4.1+: RETAIN n HOURS with n != 0 is ignored (the table's retention applies), no error
    assert vacuum(None, str(root), retention_hours=1, dry_run=True).paths == []


#: shared delta-spark tables whose history leaves stale data or DV files
SHARED = ["dv-partitioned-with-checkpoint", "basic-dv-with-checkpoint", "dv-with-columnmapping", "log-replay-dv-key-cases"]


@pytest.mark.interop
@pytest.mark.parametrize("name", SHARED)
def test_vacuum_of_delta_spark_tables_keeps_them_exactly_readable(testdata: Path, tmp_path: Path, name: str) -> None:
    from dvlake.dv.store import load_bitmap
    from tests.conftest import copy_table
    from tests.peers import read_with_deltalake
    from tests.testdata_util import prepare, tables

    entry = next(t for t in tables(testdata) if t["name"] == name)
    src = prepare(testdata, entry, tmp_path / "scratch")
    root = copy_table(src, tmp_path / "t") if src.is_relative_to(testdata) else src
    before = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts}
    for mode in ("LITE", "FULL"):
        vacuum(NO_CHECK, str(root), retention_hours=0, mode=mode)
    snap = Snapshot.load(str(root))
    for a in snap.add_files():
        assert (root / a.path).exists()
        if a.deletion_vector is not None:
            assert len(load_bitmap(a.deletion_vector, snap.table_root)) == a.deletion_vector.cardinality
    after = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts}
    assert after < before, "these tables have stale files: VACUUM must remove some"
    assert read_with_deltalake(str(root)).num_rows == entry["expected_latest"]["row_count"]


def test_failed_deletion_commits_vacuum_end_failed_and_reraises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import dvlake.commands.maintenance.vacuum as vacuum_module

    root = tmp_path / "t"
    _touch(root / "a.parquet")
    _touch(root / "stale.parquet")
    _commit(root, 0, [PROTOCOL, _metadata(), _add("a.parquet")])

    def boom(guard: object, relatives: list[str]) -> int:
        raise PermissionError(f"cannot delete {relatives[0]}")

    monkeypatch.setattr(vacuum_module, "delete_many_inside", boom)
    with pytest.raises(PermissionError):
        vacuum(None, str(root))
    end = [json.loads(ln)["commitInfo"] for ln in (root / "_delta_log" / f"{2:020d}.json").read_text().splitlines()
           if "commitInfo" in ln][0]
    assert end["operation"] == "VACUUM END" and end["operationParameters"] == {"status": "FAILED"}
    assert end["operationMetrics"] == {}
    assert not (root / "_delta_log" / LAST_VACUUM_INFO).exists()
