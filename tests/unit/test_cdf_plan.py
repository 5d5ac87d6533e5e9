"""Change Data Feed planning (no Spark): what each commit contributes, range checks, the CDF-on check."""

from __future__ import annotations

import json

import pytest

from dvlake.errors import CdcStartVersionAfterLatestError, InvalidCdcRangeError, MissingChangeDataError
from dvlake.log.actions import Metadata
from dvlake.log.cdf_plan import check_enabled, check_range, plan_version

SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})


def _dv(path: str, card: int) -> dict:
    return {"storageType": "u", "pathOrInlineDv": path, "offset": 1, "sizeInBytes": 40, "cardinality": card}


def _add(path: str, dv: dict | None = None, data_change: bool = True) -> dict:
    a = {"path": path, "partitionValues": {}, "size": 10, "modificationTime": 1, "dataChange": data_change,
         "stats": json.dumps({"numRecords": 100})}
    if dv:
        a["deletionVector"] = dv
    return {"add": a}


def _remove(path: str, dv: dict | None = None, data_change: bool = True) -> dict:
    r = {"path": path, "deletionTimestamp": 1, "dataChange": data_change, "extendedFileMetadata": True, "size": 10,
         "partitionValues": {}}
    if dv:
        r["deletionVector"] = dv
    return {"remove": r}


def _metadata(cdf: bool) -> Metadata:
    conf = {"delta.enableChangeDataFeed": "true"} if cdf else {}
    return Metadata.from_json({"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": SCHEMA,
                               "partitionColumns": [], "configuration": conf})


def test_a_commit_with_cdc_actions_is_read_from_them_only():
    lines = [{"commitInfo": {}}, _remove("a.parquet"), _add("a.parquet", _dv("x", 2)), _add("b.parquet"),
             {"cdc": {"path": "_change_data/c.parquet", "partitionValues": {}, "size": 5, "dataChange": False}}]
    plan = plan_version(3, 1000, lines)
    assert [c.path for c in plan.cdc_files] == ["_change_data/c.parquet"]
    assert not plan.inserted and not plan.deleted and not plan.dv_changes
    assert (plan.version, plan.timestamp_ms) == (3, 1000)


def test_lone_add_is_insert_lone_remove_is_delete_with_their_dvs():
    plan = plan_version(1, 0, [_add("new.parquet", _dv("n", 3)), _remove("gone.parquet", _dv("g", 4))])
    assert [(f.path, f.dv.cardinality, f.num_records) for f in plan.inserted] == [("new.parquet", 3, 100)]
    assert [(f.path, f.dv.cardinality) for f in plan.deleted] == [("gone.parquet", 4)]
    assert not plan.dv_changes


@pytest.mark.parametrize(("old", "new"), [
    (None, _dv("d1", 2)),            # DELETE on a file without DV: rows in DV1 are deleted
    (_dv("d1", 2), None),            # RESTORE: rows in DV1 are inserted again
    (_dv("d1", 2), _dv("d2", 5)),    # DV1 → DV2: DV2∖DV1 deleted, DV1∖DV2 inserted
])
def test_same_path_remove_and_add_is_a_dv_change_never_all_deleted_and_all_inserted(old, new):
    plan = plan_version(2, 0, [_remove("f%20x.parquet", old), _add("f x.parquet" if old else "f%20x.parquet", new)])
    assert not plan.inserted and not plan.deleted  # delta-io/delta#1701: paths compared decoded
    (change,) = plan.dv_changes
    assert (change.old_dv.unique_id if change.old_dv else None) == (old and "u" + old["pathOrInlineDv"] + "@1")
    assert (change.new_dv.cardinality if change.new_dv else None) == (new and new["cardinality"])


def test_unchanged_dv_and_data_change_false_contribute_nothing():
    same = plan_version(4, 0, [_remove("f.parquet", _dv("d1", 2)), _add("f.parquet", _dv("d1", 2))])
    assert same.empty
    optimize = plan_version(5, 0, [_remove("a.parquet", _dv("d1", 2), data_change=False),
                                   _add("big.parquet", data_change=False)])
    assert optimize.empty


def test_range_checks_name_delta_spark_error_classes():
    assert check_range(2, None, 7, "t") == 7
    assert check_range(2, 100, 7, "t") == 7  # an end past the latest version is the latest
    with pytest.raises(InvalidCdcRangeError, match="DELTA_INVALID_CDC_RANGE"):
        check_range(5, 3, 7, "t")
    with pytest.raises(CdcStartVersionAfterLatestError, match="DELTA_CDC_START_VERSION_AFTER_LATEST"):
        check_range(8, None, 7, "t")
    with pytest.raises(InvalidCdcRangeError):
        check_range(-1, None, 7, "t")


def test_cdf_must_be_on_at_every_version_of_the_range():
    on, off = _metadata(True), _metadata(False)
    check_enabled(on, [(1, []), (2, [])], 1, 2, "t")
    with pytest.raises(MissingChangeDataError, match="DELTA_MISSING_CHANGE_DATA.*version 1"):
        check_enabled(off, [(1, []), (2, [{"metaData": on.to_json()}])], 1, 2, "t")
    with pytest.raises(MissingChangeDataError, match="version 3"):
        check_enabled(on, [(2, []), (3, [{"metaData": off.to_json()}])], 2, 3, "t")
    check_enabled(off, [(4, [{"metaData": on.to_json()}])], 4, 4, "t")  # enabled by the start version's own commit
