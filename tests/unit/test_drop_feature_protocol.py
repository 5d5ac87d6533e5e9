"""DROP FEATURE without Spark: the protocol a drop leaves (normalized as delta-spark), and which requests are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dvlake.commands.ddl import drop_feature as drop_feature_module
from dvlake.commands.ddl.drop_feature import resolve_feature
from dvlake.config import table_bool
from dvlake.errors import DeltaAnalysisException, DeltaTableFeatureException
from dvlake.log.actions import Protocol
from dvlake.log.cleanup import CHECKPOINT_PROTECTION
from dvlake.log.protocol_ops import drop_feature_protocol, normalize_protocol
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction

DV = "deletionVectors"
CP = "checkpointProtection"


@pytest.mark.parametrize(("before", "add", "after"), [
    # a new dvlake DV table: nothing is left, so the protocol is the lowest there is
    (Protocol(3, 7, (DV,), (DV,)), (), Protocol(1, 1)),
    # legacy features that (1, 2) implies fold back into the legacy form
    (Protocol(3, 7, (DV,), ("appendOnly", "invariants", DV)), (), Protocol(1, 2)),
    # fast drop: checkpointProtection is a writer-only table feature, so writer 7 stays, reader falls to 1
    (Protocol(3, 7, (DV,), ("appendOnly", "invariants", DV)), (CP,), Protocol(1, 7, None, ("appendOnly", CP, "invariants"))),
    # column mapping alone needs reader 2, listed nowhere on the reader side
    (Protocol(3, 7, ("columnMapping", DV), ("columnMapping", DV)), (CP,), Protocol(2, 7, None, (CP, "columnMapping"))),
    # a remaining reader-writer table feature keeps reader 3 with its list
    (Protocol(3, 7, (DV, "timestampNtz"), (DV, "timestampNtz")), (CP,), Protocol(3, 7, ("timestampNtz",), (CP, "timestampNtz"))),
    # changeDataFeed + appendOnly + invariants is not exactly what (1, 4) implies: table features stay
    (Protocol(3, 7, (DV,), ("appendOnly", "changeDataFeed", "invariants", DV)), (),
     Protocol(1, 7, None, ("appendOnly", "changeDataFeed", "invariants"))),
])
def test_drop_feature_protocol_is_normalized_as_delta_spark(before: Protocol, add: tuple[str, ...], after: Protocol) -> None:
    assert drop_feature_protocol(before, DV, add) == after


def test_normalize_keeps_legacy_protocols_and_exact_legacy_sets() -> None:
    assert normalize_protocol(Protocol(1, 2)) == Protocol(1, 2)
    full = ("appendOnly", "changeDataFeed", "checkConstraints", "generatedColumns", "invariants")
    assert normalize_protocol(Protocol(1, 7, None, full)) == Protocol(1, 4)


DV_TABLE = Protocol(3, 7, (DV,), ("appendOnly", DV, "invariants"))


@pytest.mark.parametrize(("protocol", "name", "truncate", "error_class"), [
    (DV_TABLE, "delta.enableDeletionVectors", False, "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY"),
    (DV_TABLE, "noSuchFeature", False, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
    (DV_TABLE, "appendOnly", False, "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE"),
    (Protocol(1, 2), DV, False, "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"),
    (Protocol(1, 7, None, ("checkConstraints",)), "checkConstraints", True,
     "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED"),
    (Protocol(3, 7, (DV,), (DV, "adaptiveMetadata-preview")), DV, False, "DELTA_FEATURE_DROP_DEPENDENT_FEATURE"),
    (Protocol(1, 7, None, (CP,)), CP, False, "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION"),
    (Protocol(1, 7, None, (CP,)), CP, True, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
    # removable in delta-spark, but dvlake only knows how to drop deletionVectors, typeWidening and checkConstraints
    (Protocol(1, 7, None, ("rowTracking", "domainMetadata")), "rowTracking", False,
     "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
])
def test_refused_requests_carry_delta_sparks_error_class(protocol: Protocol, name: str, truncate: bool,
                                                         error_class: str) -> None:
    with pytest.raises(DeltaTableFeatureException) as err:
        resolve_feature(protocol, name, truncate)
    assert err.value.error_class == error_class
    assert str(err.value).startswith(f"[{error_class}]") and name.split(".")[0] in str(err.value)


def test_feature_names_resolve_case_insensitively() -> None:
    assert resolve_feature(DV_TABLE, "DELETIONVECTORS", True) == DV


CC = "checkConstraints"


def test_check_constraints_can_be_dropped_from_legacy_and_table_features_protocols() -> None:
    """Rule: checkConstraints is a removable writer feature; (1, 3) has it implicitly, as delta-spark's denormalized
    protocol does, so both forms accept the request (without TRUNCATE HISTORY)."""
    assert resolve_feature(Protocol(1, 3), CC, False) == CC
    assert resolve_feature(Protocol(1, 7, None, ("appendOnly", CC)), CC, False) == CC


@pytest.mark.parametrize(("before", "after"), [
    # legacy writer 3 minus its newest feature is exactly what writer 2 implies
    (Protocol(1, 3), Protocol(1, 2)),
    # writer 4 minus checkConstraints matches no legacy version: the remaining features are listed
    (Protocol(1, 4), Protocol(1, 7, None, ("appendOnly", "changeDataFeed", "generatedColumns", "invariants"))),
    # a DV table keeps its reader feature and everything else; no checkpointProtection for a writer feature
    (Protocol(3, 7, (DV,), ("appendOnly", CC, DV, "invariants")), Protocol(3, 7, (DV,), ("appendOnly", DV, "invariants"))),
    (Protocol(1, 7, None, (CC,)), Protocol(1, 1)),
])
def test_dropping_check_constraints_leaves_a_normalized_protocol(before: Protocol, after: Protocol) -> None:
    assert drop_feature_protocol(before, CC) == after


# -- the DROP FEATURE commit racing other writers (no Spark: the table has no DVs left to purge) -------------


def _clean_dv_table(root: Path, enabled: bool = False) -> None:
    """A table whose protocol supports DVs but whose current version uses none."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
    conf = {"delta.enableDeletionVectors": "true"} if enabled else {}
    lines = [{"commitInfo": {"operation": "WRITE"}}, {"protocol": DV_TABLE.to_json()},
             {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                           "partitionColumns": [], "configuration": conf}},
             {"add": {"path": "a.parquet", "partitionValues": {}, "size": 1, "modificationTime": 0, "dataChange": True}}]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_drop_commit_that_loses_a_race_is_prepared_again_for_its_own_version(tmp_path: Path, monkeypatch) -> None:
    root = str(tmp_path / "t")
    _clean_dv_table(tmp_path / "t")
    raced: list[int] = []

    def racing(protocol: Protocol, name: str, add: tuple[str, ...] = ()) -> Protocol:
        if not raced:  # another writer commits between the DROP FEATURE's read and its commit
            raced.append(OptimisticTransaction(root, Snapshot.load(root)).commit([], "WRITE"))
        return drop_feature_protocol(protocol, name, add)

    monkeypatch.setattr(drop_feature_module, "drop_feature_protocol", racing)
    outcome = drop_feature_module._commit_downgrade(root, DV, truncate_history=False, protect=True)
    snap = Snapshot.load(root)
    assert raced == [1] and outcome.version == snap.version == 2
    assert snap.configuration[CHECKPOINT_PROTECTION] == "2"  # the version it landed at, not the one it first read
    assert snap.protocol == Protocol(1, 7, None, ("appendOnly", CP, "invariants"))


def test_drop_is_refused_when_a_concurrent_commit_enabled_dvs_again(tmp_path: Path, monkeypatch) -> None:
    root = str(tmp_path / "t")
    _clean_dv_table(tmp_path / "t")

    def racing(protocol: Protocol, name: str, add: tuple[str, ...] = ()) -> Protocol:
        snap = Snapshot.load(root)
        if not table_bool(snap.configuration, "delta.enableDeletionVectors"):
            txn = OptimisticTransaction(root, snap)
            txn.update_metadata(snap.metadata.with_configuration(**{"delta.enableDeletionVectors": "true"}))
            txn.commit([], "SET TBLPROPERTIES")
        return drop_feature_protocol(protocol, name, add)

    monkeypatch.setattr(drop_feature_module, "drop_feature_protocol", racing)
    with pytest.raises(DeltaTableFeatureException) as err:
        drop_feature_module._commit_downgrade(root, DV, truncate_history=False, protect=True)
    assert err.value.error_class == "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL"
    snap = Snapshot.load(root)
    assert snap.version == 1 and snap.protocol == DV_TABLE  # nothing dropped; the table reads at its last version


def _constrained_table(root: Path, constraints: dict[str, str]) -> None:
    """A table on writer version 3 whose properties hold ``constraints`` (name → expression)."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [{"name": "qty", "type": "long", "nullable": True, "metadata": {}}]})
    conf = {f"delta.constraints.{k}": v for k, v in constraints.items()}
    lines = [{"commitInfo": {"operation": "CREATE TABLE"}}, {"protocol": Protocol(1, 3).to_json()},
             {"metaData": {"id": "c", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
                           "partitionColumns": [], "configuration": conf}}]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_a_table_with_check_constraints_refuses_the_drop_naming_them(tmp_path: Path) -> None:
    """Rule (CheckConstraintsPreDowngradeTableFeatureCommand): while constraints exist the drop is refused with
    DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE (0AKDE) listing each one back-quoted; the constraints are not removed."""
    root = tmp_path / "t"
    _constrained_table(root, {"qty_positive": "qty > 0", "qty_small": "qty < 1000"})
    with pytest.raises(DeltaAnalysisException) as err:
        drop_feature_module.refuse_while_constrained(Snapshot.load(str(root)))
    assert err.value.getCondition() == "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE" and err.value.getSqlState() == "0AKDE"
    assert "The following constraints must be dropped first: `qty_positive`, `qty_small`." in str(err.value)


def test_a_constraint_added_while_the_drop_commits_refuses_it(tmp_path: Path, monkeypatch) -> None:
    """Rule: the downgrade re-validates on the snapshot it commits on (validateDropInvariants): an ADD CONSTRAINT
    that lands first fails the drop with DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL and keeps the feature."""
    root = str(tmp_path / "t")
    _constrained_table(tmp_path / "t", {})

    def racing(protocol: Protocol, name: str, add: tuple[str, ...] = ()) -> Protocol:
        snap = Snapshot.load(root)
        if "delta.constraints.qty_positive" not in snap.configuration:
            txn = OptimisticTransaction(root, snap)
            txn.update_metadata(snap.metadata.with_configuration(**{"delta.constraints.qty_positive": "qty > 0"}))
            txn.commit([], "ADD CONSTRAINT")
        return drop_feature_protocol(protocol, name, add)

    monkeypatch.setattr(drop_feature_module, "drop_feature_protocol", racing)
    with pytest.raises(DeltaTableFeatureException) as err:
        drop_feature_module._commit_downgrade(root, CC, truncate_history=False, protect=False)
    assert err.value.error_class == "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL" and "qty_positive" in str(err.value)
    snap = Snapshot.load(root)
    assert snap.version == 1 and snap.protocol == Protocol(1, 3)
