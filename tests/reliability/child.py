"""A child process for the crash and concurrency tests: runs commands on a table until killed.

    python -m tests.reliability.child TABLE MODE SITE N OWNER COUNT [FIRST]

MODE ``engine`` (Spark-free, fast start: ``engine.py``) or ``spark`` (the real commands, one
JVM for all of this child's commands). SITE is where the child SIGKILLs *itself* on the N-th
time it gets there — inside the commit (temp file written, not yet linked; or linked, before
the checkpoint), inside a checkpoint, before ``_last_checkpoint`` is replaced, in the middle of
a DV-file write, before a data file is renamed into place — or ``timer`` / ``none`` (the parent
kills it from outside at a random moment, or never). Crash children run command ``version + 1``
each time (command i commits version i); concurrency children (OWNER > 0) run their own
commands FIRST, FIRST+1, … . Prints ``READY`` once set up and ``DONE i`` after each commit.

A Spark-free child can also be forked from the test process (``ForkedChild``): the same ``main``, without a new
interpreter's start and imports.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from typing import Any

SITES = ("commit-before-link", "commit-after-link", "checkpoint-before-link", "last-checkpoint", "dv-mid-write",
         "data-before-rename", "timer", "none")
ENGINE_ONLY_SITES = ("dv-mid-write", "data-before-rename")  # with Spark these run in executor processes


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


#: the commit path's sites, in the order a commit passes them (``hook_commit_sites``)
COMMIT_SITES = ("commit-entry", "commit-before-link", "commit-after-link", "checkpoint-before-link", "last-checkpoint")


def hook_commit_sites(arrive: Callable[[str], None]) -> Callable[[], None]:
    """Call ``arrive(site)`` at each arrival at a commit-path site; returns the function that removes the hooks.

    ``commit-entry``: ``OptimisticTransaction.commit`` was called (every data, DV and change-data file of the
    command is written, nothing of the commit is); ``commit-before-link``: the commit's temp file is written and
    fsynced, not linked; ``commit-after-link``: the commit is in place, nothing after it (checkpoint, the
    command's later commits) has run; ``checkpoint-before-link``: a checkpoint file is written, not linked;
    ``last-checkpoint``: before ``_last_checkpoint`` is replaced.
    """
    from dvlake.txn.transaction import OptimisticTransaction

    real_link, real_replace, real_commit = os.link, os.replace, OptimisticTransaction.commit

    def link(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
        d = os.path.basename(str(dst))
        is_commit = len(d) == 25 and d.endswith(".json") and d[:20].isdigit()
        if is_commit:
            arrive("commit-before-link")
        elif ".checkpoint." in d:
            arrive("checkpoint-before-link")
        real_link(src, dst, *a, **kw)
        if is_commit:
            arrive("commit-after-link")

    def replace(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
        if str(dst).endswith("_last_checkpoint"):
            arrive("last-checkpoint")
        real_replace(src, dst, *a, **kw)

    def commit(self: Any, *a: Any, **kw: Any) -> Any:
        arrive("commit-entry")
        return real_commit(self, *a, **kw)

    os.link, os.replace = link, replace
    OptimisticTransaction.commit = commit  # type: ignore[method-assign]

    def undo() -> None:
        os.link, os.replace = real_link, real_replace
        OptimisticTransaction.commit = real_commit  # type: ignore[method-assign]

    return undo


def install_kill_site(site: str, n: int) -> None:
    """Arrange for SIGKILL at the n-th arrival at ``site``."""
    hits = {"count": 0}

    def arrive() -> None:
        hits["count"] += 1
        if hits["count"] >= n:
            _die()

    if site in COMMIT_SITES:
        hook_commit_sites(lambda at: arrive() if at == site else None)
    elif site == "dv-mid-write":
        from dvlake.dv import store

        real_add = store.DeletionVectorWriter.add

        def add(self: Any, bitmap: Any) -> Any:
            out = real_add(self, bitmap)
            if self._stream is not None:
                self._stream.flush()  # some bytes of the DV file reach the disk, the file is never closed
            arrive()
            return out

        store.DeletionVectorWriter.add = add  # type: ignore[method-assign]
    elif site == "data-before-rename":
        real_rename = os.rename

        def rename(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
            if str(dst).endswith(".parquet"):
                arrive()
            real_rename(src, dst, *a, **kw)

        os.rename = rename


class ForkedChild:
    """A Spark-free child forked from this process, with the part of ``subprocess.Popen`` the kill loop uses.

    A fork, not a new interpreter: no interpreter start and no imports per kill (most of a Spark-free child's cost).
    It is a process of its own all the same, in its own session, and dies of the same SIGKILL at the same sites; it
    starts with an empty snapshot cache, as a new process does, and never touches this process's Spark session.
    """

    def __init__(self, argv: list[str]) -> None:
        import tests.reliability.engine  # noqa: F401 - imported once in this process, not in every forked child

        out_r, out_w = os.pipe()
        self._err = tempfile.TemporaryFile()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: run child.py's main, never return into pytest's code
            code = 1
            try:
                os.setsid()
                gc.disable()  # no collection of objects this process inherited (Spark's py4j proxies among them)
                os.close(out_r)
                os.dup2(out_w, 1)
                os.dup2(self._err.fileno(), 2)
                sys.stdout = open(1, "w", buffering=1, closefd=False)
                sys.stderr = open(2, "w", buffering=1, closefd=False)
                from dvlake.log import snapshot_cache

                snapshot_cache.SHARED = snapshot_cache.SnapshotCache()
                main(argv)
                code = 0
            except BaseException:  # noqa: BLE001 - reported on stderr, the parent fails on the exit code
                traceback.print_exc()
            finally:
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                finally:
                    os._exit(code)  # never back into the caller's code, whatever happened above
        os.close(out_w)
        self.pid = pid
        self.stdout = open(out_r, encoding="utf-8")  # closed in communicate
        self.returncode: int | None = None
        self._out: list[str] = []
        self._reader: threading.Thread | None = None

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        if self._reader is None:
            self._reader = threading.Thread(target=lambda: self._out.append(self.stdout.read()), daemon=True)
            self._reader.start()
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise subprocess.TimeoutExpired(f"forked child {self.pid}", timeout or 0)
        self.stdout.close()
        self.wait()
        self._err.seek(0)
        return self._out[0], self._err.read().decode("utf-8", "replace")

    def _set(self, status: int) -> None:
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._set(status)
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._set(os.waitpid(self.pid, 0)[1])
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main(argv: list[str]) -> None:
    table, mode, site, n, owner, count = argv[:6]
    first = int(argv[6]) if len(argv) > 6 else None
    from dvlake.log.snapshot import Snapshot
    from tests.reliability.commands import COMMANDS, batch_ids, command_at, delete_condition
    from tests.reliability.engine import engine_append, engine_delete

    spark = None
    if mode == "spark":
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from dvlake.spark.session import local_session

        spark = local_session(app_name="dvlake-crash-child", cores=1, shuffle_partitions=2, driver_memory="1g")
    install_kill_site(site, int(n))
    print("READY", flush=True)
    from dvlake.errors import DeltaConcurrentModificationException

    for k in range(int(count)):
        i = first + k if first is not None else Snapshot.load(table).version + 1
        name = command_at(i)
        try:
            if spark is not None:
                COMMANDS[name].run_spark(spark, table, i, int(owner))
            elif name == "append":
                engine_append(table, batch_ids(i, int(owner)))
            elif name == "delete":
                engine_delete(table, delete_condition(i, int(owner)))
            else:
                raise SystemExit(f"the engine has no {name!r}; run it in spark mode")
        except DeltaConcurrentModificationException as exc:
            if first is None:
                raise
            print(f"CONFLICT {i} {type(exc).__name__}", flush=True)  # lost the race: not committed, by design
            continue
        print(f"DONE {i}", flush=True)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
