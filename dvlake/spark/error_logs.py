"""PySpark's own error output, for errors raised inside dvlake's calls: no JSON records, no dvlake plans.

PySpark 4 logs every analysis error it converts from the JVM, as it converts it, through two
loggers of its own (``DataFrameQueryContextLogger``, ``SQLQueryContextLogger``): one line of JSON
on stderr with the message, the Python stack and, inside the exception text, the Java stack,
often 8 kB. dvlake asks Spark's analyzer questions whose failure is the answer (does this
condition resolve, is this expression deterministic) and turns Spark's errors into its own short
ones, so those records are noise that arrives before the error the caller gets. ``install``
adds a filter that drops the records of errors raised while dvlake's code is on the stack; the
exception itself still reaches the caller (typed by dvlake, or as Spark raised it). Errors of the
caller's own Spark code, and of statements ``dvlake.sql`` hands to Spark unchanged, are logged as
PySpark always does, except that a record whose text shows a plan dvlake built (a typo in the
caller's filter on a frame dvlake read through the pure-Python path, whose plan is dvlake's anti
join) keeps the error's message without that plan and without the Java stack.

``tidy`` shortens the message of a Spark error about a plan dvlake built (it names a
``__dvlake_`` column): Spark appends that whole plan, which is dvlake's anti join, not the user's
query. Both keep PySpark's full output when debugging is on (``dvlake.errors.debug_enabled`` or
the session setting ``spark.dvlake.debug=true``).
"""

from __future__ import annotations

import logging
import sys
import threading
from types import FrameType
from typing import Any

from dvlake.config import DEBUG_CONF
from dvlake.errors import INTERNAL_NAME_PREFIX, debug_enabled, user_text

#: PySpark's loggers for converted errors (``pyspark.errors.exceptions.base.PySparkException._log_exception``).
PYSPARK_ERROR_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")

#: dvlake modules that only route a call to Spark unchanged (or convert its errors): a Spark error under them
#: alone is the caller's own, and PySpark logs it as usual.
_ROUTING_MODULES = frozenset({
    __name__, "dvlake.faces", "dvlake.sql", "dvlake.sqlfront.router", "dvlake.sqlfront.passthrough",
    "dvlake.spark.native_sql", "dvlake.spark.task_errors",
})

_local = threading.local()
_installed: list[bool] = []


def _inside_dvlake() -> bool:
    """Whether a dvlake module other than the routing ones is on the current thread's stack."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if (module == "dvlake" or module.startswith("dvlake.")) and module not in _ROUTING_MODULES:
            return True
        frame = frame.f_back
    return False


def _session_debug() -> bool:
    """``spark.dvlake.debug`` of the active session (False when there is none or it cannot be asked)."""
    if getattr(_local, "asking", False):  # asking the session failed and is being logged: do not ask again
        return False
    _local.asking = True
    try:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        return session is not None and str(session.conf.get(DEBUG_CONF, "false")).strip().lower() == "true"
    except Exception:  # noqa: BLE001 - a logging filter must never raise
        return False
    finally:
        _local.asking = False


def show_full_errors() -> bool:
    """Whether PySpark's full error output is wanted (``--debug``, DVLAKE_DEBUG=1 or ``spark.dvlake.debug``)."""
    return debug_enabled() or _session_debug()


def _shorten(record: logging.LogRecord) -> None:
    """Make a record about a plan dvlake built (its text names a ``__dvlake_`` column) say only the error.

    The error is the caller's (a typo in their filter on a frame dvlake read), so the record stays; but its
    message carries dvlake's anti join plan, and its exception, the Py4J error being converted, the Java
    stack. The message keeps the error without the plan (``user_text``); the exception is dropped.
    """
    message = record.getMessage()
    exception = record.exc_info[1] if record.exc_info else None
    if INTERNAL_NAME_PREFIX not in message and INTERNAL_NAME_PREFIX not in str(exception or ""):
        return
    record.msg, record.args = user_text(message), ()
    record.exc_info, record.exc_text = None, None


class _DropInsideDvlake(logging.Filter):
    """Drops a converted-error record when the error was raised inside dvlake's own call, and shortens one about
    a plan dvlake built when the error is the caller's."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            if show_full_errors():
                return True
            if _inside_dvlake():
                return False
            _shorten(record)
            return True
        except Exception:  # noqa: BLE001 - never lose a record to a bug here
            return True


def install() -> None:
    """Add the filter to PySpark's error loggers (once per process). Creating them through ``PySparkLogger``
    keeps them the class PySpark expects, whoever asks for them first."""
    if _installed:
        return
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a PySpark without structured error logging: nothing to silence
        _installed.append(True)
        return
    for name in PYSPARK_ERROR_LOGGERS:
        PySparkLogger.getLogger(name).addFilter(_DropInsideDvlake())
    _installed.append(True)


def tidy(exc: Any) -> Any:
    """Shorten, in place, the message of a converted Spark error that shows a plan dvlake built; returns ``exc``."""
    for attr in ("_desc", "_message"):  # classic CapturedException, Spark Connect's exceptions
        value = getattr(exc, attr, None)
        if isinstance(value, str) and INTERNAL_NAME_PREFIX in value and not show_full_errors():
            try:
                setattr(exc, attr, user_text(value))
            except AttributeError:
                pass
    return exc
