"""Every delta-spark-written table in ../shared/testdata, at every version, reads to MANIFEST's rows exactly."""

from __future__ import annotations

from functools import reduce
from typing import Any

import pytest
from pyspark.sql import functions as F

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


CASES = [pytest.param(t["name"], path, id=f"{path}-{t['name']}")
         for t in (tables(ROOT) if ROOT else []) for path in ("native", "python")]
pytestmark = pytest.mark.interop
VERSION = "__conformance_version"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("testdata")


def _rows_by_version(spark, path: str, versions: list[int]) -> dict[int, list[dict]]:
    """``dvlake.read(version=v)``'s rows for each version, as few Spark jobs as the schemas allow: the reads of the
    versions that share a schema are one union, each row tagged with its version (the tag is not in the rows)."""
    by_schema: dict[str, list[tuple[int, Any]]] = {}
    for v in versions:
        df = dvlake.read(spark, path, version=v)
        by_schema.setdefault(df.schema.json(), []).append((v, df))
    out: dict[int, list[dict]] = {v: [] for v in versions}
    for group in by_schema.values():
        tagged = [df.withColumn(VERSION, F.lit(v)) for v, df in group]
        for r in reduce(lambda a, b: a.unionAll(b), tagged).collect():
            row = r.asDict(recursive=True)
            out[row.pop(VERSION)].append(row)
    return out


@pytest.mark.parametrize(("name", "scan_path"), CASES, indirect=["scan_path"])
def test_reads_manifest_rows_at_every_version(spark, testdata, scratch, name, scan_path):
    """Each version of the table (on the pure-Python path: ``_python_path_versions``) reads to MANIFEST's row count
    and fingerprint; one test per table and path, the versions read together (they were one test each)."""
    entry = next(t for t in tables(testdata) if t["name"] == name)
    versions = sorted(int(v) for v in entry["versions"])
    if scan_path == "python":
        versions = sorted(_python_path_versions(entry))
    path = prepare(testdata, entry, scratch)
    schema = manifest_schema(entry)
    for version, rows in _rows_by_version(spark, str(path), versions).items():
        expected = entry["versions"][str(version)]
        assert len(rows) == expected["row_count"], f"{name} version {version}"
        assert fingerprint(rows, schema) == expected["fingerprint"], f"{name} version {version}"


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
