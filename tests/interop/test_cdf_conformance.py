"""Change Data Feed conformance: dvlake's change rows equal delta-rs's ``load_cdf`` for every version range.

Each table is built by dvlake with ``delta.enableChangeDataFeed=true`` through a sequence of
DELETE, UPDATE, MERGE, OPTIMIZE, RESTORE and appends, with DVs (DV diffs, DV1→DV2, whole-file
removes, cdc files on the DV path) and without (copy-on-write cdc files). For every range
``[start, end]`` both readers' rows are compared as multisets: dvlake's ranges are checked to be
slices of its full-range read (per version and a few wider ranges), and delta-rs is read for every
range. Where delta-rs cannot serve as the oracle (lone add/remove carrying a DV, which its
load_cdf inverts; column mapping, which it refuses), every version is checked against the
snapshot difference (net inserts - deletes = rows(v) - rows(v-1)) and hand-written expectations.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

import dvlake
from dvlake import DeltaTable
from dvlake.log.snapshot import Snapshot

pytestmark = pytest.mark.interop

CDF = {"delta.enableChangeDataFeed": "true"}
DVS = {"delta.enableDeletionVectors": "true"}


def _build(spark: Any, path: str, props: dict[str, str], partitioned: bool) -> None:
    df = spark.range(0, 120).select(F.col("id"), (F.col("id") % 7).cast("int").alias("v"),
                                    (F.col("id") % 3).cast("string").alias("p")).repartition(3, "id")
    dvlake.write(df, path, partitionBy="p" if partitioned else None, properties={**CDF, **props})   # v0
    dt = DeltaTable.forPath(spark, path)
    dt.delete("id < 6")                                                     # v1: DV delete (none → DV1)
    dt.update("id between 10 and 14", {"v": "v + 100"})                     # v2: UPDATE, cdc files
    dt.delete("id between 20 and 22")                                       # v3: DV1 → DV2 on some files
    src = spark.createDataFrame([(30, 1, "0"), (31, 2, "1"), (500, 3, "2"), (40, -1, "1")], "id long, v int, p string")
    (dt.alias("t").merge(src.alias("s"), "t.id = s.id")
       .whenMatchedUpdate(condition="s.v >= 0", set={"v": "s.v"}).whenMatchedDelete()
       .whenNotMatchedInsertAll().execute())                                 # v4: MERGE update/delete/insert
    dvlake.write(spark.createDataFrame([(600, 6, "0")], "id long, v int, p string"), path, mode="append")  # v5
    dt.optimize().executeCompaction()                                        # v6: OPTIMIZE, dataChange=false
    dt.delete("id > 100 and id < 110")                                       # v7: delete after compaction
    dt.restoreToVersion(3)                                                   # v8: RESTORE (DV2 → DV1 and re-adds)
    dt.delete("p = '2'" if partitioned else "id >= 115")                      # v9: whole files / DV


def _key(r: Any) -> tuple:
    return (r["id"], r["v"], r["p"], r["_change_type"], r["_commit_version"])


def _dvlake(spark: Any, path: str, start: int, end: int) -> Counter:
    cols = ["id", "v", "p", "_change_type", "_commit_version"]
    return Counter(_key(r.asDict()) for r in dvlake.read_changes(spark, path, start, end).select(*cols).collect())


def _dvlake_ranges(spark: Any, path: str, ranges: list[tuple[int, int]]) -> dict[tuple[int, int], Counter]:
    """``_dvlake`` of each range, read as one Spark job (a union of the range reads, each tagged with its range)."""
    from functools import reduce

    cols = ["id", "v", "p", "_change_type", "_commit_version"]
    reads = [dvlake.read_changes(spark, path, start, end).select(*cols, F.lit(i).alias("_range"))
             for i, (start, end) in enumerate(ranges)]
    out: dict[tuple[int, int], Counter] = {r: Counter() for r in ranges}
    for r in reduce(lambda a, b: a.unionAll(b), reads).collect():
        out[ranges[r["_range"]]][_key(r.asDict())] += 1
    return out


def _delta_rs(path: str, start: int, end: int, table: Any = None) -> Counter:
    """delta-rs' ``load_cdf`` of the range (``table``: the path's delta-rs table, opened once for many ranges)."""
    from deltalake import DeltaTable as RsTable

    reader = (table if table is not None else RsTable(path)).load_cdf(starting_version=start, ending_version=end)
    return Counter(_key(r) for r in pa.RecordBatchReader.from_stream(reader).read_all().to_pylist())


def _lone_file_with_dv_versions(path: str, latest: int) -> set[int]:
    """Versions without cdc files holding an add or remove with a DV whose path is not both added and removed.

    delta-rs 1.6's load_cdf keeps the rows *in* such a DV instead of dropping them (a lone remove of a
    file with DV {9 rows} yields those 9 rows as deletes; delta-spark and the protocol yield the file's
    live rows). Those versions are checked against the snapshot-difference oracle instead.
    """
    out = set()
    for v in range(latest + 1):
        lines = [json.loads(ln) for ln in open(os.path.join(path, "_delta_log", f"{v:020d}.json"))]
        if any("cdc" in ln for ln in lines):
            continue
        adds = {ln["add"]["path"]: ln["add"] for ln in lines if "add" in ln and ln["add"].get("dataChange", True)}
        removes = {ln["remove"]["path"]: ln["remove"] for ln in lines
                   if "remove" in ln and ln["remove"].get("dataChange", True)}
        lone = [a for p, a in adds.items() if p not in removes] + [r for p, r in removes.items() if p not in adds]
        if any(a.get("deletionVector") for a in lone):
            out.add(v)
    return out


def _snapshot_rows(spark: Any, path: str, version: int) -> Counter:
    if version < 0:
        return Counter()
    return Counter((r.id, r.v, r.p) for r in dvlake.read(spark, path, version=version).collect())


def _snapshots(spark: Any, path: str, latest: int) -> dict[int, Counter]:
    """``_snapshot_rows`` of versions -1..latest, the reads of 0..latest as one Spark job."""
    from functools import reduce

    reads = [dvlake.read(spark, path, version=v).select("id", "v", "p", F.lit(v).alias("_version"))
             for v in range(latest + 1)]
    out: dict[int, Counter] = {v: Counter() for v in range(-1, latest + 1)}
    for r in reduce(lambda a, b: a.unionAll(b), reads).collect():
        out[r["_version"]][(r.id, r.v, r.p)] += 1
    return out


def _check_against_snapshots(spark: Any, path: str, version: int, changes: Counter,
                             snapshots: dict[int, Counter] | None = None) -> None:
    """Net change of a version (inserts and post-images minus deletes and pre-images) = snapshot(v) - snapshot(v-1)."""
    seen = {} if snapshots is None else snapshots
    for v in (version - 1, version):
        if v not in seen:
            seen[v] = _snapshot_rows(spark, path, v)
    after, before = seen[version], seen[version - 1]
    added, dropped = Counter(), Counter()
    for (i, v, p, kind, ver), n in changes.items():
        if ver == version:
            (added if kind in ("insert", "update_postimage") else dropped)[(i, v, p)] += n
    assert added - dropped == after - before and dropped - added == before - after, f"version {version}"


@pytest.mark.parametrize(("props", "partitioned"), [
    pytest.param({"delta.enableDeletionVectors": "false"}, False, id="copy-on-write"),
    pytest.param(DVS, True, id="dv-partitioned"),
])
def test_every_range_equals_delta_rs_load_cdf(spark, tmp_path, props, partitioned):
    path = str(tmp_path / "t")
    _build(spark, path, props, partitioned)
    latest = Snapshot.load(path).version
    assert latest == 9
    skip = _lone_file_with_dv_versions(path, latest)
    slices = [*[(v, v) for v in range(latest + 1)], (2, 5), (6, latest)]
    reads = _dvlake_ranges(spark, path, [(0, latest), *slices])  # the full range and its slices: one Spark job
    full = reads[(0, latest)]
    assert sum(full.values()) > 120  # the feed is not trivially empty

    def comparable(c: Counter) -> Counter:
        return Counter({k: n for k, n in c.items() if k[4] not in skip})

    # dvlake itself, called per version and for a few wider ranges, is the slice of the full range ...
    for start, end in slices:
        got = reads[(start, end)]
        assert got == Counter({k: n for k, n in full.items() if start <= k[4] <= end}), (start, end)
    # ... so every range of delta-rs is compared with the matching slice
    from deltalake import DeltaTable as RsTable

    theirs_table = RsTable(path)
    for start in range(latest + 1):
        for end in range(start, latest + 1):
            mine = comparable(Counter({k: n for k, n in full.items() if start <= k[4] <= end}))
            theirs = comparable(_delta_rs(path, start, end, theirs_table))
            assert mine == theirs, (f"range [{start}, {end}]: only dvlake {sorted((mine - theirs).elements())[:6]}, "
                                    f"only delta-rs {sorted((theirs - mine).elements())[:6]}")
    snapshots = _snapshots(spark, path, latest)
    for v in range(latest + 1):  # every version, delta-rs' blind spots included, against the snapshots
        _check_against_snapshots(spark, path, v, full, snapshots)


def test_column_mapped_table_against_hand_written_expectations(spark, tmp_path):
    """delta-rs' load_cdf is compared where it can read the table; the expectations are written out too."""
    path = str(tmp_path / "cm")
    df = spark.range(0, 40).select(F.col("id"), (F.col("id") % 5).cast("int").alias("v"),
                                   (F.col("id") % 2).cast("string").alias("p")).repartition(2, "id")
    dvlake.write(df, path, partitionBy="p", properties={**CDF, **DVS, "delta.columnMapping.mode": "name"})
    dt = DeltaTable.forPath(spark, path)
    dt.delete("id < 3")                               # v1: DV delete → 0, 1, 2 deleted
    dt.update("id = 10", {"v": "v + 50"})             # v2: update pre/post images (cdc files, physical names)
    dt.restoreToVersion(0)                            # v3: RESTORE → 0, 1, 2 inserted, 10 back (remove + add)
    got = Counter((r.id, r.v, r.p, r._change_type, r._commit_version)
                  for r in dvlake.read_changes(spark, path, 1, 2).collect())
    expected = Counter({(0, 0, "0", "delete", 1): 1, (1, 1, "1", "delete", 1): 1, (2, 2, "0", "delete", 1): 1,
                        (10, 0, "0", "update_preimage", 2): 1, (10, 50, "0", "update_postimage", 2): 1})
    assert got == expected
    restored = Counter((r.id, r._change_type) for r in dvlake.read_changes(spark, path, 3, 3).collect())
    assert restored[(0, "insert")] == restored[(1, "insert")] == restored[(2, "insert")] == 1
    assert restored[(10, "insert")] == 1 and restored[(10, "delete")] == 1  # the updated copy removed, the old one back
    whole, snapshots = _dvlake(spark, path, 0, 3), _snapshots(spark, path, 3)
    for v in range(4):
        _check_against_snapshots(spark, path, v, whole, snapshots)
    try:  # delta-rs 1.6: "Column mapping is not supported for read operation 'CHANGE DATA FEED scans' yet"
        theirs = _delta_rs(path, 1, 2)
    except Exception:  # noqa: BLE001 - delta-rs cannot read the case: the hand-written expectations above stand
        return
    assert got == theirs
