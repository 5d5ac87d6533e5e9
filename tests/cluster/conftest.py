"""Fixtures of the cluster tests: a standalone cluster, a Spark Connect server, and the scenario results.

The cluster and Connect sessions run in subprocesses (``tests/cluster/scenarios.py``): a classic
session on a standalone master cannot coexist with the suite's ``local[2]`` session in one
process (one SparkContext per JVM), and a Spark Connect session switches PySpark's functions to
Connect mode for the whole process. So this process keeps its ``spark`` fixture untouched; it
runs the same scenarios in local mode for the comparison, and the subprocesses report JSON.

The fixtures are package-scoped: the daemons stop when the last cluster test has run, not at the end of the suite.

Executors get dvlake the way a user ships it (see README "Running on a cluster"): the checkout's
``dvlake`` package zipped and shipped with ``spark.submit.pyFiles`` (classic) or
``spark.addArtifacts(pyfile=True)`` (Connect), executors running a Python that has dvlake's
dependencies but not dvlake itself (``daemons.executor_python``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import daemons, scenarios
from tests.conftest import find_testdata

#: A whole scenario run (session start included); generous for a loaded machine, exceeded = a clear failure.
RUN_TIMEOUT_S = float(os.environ.get("DVLAKE_CLUSTER_RUN_TIMEOUT", "900"))


@pytest.fixture(scope="package")
def cluster_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="package")
def dvlake_zip(cluster_work: Path) -> Path:
    """The checkout's dvlake package as a zip, what executors import."""
    return daemons.pack_dvlake(cluster_work)


@pytest.fixture(scope="package")
def executor_python(cluster_work: Path) -> Path:
    """A Python with dvlake's dependencies and without dvlake, for executors."""
    return daemons.executor_python(cluster_work)


@pytest.fixture(scope="package")
def standalone_cluster(cluster_work: Path) -> Iterator[daemons.StandaloneCluster]:
    """A standalone master and two 1-core workers on 127.0.0.1, stopped by pid at the end (also on failure)."""
    cluster = daemons.start_standalone(cluster_work / "standalone", workers=2)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="package")
def connect_server(cluster_work: Path, executor_python: Path) -> Iterator[daemons.ConnectServer]:
    """A Spark Connect server (local[2]) on a loopback port; its Python workers lack dvlake until a client ships it."""
    server = daemons.start_connect_server(cluster_work / "connect", executor_python)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def installed_server(cluster_work: Path) -> Iterator[daemons.ConnectServer]:
    """A Connect server with dvlake installed the way an administrator does it: its Python workers run this
    interpreter (dvlake importable, what the streaming source's worker needs) and it starts with dvlake's scan jar
    (``--jars``, when the jar is built). One server for the stream tests and the refused-jar-artifacts test."""
    import pyspark

    from dvlake.spark import native

    server = daemons.start_connect_server(cluster_work / "connect-installed", Path(sys.executable),
                                         jars=native.jar_for(pyspark.__version__))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
def installed_results(installed_server: daemons.ConnectServer, dvlake_zip: Path, cluster_work: Path) -> dict[str, Any]:
    """One client on ``installed_server`` that refuses jar artifacts for its whole session: a native DV read
    (under ``refused``), then the streams (``stream_connect.py``)."""
    return run_script("tests.cluster.stream_connect", ["--remote", installed_server.url, "--artifact", str(dvlake_zip),
                                                       "--refuse-jar-artifacts"], cluster_work / "installed-run")


@pytest.fixture(scope="package")
def connect_faces(connect_server: daemons.ConnectServer, dvlake_zip: Path, cluster_work: Path) -> dict[str, Any]:
    """The faces over Connect (``faces_connect.py``) on the artifacts-only server, ending with a stream source there."""
    return run_script("tests.cluster.faces_connect", ["--remote", connect_server.url, "--artifact", str(dvlake_zip)],
                      cluster_work / "faces-connect")


def run_script(module: str, args: list[str], work: Path, env_extra: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``python -m module --work-dir WORK --out WORK/results.json ARGS`` (a session of its own in a
    subprocess); its JSON results, or a test failure with the tail of its output."""
    work.mkdir(parents=True, exist_ok=True)
    out, log = work / "results.json", work / "run.log"
    argv = [sys.executable, "-m", module, "--work-dir", str(work), "--out", str(out), *args]
    with open(log, "wb") as f:
        try:
            proc = subprocess.run(argv, cwd=daemons.REPO_ROOT, env=daemons.daemon_env(env_extra or {}), stdout=f,
                                  stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{module} did not finish in {RUN_TIMEOUT_S:.0f} s (DVLAKE_CLUSTER_RUN_TIMEOUT); "
                        f"its output:\n{_tail(log)}")
    if proc.returncode != 0 or not out.exists():
        pytest.fail(f"{module} exited with {proc.returncode}; its output:\n{_tail(log)}")
    return json.loads(out.read_text())


def run_scenarios(args: list[str], work: Path, env_extra: dict[str, str]) -> dict[str, Any]:
    """Run ``tests/cluster/scenarios.py`` in a subprocess (with the shared test tables when present)."""
    testdata = find_testdata()
    extra = ["--testdata", str(testdata)] if testdata is not None else []
    return run_script("tests.cluster.scenarios", [*args, *extra], work, env_extra)


def _tail(path: Path, lines: int = 80) -> str:
    text = path.read_text(errors="replace").splitlines()
    return "\n".join([line for line in text if " WARN " not in line][-lines:])


@pytest.fixture(scope="package")
def standalone_results(standalone_cluster: daemons.StandaloneCluster, dvlake_zip: Path, executor_python: Path,
                       cluster_work: Path) -> dict[str, Any]:
    """The scenarios on the standalone cluster, then a second application whose executors lack dvlake."""
    return run_scenarios(["--master", standalone_cluster.master_url, "--py-files", str(dvlake_zip), "--without-dvlake"],
                         cluster_work / "standalone-run", {"PYSPARK_PYTHON": str(executor_python)})


@pytest.fixture(scope="package")
def connect_results(connect_server: daemons.ConnectServer, dvlake_zip: Path, cluster_work: Path) -> dict[str, Any]:
    """The scenarios through a Spark Connect client that ships dvlake as an artifact."""
    return run_scenarios(["--remote", connect_server.url, "--artifact", str(dvlake_zip)], cluster_work / "connect-run", {})


@pytest.fixture(scope="package")
def local_results(spark: Any, cluster_work: Path) -> dict[str, Any]:
    """The same scenarios in this process's local[2] session: what the other modes must equal."""
    return {"scenarios": scenarios.run_all(spark, cluster_work / "local-run", find_testdata())}


def scenario(results: dict[str, Any], name: str) -> Any:
    """One scenario's result, or the test fails with the error and traceback the run reported."""
    entry = results["scenarios"][name]
    if "error" in entry:
        pytest.fail(f"scenario {name!r} failed: {entry['error']}\n{entry.get('traceback', '')}")
    return entry["ok"]


def step_ok(results: dict[str, Any], step: str) -> Any:
    """One step's result of a Connect script run, or the test fails with the error and traceback it reported."""
    entry = results[step]
    if "error" in entry:
        pytest.fail(f"step {step!r} failed over Spark Connect: {entry['error']}\n{entry['traceback']}")
    return entry["ok"]
