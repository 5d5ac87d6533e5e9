"""Executor-side requirements of dvlake, and a clear error when executors cannot import it.

dvlake runs Python on executors (``mapInArrow`` that decodes and builds deletion vectors), so
every executor needs dvlake and its dependencies (README "Running on a cluster"). When one lacks
dvlake, Spark reports the task failure as a worker traceback ending in ``No module named
'dvlake'``; commands turn that into ``ExecutorEnvironmentError`` saying how to ship dvlake.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from dvlake.errors import ExecutorEnvironmentError

#: What to do, quoted by the error (and the README says the same).
HOW_TO_SHIP = ("ship dvlake to the executors: with a classic session, a zip or wheel of dvlake in spark.submit.pyFiles "
               "(spark-submit --py-files dvlake.zip, or addPyFile on a classic session); over Spark Connect, "
               "spark.addArtifacts('dvlake.zip', pyfile=True); or install dvlake into the executors' Python "
               "(spark.pyspark.python). Executors also need pyarrow, pyroaring, numpy, orjson and pandas.")


def is_missing_dvlake(error: BaseException) -> bool:
    """Whether a Spark job failed because a Python worker could not import dvlake."""
    text = str(error)
    return "No module named 'dvlake" in text or 'No module named "dvlake' in text


def missing_module_error(module: str, command: str | None = None) -> ExecutorEnvironmentError:
    """The one message for Spark's Python workers lacking a module the driver has (``command``: what failed, and
    then the table was not changed — a command's jobs run before its commit)."""
    failed = f"{command} failed, the table was not changed: " if command else ""
    return ExecutorEnvironmentError(
        f"{failed}Spark's Python workers cannot import {module} (No module named "
        f"{module!r}), though the driver can. The executors run another Python than the one dvlake is installed in: "
        f"set PYSPARK_PYTHON (or spark.pyspark.python) to that interpreter (the driver uses {sys.executable}), or "
        f"{HOW_TO_SHIP}")


@contextmanager
def executors_need_dvlake(command: str) -> Iterator[None]:
    """Run a command's Spark jobs; re-raise a missing-dvlake task failure as ``ExecutorEnvironmentError``."""
    try:
        yield
    except Exception as e:
        if not isinstance(e, ExecutorEnvironmentError) and is_missing_dvlake(e):
            raise missing_module_error("dvlake", command) from e
        raise
