"""``dvlake doctor``: what this install runs on, which read path a session will take, and why.

Asked without starting Spark (seconds): the versions a user reports in an issue, where the native scan's jar comes
from (``dvlake.native_jar``: packaged, cached, to be compiled on first use, or why none), and which stream engine
``readStream.format("delta")`` gets on this PySpark.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

from dvlake import native_jar
from dvlake._version import __version__
from dvlake.commands.inspection.health import read_path_for
from dvlake.spark.stream_support import missing_streaming_api


@dataclass(frozen=True)
class Finding:
    """One line of the report: what was looked at, what was found, and (when it matters) what to do."""

    item: str
    value: str
    note: str = ""


def java_version() -> str | None:
    """``java -version``'s version string (Spark needs 17 or 21), or None without a ``java`` on PATH."""
    java = shutil.which("java")
    if java is None:
        return None
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'version "([^"]+)"', done.stderr + done.stdout)
    return found.group(1) if found else (done.stderr or done.stdout).strip().splitlines()[0]


def diagnose(scan_setting: str | None = None) -> list[Finding]:
    """The report's lines, in the order a reader checks them."""
    found = [Finding("dvlake", __version__), Finding("python", f"{platform.python_version()} ({sys.executable})")]
    here = native_jar.installed_pyspark()
    if here is None:
        found.append(Finding("pyspark", "not installed", "pip install 'pyspark>=4.0,<5'"))
        return found
    version, _ = here
    supported = native_jar.minor_of(version) in native_jar.SUPPORTED_MINORS
    found.append(Finding("pyspark", version, "" if supported else
                         f"dvlake is built and tested on PySpark {', '.join(native_jar.SUPPORTED_MINORS)}"))
    java = java_version()
    found.append(Finding("java", java or "not found", "" if java else "Spark needs Java 17 or 21 on PATH"))
    javac = native_jar.javac()
    found.append(Finding("javac", javac or "not found", "" if javac else
                         "needed only to compile the native scan once, when no packaged jar fits"))
    choice = native_jar.find_jar(version, build=False)
    origin = {"packaged": "packaged with dvlake", "cached": "compiled earlier (per-user cache)"}.get(choice.origin)
    found.append(Finding("native scan jar", str(choice.path) if choice.path else "none yet",
                         origin or choice.why))
    found.append(Finding("jar cache", str(native_jar.cache_dir()), f"set {native_jar.CACHE_ENV} to move it"))
    model, why = read_path_for(scan_setting)
    found.append(Finding("read path", model.label, why))
    streams = ("JVM source on classic sessions with the native scan; "
               + ("the Python engine over Spark Connect" if not missing_streaming_api()
                  else "no Python engine (Spark Connect streams need PySpark 4.2+)"))
    found.append(Finding("readStream engine", streams))
    return found


def compile_now() -> Finding:
    """Compile (or find) the jar for the installed PySpark now, instead of at a session's first read."""
    here = native_jar.installed_pyspark()
    if here is None:
        return Finding("native scan jar", "not built", "pyspark is not installed")
    choice = native_jar.find_jar(here[0])
    return Finding("native scan jar", str(choice.path) if choice.path else "not built", choice.why)
