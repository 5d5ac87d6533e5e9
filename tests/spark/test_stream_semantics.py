"""delta-spark's streaming cases that dvlake once got wrong (issue 40), shaped as delta-spark's suites shape them:
``availableNow`` runs on one checkpoint, restarts, rate limits; exact rows on both engines of the source."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

import dvlake
from dvlake import DeltaTable
from tests.helpers import DV_PROPS
from tests.spark import test_streaming as base

_collect = base._collect
engine = base.engine  # the two engines' fixture, used by name


def _values_table(spark: SparkSession, path: str, files: list[list[int]], properties: dict[str, str] | None = None) -> None:
    """One commit per list, each one file of those ``value`` rows; deletion vectors on."""
    for i, values in enumerate(files):
        frame = spark.createDataFrame([(v,) for v in values], "value INT").coalesce(1)
        dvlake.write(frame, path, "append", properties={**DV_PROPS, **(properties or {})} if i == 0 else None)


def test_two_dv_deletes_of_one_file_in_one_batch_read_each_commits_own_dv(dspark: SparkSession, tmp_path: Path,
                                                                            engine: str) -> None:
    """DeltaSourceDeletionVectorsSuite's shape: the file comes back twice in one batch, once per DELETE; the first
    re-add still has 4 (only 3 deleted), the second has only 5. Reading both with the latest DV would lose the 4."""
    path = str(tmp_path / "t")
    _values_table(dspark, path, [[3, 4, 5], [10, 11, 12], [20, 21, 22], [30, 31, 32], [40, 41, 42]])
    for options, chk in (({"ignoreChanges": "true"}, "a"), ({"ignoreChanges": "true", "skipChangeCommits": "false"}, "b")):
        first = _collect(dvlake.read_stream(dspark, path, **options), tmp_path / chk)
        assert [b for _, b in first] == [[3, 4, 5, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42]]
    table = DeltaTable.forPath(dspark, path)
    table.delete("value = 3")
    table.delete("value = 4")
    for options, chk in (({"ignoreChanges": "true"}, "a"), ({"ignoreChanges": "true", "skipChangeCommits": "false"}, "b")):
        got = _collect(dspark.readStream.format("delta").options(**options).load(path), tmp_path / chk)
        assert [b for _, b in got] == [[4, 5, 5]]
