"""Where the native scan's jar comes from, for the Spark a user runs: the one place that decides it.

The Java sources of dvlake's JVM module ship inside the package (``dvlake/jvm/``), so every install — editable,
``pip install <path>``, a wheel — can give the fast path to whatever PySpark 4 minor it meets, with no build step by
hand. For Spark ``M.N`` a jar is looked for, in this order:

1. **packaged**: ``dvlake/jars/dvlake-scan-sparkM.N.jar`` (``make jar`` puts it there; a wheel built after it carries
   it), used when its stamp says it was built from exactly these sources and speaks this listing protocol;
2. **cached**: ``<cache>/dvlake-scan-sparkM.N-<sources digest>.jar`` in the per-user cache (``DVLAKE_JAR_CACHE``, else
   ``$XDG_CACHE_HOME/dvlake/jars``, else ``~/.cache/dvlake/jars``);
3. **built**: compiled into that cache on first use when a JDK's ``javac`` is here and the installed pyspark is of that
   minor (its own jars are the class path): a few seconds, once, said in one log line.

A jar's stamp (``META-INF/dvlake-scan.properties``) names the digest of the sources it was compiled from, the Spark
version it was compiled against and the listing protocol: a jar from older sources is never used, whatever its name.
With no jar and no ``javac``, reads take the pure-Python path and the reason says how to get the fast one.

Spark-free on purpose: ``dvlake health`` and ``dvlake doctor`` ask it without starting Spark.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dvlake.errors import UnsupportedEnvironmentError

log = logging.getLogger(__name__)

#: The scan listing's protocol; the Java format's ``PROTOCOL`` is the same number (a test checks). 2: a large read's
#: listing travels as a reference to a file (``LISTING_OPTION``) instead of inline text in the plan. 3: each line
#: carries the file's partition values, so a partitioned read is one relation (``PARTITIONS_OPTION``).
SCAN_PROTOCOL = 3
#: The read option that carries it to the Java format, which refuses a listing of another protocol.
PROTOCOL_OPTION = "dvlake.scan.protocol"
#: The read option naming a listing file: ``<quoted location> \t <sha256 of its bytes> \t <entries>``.
LISTING_OPTION = "dvlake.scan.listing"
#: The read option naming the read's partition columns (protocol 3), filled from the listing by the Java format.
PARTITIONS_OPTION = "dvlake.scan.partitionColumns"

PACKAGE_DIR = Path(__file__).resolve().parent
SOURCES_DIR = PACKAGE_DIR / "jvm"
PACKAGED_DIR = PACKAGE_DIR / "jars"
STAMP_ENTRY = "META-INF/dvlake-scan.properties"
CACHE_ENV = "DVLAKE_JAR_CACHE"

#: The minors the Java module is compiled and tested against (CI runs the native scan's tests on each).
SUPPORTED_MINORS = ("4.0", "4.1", "4.2", "4.3")


@dataclass(frozen=True)
class JarChoice:
    """The jar a session would load for one Spark version, where it came from, and why (or why there is none)."""

    path: Path | None
    origin: str   # "packaged" | "cached" | "built" | "first use" (none yet, compiled when a session asks) | "" (none)
    why: str


def minor_of(spark_version: str) -> str:
    """``4.1.4`` → ``4.1``."""
    return ".".join(spark_version.split(".")[:2])


def packaged_jar(spark_version: str) -> Path:
    """Where ``make jar`` (and a wheel) keeps the jar for ``spark_version``'s minor."""
    return PACKAGED_DIR / f"dvlake-scan-spark{minor_of(spark_version)}.jar"


def cache_dir() -> Path:
    """The per-user folder of jars compiled on first use."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dvlake" / "jars"


def _source_files() -> list[Path]:
    return sorted(p for p in SOURCES_DIR.rglob("*") if p.is_file() and p.suffix != ".md")


@cache
def sources_digest() -> str:
    """A digest of the shipped Java sources and resources (paths and bytes): names the jar built from them."""
    digest = hashlib.sha256()
    for path in _source_files():
        digest.update(path.relative_to(SOURCES_DIR).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cached_jar(spark_version: str) -> Path:
    """Where a jar compiled on first use for ``spark_version``'s minor and these sources lives."""
    return cache_dir() / f"dvlake-scan-spark{minor_of(spark_version)}-{sources_digest()[:16]}.jar"


def read_stamp(jar: Path) -> dict[str, str] | None:
    """The jar's stamp (``key=value`` lines), or None when it has none or is not a readable jar."""
    try:
        with zipfile.ZipFile(jar) as z:
            text = z.read(STAMP_ENTRY).decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _stale(jar: Path, spark_version: str) -> str | None:
    """Why ``jar`` must not be used for ``spark_version`` (None when it fits)."""
    stamp = read_stamp(jar)
    if not stamp:
        return f"{jar} has no dvlake stamp (built by an older dvlake)"
    if stamp.get("protocol") != str(SCAN_PROTOCOL):
        return f"{jar} speaks listing protocol {stamp.get('protocol')}, this dvlake {SCAN_PROTOCOL}"
    if minor_of(stamp.get("spark", "")) != minor_of(spark_version):
        return f"{jar} was compiled against Spark {stamp.get('spark')}, not {minor_of(spark_version)}"
    if SOURCES_DIR.is_dir() and stamp.get("sources") != sources_digest():
        return f"{jar} was built from other Java sources than this dvlake's"
    return None


def javac() -> str | None:
    """A JDK's ``javac``: on PATH, else under ``JAVA_HOME``."""
    found = shutil.which("javac")
    if found:
        return found
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "javac" if home else None
    return str(candidate) if candidate is not None and candidate.is_file() else None


def installed_pyspark() -> tuple[str, Path] | None:
    """The installed pyspark's version and its jars folder (without importing pyspark), or None."""
    try:
        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):  # a broken or blocked pyspark is none
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        version = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        return None
    return version, Path(next(iter(spec.submodule_search_locations))) / "jars"


def find_jar(spark_version: str, *, build: bool = True) -> JarChoice:
    """The jar for ``spark_version``: packaged, cached, or (``build``) compiled now into the cache."""
    packaged = packaged_jar(spark_version)
    skipped = ""
    if packaged.is_file():
        stale = _stale(packaged, spark_version)
        if stale is None:
            return JarChoice(packaged, "packaged", f"the jar packaged for Spark {minor_of(spark_version)}")
        skipped = f"; skipped {stale}"
    cached = cached_jar(spark_version)
    if cached.is_file() and _stale(cached, spark_version) is None:
        return JarChoice(cached, "cached", f"compiled earlier into {cache_dir()}{skipped}")
    missing = _cannot_build(spark_version)
    if missing is not None:
        return JarChoice(None, "", missing + skipped)
    if not build:
        return JarChoice(None, "first use", f"not built yet: it will be compiled into {cache_dir()} on first use{skipped}")
    try:
        started = time.monotonic()
        built = build_jar(spark_version, cached)
    except (OSError, subprocess.SubprocessError, UnsupportedEnvironmentError) as exc:
        return JarChoice(None, "", f"compiling it failed: {exc}{skipped}")
    log.warning("dvlake: compiled the native scan for Spark %s into %s (once, %.1f s)", minor_of(spark_version), built,
                time.monotonic() - started)
    return JarChoice(built, "built", f"compiled now into {cache_dir()}{skipped}")


def _cannot_build(spark_version: str) -> str | None:
    """Why no jar can be compiled here for ``spark_version`` (None when one can)."""
    if not SOURCES_DIR.is_dir():
        return f"no jar for Spark {minor_of(spark_version)} and this install has no Java sources to build one"
    if minor_of(spark_version) not in SUPPORTED_MINORS:
        return (f"the native scan is built for Spark {', '.join(SUPPORTED_MINORS)} only, not {spark_version}")
    if javac() is None:
        return (f"no jar for Spark {minor_of(spark_version)} and no JDK to compile one (javac is not on PATH or under "
                "JAVA_HOME): install a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless) and the next session "
                "compiles it once")
    here = installed_pyspark()
    if here is None or minor_of(here[0]) != minor_of(spark_version) or not here[1].is_dir():
        local = here[0] if here else "none"
        return (f"no jar for Spark {minor_of(spark_version)}, and the pyspark installed here ({local}) is not of that "
                "minor to compile one against: install pyspark of the server's minor, or start the server with the jar")
    return None


def build_jar(spark_version: str, dest: Path) -> Path:
    """Compile the shipped sources against the installed pyspark's jars (``javac --release 17``) into ``dest``.

    The jar is a zip written by Python (no ``jar`` tool needed) and moved into place in one rename, so a
    concurrent builder or reader never sees half a jar; two builders racing both produce the same bytes' meaning.
    """
    here = installed_pyspark()
    compiler = javac()
    if here is None or compiler is None:
        raise UnsupportedEnvironmentError("building the native scan needs pyspark and a JDK's javac")
    version, spark_jars = here
    sources = [str(p) for p in _source_files() if p.suffix == ".java"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dvlake-jar-") as tmp:
        classes = Path(tmp) / "classes"
        classes.mkdir()
        done = subprocess.run([compiler, "--release", "17", "-nowarn", "-encoding", "UTF-8",
                               "-cp", str(spark_jars / "*"), "-d", str(classes), *sources],
                              capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise UnsupportedEnvironmentError(f"javac failed against Spark {version}: {done.stderr.strip()[-2000:]}")
        staged = Path(tmp) / dest.name
        _write_jar(staged, classes, version)
        partial = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        shutil.copyfile(staged, partial)
        os.replace(partial, dest)
    return dest


def _write_jar(jar: Path, classes: Path, spark_version: str) -> None:
    stamp = f"sources={sources_digest()}\nspark={spark_version}\nprotocol={SCAN_PROTOCOL}\n"
    with zipfile.ZipFile(jar, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: dvlake\r\n\r\n")
        z.writestr(STAMP_ENTRY, stamp)
        for root in (classes, SOURCES_DIR / "resources"):
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                z.write(path, path.relative_to(root).as_posix())


def main(argv: list[str] | None = None) -> int:
    """``python -m dvlake.native_jar [--into DIR]``: build the jar for the installed pyspark (``make jar`` runs it)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--into", type=Path, default=PACKAGED_DIR, help="folder for the jar (default: the package's)")
    args = parser.parse_args(argv)
    here = installed_pyspark()
    if here is None:
        parser.error("pyspark is not installed")
    version = here[0]
    why = _cannot_build(version)
    if why is not None:
        print(f"not built: {why}")
        return 0
    dest = args.into / packaged_jar(version).name
    if dest.is_file() and _stale(dest, version) is None:
        print(f"up to date: {dest}")
        return 0
    print(f"built {build_jar(version, dest)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
