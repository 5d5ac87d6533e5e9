"""``readStream``/``writeStream`` ``format("delta")`` over Spark Connect (``stream_connect.py`` in a subprocess).

The server's Python must have dvlake installed for the source: Spark starts the streaming Python data source's
worker (``create_data_source``, at query start) without the session's artifacts, so a dvlake zip shipped with
``addArtifacts(pyfile=True)`` does not reach it (PySpark 4.3). So the pipeline runs against a server whose Python has
dvlake; against the artifacts-only server of the other cluster tests, the source must fail with dvlake's clear
executor-environment error rather than a raw unpickling traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import daemons
from tests.cluster.conftest import RUN_TIMEOUT_S

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def _run(server: daemons.ConnectServer, dvlake_zip: Path, work: Path, *extra: str) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    out, log = work / "results.json", work / "run.log"
    argv = [sys.executable, "-m", "tests.cluster.stream_connect", "--remote", server.url,
            "--artifact", str(dvlake_zip), "--work-dir", str(work), "--out", str(out), *extra]
    with open(log, "wb") as f:
        proc = subprocess.run(argv, cwd=daemons.REPO_ROOT, env=daemons.daemon_env({}), stdout=f,
                              stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
    if proc.returncode != 0 or not out.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-60:])
        pytest.fail(f"the Connect streaming run exited with {proc.returncode}:\n{tail}")
    return json.loads(out.read_text())


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


def _ok(results: dict[str, Any], step: str) -> Any:
    entry = results[step]
    if "error" in entry:
        pytest.fail(f"step {step!r} failed over Spark Connect: {entry['error']}\n{entry['traceback']}")
    return entry["ok"]


def test_delta_stream_into_delta_over_connect(connect_stream: dict[str, Any]) -> None:
    live = [i for i in range(20) if i % 4 != 0]
    assert _ok(connect_stream, "source_only") == live  # the source alone, into Spark's Parquet sink
    assert _ok(connect_stream, "first_run") == [live, live]
    second = _ok(connect_stream, "second_run")
    assert second["rows"] == [live + list(range(20, 25))] * 2
    assert second["query_ids"] == 1 and second["txn_ids"] is True  # the restart kept the query id: one txn app id


def test_delta_sink_over_connect_needs_a_checkpoint(connect_stream: dict[str, Any]) -> None:
    message = _ok(connect_stream, "without_checkpoint")
    assert message is not None and "checkpointLocation" in message


def test_source_on_a_server_without_dvlake_says_so(connect_server: daemons.ConnectServer, dvlake_zip: Path,
                                                   cluster_work: Path) -> None:
    got = _run(connect_server, dvlake_zip, cluster_work / "stream-connect-artifacts-only", "--source-only")
    error = got["source_only"].get("error", "")
    assert "DVLAKE_EXECUTOR_ENVIRONMENT" in error and "dvlake" in error, got["source_only"]
