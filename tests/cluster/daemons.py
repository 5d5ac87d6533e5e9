"""Spark daemons for the cluster tests and the scale benchmark, started from the pyspark wheel.

Nothing here comes from outside the wheel: ``bin/spark-class`` runs a standalone master and
workers, ``bin/spark-submit`` runs the Spark Connect server (its jar ships in ``pyspark/jars``).
Every daemon listens on 127.0.0.1 only, runs in its own process group and is stopped by its
process id (SIGTERM, then SIGKILL of its group after a grace period), also when a test fails.

Also here: how executors get dvlake, the way a user deploys it (README "Running on a cluster"):

- ``pack_dvlake`` zips the checkout's ``dvlake`` package (pure Python) for ``spark.submit.pyFiles``
  (classic) or ``spark.addArtifacts(..., pyfile=True)`` (Spark Connect);
- ``executor_python`` makes a separate Python environment that has dvlake's third-party
  dependencies but *not* dvlake, so the tests prove that the shipped zip is what executors run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import venv
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Generous: the machine running the tests may be heavily loaded (JVM start-up takes seconds each).
STARTUP_TIMEOUT_S = float(os.environ.get("DVLAKE_CLUSTER_STARTUP_TIMEOUT", "120"))


def spark_home() -> Path:
    """The Spark distribution inside the installed pyspark wheel."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pack_dvlake(dest_dir: Path) -> Path:
    """``dvlake-<version>.zip``: the checkout's ``dvlake`` package, importable from the zip (zipimport)."""
    from dvlake import __version__

    out = dest_dir / f"dvlake-{__version__}.zip"
    package = REPO_ROOT / "dvlake"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed"):
                zf.write(path, path.relative_to(REPO_ROOT).as_posix())
    return out


def executor_python(dest_dir: Path) -> Path:
    """A Python for executors with dvlake's dependencies but without dvlake.

    A fresh venv whose only extra path is this interpreter's site-packages, added by a plain
    ``.pth`` path line: the site-packages' own ``.pth`` files (the editable install of dvlake)
    are not processed for such a path, so ``import dvlake`` fails unless dvlake is shipped.
    """
    import sysconfig

    env_dir = dest_dir / "executor-env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "dvlake_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = ("import importlib.util, numpy, pandas, pyarrow, pyroaring, orjson\n"
             "assert importlib.util.find_spec('dvlake') is None, 'dvlake must not be importable here'\n")
    subprocess.run([str(python), "-c", probe], check=True, cwd=dest_dir, capture_output=True, text=True)
    return python


def daemon_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment of a Spark daemon: loopback only, small daemon heap, Python of this run, UTC."""
    env = dict(os.environ)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("SPARK_REMOTE", None)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "512m",
        "PYSPARK_PYTHON": sys.executable,
        "TZ": "UTC",
    })
    env.update(extra or {})
    return env


@dataclass
class Daemon:
    """One JVM we started: its Popen, its log and what it is (for messages)."""

    name: str
    proc: subprocess.Popen
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} (pid {self.proc.pid}) exited with {self.proc.returncode}; its log:\n{self.tail()}")

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM to the JVM by its pid, then SIGKILL to its process group (executors it forked)."""
        pid = self.proc.pid
        if self.proc.poll() is None:
            try:
                os.kill(pid, signal.SIGTERM)
                self.proc.wait(timeout=grace_s)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(pid, signal.SIGKILL)  # the group leader is our own daemon (start_new_session)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass


def start_daemon(name: str, argv: list[str], log_dir: Path, env: dict[str, str]) -> Daemon:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    out = open(log, "wb")  # noqa: SIM115 - the daemon owns it for its lifetime
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            cwd=log_dir, start_new_session=True)
    out.close()
    return Daemon(name, proc, log)


def wait_until(what: str, ready: Callable[[], bool], daemons: list[Daemon], timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    """Poll ``ready`` until true; fail clearly (with the daemons' logs) on a timeout or a dead daemon."""
    deadline = time.monotonic() + timeout_s
    while True:
        for d in daemons:
            d.check_alive()
        try:
            if ready():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            logs = "\n\n".join(f"--- {d.name} (pid {d.proc.pid}) ---\n{d.tail()}" for d in daemons)
            raise TimeoutError(f"{what} not ready after {timeout_s:.0f} s (raise DVLAKE_CLUSTER_STARTUP_TIMEOUT "
                               f"on a slow machine); daemon logs:\n{logs}")
        time.sleep(1.0)


@dataclass
class StandaloneCluster:
    """A standalone master and its workers on 127.0.0.1."""

    master_url: str
    ui_port: int
    daemons: list[Daemon] = field(default_factory=list)

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as r:
            state = json.load(r)
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        for d in reversed(self.daemons):  # workers first, then the master
            d.stop()


def start_standalone(work_dir: Path, workers: int = 2, worker_memory: str = "1g",
                     timeout_s: float = STARTUP_TIMEOUT_S) -> StandaloneCluster:
    """Start a master and ``workers`` workers (1 core each) and wait until all are registered.

    On any failure the daemons already started are stopped before the error propagates.
    """
    spark_class = str(spark_home() / "bin" / "spark-class")
    port, ui_port = free_port(), free_port()
    cluster = StandaloneCluster(f"spark://127.0.0.1:{port}", ui_port)
    env = daemon_env()
    try:
        master = start_daemon("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                         "--port", str(port), "--webui-port", str(ui_port)], work_dir, env)
        cluster.daemons.append(master)
        wait_until("the standalone master", lambda: cluster.alive_workers() >= 0, [master], timeout_s)
        for i in range(workers):
            wdir = work_dir / f"worker-{i}"
            wdir.mkdir(parents=True, exist_ok=True)
            cluster.daemons.append(start_daemon(f"worker-{i}", [
                spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                "--memory", worker_memory, "--webui-port", str(free_port()), "--work-dir", str(wdir),
                cluster.master_url], work_dir, env))
        wait_until(f"{workers} workers registered with the master", lambda: cluster.alive_workers() >= workers,
                   cluster.daemons, timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@dataclass
class ConnectServer:
    """A Spark Connect server on 127.0.0.1."""

    url: str
    daemon: Daemon

    def stop(self) -> None:
        self.daemon.stop()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_connect_server(work_dir: Path, executor_python_path: Path, master: str = "local[2]",
                         timeout_s: float = STARTUP_TIMEOUT_S, jars: Path | None = None) -> ConnectServer:
    """The Spark Connect server class run by ``spark-submit`` in the foreground (what
    ``sbin/start-connect-server.sh --wait`` does), its Python workers on ``executor_python_path``;
    ``jars``: a jar the server starts with (``--jars``), as an administrator would install dvlake's scan."""
    port = free_port()
    argv = [str(spark_home() / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name", "dvlake-connect-tests", "--master", master, "--driver-memory", "1g",
            *(["--jars", str(jars)] if jars is not None else []),
            "--conf", f"spark.connect.grpc.binding.port={port}",
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.pyspark.python={executor_python_path}",
            "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=4",
            "--conf", "spark.sql.session.timeZone=UTC",
            "--conf", "spark.sql.execution.arrow.pyspark.enabled=true",
            "spark-internal"]
    daemon = start_daemon("connect-server", argv, work_dir, daemon_env({"PYSPARK_PYTHON": str(executor_python_path)}))
    try:
        wait_until("the Spark Connect server", lambda: _port_open(port), [daemon], timeout_s)
    except BaseException:
        daemon.stop()
        raise
    return ConnectServer(f"sc://127.0.0.1:{port}", daemon)
