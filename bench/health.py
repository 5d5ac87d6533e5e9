"""Benchmark: ``dvlake health`` on a 100,000-file table (log only, plus the one DV file its DVs point to).

The table is ``bench/log_replay.py``'s synthetic log (checkpoint + 20 JSON commits, 20 % of the
files with a DV, 100 partitions); the DV file is written with correct per-DV size headers so the
header check runs for real. Times ``table_health`` (replay, per-file frame, DV headers,
partitions, history, recommendations), the PNG, and the whole ``dvlake health --json`` command
in a fresh process. Run: ``.venv/bin/python bench/health.py [--files 100000] [--write-md]``.
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import median_time  # noqa: E402
from bench.log_replay import build  # noqa: E402
from dvlake.commands.inspection.health import table_health  # noqa: E402
from dvlake.dv.descriptor import DeletionVectorDescriptor  # noqa: E402

DV_PATH = "vBn[lx{q8@P<9BNH/isA"  # the one DV file log_replay.build's DVs name; offsets 1 + 45 j, 36 bytes each


def write_dv_file(root: str, dvs_per_commit: int) -> None:
    """A DV file whose size headers match the synthetic descriptors (the bitmaps themselves are not read)."""
    location = DeletionVectorDescriptor("u", DV_PATH, 36, 2, 1).absolute_path(root)
    buf = bytearray(b"\x01" + bytes(45 * dvs_per_commit + 8))
    for j in range(dvs_per_commit):
        struct.pack_into(">I", buf, 1 + 45 * j, 36)
    with open(location, "wb") as f:
        f.write(buf)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "t")
        per_commit = args.files // 100
        build(root, args.files, 80, 20, per_commit)
        write_dv_file(root, per_commit)
        report = table_health(root)
        assert report.summary["files"] == args.files and report.summary["files_with_dv"] == args.files // 5, report.summary
        assert not report.problems, report.problems
        from dvlake.log.snapshot import Snapshot

        t_load = median_time(lambda: Snapshot.load(root), args.repeat)
        t_health = median_time(lambda: table_health(root), args.repeat)
        t_nohdr = median_time(lambda: table_health(root, verify_headers=False), args.repeat)
        png = os.path.join(tmp, "h.png")

        def plot() -> None:
            from dvlake.commands.inspection.health_report import write_png

            write_png(report, png)

        t_png = median_time(plot, args.repeat)
        exe = os.path.join(os.path.dirname(sys.executable), "dvlake")

        def cli() -> None:
            subprocess.run([exe, "health", root, "--json"], check=True, stdout=subprocess.DEVNULL)

        t_cli = median_time(cli, args.repeat)
        table = "\n".join([
            f"{args.files:,} files in 100 partitions (checkpoint + 20 JSON commits, 20 % with DVs packed in one DV file); "
            f"median of {args.repeat}; {time.strftime('%Y-%m-%d')}, 2 cores shared with other work (load average "
            f"{os.getloadavg()[0]:.0f} at the end: absolute times are inflated, the ratio to a bare snapshot load is the "
            "number to compare). Target: seconds.", "",
            "| step | median s | / snapshot load |", "|---|---:|---:|",
            f"| `Snapshot.load` alone (the log replay every reader pays) | {t_load:.2f} | 1.00x |",
            f"| `table_health` (replay, per-file frame, {args.files // 5:,} DV headers, partitions, history, recommendations) "
            f"| {t_health:.2f} | {t_health / t_load:.2f}x |",
            f"| `table_health(verify_headers=False)` | {t_nohdr:.2f} | {t_nohdr / t_load:.2f}x |",
            f"| PNG (3 panels) | {t_png:.2f} | |",
            f"| `dvlake health PATH --json` in a fresh process (imports included) | {t_cli:.2f} | {t_cli / t_load:.2f}x |"])
        print(table)
        if args.write_md:
            from bench.common import update_benchmarks_md

            update_benchmarks_md(f"## DV health, {args.files:,} files (bench/health.py)", table)


if __name__ == "__main__":
    main()
