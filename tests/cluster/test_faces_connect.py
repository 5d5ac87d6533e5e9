"""``configure_spark``'s hooks on a Spark Connect session: format("delta") reads/writes, spark.sql, catalog names."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.conftest import step_ok
from tests.conftest import require_native_jar

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_format_delta_over_connect(connect_faces: dict[str, Any]) -> None:
    assert step_ok(connect_faces, "write_and_read") == [1, 2, 4, 5, 7, 8, 10, 11]
    assert step_ok(connect_faces, "version_as_of") == list(range(10))
    assert step_ok(connect_faces, "same_plan") is True
    assert step_ok(connect_faces, "native_scan") is True  # read through the jar, not the pure-Python fallback
    assert step_ok(connect_faces, "user_metadata") == "m"


def test_sql_and_other_formats_over_connect(connect_faces: dict[str, Any]) -> None:
    assert step_ok(connect_faces, "sql_delete") == [2, 4, 5, 7, 8, 10, 11]
    assert step_ok(connect_faces, "sql_plain") == 1
    assert step_ok(connect_faces, "parquet_untouched") == [3, False]


def test_catalog_names_over_connect(connect_faces: dict[str, Any]) -> None:
    assert step_ok(connect_faces, "save_as_table") == [[0, 1, 2, 3], [0, 1, 2, 3]]


def test_catalog_names_never_answer_wrong_over_connect(connect_faces: dict[str, Any]) -> None:
    got = step_ok(connect_faces, "catalog_shapes")
    assert got["shapes"] >= 20 and got["wrong_with"] == [] and got["wrong_without"] == []
    assert got["errors_without"] > 0  # plain Spark cannot read the name: it says so


def test_native_scan_with_the_servers_jar_when_artifacts_are_refused(installed_results: dict[str, Any]) -> None:
    """The jar cannot be added as an artifact, but the server has it (``--jars``): dvlake resolves the format first
    and reads through it, without trying the artifact (a fallback to the pure-Python path would give the same rows).
    The client refuses jar artifacts for its whole session, which then runs the stream tests too: none tried one."""
    import pyspark

    require_native_jar(pyspark.__version__)
    got = installed_results["refused"]
    assert step_ok(got, "rows") == [1, 2, 4, 5, 7, 8, 10, 11]
    assert step_ok(got, "native_scan") is True
    assert step_ok(got, "jar_artifacts_tried") == []
    assert step_ok(got, "jar_artifacts_tried_by_the_end") == []
