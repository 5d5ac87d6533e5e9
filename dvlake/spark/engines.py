"""Engines that replace Spark's Parquet scans (Comet, Gluten, RAPIDS, Blaze/Auron), found in a session's settings.

Both of dvlake's read paths rely on Spark's own Parquet reader: the native scan is a ``ParquetFileFormat`` subclass
that drops deleted rows inside it, and the pure-Python path joins on ``_metadata.row_index`` as Spark's reader
numbers rows. An accelerator that swaps Spark's scan for its own reads the same files but knows nothing of deletion
vectors (nor of our reader): its rows would include deleted ones, silently, and a row index it numbered differently
would make DML mark the wrong rows. So reading files with a DV, or the row indexes DML marks, refuses such a session
with a typed error, unless the engine's own switch turns it, or its scans, off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dvlake.errors import NativeEngineScanError

#: Where Spark names the classes that plug an engine in.
PLUGIN_SETTINGS = ("spark.plugins", "spark.sql.extensions")


@dataclass(frozen=True)
class Engine:
    """One engine: the words its plugin or extension class names contain, and the settings that switch its scans off
    (any one set to ``false``)."""

    name: str
    words: tuple[str, ...]
    off_switches: tuple[str, ...]


ENGINES = (
    Engine("Apache DataFusion Comet", ("comet",), ("spark.comet.enabled", "spark.comet.scan.enabled")),
    Engine("Apache Gluten", ("gluten", "glutenproject"), ("spark.gluten.enabled",)),
    Engine("NVIDIA RAPIDS Accelerator", ("com.nvidia.spark", "rapids"),
           ("spark.rapids.sql.enabled", "spark.rapids.sql.format.parquet.read.enabled")),
    Engine("Blaze/Auron", ("blaze", "auron"), ()),
)


def _setting(spark: Any, key: str) -> str:
    try:
        return str(spark.conf.get(key, "") or "")
    except Exception:  # noqa: BLE001 - a setting the session cannot show is a setting it does not have
        return ""


def scan_replacing_engines(spark: Any) -> list[tuple[Engine, str, str]]:
    """(engine, setting, value) for each engine the session's plugins or extensions load and do not switch off."""
    found: list[tuple[Engine, str, str]] = []
    for setting in PLUGIN_SETTINGS:
        value = _setting(spark, setting)
        classes = [c.strip() for c in value.split(",") if c.strip()]
        for engine in ENGINES:
            if not any(word in c.lower() for c in classes for word in engine.words):
                continue
            if any(_setting(spark, off).strip().lower() == "false" for off in engine.off_switches):
                continue
            if all(e is not engine for e, _, _ in found):
                found.append((engine, setting, value))
    return found


def refuse_scan_replacing_engines(spark: Any, why: str) -> None:
    """Raise :class:`NativeEngineScanError` when the session has such an engine; ``why``: what its scan would get
    wrong (the message's words)."""
    found = scan_replacing_engines(spark)
    if not found:
        return
    engine, setting, value = found[0]
    off = (f"switch its scans off for this session ({' or '.join(f'{k}=false' for k in engine.off_switches)})"
           if engine.off_switches else "start the session without it")
    raise NativeEngineScanError(
        f"{engine.name} is loaded ({setting}={value}) and may replace Spark's Parquet scan with its own, which does not "
        f"apply deletion vectors: {why}. dvlake "
        f"refuses rather than answer wrongly: {off}, or purge the table's DVs (REORG TABLE ... APPLY (PURGE)) from a "
        "session without it")
