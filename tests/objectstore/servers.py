"""Local object-store emulators for tests/objectstore: started on 127.0.0.1 on free ports, stopped by process id.

S3 is moto in server mode (a PyPI package of the test extra; it answers a PutObject with ``If-None-Match: *`` on an
existing key with 412; ``moto_serial`` serves its requests one at a time so that check and store cannot
interleave). Azure Blob / ADLS is Azurite from npm, installed by the Makefile into ``.venv/node`` (``make
emulators``). No installable GCS emulator serves the XML-API PUT that obstore's GCS client commits with
(gcp-storage-emulator answers 501, fake-gcs-server 1.54 takes only JSON-API uploads there), so GCS is covered by
tests/unit/test_objectstore.py's fake.

A missing emulator skips its tests with the reason, except under CI (CI=true), where it fails them: CI installs both.
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Azurite's documented development account (a public, well-known key: not a secret)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
STARTUP_TIMEOUT_S = float(os.environ.get("DVLAKE_EMULATOR_STARTUP_TIMEOUT", "60"))


@dataclass
class Emulator:
    """A running emulator: its process, port, and the environment a client process needs to reach it."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    env: dict[str, str] = field(default_factory=dict)


def unavailable(reason: str) -> None:
    """Skip locally, fail under CI: there the Makefile installs every emulator, so a missing one is a bug."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI installs it: `make emulators`)")
    pytest.skip(f"{reason}; `make emulators` installs it")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(proc: subprocess.Popen[bytes], port: int, name: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} before listening; its log:\n{log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"{name} did not listen on 127.0.0.1:{port} within {STARTUP_TIMEOUT_S}s; its log:\n"
                       f"{log.read_text()[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop one emulator by its own process id (terminate, then kill after a grace period)."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def _running(name: str, cmd: list[str], port: int, workdir: Path, cwd: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd or workdir)
    try:
        _wait_listening(proc, port, name, log)
        yield proc
    finally:
        stop(proc)


@contextmanager
def moto_s3(workdir: Path) -> Iterator[Emulator]:
    """moto's S3 server, in memory, serving one request at a time (see ``moto_serial``)."""
    try:
        import moto.server  # noqa: F401
    except ImportError:
        unavailable("moto[server] is not installed")
    port = free_port()
    cmd = [sys.executable, "-m", "tests.objectstore.moto_serial", "127.0.0.1", str(port)]
    with _running("moto", cmd, port, workdir, cwd=REPO_ROOT) as proc:
        env = {"AWS_ENDPOINT": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "dvlake", "AWS_SECRET_ACCESS_KEY": "dvlake",
               "AWS_REGION": "us-east-1"}
        yield Emulator("moto", proc, port, env)


def moto_bucket(emulator: Emulator, bucket: str) -> None:
    """Create a bucket (moto takes an unsigned CreateBucket)."""
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{emulator.port}/{bucket}", method="PUT"), timeout=30)


def azurite_binary() -> str | None:
    """``azurite-blob`` from the Makefile's project-local npm folder, or DVLAKE_AZURITE, or PATH."""
    for candidate in (os.environ.get("DVLAKE_AZURITE"), str(REPO_ROOT / ".venv/node/node_modules/.bin/azurite-blob")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("azurite-blob")


@contextmanager
def azurite(workdir: Path) -> Iterator[Emulator]:
    """Azurite's Blob service (it also serves the ADLS Gen2 blob endpoint obstore uses for abfs[s]://)."""
    binary = azurite_binary()
    if binary is None:
        unavailable("Azurite (npm package azurite) is not installed")
    port = free_port()
    data = workdir / "azurite-data"
    data.mkdir(exist_ok=True)
    cmd = [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(data), "--silent",
           "--skipApiVersionCheck", "--disableTelemetry"]
    with _running("azurite", cmd, port, workdir) as proc:
        env = {"AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
               "AZURE_STORAGE_ENDPOINT": f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"}
        yield Emulator("azurite", proc, port, env)


def azurite_container(emulator: Emulator, container: str) -> None:
    """Create a container: one Create Container request signed with the account's shared key."""
    date = email.utils.formatdate(usegmt=True)
    version = "2021-08-06"
    # the string to sign: verb, eleven empty standard headers, the x-ms-* headers, the canonical resource
    to_sign = (f"PUT\n{chr(10) * 11}x-ms-date:{date}\nx-ms-version:{version}\n"
               f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{container}\nrestype:container")
    signature = base64.b64encode(hmac.new(base64.b64decode(AZURITE_KEY), to_sign.encode(), hashlib.sha256).digest())
    request = urllib.request.Request(
        f"http://127.0.0.1:{emulator.port}/{AZURITE_ACCOUNT}/{container}?restype=container", method="PUT",
        headers={"x-ms-date": date, "x-ms-version": version, "Content-Length": "0",
                 "Authorization": f"SharedKey {AZURITE_ACCOUNT}:{signature.decode()}"})
    urllib.request.urlopen(request, timeout=30)
