"""Benchmark: how long the log-only ``dvlake`` commands take in a fresh process (start-up is most of it).

``history``, ``detail``, ``files`` and ``vacuum --dry-run`` read the log and list files; none starts Spark.
Each is run as a new ``python -m dvlake.cli`` process on a 1,000-file synthetic log
(``bench/log_replay.py``'s), median of ``--repeat`` runs, beside a bare ``python -c pass`` (the interpreter's
own start) and ``python -c "import pyspark.sql"`` (what merely importing PySpark would cost). dvlake's own
time is the command's minus the bare interpreter's. Run: ``.venv/bin/python bench/cli_startup.py [--write-md]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import median_time, update_benchmarks_md  # noqa: E402
from bench.log_replay import build  # noqa: E402

NOTE = ("Where the time goes (`python -X importtime`, history): pandas ~1.0 s, imported by pyarrow on the log replay's first `pa.array` of Python lists (pyarrow probes every list for pandas types); numpy + pyarrow ~0.5 s; click and rich < 0.1 s; PySpark, sqlglot and matplotlib are not imported (`tests/unit/test_cli_output.py` keeps it so). Before issue 30's changes the same commands took the same time (history 2.1 s vs 1.8 s, files 3.8 s vs 3.4 s, alternating runs): under a second needs a log replay that builds its Arrow tables without Python lists.")
HEADING = "## CLI start-up: log-only commands in a fresh process (bench/cli_startup.py)"


def _run(args: list[str]) -> None:
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "t")
        build(root, 1000, 10, 2, 50)
        bare = median_time(lambda: _run([py, "-c", "pass"]), args.repeat)
        pyspark = median_time(lambda: _run([py, "-c", "import pyspark.sql"]), args.repeat)
        rows = []
        for name, cmd in (("history", ["history", root]), ("detail", ["detail", root]), ("files", ["files", root]),
                          ("vacuum --dry-run", ["vacuum", root, "--dry-run"])):
            t = median_time(lambda cmd=cmd: _run([py, "-m", "dvlake.cli", *cmd]), args.repeat)
            rows.append((name, t, t - bare))
    lines = [f"1,000-file synthetic log; median of {args.repeat} fresh processes; {dt.date.today()}, 2 cores shared with "
             "other work. dvlake's own time = the command's minus a bare `python -c pass` "
             f"({bare:.2f} s); merely importing `pyspark.sql` takes {pyspark - bare:.2f} s on top of the interpreter.",
             "", "| command | wall s | dvlake's own s |", "|---|---:|---:|"]
    lines += [f"| `dvlake {name}` | {t:.2f} | {own:.2f} |" for name, t, own in rows]
    lines += ["", NOTE]
    body = "\n".join(lines)
    print(body)
    if args.write_md:
        update_benchmarks_md(HEADING, body)


if __name__ == "__main__":
    main()
