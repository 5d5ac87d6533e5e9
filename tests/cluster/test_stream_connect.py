"""``readStream``/``writeStream`` ``format("delta")`` over Spark Connect (``stream_connect.py`` in a subprocess).

The server's Python must have dvlake installed for the source: Spark starts the streaming Python data source's
worker (``create_data_source``, at query start) without the session's artifacts, so a dvlake zip shipped with
``addArtifacts(pyfile=True)`` does not reach it (PySpark 4.3). So the pipeline runs against a server whose Python has
dvlake; against the artifacts-only server of the other cluster tests, the source must fail with dvlake's clear
executor-environment error rather than a raw unpickling traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import daemons
from tests.cluster.conftest import run_script, step_ok

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def _run(server: daemons.ConnectServer, dvlake_zip: Path, work: Path, *extra: str) -> dict[str, Any]:
    return run_script("tests.cluster.stream_connect", ["--remote", server.url, "--artifact", str(dvlake_zip), *extra],
                      work)


@pytest.fixture(scope="module")
def server_with_dvlake(cluster_work: Path) -> Iterator[daemons.ConnectServer]:
    """A Connect server whose Python workers run this interpreter (dvlake installed), as a deployment for streams."""
    server = daemons.start_connect_server(cluster_work / "connect-stream", Path(sys.executable))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def connect_stream(server_with_dvlake: daemons.ConnectServer, dvlake_zip: Path, cluster_work: Path) -> dict[str, Any]:
    return _run(server_with_dvlake, dvlake_zip, cluster_work / "stream-connect")


def test_delta_stream_into_delta_over_connect(connect_stream: dict[str, Any]) -> None:
    live = [i for i in range(20) if i % 4 != 0]
    assert step_ok(connect_stream, "source_only") == live  # the source alone, into Spark's Parquet sink
    assert step_ok(connect_stream, "first_run") == [live, live]
    second = step_ok(connect_stream, "second_run")
    assert second["rows"] == [live + list(range(20, 25))] * 2
    assert second["query_ids"] == 1 and second["txn_ids"] is True  # the restart kept the query id: one txn app id


def test_delta_sink_over_connect_needs_a_checkpoint(connect_stream: dict[str, Any]) -> None:
    message = step_ok(connect_stream, "without_checkpoint")
    assert message is not None and "checkpointLocation" in message


def test_source_on_a_server_without_dvlake_says_so(connect_server: daemons.ConnectServer, dvlake_zip: Path,
                                                   cluster_work: Path) -> None:
    got = _run(connect_server, dvlake_zip, cluster_work / "stream-connect-artifacts-only", "--source-only")
    error = got["source_only"].get("error", "")
    assert "DVLAKE_EXECUTOR_ENVIRONMENT" in error and "dvlake" in error, got["source_only"]
