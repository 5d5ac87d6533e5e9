"""One rule for the (path, DV id) key: the scalar, JSON and vectorized Arrow forms agree on real descriptors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dvlake.dv.descriptor import DeletionVectorDescriptor, dv_unique_id
from dvlake.log.arrow import DV_TYPE, dv_unique_ids
from dvlake.log.replay import dv_unique_id_of
from tests.conftest import find_testdata
from tests.testdata_util import prepare, tables
from tests.unit.test_testdata_dvs import _descriptors

ROOT = find_testdata()


@pytest.mark.parametrize("name", [t["name"] for t in (tables(ROOT) if ROOT else [])])
def test_arrow_form_equals_scalar_rule_on_every_shared_descriptor(testdata, tmp_path, name: str) -> None:
    entry = next(t for t in tables(testdata) if t["name"] == name)
    dvs = [dv for _, dv in _descriptors(prepare(testdata, entry, tmp_path))]
    if not dvs:
        pytest.skip(f"{name} references no DV")
    rows = [{f.name: dv.get(f.name) for f in DV_TYPE} for dv in dvs]
    # plus the two spellings of "no DV": a null struct and a checkpoint's all-null struct
    arr = pa.array([*rows, None, dict.fromkeys(f.name for f in DV_TYPE)], type=DV_TYPE)
    vectorized = dv_unique_ids(arr).to_pylist()
    expected = [DeletionVectorDescriptor.from_json(dv).unique_id for dv in dvs]
    assert vectorized[: len(dvs)] == expected
    assert [dv_unique_id_of(dv) for dv in dvs] == expected
    assert vectorized[len(dvs):] == [None, None]
    assert any("@" in e for e in expected) or all(d.get("offset") is None for d in dvs)


def test_rule_itself() -> None:
    assert dv_unique_id("u", "ab", 1) == "uab@1"
    assert dv_unique_id("i", "xyz", None) == "ixyz"
    chunked = pa.chunked_array([pa.array([{"storageType": "p", "pathOrInlineDv": "/x.bin", "offset": 9, "sizeInBytes": 1,
                                           "cardinality": 1}], type=DV_TYPE)])
    assert dv_unique_ids(chunked).to_pylist() == ["p/x.bin@9"]
