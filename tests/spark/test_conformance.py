"""Every delta-spark-written table in ../shared/testdata, at every version, reads to MANIFEST's rows exactly."""

from __future__ import annotations

import pytest

import dvlake
from tests.conftest import find_testdata
from tests.testdata_util import fingerprint, manifest_schema, prepare, tables

ROOT = find_testdata()
CASES = [(t["name"], int(v)) for t in (tables(ROOT) if ROOT else []) for v in t["versions"]]
pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("testdata")


@pytest.mark.parametrize("name,version", CASES)
def test_reads_manifest_rows(spark, testdata, scratch, name, version, scan_path):
    entry = next(t for t in tables(testdata) if t["name"] == name)
    expected = entry["versions"][str(version)]
    path = prepare(testdata, entry, scratch)
    rows = [r.asDict(recursive=True) for r in dvlake.read(spark, str(path), version=version).collect()]
    assert len(rows) == expected["row_count"]
    assert fingerprint(rows, manifest_schema(entry)) == expected["fingerprint"]


def test_unprepared_test_prefix_table_fails_with_typed_error(spark, testdata, scan_path):
    from dvlake.errors import DeletionVectorNotFoundError

    with pytest.raises(Exception) as info:
        dvlake.read(spark, str(testdata / "table-with-dv-small"), version=1).collect()
    assert "deletion_vector_b6a98cdd-7843-470d-8897-708cdffa38c5.bin" in str(info.value)
    assert DeletionVectorNotFoundError.__name__ in str(info.value) or isinstance(info.value, DeletionVectorNotFoundError)


def test_special_char_absolute_path(spark, testdata, scratch, scan_path):
    entry = next(t for t in tables(testdata) if t["name"] == "table-with-dv-special-char")
    path = prepare(testdata, entry, scratch)
    assert sorted(r[0] for r in dvlake.read(spark, str(path)).select("id").collect()) == [1, 3, 5, 7, 9]
