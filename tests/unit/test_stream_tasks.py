"""The streaming source's read tasks: balanced over the cores, large files sliced so every row group is read once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dvlake.spark.stream_tasks import OPEN_COST_BYTES, TASK_BYTES, plan_tasks, slice_row_groups, split_bytes

MB = 1024 * 1024


def _files(*sizes: int, kind: str = "file") -> list[dict[str, Any]]:
    return [{"kind": kind, "location": f"f{i}", "size": s} for i, s in enumerate(sizes)]


def test_small_snapshot_is_spread_over_the_cores_not_one_task() -> None:
    # 16 files of 11 MB: one 128 MB-packed task held 11 of them and left the second core mostly idle
    tasks = plan_tasks(_files(*[11 * MB] * 16), parallelism=2)
    assert [len(t) for t in tasks] == [8, 8]
    assert [e["location"] for t in tasks for e in t] == [f"f{i}" for i in range(16)]  # stream order kept


def test_split_size_follows_spark_bounds() -> None:
    assert split_bytes([1000], 2) == OPEN_COST_BYTES  # never below the open cost
    assert split_bytes([10_000 * MB], 2) == TASK_BYTES  # never above 128 MB
    assert split_bytes([100 * MB, 100 * MB], 4) == (200 * MB + 2 * OPEN_COST_BYTES) // 4


def test_large_file_is_cut_into_slices_and_dv_changes_never_are() -> None:
    entries = _files(300 * MB) + _files(300 * MB, kind="dv")
    tasks = plan_tasks(entries, parallelism=2)
    slices = [e["slice"] for t in tasks for e in t if e["kind"] == "file"]
    assert slices == [[0, 3], [1, 3], [2, 3]]
    assert [e for t in tasks for e in t if e["kind"] == "dv"] == [entries[1]]
    assert plan_tasks([], 2) == []


def _parquet(path: Path, rows: int, group_rows: int) -> pq.FileMetaData:
    rng = np.random.default_rng(1)
    table = pa.table({"a": rng.integers(0, 1 << 60, rows), "s": [f"v{i % 97}" for i in range(rows)]})
    pq.write_table(table, path, row_group_size=group_rows)
    return pq.ParquetFile(path).metadata


@pytest.mark.parametrize("count", [1, 2, 3, 7, 40])
def test_slices_read_every_row_group_exactly_once_with_its_first_row(tmp_path: Path, count: int) -> None:
    meta = _parquet(tmp_path / "f.parquet", 10_000, 700)
    size = (tmp_path / "f.parquet").stat().st_size
    got = [g for i in range(count) for g in slice_row_groups(meta, size, i, count)]
    firsts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])[:-1]
    assert got == [(g, int(firsts[g])) for g in range(meta.num_row_groups)]


def test_slices_cover_the_file_even_when_the_logged_size_is_wrong(tmp_path: Path) -> None:
    meta = _parquet(tmp_path / "f.parquet", 5_000, 500)
    for size in (1, 10**12):
        got = sorted(g for i in range(3) for g, _ in slice_row_groups(meta, size, i, 3))
        assert got == list(range(meta.num_row_groups))
