"""Log cleanup after checkpoints, and protocol upgrades / feature support (no Spark)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from dvlake.commands.ddl.properties import set_properties
from dvlake.commands.ddl.protocol import add_feature_support, upgrade_table_protocol
from dvlake.errors import InvalidArgumentError, ProtocolFeatureError, UnsupportedFeatureError, VersionNotFoundError
from dvlake.log.actions import Protocol
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction, checkpoint

OLD = time.time() - 40 * 86_400  # older than the default 30-day log retention


def _table(root: Path, conf: dict[str, str] | None = None, versions: int = 5) -> None:
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
    meta = {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                         "partitionColumns": [], "configuration": {"delta.checkpointInterval": "2", **(conf or {})}}}
    for v in range(versions):
        lines = [{"commitInfo": {"operation": "WRITE"}}]
        if v == 0:
            lines += [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, meta]
        lines.append({"add": {"path": f"f{v}.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0,
                              "dataChange": True}})
        p = log / f"{v:020d}.json"
        p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
        if v == 2:
            checkpoint(str(root), 2)
        os.utime(p, (OLD + v, OLD + v))


def _commit(root: Path) -> int:
    return OptimisticTransaction(str(root), Snapshot.load(str(root))).commit([], "SET TBLPROPERTIES", {})


def _versions(root: Path) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(root / "_delta_log") if n.endswith(".json"))


def test_log_cleanup_removes_scan_listings_older_than_the_retention_only(tmp_path: Path) -> None:
    """Large reads leave native-scan listing files under _delta_log/_dvlake/scan; the cleanup after a checkpoint drops
    those last written before the log retention and keeps recent ones (a read rewrites a listing that is gone)."""
    from dvlake.log.cleanup import SCAN_LISTINGS_SUBDIR

    root = tmp_path / "t"
    _table(root)
    listings = root / SCAN_LISTINGS_SUBDIR
    listings.mkdir(parents=True)
    old, new, other = listings / "a.listing.gz", listings / "b.listing.gz", listings / "notes.txt"
    for f in (old, new, other):
        f.write_bytes(b"x")
    os.utime(old, (OLD, OLD))
    os.utime(other, (OLD, OLD))
    _commit(root)  # v5
    _commit(root)  # v6: checkpoint, then cleanup
    assert sorted(p.name for p in listings.iterdir()) == ["b.listing.gz", "notes.txt"]


def test_checkpoint_cleans_up_expired_commits_but_keeps_what_versions_need(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root)
    _commit(root)  # v5
    assert _versions(root) == [0, 1, 2, 3, 4, 5]
    _commit(root)  # v6: checkpoint, then cleanup cuts at checkpoint 2 (commits 0 and 1 are 40 days old)
    assert _versions(root) == [2, 3, 4, 5, 6]
    assert not (root / "_delta_log" / f"{0:020d}.checkpoint.parquet").exists()
    for v in range(2, 7):
        assert Snapshot.load(str(root), version=v).num_files == min(v, 4) + 1
    with pytest.raises(VersionNotFoundError, match="available versions are 2 to 6 .*log cleanup"):
        Snapshot.load(str(root), version=1)


@pytest.mark.parametrize("conf", [{"delta.enableExpiredLogCleanup": "false"},
                                  {"delta.requireCheckpointProtectionBeforeVersion": "4"},
                                  {"delta.logRetentionDuration": "interval 60 days"}])
def test_cleanup_respects_its_settings(tmp_path: Path, conf: dict[str, str]) -> None:
    root = tmp_path / "t"
    _table(root, conf)
    _commit(root)
    _commit(root)
    assert _versions(root) == list(range(7))


def test_upgrade_protocol_and_add_features(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root, versions=1)
    assert upgrade_table_protocol(str(root), 1, 2) is None  # already there: no commit
    set_properties(str(root), {"delta.minWriterVersion": "3"})  # the SQL way; not stored as a property
    snap = Snapshot.load(str(root))
    assert snap.protocol == Protocol(1, 3) and "delta.minWriterVersion" not in snap.configuration
    assert upgrade_table_protocol(str(root), 1, 3) is None
    assert upgrade_table_protocol(str(root), 1, 2) is None  # never downgrades: a no-op, as delta-spark
    assert Snapshot.load(str(root)).protocol == Protocol(1, 3)
    with pytest.raises(InvalidArgumentError, match="DELTA_INVALID_PROTOCOL_VERSION"):
        upgrade_table_protocol(str(root), 1, 8)
    add_feature_support(str(root), "deletionVectors")
    snap = Snapshot.load(str(root))
    assert snap.protocol == Protocol(3, 7, ("deletionVectors",),
                                     ("appendOnly", "checkConstraints", "deletionVectors", "invariants"))
    assert "delta.enableDeletionVectors" not in snap.configuration  # supported, not enabled
    history = snap.history(1)[0]
    assert history["operation"] == "SET TBLPROPERTIES"
    assert json.loads(history["operationParameters"]["properties"]) == {"delta.feature.deletionVectors": "supported"}
    set_properties(str(root), {"delta.feature.changeDataFeed": "supported", "owner": "me"})
    snap = Snapshot.load(str(root))
    assert "changeDataFeed" in (snap.protocol.writer_features or ())
    assert snap.configuration.get("owner") == "me" and not any(k.startswith("delta.feature.") for k in snap.configuration)
    with pytest.raises(ProtocolFeatureError) as err:
        add_feature_support(str(root), "noSuchFeature")
    assert err.value.error_class == "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"
    with pytest.raises(UnsupportedFeatureError, match="inCommitTimestamp"):
        add_feature_support(str(root), "inCommitTimestamp")
    upgrade_table_protocol(str(root), 3, 7)  # already table features: nothing changes
    assert Snapshot.load(str(root)).protocol == snap.protocol
    add_feature_support(str(root), "rowTracking")  # brings the feature it requires along
    assert {"rowTracking", "domainMetadata"} <= set(Snapshot.load(str(root)).protocol.writer_features or ())
