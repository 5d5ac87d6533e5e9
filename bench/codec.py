"""Benchmark: the DV codec vs bare pyroaring, side by side.

Serialize and deserialize 1M and 10M row indexes at 0.1 %, 10 % and 90 % density (the file has
N / density rows), random and clustered (runs of 1,000), comparing ``dvlake.dv.roaring``
(magic handling and checks included) with ``pyroaring.BitMap64.serialize/deserialize`` on the
same already run-optimized bitmap (``run_optimize`` is a separate step the writer does once). Median of --repeat. Run: ``.venv/bin/python bench/codec.py [--quick] [--write-md]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import pyroaring  # noqa: E402

from bench.common import median_time  # noqa: E402
from dvlake.dv import roaring  # noqa: E402


def rows_for(n: int, density: float, clustered: bool, rng: np.random.Generator) -> np.ndarray:
    universe = int(n / density)
    if not clustered:
        return np.sort(rng.choice(universe, size=n, replace=False)).astype(np.uint64)
    run = 1000
    starts = np.sort(rng.choice(universe // run, size=max(1, n // run), replace=False)) * run
    return (starts[:, None] + np.arange(run)[None, :]).ravel()[:n].astype(np.uint64)




def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1M rows only")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(42)
    sizes = [1_000_000] if args.quick else [1_000_000, 10_000_000]
    lines = ["| rows | density | layout | bytes | serialize M rows/s | ratio vs pyroaring | ratio, one joined bytes | "
             "deserialize M rows/s | ratio vs pyroaring |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    worst = 0.0
    for n in sizes:
        for density in (0.001, 0.10, 0.90):
            for clustered in (False, True):
                bm = pyroaring.BitMap64(rows_for(n, density, clustered, rng))
                bm.run_optimize()
                data = roaring.serialize(bm)
                raw = bm.serialize()
                ser_ours = median_time(lambda: roaring.serialize_parts(bm), args.repeat)
                ser_joined = median_time(lambda: roaring.serialize(bm, optimize=False), args.repeat)
                ser_bare = median_time(lambda: bm.serialize(), args.repeat)
                de_ours = median_time(lambda: roaring.deserialize(data), args.repeat)
                de_bare = median_time(lambda: pyroaring.BitMap64.deserialize(raw), args.repeat)
                assert roaring.deserialize(data) == bm
                r_ser, r_de, r_joined = ser_ours / ser_bare, de_ours / de_bare, ser_joined / ser_bare
                worst = max(worst, r_ser, r_de)
                lines.append(f"| {n:,} | {density * 100:g} % | {'clustered' if clustered else 'random'} | {len(data):,} | "
                             f"{n / ser_ours / 1e6:,.0f} | {r_ser:.2f}x | {r_joined:.2f}x | {n / de_ours / 1e6:,.0f} | {r_de:.2f}x |")
                print(lines[-1], flush=True)
    table = (f"Median of {args.repeat}; {time.strftime('%Y-%m-%d')}; target ≤ 1.2x; worst ratio {worst:.2f}x. "
             "'serialize' is what the DV writer does (magic and body streamed, no copy); 'one joined bytes' "
             "adds the copy that prepending the magic to a single bytes object costs.\n\n"
             + "\n".join(lines))
    print(table)
    if args.write_md:
        from bench.common import update_benchmarks_md

        update_benchmarks_md("## DV codec (bench/codec.py)", table)


if __name__ == "__main__":
    main()
