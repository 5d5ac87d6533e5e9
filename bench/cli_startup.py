"""Benchmark: how long the log-only ``dvlake`` commands take in a fresh process (start-up is most of it).

``history``, ``detail``, ``files`` and ``vacuum --dry-run`` read the log and list files; none starts Spark.
Each is run as a new ``python -m dvlake.cli`` process on a 1,000-file synthetic log
(``bench/log_replay.py``'s), median of ``--repeat`` runs after one warm-up run, beside a bare
``python -c pass`` (the interpreter's own start), ``python -c "import pandas"`` (what the commands no longer
import, ``dvlake/terminal/light.py``) and ``python -c "import pyspark.sql"`` (what merely importing PySpark
would cost). dvlake's own time is the command's minus the bare interpreter's. The processes may write
bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment), as an installed dvlake has
them; the warm-up run writes them. Run: ``.venv/bin/python bench/cli_startup.py [--write-md]``.
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

NOTE = ("What the commands import: numpy, pyarrow (with pyarrow.compute, which builds its function wrappers at import), click and rich; not pandas (pyarrow imports it on its first conversion of a Python value unless the process keeps it out, `dvlake/terminal/light.py`), PySpark, sqlglot or matplotlib (`tests/unit/test_cli_output.py` keeps it so). `files` draws its listing without rich's table layout (`dvlake/terminal/listing.py`), which cost ~10 ms per file.")
HEADING = "## CLI start-up: log-only commands in a fresh process (bench/cli_startup.py)"


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(args: list[str]) -> None:
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)


def _timed(args: list[str], repeat: int) -> float:
    _run(args)  # warm-up: bytecode caches, the OS's file cache
    return median_time(lambda: _run(args), repeat)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-md", action="store_true")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "t")
        build(root, 1000, 10, 2, 50)
        bare = _timed([py, "-c", "pass"], args.repeat)
        pandas = _timed([py, "-c", "import pandas"], args.repeat)
        pyspark = _timed([py, "-c", "import pyspark.sql"], args.repeat)
        rows = []
        for name, cmd in (("history", ["history", root]), ("detail", ["detail", root]), ("files", ["files", root]),
                          ("vacuum --dry-run", ["vacuum", root, "--dry-run"])):
            t = _timed([py, "-m", "dvlake.cli", *cmd], args.repeat)
            rows.append((name, t, t - bare))
    lines = [f"1,000-file synthetic log; median of {args.repeat} fresh processes after a warm-up run; {dt.date.today()}, "
             "2 cores shared with other work. dvlake's own time = the command's minus a bare `python -c pass` "
             f"({bare:.2f} s); for scale, importing `pandas` alone takes {pandas - bare:.2f} s and `pyspark.sql` "
             f"{pyspark - bare:.2f} s on top of the interpreter.",
             "", "| command | wall s | dvlake's own s |", "|---|---:|---:|"]
    lines += [f"| `dvlake {name}` | {t:.2f} | {own:.2f} |" for name, t, own in rows]
    lines += ["", NOTE]
    body = "\n".join(lines)
    print(body)
    if args.write_md:
        update_benchmarks_md(HEADING, body)


if __name__ == "__main__":
    main()
