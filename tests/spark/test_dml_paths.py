"""Where DML builds its DVs and which target files MERGE reads (issue 27), against plain-Spark oracles.

- The DVs of a small change are built on the driver, of a large one on executors (``spark.dvlake.dml.driverMarkRows``):
  both paths give the same table, metrics and checks (MERGE's multiple-match error included).
- MERGE reads only the target files its ON condition's target-only conjuncts (or a NOT MATCHED BY SOURCE clause's
  condition) cannot rule out: a file moved away while MERGE runs is never opened when it is proven irrelevant.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid

import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.config import DML_DRIVER_MARK_ROWS
from dvlake.errors import MultipleSourceRowMatchingTargetRowError
from dvlake.log.snapshot import Snapshot
from tests.helpers import DV_PROPS

COLS = ["id", "v", "p"]
VOLATILE = ("executionTimeMs", "scanTimeMs", "rewriteTimeMs", "materializeSourceTimeMs", "numTargetBytesAdded",
            "numAddedBytes")


def _make(spark, path, n=120, files=3, partition_by=None):
    data = spark.createDataFrame([(i, i * 10, i % 3) for i in range(n)], "id long, v long, p int")
    dvlake.write(data.repartition(files), path, properties=DV_PROPS, partitionBy=partition_by)


def _rows(df):
    return sorted(tuple(r[c] for c in COLS) for r in df.collect())


def _metrics(path):
    log = os.path.join(path, "_delta_log")
    last = sorted(n for n in os.listdir(log) if n.endswith(".json"))[-1]
    with open(os.path.join(log, last)) as f:
        info = next(a["commitInfo"] for a in map(json.loads, f) if "commitInfo" in a)
    return {k: v for k, v in info["operationMetrics"].items() if k not in VOLATILE}


def _source(spark):
    # 80..139: 80..119 match (v NULL on some), 120..139 are new
    return spark.createDataFrame([(i, None if i % 9 == 0 else -i, i % 3) for i in range(80, 140)], "id long, v long, p int")


COMMANDS = {
    "delete": lambda spark, dt: dt.delete("id % 4 = 1"),
    "update": lambda spark, dt: dt.update("id % 4 = 1", {"v": "v + 1"}),
    "merge": lambda spark, dt: (dt.alias("t").merge(_source(spark).alias("s"), "t.id = s.id")
                                .whenMatchedDelete("s.v IS NULL").whenMatchedUpdateAll().whenNotMatchedInsertAll()
                                .execute()),
    "merge by source": lambda spark, dt: (dt.alias("t").merge(_source(spark).alias("s"), "t.id = s.id")
                                          .whenMatchedUpdate(set={"v": "s.v"})
                                          .whenNotMatchedBySourceDelete("t.id % 5 = 0")
                                          .whenNotMatchedBySourceUpdate("t.id < 20", {"v": "t.v * 100"}).execute()),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_driver_and_executor_dv_building_agree(spark, tmp_path, command):
    results = {}
    base = str(tmp_path / "base")
    _make(spark, base)  # written once, each path runs on a byte copy
    # 40: below the planned rows but at or above some commands' matched rows: counted first, then either path
    for where, limit in (("driver", "1000000"), ("executors", "0"), ("counted", "40")):
        path = str(tmp_path / where)
        shutil.copytree(base, path)
        spark.conf.set(DML_DRIVER_MARK_ROWS, limit)
        try:
            COMMANDS[command](spark, DeltaTable.forPath(spark, path))
        finally:
            spark.conf.unset(DML_DRIVER_MARK_ROWS)
        with_dv = any(a.deletion_vector is not None for a in Snapshot.load(path).add_files())
        results[where] = (_rows(dvlake.read(spark, path)), _metrics(path), with_dv)
    assert results["driver"] == results["executors"] == results["counted"]
    assert results["driver"][2], "the command should have written deletion vectors"


def test_multiple_matches_fail_on_the_executor_path_too(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, files=1)
    version = Snapshot.load(path).version
    src = spark.createDataFrame([(5, 1, 0), (5, 2, 0), (7, 3, 0)], "id long, v long, p int")
    spark.conf.set(DML_DRIVER_MARK_ROWS, "0")
    try:
        with pytest.raises(MultipleSourceRowMatchingTargetRowError):
            (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id")
             .whenMatchedUpdate("s.v > 100", {"v": "s.v"}).execute())  # no clause takes the rows: still ambiguous
    finally:
        spark.conf.unset(DML_DRIVER_MARK_ROWS)
    assert Snapshot.load(path).version == version


class _Unreadable:
    """Partition ``p=2``'s data files replaced by bytes that are not Parquet while the block runs (they still exist,
    so planning passes; only opening them fails)."""

    def __init__(self, path):
        folder = os.path.join(path, "p=2")
        self.files = [os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".parquet")]
        self.saved = {}

    def __enter__(self):
        for f in self.files:
            with open(f, "rb") as fh:
                self.saved[f] = fh.read()
            with open(f, "wb") as fh:
                fh.write(b"not parquet" * (len(self.saved[f]) // 11 + 1))
        return self

    def __exit__(self, *exc):
        for f, data in self.saved.items():
            with open(f, "wb") as fh:
                fh.write(data)


def test_merge_never_opens_a_target_file_its_on_condition_rules_out(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partition_by=["p"])
    pre = dvlake.read(spark, path)
    pre = spark.createDataFrame(pre.collect(), pre.schema)
    src = spark.createDataFrame([(i, -i, 1) for i in range(0, 130, 2)], "id long, v long, p int")
    with _Unreadable(path):
        (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id AND t.p = 1")
         .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedInsertAll()
         .whenNotMatchedBySourceDelete("t.p = 0 AND t.id > 100").execute())
    got = _rows(dvlake.read(spark, path))
    on = F.expr("t.id = s.id AND t.p = 1")
    matched = pre.alias("t").join(src.alias("s"), on, "left_semi")
    updated = pre.alias("t").join(src.alias("s"), on).select("t.id", "s.v", "t.p")
    kept = pre.join(matched, "id", "left_anti").filter("NOT (p = 0 AND id > 100)")
    inserted = src.alias("s").join(pre.alias("t"), on, "left_anti")
    assert got == _rows(kept.unionByName(updated).unionByName(inserted))


def test_a_not_matched_by_source_clause_without_condition_reads_every_file(spark, tmp_path):
    path = str(tmp_path / "t")
    _make(spark, path, partition_by=["p"])
    src = spark.createDataFrame([(1, -1, 1)], "id long, v long, p int")
    with _Unreadable(path), pytest.raises(Exception, match=r"(?i)parquet"):
        (DeltaTable.forPath(spark, path).alias("t").merge(src.alias("s"), "t.id = s.id AND t.p = 1")
         .whenMatchedUpdate(set={"v": "s.v"}).whenNotMatchedBySourceDelete().execute())


def _jobs(spark, run):
    """The Spark jobs ``run()`` started (a job group of its own on this thread)."""
    sc = spark.sparkContext
    group = f"dml-jobs-{uuid.uuid4().hex}"  # never id(run): a collected lambda's id is reused, merging two groups
    sc.setJobGroup(group, group)
    try:
        run()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return len(sc.statusTracker().getJobIdsForGroup(group))


def test_a_small_update_is_one_job_and_a_small_upsert_five(spark, tmp_path):
    # the marks ride on a job the command runs anyway (dv_pairs.py): UPDATE's write; MERGE's matches
    path = str(tmp_path / "t")
    _make(spark, path)
    assert _jobs(spark, lambda: COMMANDS["update"](spark, DeltaTable.forPath(spark, path))) == 1
    # source materialized, its broadcast, the matches materialized (marks gathered), matched ids' broadcast, write
    assert _jobs(spark, lambda: COMMANDS["merge"](spark, DeltaTable.forPath(spark, path))) == 5


def _one_file_matches(spark, path):
    """Three files of 40 rows (ids 0..39 in the first); no file can be skipped for ``_SKEWED``."""
    for part in range(3):
        rows = [(i, i * 10, i % 3) for i in range(part * 40, part * 40 + 40)]
        dvlake.write(spark.createDataFrame(rows, "id long, v long, p int").coalesce(1), path,
                     mode="append" if part else "error", properties=None if part else DV_PROPS)


_SKEWED = "CASE WHEN id < 40 THEN id % 2 = 0 ELSE false END"  # 20 rows, all in the first file


@pytest.mark.parametrize("command", ["update", "merge"])
def test_a_task_holding_more_than_its_share_of_marks_falls_back(spark, tmp_path, command):
    # driverMarkRows 30 over 3 files: each task may gather 10 pairs, the first file's task has 20; the 20 still fit
    # the driver, so the fallback reads them with a job of its own. Same table as without any bound.
    def run(dt):
        if command == "update":
            dt.update(_SKEWED, {"v": "v + 1"})
        else:
            src = spark.createDataFrame([(i, -i, 0) for i in range(0, 40, 2)] + [(500, 1, 0)], "id long, v long, p int")
            (dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"v": "s.v"})
             .whenNotMatchedInsertAll().execute())

    results = {}
    base = str(tmp_path / "base")
    _one_file_matches(spark, base)  # written once, each bound runs on a byte copy
    for where, limit in (("skewed", "30"), ("free", "1000000")):
        path = str(tmp_path / where)
        shutil.copytree(base, path)
        spark.conf.set(DML_DRIVER_MARK_ROWS, limit)
        try:
            run(DeltaTable.forPath(spark, path))
        finally:
            spark.conf.unset(DML_DRIVER_MARK_ROWS)
        results[where] = (_rows(dvlake.read(spark, path)), _metrics(path))
    assert results["skewed"] == results["free"]
    rows = {r[0]: r[1] for r in results["free"][0]}
    assert rows[2] == (21 if command == "update" else -2) and rows[3] == 30 and len(rows) == 120 + (command == "merge")


def test_the_scan_never_has_more_tasks_than_the_gathering_bound(spark, tmp_path):
    from dvlake.commands.dml.dv_pairs import tasks_bound
    from dvlake.spark.scan import logical_frame, plan_scan

    path = str(tmp_path / "t")
    _make(spark, path, n=3000, files=4)
    DeltaTable.forPath(spark, path).delete("id % 7 = 0")  # DVs: the keyed scan of files with and without one
    snapshot = Snapshot.load(path)
    plan = plan_scan(spark, snapshot)
    for max_bytes, open_cost in (("128m", "4m"), ("2000b", "1000b"), ("1000b", "1m")):
        spark.conf.set("spark.sql.files.maxPartitionBytes", max_bytes)
        spark.conf.set("spark.sql.files.openCostInBytes", open_cost)
        try:
            tasks = logical_frame(spark, snapshot, plan, include_row_index=True).rdd.getNumPartitions()
            assert 1 <= tasks <= tasks_bound(spark, plan), (max_bytes, open_cost)
        finally:
            spark.conf.unset("spark.sql.files.maxPartitionBytes")
            spark.conf.unset("spark.sql.files.openCostInBytes")
