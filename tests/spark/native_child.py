"""A child process for native-scan tests that need a JVM of their own (a session the shared one cannot be).

    python -m tests.spark.native_child MODE TABLE [MODE TABLE ...]

The modes run in the order given, one after the other in this one JVM (each starts and stops its own sessions), so
that one child serves several tests. The tables are built by the parent (its shared session), as the modes say.

MODE ``contexts``: one JVM, several SparkContexts one after the other (local mode with the jar on ``spark.jars``,
as notebooks and dvlake's own sessions have it: the jar's classes outlive each context). The table: 2,000 ids in one
file, then two DELETEs (versions 1 and 2, each a different DV for the same data file). A fresh session reads version
1 natively and stops; another fresh session (its broadcasts numbered from 0 again) reads version 2 natively, then on
the pure-Python path. Prints ``@ ROWS <native> <python>`` for version 2. Run it first: it needs no earlier session.

MODE ``engine``: the table: 100 ids in one file, DVs on, no DV yet. A session whose ``spark.sql.extensions`` names
Comet's class (absent: Spark warns and goes on, and dvlake sees only the setting): DML (its row indexes) and reads of
files with a DV must refuse, on both paths, unless Comet's scan is switched off. Prints one line per case: ``@``, a
label, then the result or ``REFUSED <type> <message>``.
"""

from __future__ import annotations

import sys
from typing import Any

import dvlake
from dvlake import DeltaTable
from dvlake.spark import native
from dvlake.spark.session import local_session


def _ids(path: str, version: int, settings: tuple[str, ...]) -> list[list[int]]:
    """``path`` at ``version`` read by a session of its own (a new SparkContext in this JVM) once per native-scan
    setting in ``settings``, in that order; then the session is stopped."""
    spark = local_session(app_name="dvlake-child")
    try:
        out = []
        for setting in settings:
            spark.conf.set(native.SETTING, setting)
            out.append(sorted(r.id for r in dvlake.read(spark, path, version=version).collect()))
        return out
    finally:
        spark.stop()


def contexts(path: str) -> None:
    # each context numbers its broadcasts from 0: the same steps give the same broadcast ids in both native reads
    _ids(path, 1, ("true",))
    native_rows, python_rows = _ids(path, 2, ("true", "false"))
    print("@ ROWS", len(native_rows), len(python_rows), flush=True)


def _try(label: str, act: Any) -> None:
    try:
        print("@", label, act(), flush=True)
    except Exception as exc:  # noqa: BLE001 - the parent checks the type's name and the message
        print("@", label, "REFUSED", type(exc).__name__, str(exc).replace("\n", " "), flush=True)


def engine(path: str) -> None:
    spark = local_session(app_name="dvlake-child",
                          extra_conf={"spark.sql.extensions": "org.apache.comet.CometSparkSessionExtensions"})
    _try("PLAIN", lambda: dvlake.read(spark, path).count())  # no DV, no row index: nothing to refuse
    _try("DELETE", lambda: DeltaTable.forPath(spark, path).delete("id % 3 = 0"))  # DML marks rows by row index
    spark.conf.set("spark.comet.scan.enabled", "false")
    _try("DELETE_SCAN_OFF", lambda: DeltaTable.forPath(spark, path).delete("id % 3 = 0"))
    spark.conf.unset("spark.comet.scan.enabled")
    for setting in ("true", "false", "auto"):
        spark.conf.set(native.SETTING, setting)
        _try(f"READ_{setting}", lambda: dvlake.read(spark, path).count())
    spark.conf.set("spark.comet.scan.enabled", "false")
    spark.conf.set(native.SETTING, "true")
    _try("READ_SCAN_OFF", lambda: dvlake.read(spark, path).count())
    spark.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    for mode, table in zip(args[::2], args[1::2], strict=True):
        print("@ MODE", mode, flush=True)
        {"contexts": contexts, "engine": engine}[mode](table)
