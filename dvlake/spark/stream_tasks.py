"""How a micro-batch of the Delta streaming source is cut into read tasks, and which row groups a task's slice reads.

Why: the source's tasks decode Parquet in Python workers, so a micro-batch runs only as fast as its tasks are
even. Packing files up to a fixed 128 MB put a whole initial snapshot of small files into one task (one core of
two idle) and left a large file a task of its own. Tasks are cut here the way Spark cuts a batch file scan
(``FilePartition.maxSplitBytes``): the split size is the batch's bytes (each file plus an open cost) over the
session's parallelism, between 4 MB and 128 MB, files are packed up to it, and a file larger than it is read as
several slices. A slice is a share of the file's bytes; it reads the row groups whose middle byte falls in its
share (as Spark's Parquet reader assigns row groups to splits), so every row group is read by exactly one slice
whatever the row group layout, and the executor knows each row group's first row index for the deletion vector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: The most bytes of Parquet one read task takes (Spark's ``spark.sql.files.maxPartitionBytes`` default).
TASK_BYTES = 128 * 1024 * 1024
#: What opening a file costs, counted as bytes when tasks are packed (Spark's ``spark.sql.files.openCostInBytes``).
OPEN_COST_BYTES = 4 * 1024 * 1024
#: Planned kinds read as a whole file's live rows, so they can be sliced by row groups (``dv`` reads rows by index).
SLICEABLE = frozenset({"file", "cdc"})


def split_bytes(sizes: Sequence[int], parallelism: int) -> int:
    """The bytes one task aims at: the batch's bytes (each file plus the open cost) spread over ``parallelism``."""
    total = sum(sizes) + len(sizes) * OPEN_COST_BYTES
    return min(TASK_BYTES, max(OPEN_COST_BYTES, total // max(1, parallelism)))


def plan_tasks(entries: Sequence[dict[str, Any]], parallelism: int) -> list[list[dict[str, Any]]]:
    """The read tasks of one micro-batch, in stream order: planned files packed up to ``split_bytes``, a
    sliceable file larger than it split into ``slice`` = ``[i, n]`` entries (each reads its share of row groups).

    Args:
        entries: the planned files, each with ``kind`` and ``size`` (bytes, from the add action).
        parallelism: the session's default parallelism (the cores that read at once).
    """
    if not entries:
        return []
    target = split_bytes([int(e["size"]) for e in entries], parallelism)
    pieces: list[tuple[dict[str, Any], int]] = []
    for e in entries:
        size = int(e["size"])
        count = math.ceil(size / target) if e["kind"] in SLICEABLE and size > target else 1
        if count == 1:
            pieces.append((e, size))
        else:
            pieces.extend(({**e, "slice": [i, count]}, math.ceil(size / count)) for i in range(count))
    tasks: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    used = 0
    for e, size in pieces:
        if current and used + size > target:
            tasks.append(current)
            current, used = [], 0
        current.append(e)
        used += size + OPEN_COST_BYTES
    if current:
        tasks.append(current)
    return tasks


def row_group_middle(metadata: Any, group: int) -> int:
    """The byte in the middle of row group ``group`` of a Parquet footer (``pyarrow.parquet.FileMetaData``)."""
    rg = metadata.row_group(group)
    starts, length = [], 0
    for c in range(rg.num_columns):
        col = rg.column(c)
        start = col.data_page_offset
        if col.has_dictionary_page and col.dictionary_page_offset and col.dictionary_page_offset > 0:
            start = min(start, col.dictionary_page_offset)
        starts.append(start)
        length += col.total_compressed_size
    return (min(starts) if starts else 0) + length // 2


def slice_row_groups(metadata: Any, file_size: int, index: int, count: int) -> list[tuple[int, int]]:
    """The row groups slice ``index`` of ``count`` reads, each with the file's row index it starts at.

    Row group ``g`` belongs to slice ``min(count - 1, middle(g) * count // file_size)``: each row group to exactly one
    slice, even when ``file_size`` is not the file's true length.
    """
    out = []
    first_row = 0
    for g in range(metadata.num_row_groups):
        owner = min(count - 1, row_group_middle(metadata, g) * count // max(1, file_size))
        if owner == index:
            out.append((g, first_row))
        first_row += metadata.row_group(g).num_rows
    return out
