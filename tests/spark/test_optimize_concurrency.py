"""OPTIMIZE racing a DELETE: the loser retries only when its inputs keep their (path, DV id), else raises;
never a resurrected row (delta-io/delta#3981). The race is forced between OPTIMIZE's rewrite and its commit."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import dvlake
import dvlake.commands.maintenance.optimize as opt
from dvlake import DeltaTable
from dvlake.errors import DeltaConcurrentModificationException
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _make(spark, path):
    df = spark.createDataFrame([(i, i % 2) for i in range(400)], "id long, p int")
    dvlake.write(df.repartition(2), path, properties=DV_PROPS, partitionBy=["p"])  # 2 files in each partition
    DeltaTable.forPath(spark, path).delete("id % 10 = 0")


def _ids(spark, path):
    return sorted(r.id for r in dvlake.read(spark, path).select("id").collect())


def _race(monkeypatch, concurrent):
    """Run ``concurrent()`` after OPTIMIZE wrote its files and before it commits."""
    original = opt._rewrite_bins

    def rewrite_then_race(*args, **kwargs):
        out = original(*args, **kwargs)
        concurrent()
        return out

    monkeypatch.setattr(opt, "_rewrite_bins", rewrite_then_race)


def test_optimize_retries_over_a_delete_of_other_files(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    _make(spark, path)
    _race(monkeypatch, lambda: DeltaTable.forPath(spark, path).delete("p = 1 AND id % 10 = 1"))
    DeltaTable.forPath(spark, path).optimize().where("p = 0").executeCompaction()
    snap = Snapshot.load(path)
    ops = [h["operation"] for h in snap.history()]
    assert ops[:2] == ["OPTIMIZE", "DELETE"]
    assert _ids(spark, path) == [i for i in range(400) if i % 10 not in (0, 1)]
    assert {a.partition_values["p"] for a in snap.add_files() if a.deletion_vector} == {"1"}


@pytest.mark.slow
def test_delete_in_another_process_wins_and_optimize_raises_without_resurrecting(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    _make(spark, path)
    # another process (nothing shared with this one but the files), Spark-free: tests/reliability's DELETE commits
    # what dvlake's DELETE commits (a remove and an add with the OR-ed DV per touched file) without a JVM start;
    # the real DELETE racing a paused OPTIMIZE is test_concurrency_pairs.py's DELETE/OPTIMIZE pairs
    child = textwrap.dedent(f"""
        from tests.reliability.engine import engine_delete
        engine_delete({path!r}, "id % 10 = 2")  # run once per rewritten bin: the second finds nothing to delete
    """)

    def delete_in_other_process():
        env = {**os.environ, "PYTHONPATH": REPO}
        done = subprocess.run([sys.executable, "-c", child], env=env, timeout=600, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-4000:]

    _race(monkeypatch, delete_in_other_process)
    version = Snapshot.load(path).version
    with pytest.raises(DeltaConcurrentModificationException):
        DeltaTable.forPath(spark, path).optimize().executeCompaction()
    snap = Snapshot.load(path)
    assert snap.version == version + 1 and snap.history()[0]["operation"] == "DELETE"
    assert _ids(spark, path) == [i for i in range(400) if i % 10 not in (0, 2)]  # the DELETE's rows stay deleted
    # the loser's rewritten files were never committed; a fresh OPTIMIZE compacts the new DVs
    DeltaTable.forPath(spark, path).optimize().executeCompaction()
    assert Snapshot.load(path).dv_count() == 0
    assert _ids(spark, path) == [i for i in range(400) if i % 10 not in (0, 2)]
