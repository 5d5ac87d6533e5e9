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
"""

from __future__ import annotations

import os
import signal
import sys
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
