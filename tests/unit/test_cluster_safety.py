"""Code that must run on a cluster and over Spark Connect: no classic-only handles, a clear error
when executors lack dvlake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dvlake.errors import ExecutorEnvironmentError, UnsupportedEnvironmentError
from dvlake.spark.executors import executors_need_dvlake, is_missing_dvlake

PACKAGE = Path(__file__).resolve().parents[2] / "dvlake"
#: Handles that exist only on a classic (py4j) session: never on a user path.
CLASSIC_ONLY = re.compile(r"\._jdf\b|\._jvm\b|\._jsc\b|\bsparkContext\b|\.rdd\b|\bSparkContext\b")
#: ``local_session`` builds a classic local session by definition; its log level call is the one use.
ALLOWED = {("spark/session.py", "session.sparkContext.setLogLevel")}
#: Modules for classic sessions only, entered behind a check that the session is classic: the streaming source's
#: JVM engine (``stream_jvm.usable`` is False over Spark Connect, which gets the Python engine).
CLASSIC_MODULES = {"spark/stream_jvm.py"}


def test_no_classic_only_spark_handles_in_dvlake():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in CLASSIC_MODULES:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if CLASSIC_ONLY.search(code) and not any(rel == f and snippet in code for f, snippet in ALLOWED):
                found.append(f"dvlake/{rel}:{number}: {line.strip()}")
    assert not found, "classic-only Spark handles break Spark Connect:\n" + "\n".join(found)


def test_classic_only_modules_are_entered_only_on_classic_sessions():
    """The JVM stream engine is chosen only for a classic session: a Spark Connect session never reaches it."""
    from dvlake.spark import stream_jvm

    class ConnectSession:  # stands in for pyspark.sql.connect.session.SparkSession: only its module matters here
        pass

    ConnectSession.__module__ = "pyspark.sql.connect.session"
    assert stream_jvm.usable(ConnectSession()) is False  # type: ignore[arg-type]


WORKER_TRACEBACK = ("An exception was thrown from the Python worker. Please see the stack trace below.\n"
                    "Traceback (most recent call last):\n  File \"pyspark/serializers.py\", line 192, in _read_with_length\n"
                    "ModuleNotFoundError: No module named 'dvlake'")


def test_missing_dvlake_on_executors_becomes_a_clear_error():
    assert is_missing_dvlake(RuntimeError(WORKER_TRACEBACK))
    with pytest.raises(ExecutorEnvironmentError) as info:
        with executors_need_dvlake("DELETE"):
            raise RuntimeError(WORKER_TRACEBACK)
    message = str(info.value)
    assert "DELETE failed" in message and "cannot import dvlake" in message
    assert "spark.submit.pyFiles" in message and "addArtifacts" in message
    assert isinstance(info.value, UnsupportedEnvironmentError)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_other_failures_pass_through_unchanged():
    assert not is_missing_dvlake(RuntimeError("No module named 'pyroaring'"))
    with pytest.raises(KeyError):
        with executors_need_dvlake("DELETE"):
            raise KeyError("x")
