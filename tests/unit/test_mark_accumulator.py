"""The DV builder's per-file logic shared by the driver and executors (``spark/dv_build.py``), without Spark."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import load_bitmap
from dvlake.spark.dv_build import FileToMark, Kinds, MarkAccumulator

NOOP, UPDATE, DELETE, INSERT = 0, 1, 2, 3
KINDS = Kinds("kind", frozenset({UPDATE, DELETE}), frozenset({NOOP, UPDATE, DELETE}))


def _batch(files: list[int], rows: list[int], kinds: list[int]) -> pa.Table:
    return pa.table({"f": pa.array(files, pa.int32()), "r": pa.array(rows, pa.int64()), "kind": pa.array(kinds, pa.int32())})


def test_marked_kinds_only_are_marked_all_counted_and_or_ed_with_the_old_dv(tmp_path) -> None:
    root = str(tmp_path)
    acc = MarkAccumulator(KINDS)
    acc.add_batch(_batch([0, 0, 1, 1, 0], [3, 5, 7, 8, 9], [UPDATE, NOOP, DELETE, UPDATE, DELETE]), "f", "r", None)
    acc.add_batch(_batch([1], [2], [NOOP]), "f", "r", None)  # a second batch of the same file
    out = acc.write(root, {0: FileToMark(10, None), 1: FileToMark(100, None)}, 1 << 20)
    assert out["file_index"] == [0, 1] and out["changed"] == [True, True] and out["duplicate"] == [False, False]
    assert [json.loads(c) for c in out["kind_counts"]] == [{"0": 1, "1": 1, "2": 1}, {"0": 1, "1": 1, "2": 1}]
    marked = [sorted(load_bitmap(DeletionVectorDescriptor.from_json(json.loads(d)), root)) for d in out["dv"]]
    assert marked == [[3, 9], [7, 8]]
    again = MarkAccumulator(KINDS)  # marking rows already in the DV changes nothing; new ones are OR-ed in
    again.add(np.array([0, 0]), np.array([3, 4]), np.array([UPDATE, UPDATE]))
    out2 = again.write(root, {0: FileToMark(10, out["dv"][0])}, 1 << 20)
    assert out2["previous_cardinality"] == [2] and out2["cardinality"] == [3] and out2["changed"] == [True]


def test_a_row_named_twice_by_checked_kinds_writes_nothing(tmp_path) -> None:
    acc = MarkAccumulator(KINDS)
    acc.add(np.array([0, 1, 1]), np.array([4, 6, 6]), np.array([UPDATE, NOOP, NOOP]))  # file 1 row 6: matched twice
    out = acc.write(str(tmp_path), {0: FileToMark(10, None), 1: FileToMark(10, None)}, 1 << 20)
    assert acc.duplicate and out["duplicate"] == [False, True] and out["dv"] == [None, None]
    assert not list(tmp_path.iterdir())  # no DV file


def test_unchecked_kinds_may_repeat_and_no_kinds_marks_everything(tmp_path) -> None:
    lenient = MarkAccumulator(Kinds("kind", frozenset({DELETE})))  # a lone unconditional delete: duplicates harmless
    lenient.add(np.array([0, 0]), np.array([1, 1]), np.array([DELETE, DELETE]))
    assert not lenient.duplicate
    plain = MarkAccumulator(None)
    plain.add_batch(pa.table({"f": ["file:/t/a.parquet", "file:/t/b.parquet"], "r": [1, 2]}), "f", "r",
                    {"/t/a.parquet": 0, "/t/b.parquet": 1})
    assert {k: sorted(v.marked) for k, v in plain.files.items()} == {0: [1], 1: [2]}
