"""The PySpark hooks are checked against the installed PySpark, can be taken back out, and guard re-entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession, readwriter

import dvlake
from dvlake import faces
from dvlake.compat import pyspark_hooks as hooks
from dvlake.compat.pyspark_hooks import PySparkIncompatibleError
from tests.helpers import table_rows


class _Reader:
    """A stand-in for a PySpark class whose ``load`` changed its parameters in some future release."""

    def load(self, path=None, format=None, schema=None, *, options=None):  # noqa: A002
        return ("original", path)


def _wrapper_forwarding_todays_parameters(self, path=None, format=None, schema=None, **options):  # noqa: A002
    return ("wrapped", path)


def test_a_wrapper_that_no_longer_matches_is_refused_and_nothing_is_replaced():
    before = _Reader.__dict__["load"]
    with pytest.raises(PySparkIncompatibleError) as info:
        hooks.patch(_Reader, "load", _wrapper_forwarding_todays_parameters)
    message = str(info.value)
    assert "_Reader.load" in message
    assert "(path, format, schema, **kwargs)" in message and "(path, format, schema, options)" in message
    assert info.value.error_class == "DVLAKE_PYSPARK_INCOMPATIBLE"
    assert _Reader.__dict__["load"] is before
    assert _Reader().load("p") == ("original", "p")


def test_pass_through_wrappers_are_not_checked_and_uninstall_restores_what_the_class_had():
    class Base:
        def name(self):
            return "base"

    class Child(Base):
        def own(self, x):
            return ("own", x)

    saved = list(hooks._patches)
    hooks._patches.clear()
    try:
        hooks.patch(Child, "name", lambda self, *a, **k: "wrapped")  # inherited method, pass-through wrapper
        hooks.patch(Child, "own", lambda self, x: ("wrapped", x))
        assert Child().name() == "wrapped" and Child().own(1) == ("wrapped", 1)
        assert hooks.original(Child, "own")(Child(), 2) == ("own", 2)
        assert hooks.uninstall() == 2
        assert "name" not in Child.__dict__  # the inherited method shows through again
        assert Child().name() == "base" and Child().own(3) == ("own", 3)
    finally:
        hooks._patches[:0] = saved


def test_install_is_all_or_nothing(monkeypatch):
    class Target:
        def a(self, x):
            return x

    def failing_install() -> None:
        hooks.patch(Target, "a", lambda self, x: -x)
        raise PySparkIncompatibleError("simulated: the second method changed")

    saved = list(hooks._patches)
    hooks._patches.clear()
    monkeypatch.setattr(faces, "_install_all", failing_install)
    try:
        with pytest.raises(PySparkIncompatibleError, match="simulated"):
            faces.install()
        assert Target().a(5) == 5
        assert not hooks.installed()
    finally:
        hooks._patches[:0] = saved


def test_the_re_entry_guard_nests():
    assert not hooks.is_inside_dvlake()
    with hooks.inside_dvlake():
        assert hooks.is_inside_dvlake()
        with hooks.inside_dvlake():
            assert hooks.is_inside_dvlake()
        assert hooks.is_inside_dvlake()
    assert not hooks.is_inside_dvlake()


def test_every_hook_matches_the_installed_pyspark_and_uninstall_gives_plain_pyspark_back(
        spark: SparkSession, tmp_path: Path) -> None:
    p = str(tmp_path / "t")
    dvlake.write(spark.range(4), p)
    was_enabled = faces.enabled(spark)
    faces.install()  # every wrapper's parameters checked against this PySpark (classic and Connect classes)
    dvlake.configure_spark(spark)
    try:
        assert sorted(r.id for r in spark.read.format("delta").load(p).collect()) == [0, 1, 2, 3]
        restored = faces.uninstall()
        assert restored > 0 and not hooks.installed()
        assert not hasattr(readwriter.DataFrameReader.load, "__dvlake_original__")
        with pytest.raises(Exception, match="(?i)delta"):  # plain PySpark has no delta source
            spark.read.format("delta").load(p).collect()
    finally:
        dvlake.configure_spark(spark)  # reinstalls the hooks for the rest of the session's tests
        if not was_enabled:
            faces.disable(spark)
    assert hooks.installed()


def test_call_sites_are_off_while_commands_run_and_pyspark_s_setting_comes_back(spark, tmp_path):
    """Commands build their Columns without PySpark's per-call origin capture (five JVM round trips per Column
    call); overlapping commands on two threads put PySpark's own value back only when the last one ends."""
    import threading

    import pyspark.errors.utils as origin
    from pyspark.sql import functions as F

    before = origin.is_debugging_enabled()
    assert before is True  # PySpark's default: the capture is on
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[object] = []

    def first() -> None:
        with hooks.without_call_sites():
            first_in.set()
            second_done.wait(30)
            seen.append(origin._enable_debugging_cache)  # the other command ended: still off for this one

    t = threading.Thread(target=first)
    t.start()
    first_in.wait(30)
    with hooks.without_call_sites():
        seen.append(origin._enable_debugging_cache)
    second_done.set()
    t.join(30)
    assert seen == [False, False]
    assert origin.is_debugging_enabled() is before

    # a real command runs with the capture off: count the JVM origin updates PySpark makes while it runs
    path = str(tmp_path / "t")
    dvlake.write(spark.range(10), path, properties={"delta.enableDeletionVectors": "true"})
    calls: list[str] = []
    real = origin._capture_call_site

    def counting(depth: int) -> str:
        calls.append("x")
        return real(depth)

    origin._capture_call_site = counting
    try:
        F.col("id") + 1  # outside a command: captured
        captured_outside = len(calls)
        dvlake.DeltaTable.forPath(spark, path).update("id % 3 = 0", {"id": "id + 100"})
    finally:
        origin._capture_call_site = real
    assert captured_outside > 0 and len(calls) == captured_outside
    assert table_rows(spark, path) == [(1,), (2,), (4,), (5,), (7,), (8,), (100,), (103,), (106,), (109,)]
    assert origin.is_debugging_enabled() is before
