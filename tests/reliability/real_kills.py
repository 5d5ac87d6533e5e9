"""SIGKILLs of the real Spark commands at their commit points, with one JVM for all of them.

    python -m tests.reliability.real_kills WORKDIR SEED ROUNDS

A round runs OPTIMIZE, UPDATE, MERGE, a CDF-enabled UPDATE (it writes ``_change_data`` files), PURGE
(REORG … APPLY (PURGE)), RESTORE, DROP FEATURE deletionVectors and CONVERT TO DELTA, each the real dvlake
command on the campaign's table (CONVERT on a fresh Parquet directory). Every command first runs
serially on a byte copy of the table, with the commit-path sites of ``child.hook_commit_sites`` counted;
that run's result is the post-state. Then the command runs twice on the table itself, each time in a
process forked from this one that SIGKILLs itself at one arrival drawn by the seeded schedule from those
the serial run made: first before the commit lands (``commit-entry``: every data, DV and change-data file
is written; ``commit-before-link``: the commit's temp file is written), then once it has
(``commit-after-link``, a checkpoint being written, ``_last_checkpoint``). After each kill the table must
read, as a multiset of rows and with the change data of its latest commit, exactly as the pre-state or
the post-state (a one-commit command whose rows change: exactly the one the kill's phase implies); for
CONVERT, either no Delta table with every Parquet file byte-identical, or the converted table with every
row. The second run is the next writer after the first kill (a kill that moved the log on, as one inside
DROP FEATURE's several commits, gets a fresh serial run); after the second an append must add exactly its
rows, and DROP FEATURE and CONVERT, run again, must finish the job. Each kill prints one JSON line; the
first wrong state raises.

Why a fork is sound here: this process holds the Spark session, and the fork shares its JVM, so a kill
costs no JVM start. The forked process talks
to the JVM over the main thread's py4j connection while this process waits for it, and every site is in
dvlake's pure-Python commit path, so no py4j call is in flight at the kill and the connection is clean
when this process uses it again. py4j's finalizer thread does not exist in the fork, so the fork never
asks the JVM to drop an object this process still holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tests.reliability.child import hook_commit_sites, install_kill_site
from tests.reliability.commands import check_log_readable, read_rows

BEFORE = ("commit-entry", "commit-before-link")
AFTER = ("commit-after-link", "checkpoint-before-link", "last-checkpoint")
DVS = "delta.enableDeletionVectors"
CDF = "delta.enableChangeDataFeed"
ROWS = 300  # ids 0..299 in the campaign table at the start


@dataclass
class Capture:
    """What a reader sees: a Delta table's live rows and its latest commit's change data, or a plain Parquet
    directory (its rows and each file's hash)."""

    delta: bool
    rows: list[tuple[Any, ...]]
    changes: list[tuple[Any, ...]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def _parquet_files(path: str) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".parquet") and not n.startswith((".", "_")))


def capture(path: str) -> Capture:
    from dvlake.commands.common import try_load

    snap = try_load(path)
    if snap is None:
        names = _parquet_files(path)
        rows: list[tuple[Any, ...]] = []
        for n in names:
            t = pq.read_table(os.path.join(path, n), columns=["id", "v"])
            rows += zip(t.column("id").to_pylist(), t.column("v").to_pylist(), strict=True)
        hashes = {n: hashlib.sha256(Path(path, n).read_bytes()).hexdigest() for n in names}
        return Capture(False, sorted(rows), files=hashes)
    check_log_readable(path)
    return Capture(True, read_rows(path), changes=change_rows(path, snap.version))


def _log_version(path: str) -> int:
    from dvlake.commands.common import try_load

    snap = try_load(path)
    return -1 if snap is None else snap.version


def change_rows(path: str, version: int) -> list[tuple[Any, ...]]:
    """The rows of the ``cdc`` files commit ``version`` names (a file it names but that is missing fails here)."""
    from tests.reliability.tables import read_actions

    out: list[tuple[Any, ...]] = []
    for a in read_actions(path, version):
        if "cdc" in a:
            t = pq.read_table(os.path.join(path, a["cdc"]["path"]), columns=["id", "v", "_change_type"])
            out += zip(*(t.column(c).to_pylist() for c in ("id", "v", "_change_type")), strict=True)
    return sorted(out)


# --- the commands ------------------------------------------------------------------------------------------


class Campaign:
    """The table, the schedule and the commands; ``run`` kills each command twice per round."""

    def __init__(self, spark: Any, workdir: str, seed: int) -> None:
        self.spark = spark
        self.workdir = workdir
        self.table = os.path.join(workdir, "t")
        self.rng = random.Random(seed)
        self.restore_to = 0
        self.fresh = 2_000_000  # ids of the next writer's appends
        self.checked = 0  # table states compared: after each kill, after each next writer, Spark reader vs log reader

    def dt(self, path: str) -> Any:
        from dvlake import DeltaTable

        return DeltaTable.forPath(self.spark, path)

    def create(self) -> None:
        """The starting table (Spark-free): DVs on, checkpoints every 3 commits, 3 files, some rows deleted by DVs."""
        from tests.reliability.engine import engine_append, engine_create, engine_delete

        engine_create(self.table, list(range(100)), checkpoint_interval=3)
        engine_append(self.table, list(range(100, 200)))
        engine_append(self.table, list(range(200, ROWS)))
        engine_delete(self.table, "id % 7 = 3")

    # setups run here, uninterrupted, before the pre-state is taken; they are not killed
    def setup_optimize(self, i: int) -> str:
        from dvlake.log.snapshot import Snapshot
        from tests.reliability.engine import engine_append

        snap = Snapshot.load(self.table)
        if snap.configuration.get(DVS) != "true":  # a previous round dropped the feature: DVs back on
            self.dt(self.table).setProperties({DVS: "true"})
        for _ in range(2):  # small files for OPTIMIZE to compact
            engine_append(self.table, self.next_ids(10))
        return self.table

    def setup_merge(self, i: int) -> str:
        from dvlake.log.snapshot import Snapshot

        self.restore_to = Snapshot.load(self.table).version  # after this round's UPDATE: DVs live
        return self.table

    def setup_cdf(self, i: int) -> str:
        self.dt(self.table).setProperties({CDF: "true"})
        return self.table

    def setup_purge(self, i: int) -> str:
        self.dt(self.table).setProperties({CDF: "false"})
        return self.table

    def setup_convert(self, i: int) -> str:
        """A fresh Parquet directory of three files (CONVERT runs once per directory)."""
        path = os.path.join(self.workdir, f"parquet-{i}")
        os.makedirs(path)
        for f in range(3):
            ids = list(range(f * 50, f * 50 + 50))
            pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([i] * 50, pa.int64())}),
                           os.path.join(path, f"part-{f}.parquet"))
        return path

    def next_ids(self, n: int) -> list[int]:
        self.fresh += n
        return list(range(self.fresh - n, self.fresh))

    def optimize(self, path: str, i: int) -> None:
        self.dt(path).optimize().executeCompaction()

    def update(self, path: str, i: int) -> None:
        self.dt(path).update(f"id % 5 = {i % 5}", {"v": f"v + {i + 1}"})

    def merge(self, path: str, i: int) -> None:
        rows = [(k, 1000 + i) for k in range(i % 9, ROWS, 9)] + [(900_000 + i * 100 + k, i) for k in range(5)]
        source = self.spark.createDataFrame(rows, "id long, v long")
        (self.dt(path).alias("t").merge(source.alias("s"), "t.id = s.id")
         .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll().execute())

    def cdf_update(self, path: str, i: int) -> None:
        self.dt(path).update(f"id % 3 = {i % 3}", {"v": "v * 2 + 1"})

    def purge(self, path: str, i: int) -> None:
        self.dt(path).reorgPurge()

    def restore(self, path: str, i: int) -> None:
        self.dt(path).restoreToVersion(self.restore_to)

    def drop_feature(self, path: str, i: int) -> None:
        self.dt(path).dropFeatureSupport("deletionVectors")

    def convert(self, path: str, i: int) -> None:
        from dvlake import DeltaTable

        DeltaTable.convertToDelta(self.spark, f"parquet.`{path}`")

    def steps(self) -> list[tuple[str, Callable[[int], str], Callable[[str, int], None]]]:
        """(name, setup returning the path the command runs on, the command) in round order."""
        at_table: Callable[[int], str] = lambda i: self.table  # noqa: E731
        return [("OPTIMIZE", self.setup_optimize, self.optimize), ("UPDATE", at_table, self.update),
                ("MERGE", self.setup_merge, self.merge), ("CDF UPDATE", self.setup_cdf, self.cdf_update),
                ("PURGE", self.setup_purge, self.purge), ("RESTORE", at_table, self.restore),
                ("DROP FEATURE", at_table, self.drop_feature), ("CONVERT", self.setup_convert, self.convert)]

    # --- one kill ----------------------------------------------------------------------------------------

    def serial_run(self, path: str, command: Callable[[str, int], None], i: int) -> tuple[Capture, Counter[str]]:
        """The command run uninterrupted on a byte copy of ``path``: its result and its arrivals at each site."""
        copy = os.path.join(self.workdir, f"serial-{i}")
        shutil.copytree(path, copy, symlinks=True)
        arrivals: Counter[str] = Counter()
        undo = hook_commit_sites(lambda site: arrivals.update([site]))
        try:
            command(copy, i)
        finally:
            undo()
        post = capture(copy)
        shutil.rmtree(copy)
        return post, arrivals

    def killed_run(self, path: str, command: Callable[[str, int], None], i: int, site: str, n: int) -> bool:
        """The command in a forked process that SIGKILLs itself at the n-th arrival at ``site``; True if it did."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the fork: run, die at the site, never return into the parent's code
            try:
                install_kill_site(site, n)
                command(path, i)
            except BaseException:  # noqa: BLE001 - reported, the parent fails on the exit code
                traceback.print_exc()
                sys.stderr.flush()
                os._exit(3)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            assert os.WTERMSIG(status) == signal.SIGKILL, f"the command died of signal {os.WTERMSIG(status)}"
            return True
        assert os.WEXITSTATUS(status) == 0, f"the command failed in the fork (exit {os.WEXITSTATUS(status)})"
        return False

    def kill_twice(self, name: str, setup: Callable[[int], str], command: Callable[[str, int], None],
                   i: int) -> list[dict[str, Any]]:
        """Kill the command once before its commit lands and once after, then run the next writer."""
        path = setup(i)
        records = []
        reference: tuple[int, Capture, Capture, Counter[str]] | None = None
        for phase in (BEFORE, AFTER):
            if reference is None or reference[0] != _log_version(path):  # first, or a kill moved the log on
                pre = capture(path)
                post, arrivals = self.serial_run(path, command, i)
                reference = (_log_version(path), pre, post, arrivals)
            _, pre, post, arrivals = reference
            records.append(self.kill_once(name, path, command, i, phase, pre, post, arrivals))
        self.next_writer(name, path, command, i, capture(path), reference[2])
        return records

    def kill_once(self, name: str, path: str, command: Callable[[str, int], None], i: int, phase: tuple[str, ...],
                  pre: Capture, post: Capture, arrivals: Counter[str]) -> dict[str, Any]:
        commits = arrivals["commit-after-link"]
        assert commits, f"{name} committed nothing in its serial run: nothing to kill"
        site, n = self.rng.choice([(s, n) for s in phase for n in range(1, arrivals[s] + 1)])
        started = time.monotonic()
        killed = self.killed_run(path, command, i, site, n)
        after = capture(path)
        state = "pre" if after == pre else "post" if after == post else None
        assert state is not None, (f"{name} killed at {site} #{n}: the table is neither the pre- nor the post-state "
                                   f"({len(after.rows)} rows, pre {len(pre.rows)}, post {len(post.rows)}; "
                                   f"delta {after.delta}, pre {pre.delta}, post {post.delta})")
        assert killed or state == "post", f"{name} finished unkilled but the table is not its result"
        self.checked += 1
        if commits == 1 and pre != post:  # one commit decides it: before it lands nothing, after it everything
            expected = "pre" if site in BEFORE else "post"
            assert state == expected, f"{name} killed at {site} #{n}: table at the {state}-state, not the {expected}-state"
        return {"command": name, "site": site, "n": n, "arrivals": sum(arrivals.values()), "commits": commits,
                "killed": killed, "state": "pre=post" if pre == post else state,
                "seconds": round(time.monotonic() - started, 1)}

    def next_writer(self, name: str, path: str, command: Callable[[str, int], None], i: int, after: Capture,
                    post: Capture) -> None:
        """The next writer on the crashed table succeeds: DROP FEATURE and CONVERT are run again and must finish
        the job (the rows the serial run left); after the others an append adds exactly its rows."""
        if name in ("DROP FEATURE", "CONVERT"):
            from dvlake.errors import DeltaTableFeatureException
            from dvlake.log.snapshot import Snapshot

            try:
                command(path, i)
            except DeltaTableFeatureException as exc:  # DROP FEATURE after a kill past its final commit
                assert exc.error_class == "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT", exc
            again = capture(path)
            self.checked += 1
            assert again.delta and again.rows == post.rows, f"{name} run again after the kill: not the serial result"
            if name == "DROP FEATURE":
                from dvlake.log import features

                assert "deletionVectors" not in features.writer_features(Snapshot.load(path).protocol), "DVs not dropped"
            return
        from tests.reliability.engine import engine_append

        ids = self.next_ids(5)
        engine_append(path, ids)
        self.checked += 1
        assert read_rows(path) == sorted(after.rows + [(x, 0) for x in ids]), f"the append after the {name} kill"

    def check_spark_reader(self) -> None:
        """The Spark scan of the crashed table agrees with the Spark-free reader."""
        import dvlake

        got = sorted((r.id, r.v) for r in dvlake.read(self.spark, self.table).select("id", "v").collect())
        self.checked += 1
        assert got == read_rows(self.table), "the Spark reader and the log reader disagree"

    def run(self, rounds: int) -> None:
        self.create()
        i = 0
        for r in range(rounds):
            for name, setup, command in self.steps():
                i += 1
                for record in self.kill_twice(name, setup, command, i):
                    print(json.dumps({"round": r, **record}), flush=True)
            self.check_spark_reader()


def _cpu_seconds() -> float:
    """CPU time of this process, its reaped forks and every live descendant (the JVM, Python workers): what the
    campaign costs on an idle machine, whatever the load of the one it ran on."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
            cpu[int(entry)] = sum(int(x) for x in fields[11:15]) / ticks  # utime stime cutime cstime
    me, total = os.getpid(), sum(os.times()[:4])
    for pid in parents:
        p = parents[pid]
        while p > 1 and p != me:
            p = parents.get(p, 0)
        if p == me and pid != me:
            total += cpu[pid]
    return total


def main(argv: list[str]) -> None:
    workdir, seed, rounds = argv[0], int(argv[1]), int(argv[2])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from dvlake.spark.session import local_session

    spark = local_session(app_name="dvlake-real-kills", cores=1, shuffle_partitions=2, driver_memory="1g")
    started = time.monotonic()
    campaign = Campaign(spark, workdir, seed)
    campaign.run(rounds)
    print(json.dumps({"states_checked": campaign.checked, "seconds": round(time.monotonic() - started, 1),
                      "cpu_seconds": round(_cpu_seconds(), 1)}))
    print("FINISHED", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
