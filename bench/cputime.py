"""CPU seconds used by this process and every process it started (Spark's JVM, its Python workers).

On a shared machine the wall-clock time of a query swings with other people's load; the CPU time the
query's own processes spend is far steadier, so the benchmarks report CPU-time ratios beside the
wall-clock ones. Linux only (reads ``/proc``); elsewhere ``tree_cpu_seconds`` returns None.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds incl. reaped children) of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / _TICKS


def tree_cpu_seconds(root: int | None = None) -> float | None:
    """CPU seconds of ``root`` (default: this process) and all its live descendants."""
    if not os.path.isdir("/proc"):
        return None
    root = os.getpid() if root is None else root
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = _stat(int(name))
            if s is not None:
                stats[int(name)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, []))
    return total


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process tree) of one call; CPU is NaN where unavailable."""
    c0 = tree_cpu_seconds()
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    c1 = tree_cpu_seconds()
    return wall, (c1 - c0) if c0 is not None and c1 is not None else float("nan")
