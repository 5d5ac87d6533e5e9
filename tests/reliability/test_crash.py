"""Crash tests: children SIGKILLed at random points of appends and DELETEs (DV-file writes, commit,
checkpoint, ``_last_checkpoint``, data-file placement); after every kill the table is exactly the
state before or after the command that was running, every log file is readable, and the next
command succeeds.

Counts: ``DVLAKE_CRASH_KILLS`` Spark-free kills (default 14: every site twice, the sites taken in a
seeded order and a site retried until a kill lands there, so no site is left to chance; each child forked
from the test process, ``ForkedChild``, rather than a new interpreter that imports everything again) and
``DVLAKE_CRASH_SPARK_KILLS`` kills of children running the real Spark commands (default 1, one JVM
each: the child's whole process group, JVM included, killed from outside in the middle of its Spark
work, which neither the Spark-free children nor ``real_kills.py``'s forks do; the commit-path sites
in between are the same Python code as the Spark-free children's and the forks'). The seed is fixed
in CI (``DVLAKE_CRASH_SEED``, default 8). Commands come from ``commands.SEQUENCE``: a command
registered there is crash-tested with no change here.

The other commands — OPTIMIZE, UPDATE, MERGE, a CDF-enabled UPDATE, PURGE, RESTORE, DROP FEATURE
deletionVectors, CONVERT TO DELTA — are killed by ``real_kills.py``: the real commands, each killed
twice per round (``DVLAKE_CRASH_REAL_ROUNDS``, default 1), once before its commit lands and once after,
in processes forked from one Spark child, so the campaign costs one JVM start.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dvlake
from dvlake.log.snapshot import Snapshot
from tests.conftest import REPO_ROOT
from tests.reliability.child import ENGINE_ONLY_SITES, SITES, ForkedChild
from tests.reliability.commands import check_log_readable, create_table, model_after, read_state

KILLS = int(os.environ.get("DVLAKE_CRASH_KILLS", "14"))
SPARK_KILLS = int(os.environ.get("DVLAKE_CRASH_SPARK_KILLS", "1"))
SEED = int(os.environ.get("DVLAKE_CRASH_SEED", "8"))
REAL_ROUNDS = int(os.environ.get("DVLAKE_CRASH_REAL_ROUNDS", "1"))
REAL_COMMANDS = {"OPTIMIZE", "UPDATE", "MERGE", "CDF UPDATE", "PURGE", "RESTORE", "DROP FEATURE", "CONVERT"}
CHILD_TIMEOUT = 300


def _start(table: str, mode: str, site: str, n: int, count: int) -> subprocess.Popen[str] | ForkedChild:
    if mode == "engine":
        return ForkedChild([table, mode, site, str(n), "0", str(count)])
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen([sys.executable, "-m", "tests.reliability.child", table, mode, site, str(n), "0", str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO_ROOT), env=env,
                            start_new_session=True)  # its own process group: the child's JVM dies with it


def _kill_group(proc: subprocess.Popen[str] | ForkedChild) -> None:
    """SIGKILL whatever is left of the child's process group (a Spark child's JVM and Python workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_ready(proc: subprocess.Popen[str] | ForkedChild, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY") or not line:
            return
    raise AssertionError("child did not get ready")


def check_state(table: str, done: int | None) -> int:
    """The table is at command ``done`` (last reported) or one further, with exactly that model's rows."""
    check_log_readable(table)
    version = Snapshot.load(table).version
    if done is not None:
        assert version in (done, done + 1), f"table at version {version}, child last reported command {done}"
    assert read_state(table) == model_after(version + 1), f"rows at version {version} differ from the serial model"
    return version


def _run_kills(table: str, rng: random.Random, kills: int, mode: str, sites: list[str]) -> list[str]:
    """Kill ``kills`` children, the k-th at ``sites[k % len(sites)]`` (a child that finishes without reaching its
    site is run again at the same site); return the site of every kill."""
    done_sites: list[str] = []
    attempts = 0
    while len(done_sites) < kills:
        attempts += 1
        assert attempts < kills * 4, f"only {len(done_sites)} kills in {attempts} attempts"
        before = Snapshot.load(table).version
        site = sites[len(done_sites) % len(sites)]
        # a Spark child is slow: it dies at the first arrival, and 3 commands always pass a checkpoint (interval 3)
        n = rng.randint(1, 3) if mode == "engine" else 1
        proc = _start(table, mode, site, n, count=6 if mode == "engine" else 3)
        try:
            if site == "timer":
                _wait_ready(proc, CHILD_TIMEOUT)
                time.sleep(rng.uniform(0.05, 8.0 if mode == "spark" else 0.6))
                proc.kill()
            try:
                out, err = proc.communicate(timeout=CHILD_TIMEOUT)
            except subprocess.TimeoutExpired:  # a loaded machine: the kill simply lands wherever the child is
                proc.kill()
                out, err = proc.communicate()
                site = "timeout"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _kill_group(proc)
        done = [int(line.split()[1]) for line in out.splitlines() if line.startswith("DONE")]
        assert proc.returncode in (-9, 0), f"child failed ({proc.returncode}):\n{err[-3000:]}"
        check_state(table, done[-1] if done else before)
        if proc.returncode == -9:
            done_sites.append(site)
    return done_sites


def test_kills_of_spark_free_children(tmp_path: Path) -> None:
    table = str(tmp_path / "t")
    create_table(table)
    rng = random.Random(SEED)
    sites = rng.sample([s for s in SITES if s != "none"], len(SITES) - 1)
    killed = _run_kills(table, rng, KILLS, "engine", sites)
    assert len(killed) >= KILLS
    if KILLS >= len(sites):  # every site got its kill ("timeout": a loaded machine's kill, wherever the child was)
        assert set(sites) - {"timer"} <= set(killed)
    # every version ever committed still reads as the serial model, and the next command succeeds
    latest = Snapshot.load(table).version
    for v in range(latest + 1):
        assert read_state(table, v) == model_after(v + 1), f"version {v}"
    proc = _start(table, "engine", "none", 1, count=2)
    _, err = proc.communicate(timeout=CHILD_TIMEOUT)
    assert proc.returncode == 0, err[-3000:]
    check_state(table, None)
    print(f"crash: {len(killed)} kills of Spark-free children at {sorted(set(killed))}")


@pytest.mark.slow
def test_kills_of_spark_children(spark, tmp_path: Path) -> None:
    if SPARK_KILLS <= 0:
        pytest.skip("DVLAKE_CRASH_SPARK_KILLS=0")
    table = str(tmp_path / "t")
    create_table(table)
    rng = random.Random(SEED + 1)
    commit_sites = [s for s in SITES if s not in ENGINE_ONLY_SITES and s not in ("none", "timer")]
    sites = ["timer", *rng.sample(commit_sites, len(commit_sites))]  # the JVM killed mid-command first
    killed = _run_kills(table, rng, SPARK_KILLS, "spark", sites)
    assert len(killed) >= SPARK_KILLS
    # the Spark reader agrees with the model, and a real DELETE and append on the crashed table succeed
    version = Snapshot.load(table).version
    assert {r.id for r in dvlake.read(spark, table).select("id").collect()} == set(model_after(version + 1))
    from tests.reliability.commands import COMMANDS, command_at

    for i in (version + 1, version + 2):
        COMMANDS[command_at(i)].run_spark(spark, table, i, 0)
    assert {r.id for r in dvlake.read(spark, table).select("id").collect()} == set(model_after(version + 3))
    print(f"crash: {len(killed)} kills of Spark children at {sorted(set(killed))}")


@pytest.mark.slow
def test_kills_of_real_commands(tmp_path: Path) -> None:
    """Every command of ``REAL_COMMANDS`` SIGKILLed twice per round at commit-path sites, the table at the pre- or
    post-state of a serial run after each kill and the next writer working (``real_kills.py`` checks each)."""
    if REAL_ROUNDS <= 0:
        pytest.skip("DVLAKE_CRASH_REAL_ROUNDS=0")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([sys.executable, "-m", "tests.reliability.real_kills", str(tmp_path), str(SEED + 2),
                             str(REAL_ROUNDS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(REPO_ROOT), env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=CHILD_TIMEOUT * 4)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_group(proc)
    assert proc.returncode == 0, f"the campaign failed ({proc.returncode}):\n{out[-2000:]}\n{err[-4000:]}"
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    records = [r for r in lines if "command" in r]
    cost = next(r for r in lines if "cpu_seconds" in r)
    assert "FINISHED" in out and len(records) == 2 * REAL_ROUNDS * len(REAL_COMMANDS), out
    assert all(r["killed"] for r in records), [r for r in records if not r["killed"]]
    kills = {name: sum(1 for r in records if r["command"] == name) for name in sorted(REAL_COMMANDS)}
    assert set(kills.values()) == {2 * REAL_ROUNDS}, kills
    before = {"commit-entry", "commit-before-link"}
    for name in REAL_COMMANDS:  # every command killed both before its (last) commit landed and after one had
        sites = [r["site"] for r in records if r["command"] == name]
        assert any(s in before for s in sites) and any(s not in before for s in sites), (name, sites)
    assert cost["states_checked"] >= 3 * len(REAL_COMMANDS) * REAL_ROUNDS, cost  # each kill, each next writer
    states = {s: sum(1 for r in records if r["state"] == s) for s in ("pre", "post", "pre=post")}
    print(f"crash (real commands): {len(records)} kills, {kills}, states {states}, "
          f"sites {sorted({r['site'] for r in records})}, {cost['states_checked']} states checked, "
          f"{cost['seconds']} s, {cost['cpu_seconds']} CPU s")
