"""Where the native scan's jar comes from (``dvlake.native_jar``) and the Python↔JVM seam's contracts, without Spark.

The jar is compiled for the Spark a user runs, stamped with the digest of the sources it came from; a jar from other
sources, another Spark minor or another listing protocol is never loaded. The Java side and the Python side of the
seam name the same protocol number and the same error classes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dvlake import errors, native_jar

JAVA_DIR = native_jar.SOURCES_DIR / "src" / "io" / "dvlake" / "spark"
REPO = Path(__file__).resolve().parents[2]


def _java(name: str) -> str:
    return (JAVA_DIR / name).read_text()


def test_the_java_format_and_python_name_the_same_listing_protocol() -> None:
    found = re.search(r"public static final int PROTOCOL = (\d+);", _java("DvlakeParquetFileFormat.java"))
    assert found is not None, "DvlakeParquetFileFormat.PROTOCOL is gone: the seam test must follow it"
    assert int(found.group(1)) == native_jar.SCAN_PROTOCOL
    option = re.search(r'PROTOCOL_OPTION = "([^"]+)"', _java("DvlakeParquetFileFormat.java"))
    assert option is not None and option.group(1) == native_jar.PROTOCOL_OPTION
    listing = re.search(r'LISTING_OPTION = "([^"]+)"', _java("DvlakeParquetFileFormat.java"))
    assert listing is not None and listing.group(1) == native_jar.LISTING_OPTION
    magic = re.search(r'MAGIC = "([^"]+)"', _java("ScanListings.java"))
    assert magic is not None and magic.group(1) == scan_listing_magic()


def scan_listing_magic() -> str:
    """The listing file's header word as the Python writer spells it (Spark-free: read from the source text)."""
    found = re.search(r'^MAGIC = "([^"]+)"', (REPO / "dvlake" / "spark" / "scan_listing.py").read_text(), re.M)
    assert found is not None
    return found.group(1)


def test_every_error_class_the_java_side_names_exists_in_dvlake_errors() -> None:
    """The task-error marker carries a Python class name; a renamed class would turn a typed error into a raw one."""
    names = set()
    for source in JAVA_DIR.glob("*.java"):
        names |= set(re.findall(r"\[DVLAKE_TASK_ERROR (\w+)", source.read_text()))
    assert {"CorruptDeletionVectorError", "DeletionVectorIntegrityError", "DeletionVectorNotFoundError"} <= names
    for name in sorted(names):
        cls = getattr(errors, name, None)
        assert isinstance(cls, type) and issubclass(cls, errors.DvlakeError), f"dvlake.errors has no {name}"


def test_the_package_ships_the_java_sources_it_builds_from() -> None:
    sources = {p.relative_to(native_jar.SOURCES_DIR).as_posix() for p in native_jar.SOURCES_DIR.rglob("*") if p.is_file()}
    assert "src/io/dvlake/spark/DvlakeParquetFileFormat.java" in sources
    assert "resources/META-INF/services/org.apache.spark.sql.sources.DataSourceRegister" in sources
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"jvm/**/*"' in pyproject  # package data: a wheel carries them (checked for real in the wheel test)


def test_the_digest_follows_every_source_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "jvm"
    shutil.copytree(native_jar.SOURCES_DIR, copy)
    monkeypatch.setattr(native_jar, "SOURCES_DIR", copy)
    native_jar.sources_digest.cache_clear()
    try:
        before = native_jar.sources_digest()
        target = copy / "src" / "io" / "dvlake" / "spark" / "RowGroups.java"
        target.write_text(target.read_text() + "\n// one more line\n")
        native_jar.sources_digest.cache_clear()
        assert native_jar.sources_digest() != before
    finally:
        native_jar.sources_digest.cache_clear()


def _fake_jar(path: Path, **stamp: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
        if stamp:
            z.writestr(native_jar.STAMP_ENTRY, "".join(f"{k}={v}\n" for k, v in stamp.items()))
    return path


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An empty packaged folder and jar cache of the test's own."""
    packaged, cache = tmp_path / "packaged", tmp_path / "cache"
    packaged.mkdir()
    monkeypatch.setattr(native_jar, "PACKAGED_DIR", packaged)
    monkeypatch.setenv(native_jar.CACHE_ENV, str(cache))
    return packaged, cache


def test_a_packaged_jar_is_used_only_when_its_stamp_fits(places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    packaged, _ = places
    monkeypatch.setattr(native_jar, "javac", lambda: None)  # nothing may be built here
    good = {"sources": native_jar.sources_digest(), "spark": "4.1.4", "protocol": str(native_jar.SCAN_PROTOCOL)}
    jar = _fake_jar(packaged / "dvlake-scan-spark4.1.jar", **good)
    choice = native_jar.find_jar("4.1.2", build=False)
    assert (choice.path, choice.origin) == (jar, "packaged")
    for field, wrong, said in (("sources", "0" * 64, "other Java sources"), ("protocol", "0", "listing protocol 0"),
                               ("spark", "4.2.1", "compiled against Spark 4.2.1")):
        _fake_jar(jar, **{**good, field: wrong})
        choice = native_jar.find_jar("4.1.2", build=False)
        assert choice.path is None and said in choice.why and "javac" in choice.why
    _fake_jar(jar)  # a jar of an older dvlake: no stamp at all
    assert "no dvlake stamp" in native_jar.find_jar("4.1.2", build=False).why


def test_a_cached_jar_is_found_by_minor_and_source_digest(places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _, cache = places
    monkeypatch.setattr(native_jar, "javac", lambda: None)
    cached = native_jar.cached_jar("4.2.0")
    assert cached.parent == cache and native_jar.sources_digest()[:16] in cached.name and "spark4.2" in cached.name
    _fake_jar(cached, sources=native_jar.sources_digest(), spark="4.2.1", protocol=str(native_jar.SCAN_PROTOCOL))
    choice = native_jar.find_jar("4.2.1", build=False)
    assert (choice.path, choice.origin) == (cached, "cached")


def test_without_a_jdk_the_reason_says_how_to_get_the_fast_path(places: tuple[Path, Path],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_jar, "javac", lambda: None)
    choice = native_jar.find_jar("4.3.0")
    assert choice.path is None and "install a JDK" in choice.why
    assert "4.3" in choice.why


def test_a_spark_outside_the_supported_minors_is_said_plainly(places: tuple[Path, Path]) -> None:
    choice = native_jar.find_jar("3.5.2")
    assert choice.path is None and "3.5.2" in choice.why and "4.0" in choice.why


def test_a_minor_other_than_the_installed_pyspark_cannot_be_compiled_here(places: tuple[Path, Path],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native_jar, "javac", lambda: "/usr/bin/javac")
    monkeypatch.setattr(native_jar, "installed_pyspark", lambda: ("4.3.0", Path("/nonexistent")))
    choice = native_jar.find_jar("4.1.4")
    assert choice.path is None and "pyspark installed here (4.3.0)" in choice.why


@pytest.mark.skipif(native_jar.javac() is None or native_jar.installed_pyspark() is None,
                    reason="needs a JDK's javac and pyspark to compile against")
def test_first_use_compiles_a_stamped_jar_into_the_cache_once(places: tuple[Path, Path]) -> None:
    import importlib.metadata

    version = importlib.metadata.version("pyspark")
    first = native_jar.find_jar(version)
    assert first.origin == "built" and first.path is not None and first.path.is_file()
    stamp = native_jar.read_stamp(first.path)
    assert stamp == {"sources": native_jar.sources_digest(), "spark": version, "protocol": str(native_jar.SCAN_PROTOCOL)}
    with zipfile.ZipFile(first.path) as z:
        names = set(z.namelist())
    assert {"io/dvlake/spark/DvlakeParquetFileFormat.class", "io/dvlake/spark/RowGroups.class",
            "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"} <= names
    again = native_jar.find_jar(version)
    assert (again.path, again.origin) == (first.path, "cached")
    assert not [p for p in first.path.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_a_wheel_carries_the_java_sources_and_the_jar_builder(tmp_path: Path) -> None:
    """``pip install <checkout>`` builds a wheel: it must hold what a first use compiles from."""
    out = tmp_path / "wheel"
    checkout = tmp_path / "src"
    shutil.copytree(REPO, checkout, ignore=shutil.ignore_patterns(".venv", ".spark", ".git", "build", "*.egg-info",
                                                                  "__pycache__", ".pytest_cache", ".hypothesis"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(checkout)],
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("dvlake-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert "dvlake/native_jar.py" in names
    assert "dvlake/jvm/src/io/dvlake/spark/DvlakeParquetFileFormat.java" in names
    assert "dvlake/jvm/resources/META-INF/services/org.apache.spark.sql.sources.DataSourceRegister" in names
