"""Start local Spark for a CLI command with Spark's own output in a log file, not on the terminal.

PySpark launches the JVM as a child process that inherits the driver's stdout and stderr, so the
JVM's start-up banner, its WARN lines and any later log output land wherever file descriptors 1
and 2 point at that moment. For the launch only, both point at a log file; afterwards they are
restored for Python, while the JVM keeps writing to the file for its whole life. The terminal
then shows dvlake's own progress and result only (and ``--json`` output stays parseable), and a
failure names the log file. With ``--debug`` nothing is redirected.
"""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

#: Settings the CLI's session always gets (a user's ``--conf`` may override them): no stage bars on the terminal.
QUIET = {"spark.ui.showConsoleProgress": "false"}


@contextmanager
def _output_to(path: str) -> Iterator[None]:
    """Point fds 1 and 2 at ``path`` for the duration (a child process started inside inherits them)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    target = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def new_log_file() -> str:
    """A fresh, empty file for one run's Spark output (the caller names it if the run fails)."""
    fd, path = tempfile.mkstemp(prefix="dvlake-spark-", suffix=".log")
    os.close(fd)
    return path


def start(app_name: str, conf: dict[str, str], *, log_path: str | None) -> SparkSession:
    """A local session with ``QUIET`` and ``conf`` (``conf`` wins) whose JVM writes its output to ``log_path``
    (None: to the terminal, for ``--debug``). A session already running in this process is reused as it is."""
    from dvlake.spark.session import local_session

    settings = {**QUIET, **conf}
    if log_path is None:
        return local_session(app_name, extra_conf=settings)
    with _output_to(log_path):
        return local_session(app_name, extra_conf=settings)


def discard(log_path: str | None) -> None:
    """Remove a log file nobody needs (the command succeeded); a file already gone is fine."""
    if log_path:
        try:
            os.unlink(log_path)
        except OSError:
            pass
