"""Every delta-spark-written table in ../shared/testdata, at every version, reads to MANIFEST's rows exactly."""

from __future__ import annotations

import pytest

import dvlake
from tests.conftest import find_testdata
from tests.testdata_util import fingerprint, manifest_schema, prepare, tables

ROOT = find_testdata()


def _python_path_versions(entry: dict) -> set[int]:
    """The versions read on the pure-Python path too: the latest and the first with DVs. What differs between the two
    paths is how a file's DV is applied to its rows; walking the versions is log replay and time travel, which both
    paths share and the native scan reads at every version (and test_native_scan.py pins the paths to each other)."""
    versions = {int(v) for v in entry["versions"]}
    with_dvs = [int(v) for v, e in entry["versions"].items() if e.get("active_files_with_dv")]
    return {max(versions), *([min(with_dvs)] if with_dvs else [])}


CASES = [pytest.param(t["name"], int(v), path, id=f"{path}-{t['name']}-{v}")
         for t in (tables(ROOT) if ROOT else []) for v in t["versions"]
         for path in ("native", "python") if path == "native" or int(v) in _python_path_versions(t)]
pytestmark = pytest.mark.interop


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("testdata")


@pytest.mark.parametrize(("name", "version", "scan_path"), CASES, indirect=["scan_path"])
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
