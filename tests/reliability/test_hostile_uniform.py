"""UniForm key sidecars are hints, never truth (issue 39, items 3 and 4; Spark-free, seconds).

A ``<manifest>.keys`` sidecar lets a conversion step skip reading the manifests it keeps. Two ways it could hurt:

* an entry at the sidecar's path that is not a regular file (a directory, a FIFO) made every later conversion (and
  ``dvlake uniform sync``) fail on it, so Iceberg readers kept a stale snapshot: it must be treated as missing, the
  manifest read, and the sidecar written back as a regular file;
* a well-formed sidecar that lists other paths than its manifest decided which manifests a step kept: a delete
  manifest whose sidecar named DV-less files survived a commit that dropped its DVs, and Iceberg readers applied them
  (fewer rows than Delta). Its keys must be checked against the manifest before they decide anything.

Each case compares what the step published with a full rebuild of the same Delta version and with the DVs Delta has.
"""

from __future__ import annotations

import json
import os
import zlib

import pytest

from dvlake.log.actions import AddFile
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction
from dvlake.uniform import avro, convert, state
from dvlake.uniform.convert import sync
from dvlake.uniform.keys import sidecar_path
from tests.unit.test_uniform_convert import _change, _chunked_v3_table, _manifest_holding, _published


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Manifests and Puffin files of 2 entries: f0..f7 in 4 data manifests, the DVs of f0 and f5 in one."""
    monkeypatch.setattr(convert, "MAX_MANIFEST_ENTRIES", 2)
    monkeypatch.setattr(convert, "MAX_PUFFIN_BLOBS", 2)


def _full_rebuild(root: str, version: int, tmp_path: os.PathLike[str]) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """What ``sync --full`` publishes for ``version`` (on a copy made by renaming; ``root`` is gone afterwards)."""
    full = os.path.join(tmp_path, "full")
    os.rename(root, full)
    state.forget(full)
    assert sync(full, full=True) == version
    return _published(full, version)


def _delta_dvs(root: str) -> dict[str, int]:
    """The DV cardinality of each data file that has one in Delta's latest version."""
    return {a.path: a.deletion_vector.cardinality for a in Snapshot.load(root).add_files() if a.deletion_vector}


def _sidecar(root: str, name: str, content: int) -> str:
    return sidecar_path(_manifest_holding(root, Snapshot.load(root).version, name, content)["manifest_path"])


@pytest.mark.parametrize("shape", ["directory", "fifo"])
@pytest.mark.parametrize("content", [avro.MANIFEST_CONTENT_DATA, avro.MANIFEST_CONTENT_DELETES], ids=["data", "deletes"])
def test_a_sidecar_that_is_not_a_regular_file_is_ignored_and_rewritten(tmp_path, shape: str, content: int) -> None:
    root = str(tmp_path / "t")
    _chunked_v3_table(root)
    target = _sidecar(root, "f0.parquet", content)  # a manifest the step keeps (data) or retires (deletes)
    good = open(target, "rb").read()
    os.remove(target)
    os.mkdir(target) if shape == "directory" else os.mkfifo(target)
    version = _change(root)
    state.forget(root)  # as in a new process
    assert sync(root, version=version) == version
    published = _published(root, version)
    assert published[0] == {"f0.parquet": 1, "f2.parquet": 1, "f5.parquet": 2}
    if content == avro.MANIFEST_CONTENT_DATA:  # kept: its sidecar is a regular file with the same bytes again
        assert os.path.isfile(target) and open(target, "rb").read() == good
    state.forget(root)
    assert sync(root) == version  # a later sync (a new process) loads the state without tripping on it
    assert _full_rebuild(root, version, tmp_path) == published


def _lie(target: str, replace: dict[str, str]) -> None:
    """Rewrite a sidecar well-formed (same manifest, length, content and count) but naming other data files."""
    body = json.loads(zlib.decompress(open(target, "rb").read()))
    for old, new in replace.items():
        body["keys"] = [k.replace(old, new) for k in body["keys"]]
    open(target, "wb").write(zlib.compress(json.dumps(body).encode()))


def test_a_lying_delete_sidecar_does_not_keep_dvs_delta_dropped(tmp_path) -> None:
    """The campaign's case: the delete manifest's sidecar names DV-less files (f1, f3) instead of f0 and f5, then a
    commit drops both DVs (as a RESTORE to before the DELETE does). Trusting the sidecar kept the manifest, and Iceberg
    readers still applied the dropped DVs; checked against the manifest, the step retires it."""
    root = str(tmp_path / "t")
    _chunked_v3_table(root)
    _lie(_sidecar(root, "f0.parquet", avro.MANIFEST_CONTENT_DELETES), {"f0.parquet": "f1.parquet", "f5.parquet": "f3.parquet"})
    snap = Snapshot.load(root)
    actions = []
    for a in snap.add_files():
        if a.deletion_vector is not None:
            actions += [a.remove(), AddFile(**{**a.__dict__, "deletion_vector": None})]
    version = OptimisticTransaction(root, snap).commit(actions, "RESTORE")
    assert _delta_dvs(root) == {}
    state.forget(root)
    assert sync(root, version=version) == version
    published = _published(root, version)
    assert published[0] == {}
    assert len(published[1]) == 8
    assert _full_rebuild(root, version, tmp_path) == published


def test_lying_data_sidecars_are_read_past_and_the_step_publishes(tmp_path) -> None:
    """Two data sidecars swap a path each (same counts): the step that removes f1 must neither keep f1 (named by the
    other manifest's sidecar) nor stop; it reads both manifests and publishes what a full rebuild does."""
    root = str(tmp_path / "t")
    _chunked_v3_table(root)
    _lie(_sidecar(root, "f0.parquet", avro.MANIFEST_CONTENT_DATA), {"f1.parquet": "f2.parquet"})
    _lie(_sidecar(root, "f2.parquet", avro.MANIFEST_CONTENT_DATA), {"f2.parquet": "f1.parquet"})
    snap = Snapshot.load(root)
    version = OptimisticTransaction(root, snap).commit(
        [a.remove() for a in snap.add_files() if a.path == "f1.parquet"], "DELETE", {"predicate": "[]"})
    state.forget(root)
    assert sync(root, version=version) == version
    published = _published(root, version)
    assert sorted(published[1]) == [f"f{i}.parquet" for i in (0, 2, 3, 4, 5, 6, 7)]
    assert published[0] == {"f0.parquet": 1, "f5.parquet": 1}
    assert _full_rebuild(root, version, tmp_path) == published
