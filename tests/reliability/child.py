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
from typing import Any

SITES = ("commit-before-link", "commit-after-link", "checkpoint-before-link", "last-checkpoint", "dv-mid-write",
         "data-before-rename", "timer", "none")
ENGINE_ONLY_SITES = ("dv-mid-write", "data-before-rename")  # with Spark these run in executor processes


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill_site(site: str, n: int) -> None:
    """Arrange for SIGKILL at the n-th arrival at ``site``."""
    hits = {"count": 0}

    def arrive() -> None:
        hits["count"] += 1
        if hits["count"] >= n:
            _die()

    if site in ("commit-before-link", "commit-after-link", "checkpoint-before-link"):
        real_link = os.link

        def link(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
            d = str(dst)
            is_commit = d.endswith(".json") and "_delta_log" in d
            is_checkpoint = ".checkpoint." in d
            if (site == "commit-before-link" and is_commit) or (site == "checkpoint-before-link" and is_checkpoint):
                arrive()
            real_link(src, dst, *a, **kw)
            if site == "commit-after-link" and is_commit:
                arrive()

        os.link = link
    elif site == "last-checkpoint":
        real_replace = os.replace

        def replace(src: Any, dst: Any, *a: Any, **kw: Any) -> None:
            if str(dst).endswith("_last_checkpoint"):
                arrive()
            real_replace(src, dst, *a, **kw)

        os.replace = replace
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
