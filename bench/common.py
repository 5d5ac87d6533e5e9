"""Helpers shared by the benchmarks: timing and writing a section of BENCHMARKS.md."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median wall-clock seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def paired_median_times(fa: Callable[[], object], fb: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median seconds of ``fa`` and of ``fb`` over ``repeat`` rounds, the two run alternately (a, b, a, b, ...):
    a ratio of two sub-second cells on a shared 2-core machine drifts with the JVM's warm-up and the machine's load
    when one cell's runs all come before the other's (up to 1.37x for two reads planned the same)."""
    ta: list[float] = []
    tb: list[float] = []
    for _ in range(repeat):
        for fn, times in ((fa, ta), (fb, tb)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def update_benchmarks_md(heading: str, body: str) -> None:
    """Replace (or append) the section ``heading`` of BENCHMARKS.md, keeping the others."""
    path = os.path.join(ROOT, "BENCHMARKS.md")
    text = open(path).read() if os.path.exists(path) else \
        "# Benchmarks\n\nRatios measured side by side in one run; absolute times vary with the machine.\n"
    sections = text.split("\n## ")
    head, rest = sections[0], ["## " + s for s in sections[1:]]
    rest = [s for s in rest if not s.startswith(heading)]
    rest.append(f"{heading}\n\n{body}\n")
    with open(path, "w") as f:
        f.write(head.rstrip("\n") + "\n\n" + "\n\n".join(s.rstrip("\n") for s in rest) + "\n")
