"""dvlake on a real standalone cluster (two workers, separate executor JVMs) and over Spark Connect.

Every scenario (``scenarios.py``) must give exactly the rows local[2] gives and the rows plain
Spark computes without dvlake. The standalone run also starts an application whose executors
lack dvlake: commands must fail loudly and leave the table as it was.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.conftest import scenario
from tests.cluster.scenarios import DELETES

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


@pytest.fixture(scope="module", params=["standalone", "connect"])
def results(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The scenario results of one deployment mode (all tests of a mode run together)."""
    return request.getfixturevalue(f"{request.param}_results")


def _table(results: dict[str, Any]) -> dict[str, Any]:
    return scenario(results, "table")


def test_written_rows_equal_local_and_plain_spark(results, local_results):
    got, local = _table(results)["written"], _table(local_results)["written"]
    assert len(got["rows"]) == 2500
    assert got["rows"] == got["oracle"] == local["rows"]


def test_rows_after_dv_cow_and_partition_deletes(results, local_results):
    got, local = _table(results)["latest"], _table(local_results)["latest"]
    assert 0 < len(got["rows"]) < 2500
    assert got["rows"] == got["oracle"] == local["rows"]


def test_reads_go_through_the_native_scan(results):
    """The jar reached the cluster's executors (standalone) and the Connect session: reads used it."""
    assert _table(results)["native_scan"] is True


def test_filtered_read(results, local_results):
    got, local = _table(results)["filtered"], _table(local_results)["filtered"]
    assert got["rows"] and got["rows"] == got["oracle"] == local["rows"]


def test_time_travel_to_every_version(results, local_results):
    got, local = _table(results)["time_travel"], _table(local_results)["time_travel"]
    assert sorted(got) == ["1", "2", "3", "4"]
    for version, entry in got.items():
        assert entry["rows"] == entry["oracle"] == local[version]["rows"], f"version {version}"
    assert len(got["1"]["rows"]) > len(got["2"]["rows"]) > len(got["3"]["rows"]) > len(got["4"]["rows"])


def test_row_ids_kept_by_update_and_optimize(results, local_results):
    """Each row keeps its id through UPDATE and OPTIMIZE, and the ids are 0..299. Which file gets which base id
    follows the order of the write's add actions (the order its tasks finish in), so the ids of one row may differ
    between the cluster and local runs; each run must keep its own."""
    for got in (scenario(results, "row_tracking"), scenario(local_results, "row_tracking")):
        assert len(got["before"]) == 300 and got["before"] == got["after"]
        assert sorted(r[1] for r in got["after"]) == list(range(300))
        assert sorted(r[0] for r in got["after"]) == list(range(300))


def test_history_and_detail(results, local_results):
    got, local = _table(results), _table(local_results)
    assert got["history"] == local["history"]
    operations = [h[1] for h in got["history"]]
    assert operations == ["WRITE", "WRITE"] + ["DELETE"] * len(DELETES)
    dv_delete = got["history"][2][3]
    assert int(dv_delete["numDeletionVectorsAdded"]) > 0 and int(dv_delete["numDeletedRows"]) > 0
    cow_delete = got["history"][4][3]
    assert int(cow_delete["numAddedFiles"]) > 0 and int(cow_delete["numDeletionVectorsAdded"]) == 0
    assert got["sql_history"] == local["sql_history"] == [[5, "DELETE"], [4, "DELETE"]]
    version4 = _table(results)["time_travel"]["4"]["rows"]
    assert got["sql_join_versions"] == local["sql_join_versions"] and got["sql_join_versions"][0] == len(version4)
    assert got["detail"] == local["detail"]
    with_dvs = got["detail_with_dvs"]
    assert with_dvs == local["detail_with_dvs"] and with_dvs["statistics"]["numDeletionVectors"] > 0
    # the copy-on-write DELETE rewrote every file (each held an id % 11 = 0 row) without DVs
    assert got["detail"]["statistics"] == {"numDeletionVectors": 0, "numRowsDeletedByDeletionVectors": 0}
    assert got["detail"]["numFiles"] > 0 and got["detail"]["partitionColumns"] == ["p"]
    assert "deletionVectors" in got["detail"]["tableFeatures"]


def test_check_constraints_enforced_on_executors(results, local_results):
    """A violating append and MERGE fail with DELTA_VIOLATE_CONSTRAINT_WITH_VALUES and the row's value in every mode;
    only the later UPDATE commits (version 2: write, ADD CONSTRAINT, UPDATE)."""
    got, local = scenario(results, "constraints"), scenario(local_results, "constraints")
    assert got == local
    assert all(r is not None and r[0] == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES" and r[1] for r in got["refused"])
    assert len(got["rows"]) == 200 and got["version"] == 2


def test_delta_spark_table_with_dvs(results, local_results, testdata):
    got, local = scenario(results, "shared_table"), scenario(local_results, "shared_table")
    assert got is not None and got["latest"] and got == local


def test_executors_without_dvlake_fail_loudly(standalone_results):
    """A second application on the same cluster ships nothing: DV reads on the pure-Python path that decode on
    executors, and DELETE, fail with errors naming dvlake; the table stays at its last version; a table without DVs,
    one with DVs small enough to decode on the driver, and any DV table on the native scan (whose jar dvlake adds to
    the session) still read (no Python on executors), as a batch and as a stream, and so does a small DELETE
    (native row-index scan, DVs built on the driver)."""
    out = standalone_results["without_dvlake"]
    assert "error" not in out, out.get("traceback")
    assert out["plain_read_count"] == 400
    assert out["small_dv_read_count"] == 320  # DVs decoded on the driver: executors run no Python
    assert out["native_used"] and out["native_dv_read_count"] == 320  # the native scan: no Python on executors
    # readStream on a classic session: the JVM source's batches are native scans too
    assert out["native_stream_error"] is None, out["native_stream_error"]
    assert out["native_stream_count"] == 320
    assert out["read_error"] is not None and "No module named 'dvlake" in out["read_error"]["message"]
    delete_error = out["delete_error"]
    assert delete_error is not None, "DELETE succeeded on executors without dvlake"
    assert delete_error["type"] == "ExecutorEnvironmentError" and delete_error["module"] == "dvlake.errors"
    assert "cannot import dvlake" in delete_error["message"] and "spark.submit.pyFiles" in delete_error["message"]
    assert out["version_after"] == out["version_before"]
    assert not [f for f in out["log_files"] if f.endswith(".json") and int(f.split(".")[0]) > out["version_before"]]
    assert out["small_delete_error"] is None, out["small_delete_error"]
    assert out["small_delete_read_count"] == sum(1 for i in range(400) if i % 5 and i % 3)
