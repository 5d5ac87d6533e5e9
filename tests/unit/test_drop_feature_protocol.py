"""DROP FEATURE without Spark: the protocol a drop leaves (normalized as delta-spark), and which requests are refused."""

from __future__ import annotations

import pytest

from dvlake.commands.drop_feature import resolve_feature
from dvlake.errors import DeltaTableFeatureException
from dvlake.log.actions import Protocol
from dvlake.log.protocol_ops import drop_feature_protocol, normalize_protocol

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


DV_TABLE = Protocol(3, 7, (DV,), ("appendOnly", "invariants", DV))


@pytest.mark.parametrize(("protocol", "name", "truncate", "error_class"), [
    (DV_TABLE, "delta.enableDeletionVectors", False, "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY"),
    (DV_TABLE, "noSuchFeature", False, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
    (DV_TABLE, "appendOnly", False, "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE"),
    (Protocol(1, 2), DV, False, "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"),
    (Protocol(1, 7, None, ("checkConstraints",)), "checkConstraints", True,
     "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED"),
    (Protocol(3, 7, (DV,), (DV, "adaptiveMetadata-preview")), DV, False, "DELTA_FEATURE_DROP_DEPENDENT_FEATURE"),
    # removable in delta-spark, but dvlake only knows how to drop deletionVectors
    (Protocol(1, 7, None, ("checkConstraints",)), "checkConstraints", False, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
])
def test_refused_requests_carry_delta_sparks_error_class(protocol: Protocol, name: str, truncate: bool,
                                                         error_class: str) -> None:
    with pytest.raises(DeltaTableFeatureException) as err:
        resolve_feature(protocol, name, truncate)
    assert err.value.error_class == error_class
    assert str(err.value).startswith(f"[{error_class}]") and name.split(".")[0] in str(err.value)


def test_feature_names_resolve_case_insensitively() -> None:
    assert resolve_feature(DV_TABLE, "DELETIONVECTORS", True) == DV
