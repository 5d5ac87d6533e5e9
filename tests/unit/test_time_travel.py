"""Time travel by timestamp: file modification times (made monotonic) and in-commit timestamps."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from dvlake.errors import VersionNotFoundError
from dvlake.log.snapshot import Snapshot, to_epoch_ms

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})


def _commit(root, v, ict=None, conf=None, mtime=None):
    log = os.path.join(root, "_delta_log")
    os.makedirs(log, exist_ok=True)
    lines = [{"commitInfo": {"timestamp": 0, **({"inCommitTimestamp": ict} if ict is not None else {})}}]
    if v == 0:
        lines += [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                  {"metaData": {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                                "partitionColumns": [], "configuration": conf or {}}}]
    lines.append({"add": {"path": f"f{v}.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0,
                          "dataChange": True}})
    path = os.path.join(log, f"{v:020d}.json")
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines) + "\n")
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_mtimes_are_made_monotonic(tmp_path):
    root = str(tmp_path)
    _commit(root, 0, mtime=1000)
    _commit(root, 1, mtime=2000)
    _commit(root, 2, mtime=1500)  # a clock went backwards: treated as 2000.001
    assert Snapshot.load(root, timestamp=1_999_000).version == 0
    assert Snapshot.load(root, timestamp=2_000_000).version == 1
    assert Snapshot.load(root, timestamp=2_000_001).version == 2
    with pytest.raises(VersionNotFoundError, match="before the earliest"):
        Snapshot.load(root, timestamp=999_000)


def test_in_commit_timestamps_win_over_mtimes(tmp_path):
    root = str(tmp_path)
    conf = {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "0"}
    _commit(root, 0, ict=10_000, conf=conf, mtime=5)
    _commit(root, 1, ict=20_000, mtime=5)
    _commit(root, 2, ict=30_000, mtime=5)
    assert Snapshot.load(root, timestamp=25_000).version == 1
    assert Snapshot.load(root, timestamp=30_000).version == 2
    assert Snapshot.load(root).commit_timestamp(1) == 20_000


@pytest.mark.parametrize("value,expected", [
    (1700000000000, 1700000000000),
    ("2023-11-14T22:13:20Z", 1700000000000),
    ("2023-11-14 22:13:20", 1700000000000),
    (dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC), 1700000000000),
    (dt.date(2023, 11, 14), 1699920000000),
])
def test_timestamp_forms(value, expected):
    assert to_epoch_ms(value) == expected
