"""The log is read only from regular files inside the table's own ``_delta_log`` (the serializable-commits issue):
a commit that is a FIFO or a symlink to another table's commit, or a sidecar outside ``_delta_log/_sidecars``, is a
typed error naming the file — never a skipped version or another table's files."""

from __future__ import annotations

import json
import os

import pytest

from dvlake.commands.write import create_table
from dvlake.errors import CorruptLogError
from dvlake.log.actions import AddFile
from dvlake.log.checkpoint import sidecar_location
from dvlake.log.segment import Checkpoint
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def _table(root: str, files: int = 2) -> str:
    create_table(root, SCHEMA)
    for i in range(files):
        stats = json.dumps({"numRecords": 1, "minValues": {"id": i}, "maxValues": {"id": i}, "nullCount": {"id": 0}})
        OptimisticTransaction(root, Snapshot.load(root)).commit(
            [AddFile(path=f"f{i}.parquet", partition_values={}, size=10, modification_time=1, stats=stats)], "WRITE")
    return root


def _commit(root: str, version: int) -> str:
    return os.path.join(root, "_delta_log", f"{version:020d}.json")


def test_a_fifo_commit_is_an_error_not_a_missing_version(tmp_path) -> None:
    root = _table(str(tmp_path / "t"))
    os.remove(_commit(root, 2))
    os.mkfifo(_commit(root, 2))
    with pytest.raises(CorruptLogError, match=r"00000000000000000002\.json is a FIFO"):
        Snapshot.load(root)


def test_a_commit_symlinked_to_another_tables_log_is_refused(tmp_path) -> None:
    root = _table(str(tmp_path / "t"))
    other = _table(str(tmp_path / "other"), files=3)
    os.remove(_commit(root, 2))
    os.symlink(_commit(other, 2), _commit(root, 2))
    with pytest.raises(CorruptLogError, match="symlink to .*other"):
        Snapshot.load(root)


def test_a_symlink_inside_the_log_folder_is_still_read(tmp_path) -> None:
    root = _table(str(tmp_path / "t"))
    log = os.path.join(root, "_delta_log")
    os.rename(_commit(root, 2), os.path.join(log, "kept.json"))
    os.symlink(os.path.join(log, "kept.json"), _commit(root, 2))
    assert Snapshot.load(root).version == 2


@pytest.mark.parametrize("path", [
    "../../../other_table/_delta_log/00000000000000000001.checkpoint.parquet",
    "/elsewhere/other_table/_delta_log/_sidecars/a.parquet",
    "file:///elsewhere/other_table/_delta_log/_sidecars/a.parquet",
    "sub/a.parquet",
    "..",
])
def test_sidecars_outside_the_tables_sidecar_folder_are_refused(tmp_path, path: str) -> None:
    root = str(tmp_path / "t")
    checkpoint = Checkpoint(3, "v2", (os.path.join(root, "_delta_log", "x.checkpoint.json"),))
    with pytest.raises(CorruptLogError, match="sidecar"):
        sidecar_location(root, checkpoint, path)


def test_sidecars_by_name_or_by_their_own_full_path(tmp_path) -> None:
    root = str(tmp_path / "t")
    checkpoint = Checkpoint(3, "v2", (os.path.join(root, "_delta_log", "x.checkpoint.json"),))
    own = os.path.join(root, "_delta_log", "_sidecars", "a.parquet")
    assert sidecar_location(root, checkpoint, "a.parquet") == own
    assert sidecar_location(root, checkpoint, own) == own
    assert sidecar_location(root, checkpoint, "file://" + own) == own
