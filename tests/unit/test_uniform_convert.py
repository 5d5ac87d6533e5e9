"""UniForm conversion steps without Spark: tables built with the log-level writers, inline DVs, no Parquet reads.

Conversion needs only the log (file sizes, ``numRecords`` stats) and the DV bytes, so these tests
check the Iceberg side's bookkeeping: racing conversions, steps from the commit's own actions, the
per-process state cache, and the bounded Puffin files. The interop tests read the results with
pyiceberg and DuckDB.
"""

from __future__ import annotations

import json
import os
import zlib

import pyroaring
import pytest

from dvlake.commands.writes.write import create_table
from dvlake.dv import roaring
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.errors import UniformConversionError
from dvlake.log.actions import AddFile
from dvlake.log.snapshot import Snapshot
from dvlake.storage.base import storage_for
from dvlake.txn.transaction import OptimisticTransaction
from dvlake.uniform import avro, convert, state
from dvlake.uniform.convert import METADATA_DIR, metadata_location, sync
from dvlake.uniform.keys import sidecar_path

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
PROPS = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}
ROWS = 20


def _add(name: str, dv: DeletionVectorDescriptor | None = None) -> AddFile:
    stats = {"numRecords": ROWS, "tightBounds": dv is None}
    return AddFile(path=name, partition_values={}, size=1000, modification_time=1, stats=json.dumps(stats),
                   deletion_vector=dv)


def _dv(*rows: int) -> DeletionVectorDescriptor:
    bitmap = pyroaring.BitMap64(rows)
    return DeletionVectorDescriptor.inline(roaring.serialize(bitmap), len(bitmap))


def _table(tmp_path, files: int = 4) -> str:
    root = str(tmp_path / "t")
    create_table(root, SCHEMA, (), PROPS)
    OptimisticTransaction(root, Snapshot.load(root)).commit([_add(f"f{i}.parquet") for i in range(files)], "WRITE")
    return root


def _delete(root: str, deleted: dict[str, tuple[int, ...]]) -> int:
    """A DV DELETE: each named file gets a DV with ``deleted`` rows (replacing any earlier one)."""
    snap = Snapshot.load(root)
    actions = []
    for a in snap.add_files():
        if a.path in deleted:
            actions += [a.remove(), AddFile(**{**a.__dict__, "deletion_vector": _dv(*deleted[a.path]),
                                               "stats": json.dumps({"numRecords": ROWS, "tightBounds": False})})]
    return OptimisticTransaction(root, snap).commit(actions, "DELETE", {"predicate": "[]"})


def _current(root: str, version: int) -> tuple[dict, dict[str, int], set[str]]:
    """The metadata JSON of ``version``, its current snapshot's DV cardinalities by data file, and its files."""
    storage = storage_for(root)
    meta = json.loads(storage.read_bytes(metadata_location(root, version)))
    snap = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    used = {snap["manifest-list"]}
    dvs, data = {}, set()
    for m in avro.read(storage, snap["manifest-list"])[0]:
        used.add(m["manifest_path"])
        for e in avro.read(storage, m["manifest_path"])[0]:
            f = e["data_file"]
            if m["content"] == avro.MANIFEST_CONTENT_DELETES:
                used.add(f["file_path"])
                dvs[f["referenced_data_file"]] = f["record_count"]
            else:
                data.add(f["file_path"])
    return meta, dvs, used | data


def _referenced_by_history(root: str, version: int) -> set[str]:
    """Every file any snapshot of ``version``'s metadata uses (manifests with their key sidecars), and the metadata
    files of its log."""
    storage = storage_for(root)
    meta = json.loads(storage.read_bytes(metadata_location(root, version)))
    out = {metadata_location(root, version), *(m["metadata-file"] for m in meta["metadata-log"])}
    for s in meta["snapshots"]:
        out.add(s["manifest-list"])
        for m in avro.read(storage, s["manifest-list"])[0]:
            out.update((m["manifest_path"], sidecar_path(m["manifest_path"])))
            out.update(e["data_file"]["file_path"] for e in avro.read(storage, m["manifest_path"])[0]
                       if m["content"] == avro.MANIFEST_CONTENT_DELETES)
    return out


def test_racing_conversions_keep_the_first_published_snapshot(tmp_path, monkeypatch):
    """Two conversions of one version: the first to publish ``vN.metadata.json`` stands; the other removes what
    it wrote and continues from it, so the next version's history chains onto the published snapshot."""
    root = _table(tmp_path)
    sync(root)
    version = _delete(root, {"f1.parquet": (1, 2)})
    storage = storage_for(root)
    rival: dict[str, int] = {}

    def publish_first(write):
        def wrapped(path: str, data: bytes) -> None:
            if path.endswith(f"v{version}.metadata.json") and not rival:
                state.forget(root)
                sync(root, storage_for(root), version=version)  # the rival converter wins the race
                rival["id"] = json.loads(storage_for(root).read_bytes(path))["current-snapshot-id"]
            write(path, data)
        return wrapped

    monkeypatch.setattr(storage, "write_if_absent", publish_first(storage.write_if_absent))
    monkeypatch.setattr(storage, "write", publish_first(storage.write))
    state.forget(root)
    assert sync(root, storage, version=version) == version
    meta, dvs, _ = _current(root, version)
    assert meta["current-snapshot-id"] == rival["id"]  # not overwritten by the loser
    assert dvs == {os.path.join(root, "f1.parquet"): 2}
    files = {str(p) for p in (tmp_path / "t" / METADATA_DIR).iterdir()} - {os.path.join(root, METADATA_DIR,
                                                                                         "version-hint.text")}
    assert files == _referenced_by_history(root, version)  # the loser's manifests and Puffin file are gone
    nxt = _delete(root, {"f2.parquet": (3,)})
    assert sync(root) == nxt
    meta2, dvs2, _ = _current(root, nxt)
    assert meta2["snapshots"][-1]["parent-snapshot-id"] == rival["id"]
    assert dvs2 == {os.path.join(root, "f1.parquet"): 2, os.path.join(root, "f2.parquet"): 1}


def test_commit_step_reads_no_snapshot_and_matches_full(tmp_path, monkeypatch):
    """After a commit, converting from the commit's actions never replays the log, and publishes what a full
    conversion of the same version publishes."""
    root = _table(tmp_path)
    sync(root)
    version = _delete(root, {"f0.parquet": (0,), "f3.parquet": (4, 5, 6)})
    loads: list[int | None] = []
    real_load = Snapshot.load.__func__  # type: ignore[attr-defined]

    def counting(cls, *args, **kwargs):
        loads.append(kwargs.get("version"))
        return real_load(cls, *args, **kwargs)

    metadata = Snapshot.load(root).metadata
    monkeypatch.setattr(Snapshot, "load", classmethod(counting))
    convert.after_commit(root, version, storage_for(root), metadata)
    assert loads == []
    _, dvs, _ = _current(root, version)
    monkeypatch.undo()
    full_root = str(tmp_path / "full")
    os.rename(root, full_root)
    assert sync(full_root, full=True) == version
    _, full_dvs, _ = _current(full_root, version)
    assert {os.path.basename(k): v for k, v in dvs.items()} == {os.path.basename(k): v for k, v in full_dvs.items()}
    assert {os.path.basename(k) for k in dvs} == {"f0.parquet", "f3.parquet"}


def test_a_stale_dv_retires_only_its_puffin_chunk(tmp_path, monkeypatch):
    """DVs are published in Puffin files of at most MAX_PUFFIN_BLOBS blobs: changing one DV re-copies only the
    still-valid blobs of its own file, taken from the old Puffin file (checked by CRC)."""
    monkeypatch.setattr(convert, "MAX_PUFFIN_BLOBS", 2)
    root = _table(tmp_path, files=6)
    _delete(root, {f"f{i}.parquet": (i,) for i in range(6)})
    sync(root)
    version = _delete(root, {"f0.parquet": (0, 9)})
    storage = storage_for(root)
    reads = _recording(monkeypatch, storage)
    sync(root, storage, version=version)
    meta, dvs, used = _current(root, version)
    assert dvs == {os.path.join(root, f"f{i}.parquet"): 2 if i == 0 else 1 for i in range(6)}
    assert sum(p.endswith(".puffin") for p in reads) == 1  # the one retired Puffin file, read once
    snap = meta["snapshots"][-1]
    assert snap["summary"]["added-delete-files"] == "2"  # f0's new DV and the blob f1 shared a file with
    assert sum(p.endswith(".puffin") for p in used) == 3


def test_a_damaged_puffin_blob_is_not_copied(tmp_path):
    root = _table(tmp_path, files=2)
    _delete(root, {"f0.parquet": (1,), "f1.parquet": (2,)})
    sync(root)
    version = _delete(root, {"f0.parquet": (1, 3)})
    puffin = next(p for p in (tmp_path / "t" / METADATA_DIR).iterdir() if p.suffix == ".puffin")
    data = bytearray(puffin.read_bytes())
    footer_size = int.from_bytes(data[-12:-8], "little")
    blobs = json.loads(bytes(data[-12 - footer_size:-12]))["blobs"]
    kept = next(b for b in blobs if b["properties"]["referenced-data-file"].endswith("f1.parquet"))
    data[kept["offset"] + 9] ^= 0xFF  # inside the still-valid blob the next step copies
    puffin.write_bytes(bytes(data))
    state.forget(root)
    with pytest.raises(Exception, match="CRC-32"):
        sync(root, version=version)
    assert not storage_for(root).exists(metadata_location(root, version))


def test_snapshots_outside_the_retention_leave_the_published_metadata(tmp_path, monkeypatch):
    """A conversion drops the snapshots Delta's retention no longer covers (the current one always stays), with
    their snapshot-log and metadata-log entries; VACUUM's listing then finds their files unused."""
    from dvlake.uniform.expire import expired_files, kept_snapshots

    root = _table(tmp_path)
    assert sync(root) == 1  # the first snapshot is Delta version 1 (the files' commit)
    for i in range(3):
        _delete(root, {f"f{i}.parquet": (i,)})
        sync(root)
    meta, _, _ = _current(root, 4)
    assert len(meta["snapshots"]) == 4  # a week's retention keeps them all
    times = [s["timestamp-ms"] for s in meta["snapshots"]]  # versions 1..4
    assert [s["snapshot-id"] for s in kept_snapshots(meta["snapshots"], meta["current-snapshot-id"], times[2])] == \
        [s["snapshot-id"] for s in meta["snapshots"][1:]]  # version 2 was current when the window opened
    week = 7 * 24 * 3_600_000
    monkeypatch.setattr(convert, "now_ms", lambda: times[2] + week)
    version = _delete(root, {"f3.parquet": (3,)})
    assert sync(root) == version == 5
    meta, dvs, _ = _current(root, version)
    assert [s["summary"]["delta-version"] for s in meta["snapshots"]] == ["2", "3", "4", "5"]
    assert {e["snapshot-id"] for e in meta["snapshot-log"]} == {s["snapshot-id"] for s in meta["snapshots"]}
    assert [m["metadata-file"].rsplit("/", 1)[1] for m in meta["metadata-log"]] == \
        ["v2.metadata.json", "v3.metadata.json", "v4.metadata.json"]
    assert len(dvs) == 4
    old = {p.rsplit("/", 1)[1] for p in expired_files(storage_for(root), root, times[2] + 1)}
    assert {"v1.metadata.json", "v2.metadata.json"} <= old
    assert not old & {"v3.metadata.json", "v4.metadata.json", "v5.metadata.json", "version-hint.text"}


# --- IcebergCompatV3: Delta's row lineage, from the commit's own actions ---------------------------------------

V3_PROPS = {**PROPS, "delta.enableIcebergCompatV3": "true"}  # no enabledFormats: the tests convert by hand


def _v3_table(tmp_path) -> str:
    root = str(tmp_path / "t")
    create_table(root, SCHEMA, (), V3_PROPS)
    OptimisticTransaction(root, Snapshot.load(root)).commit([_add(f"f{i}.parquet") for i in range(4)], "WRITE")
    assert Snapshot.load(root).configuration["delta.enableRowTracking"] == "true"
    return root


def _data_entries(root: str, meta: dict) -> dict[str, tuple[int, int]]:
    """data file -> (first_row_id, data sequence number) of the current snapshot's live data entries."""
    storage = storage_for(root)
    snap = next(s for s in meta["snapshots"] if s["snapshot-id"] == meta["current-snapshot-id"])
    out = {}
    for m in avro.read(storage, snap["manifest-list"])[0]:
        if m["content"] == avro.MANIFEST_CONTENT_DATA:
            assert m["first_row_id"] == min(e["data_file"]["first_row_id"]
                                            for e in avro.read(storage, m["manifest_path"])[0])
            for e in avro.read(storage, m["manifest_path"])[0]:
                out[os.path.basename(e["data_file"]["file_path"])] = (e["data_file"]["first_row_id"],
                                                                      e["sequence_number"])
    return out


def _assert_delta_lineage(root: str, version: int) -> dict:
    """The Iceberg metadata of ``version`` carries Delta's row lineage: ids, commit versions, sequence number, mark."""
    delta = Snapshot.load(root, version=version)
    meta, _, _ = _current(root, version)
    assert meta["properties"]["dvlake.row-lineage"] == "delta-row-tracking"
    assert meta["last-sequence-number"] == version == meta["snapshots"][-1]["sequence-number"]
    mark = json.loads(delta.domains["delta.rowTracking"].configuration)["rowIdHighWaterMark"]
    assert meta["next-row-id"] == mark + 1
    expected = {r["path"]: (r["baseRowId"], r["defaultRowCommitVersion"])
                for r in delta.files.select(["path", "baseRowId", "defaultRowCommitVersion"]).to_pylist()}
    assert _data_entries(root, meta) == expected
    return meta


def test_v3_commit_steps_publish_delta_row_lineage_without_reading_the_table(tmp_path, monkeypatch):
    """The commit-driven step of a V3 table takes first_row_id, data sequence numbers and the high-water mark from
    the commit's own actions (or, when the commit leaves the mark alone, from the previous snapshot): no log replay,
    and the same lineage a full conversion publishes."""
    root = _v3_table(tmp_path)
    sync(root)
    _assert_delta_lineage(root, 1)
    real_load = Snapshot.load.__func__  # type: ignore[attr-defined]
    loads: list[int | None] = []

    def counting(cls, *args, **kwargs):
        loads.append(kwargs.get("version"))
        return real_load(cls, *args, **kwargs)

    def commit_and_convert(commit) -> int:
        version = commit()
        metadata = Snapshot.load(root).metadata
        with monkeypatch.context() as m:
            m.setattr(Snapshot, "load", classmethod(counting))
            convert.after_commit(root, version, storage_for(root), metadata)
        assert loads == [], version
        return version

    v2 = commit_and_convert(lambda: _delete(root, {"f0.parquet": (0, 1)}))  # mark unchanged, ids kept
    v3 = commit_and_convert(lambda: OptimisticTransaction(root, Snapshot.load(root)).commit(
        [_add("g0.parquet"), _add("g1.parquet")], "WRITE"))  # new ids above the mark; the commit raises it
    v4 = commit_and_convert(lambda: _delete(root, {"g1.parquet": (7,)}))
    for v in (v2, v3, v4):
        _assert_delta_lineage(root, v)
    assert _data_entries(root, _current(root, v3)[0])["g0.parquet"] == (80, v3)
    assert _current(root, v4)[1] == {os.path.join(root, "f0.parquet"): 2, os.path.join(root, "g1.parquet"): 1}
    full_root = str(tmp_path / "full")
    os.rename(root, full_root)
    state.forget(root)
    assert sync(full_root, full=True) == v4
    _assert_delta_lineage(full_root, v4)


def test_v3_file_re_added_with_other_row_ids_is_published_as_a_new_data_file(tmp_path):
    """A row-tracking backfill re-adds a file with (other) ids: the commit-driven step removes its old entry and adds
    it again with the new first_row_id and data sequence number, DV included, rather than keep the stale lineage."""
    from dataclasses import replace

    from dvlake.log import row_tracking

    root = _v3_table(tmp_path)
    _delete(root, {"f1.parquet": (3,)})
    sync(root)
    snap = Snapshot.load(root)
    f1 = next(a for a in snap.add_files() if a.path == "f1.parquet")
    version = OptimisticTransaction(root, snap).commit(  # f1 re-committed without ids: the transaction assigns new ones
        [replace(f1, data_change=False, base_row_id=None, default_row_commit_version=None)],
        row_tracking.BACKFILL_OPERATION, {"batchId": 0})
    assert sync(root) == version
    meta = _assert_delta_lineage(root, version)
    assert _data_entries(root, meta)["f1.parquet"] == (80, version)
    assert _current(root, version)[1] == {os.path.join(root, "f1.parquet"): 1}
    summary = meta["snapshots"][-1]["summary"]
    assert (summary["added-data-files"], summary["deleted-data-files"]) == ("1", "1")


# --- key sidecars: a new process reads the manifest list, the sidecars and only the manifests it rewrites ----------


def _chunked_v3_table(root: str) -> None:
    """8 files in data manifests of 2 entries, DVs on f0 and f5 (one Puffin file of 2 blobs), converted."""
    create_table(root, SCHEMA, (), V3_PROPS)
    OptimisticTransaction(root, Snapshot.load(root)).commit([_add(f"f{i}.parquet") for i in range(8)], "WRITE")
    _delete(root, {"f0.parquet": (1,), "f5.parquet": (2,)})
    sync(root)


def _change(root: str) -> int:
    """One commit: a new DV on f2, f5's DV replaced, f7 removed whole."""
    snap = Snapshot.load(root)
    actions = []
    for a in snap.add_files():
        rows = {"f2.parquet": (3,), "f5.parquet": (2, 4)}.get(a.path)
        if rows:
            actions += [a.remove(), AddFile(**{**a.__dict__, "deletion_vector": _dv(*rows),
                                               "stats": json.dumps({"numRecords": ROWS, "tightBounds": False})})]
        elif a.path == "f7.parquet":
            actions.append(a.remove())
    return OptimisticTransaction(root, snap).commit(actions, "DELETE", {"predicate": "[]"})


def _published(root: str, version: int) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """(DV cardinality, (first_row_id, data sequence number)) by data file name: what readers see of ``version``."""
    meta, dvs, _ = _current(root, version)
    return {os.path.basename(k): v for k, v in dvs.items()}, _data_entries(root, meta)


def _manifest_holding(root: str, version: int, name: str, content: int) -> dict:
    """The manifest-list record of ``version``'s manifest whose entries name data file ``name``."""
    storage = storage_for(root)
    meta = json.loads(storage.read_bytes(metadata_location(root, version)))
    for m in avro.read(storage, meta["snapshots"][-1]["manifest-list"])[0]:
        if m["content"] == content:
            for e in avro.read(storage, m["manifest_path"])[0]:
                f = e["data_file"]
                if os.path.basename(f["referenced_data_file"] or f["file_path"]) == name:
                    return m
    raise AssertionError(name)


def _recording(monkeypatch, storage) -> list[str]:
    reads: list[str] = []
    real_read = storage.read_bytes

    def recording(path: str) -> bytes:
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(storage, "read_bytes", recording)
    return reads


def test_cold_step_reads_only_the_manifests_it_rewrites_and_equals_warm_and_full(tmp_path, monkeypatch):
    """A new process converting one commit reads the manifest list and the key sidecars, and of the manifests only
    the data manifest that held the removed file and the delete manifest that held the replaced DV; it publishes
    what a step in the process that converted the previous commit publishes, and what a full rebuild publishes."""
    monkeypatch.setattr(convert, "MAX_MANIFEST_ENTRIES", 2)
    monkeypatch.setattr(convert, "MAX_PUFFIN_BLOBS", 2)
    warm, cold = str(tmp_path / "warm"), str(tmp_path / "cold")
    for root in (warm, cold):
        _chunked_v3_table(root)
    before = Snapshot.load(cold).version
    rewritten = {_manifest_holding(cold, before, "f7.parquet", avro.MANIFEST_CONTENT_DATA)["manifest_path"],
                 _manifest_holding(cold, before, "f5.parquet", avro.MANIFEST_CONTENT_DELETES)["manifest_path"]}
    version = _change(warm)
    assert _change(cold) == version
    assert sync(warm, version=version, metadata=Snapshot.load(warm).metadata) == version  # state kept in-process
    state.forget(cold)  # as in a new process
    storage = storage_for(cold)
    reads = _recording(monkeypatch, storage)
    assert sync(cold, storage, version=version, metadata=Snapshot.load(cold).metadata) == version
    manifests_read = {p for p in reads if p.endswith(".avro") and not os.path.basename(p).startswith("snap-")}
    assert manifests_read == rewritten
    assert sum(p.endswith(".keys") for p in reads) == 5  # 4 data manifests (f0-f7 in pairs), 1 delete manifest
    monkeypatch.undo()
    expected = _published(warm, version)
    assert expected[0] == {"f0.parquet": 1, "f2.parquet": 1, "f5.parquet": 2}
    assert "f7.parquet" not in expected[1] and len(expected[1]) == 7
    assert _published(cold, version) == expected
    full = str(tmp_path / "full")
    os.rename(cold, full)
    assert sync(full, full=True) == version
    assert _published(full, version) == expected


@pytest.mark.parametrize("damage", ["missing", "corrupt", "truncated", "other-manifest", "wrong-count"])
def test_a_missing_or_damaged_sidecar_makes_the_step_read_that_manifest(tmp_path, monkeypatch, damage):
    """A sidecar is trusted only when intact and written for that very manifest (path, length, live count); else
    the step reads the manifest itself, publishes the same snapshot, and writes the sidecar back."""
    monkeypatch.setattr(convert, "MAX_MANIFEST_ENTRIES", 2)
    monkeypatch.setattr(convert, "MAX_PUFFIN_BLOBS", 2)
    root = str(tmp_path / "t")
    _chunked_v3_table(root)
    before = Snapshot.load(root).version
    kept = _manifest_holding(root, before, "f0.parquet", avro.MANIFEST_CONTENT_DATA)  # a manifest the step keeps
    other = _manifest_holding(root, before, "f3.parquet", avro.MANIFEST_CONTENT_DATA)
    target = sidecar_path(kept["manifest_path"])
    good = open(target, "rb").read()
    if damage == "missing":
        os.remove(target)
    elif damage == "corrupt":
        open(target, "wb").write(good[:10] + bytes(b ^ 0x5A for b in good[10:]))
    elif damage == "truncated":
        open(target, "wb").write(good[: len(good) // 2])
    elif damage == "other-manifest":  # a stale sidecar: another manifest's, same shape
        open(target, "wb").write(open(sidecar_path(other["manifest_path"]), "rb").read())
    else:
        body = json.loads(zlib.decompress(good))
        body["keys"], body["lineage"] = body["keys"][:1], body["lineage"][:1]
        open(target, "wb").write(zlib.compress(json.dumps(body).encode()))
    version = _change(root)
    state.forget(root)
    storage = storage_for(root)
    reads = _recording(monkeypatch, storage)
    assert sync(root, storage, version=version, metadata=Snapshot.load(root).metadata) == version
    assert kept["manifest_path"] in reads
    monkeypatch.undo()
    assert open(target, "rb").read() == good  # written back for the next process
    published = _published(root, version)
    full = str(tmp_path / "full")
    os.rename(root, full)
    assert sync(full, full=True) == version
    assert _published(full, version) == published


def test_a_sidecar_naming_other_paths_is_not_trusted(tmp_path, monkeypatch):
    """A sidecar with the right manifest, length and count but other paths does not hash to the digest in the
    manifest's header: the step reads the manifest instead, publishes, and writes the true sidecar back."""
    monkeypatch.setattr(convert, "MAX_MANIFEST_ENTRIES", 2)
    root = str(tmp_path / "t")
    _chunked_v3_table(root)
    rewritten = _manifest_holding(root, Snapshot.load(root).version, "f7.parquet", avro.MANIFEST_CONTENT_DATA)
    target = sidecar_path(rewritten["manifest_path"])
    good = open(target, "rb").read()
    body = json.loads(zlib.decompress(good))
    body["keys"] = [body["keys"][0].replace("f6", "g6"), body["keys"][1]]
    open(target, "wb").write(zlib.compress(json.dumps(body).encode()))
    version = _change(root)
    state.forget(root)
    assert sync(root, version=version) == version
    assert open(target, "rb").read() == good
    assert _published(root, version)[0] == {"f0.parquet": 1, "f2.parquet": 1, "f5.parquet": 2}


def test_a_sidecar_with_other_lineage_publishes_nothing_and_is_removed(tmp_path, monkeypatch):
    """The digest binds a sidecar's paths, not its row lineage: a sidecar whose lineage differs from its manifest's is
    caught when the step reads the manifest it rewrites: nothing is published, the sidecar is removed, and the next
    attempt reads the manifest."""
    monkeypatch.setattr(convert, "MAX_MANIFEST_ENTRIES", 2)
    root = str(tmp_path / "t")
    _chunked_v3_table(root)
    rewritten = _manifest_holding(root, Snapshot.load(root).version, "f7.parquet", avro.MANIFEST_CONTENT_DATA)
    target = sidecar_path(rewritten["manifest_path"])
    body = json.loads(zlib.decompress(open(target, "rb").read()))
    body["lineage"] = [[body["lineage"][0][0] + 1000, body["lineage"][0][1]], body["lineage"][1]]
    open(target, "wb").write(zlib.compress(json.dumps(body).encode()))
    version = _change(root)
    state.forget(root)
    with pytest.raises(UniformConversionError, match="does not list the entries"):
        sync(root, version=version)
    assert not storage_for(root).exists(metadata_location(root, version))
    assert not os.path.exists(target)
    assert sync(root, version=version) == version
    assert _published(root, version)[0] == {"f0.parquet": 1, "f2.parquet": 1, "f5.parquet": 2}
