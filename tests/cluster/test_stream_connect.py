"""``readStream``/``writeStream`` ``format("delta")`` over Spark Connect (``stream_connect.py`` in a subprocess).

The server's Python must have dvlake installed for the source: Spark starts the streaming Python data source's
worker (``create_data_source``, at query start) without the session's artifacts, so a dvlake zip shipped with
``addArtifacts(pyfile=True)`` does not reach it (PySpark 4.3). So the pipeline runs against a server whose Python has
dvlake; against the artifacts-only server of the other cluster tests, the source must fail with dvlake's clear
executor-environment error rather than a raw unpickling traceback.

The server whose Python has dvlake (``installed_server``) also starts with dvlake's jar, and its one client refuses
jar artifacts for its whole session (``test_faces_connect.py``'s test of that reads first, then the streams run); the
source on the artifacts-only server runs at the end of the faces client (``connect_faces``): one client per server.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.conftest import step_ok

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_delta_stream_into_delta_over_connect(installed_results: dict[str, Any]) -> None:
    """The source (run in the server's Python workers) streams exactly the DV table's live rows into the Delta sink;
    the source's own test here (into a Spark sink) is the failing one on the artifacts-only server below."""
    live = [i for i in range(20) if i % 4 != 0]
    assert step_ok(installed_results, "first_run") == [live, live]
    second = step_ok(installed_results, "second_run")
    assert second["rows"] == [live + list(range(20, 25))] * 2
    assert second["query_ids"] == 1 and second["txn_ids"] is True  # the restart kept the query id: one txn app id


def test_delta_sink_over_connect_needs_a_checkpoint(installed_results: dict[str, Any]) -> None:
    message = step_ok(installed_results, "without_checkpoint")
    assert message is not None and "checkpointLocation" in message


def test_source_on_a_server_without_dvlake_says_so(connect_faces: dict[str, Any]) -> None:
    """The faces client on the artifacts-only server ends with the stream source (``faces_connect.py``)."""
    got = step_ok(connect_faces, "stream_source_without_dvlake")
    error = got.get("error", "")
    assert "DVLAKE_EXECUTOR_ENVIRONMENT" in error and "dvlake" in error, got
