"""Building deletion vectors: (file, row index[, kind]) pairs → bitmaps → packed DV files.

The same code runs in two places (``commands/dv_marking.py`` picks one):

- on executors, as a ``mapInArrow`` function after the pairs are repartitioned by file: each task
  gets every matched row of its files, ORs them into the file's existing DV and appends the result
  to *one* DV file of its own — so a DELETE touching hundreds of data files writes a handful of DV
  files, and no step holds all deleted row indexes on the driver. The task returns only descriptors.
- on the driver, for a change whose row count is known to be below a fixed bound: the pairs arrive
  as one Arrow table and are packed into one DV file with the same code; no shuffle, no Python worker.

A pair may carry a *kind* (MERGE's clause outcome): only some kinds are marked, rows of some kinds are
checked for duplicates (a target row matched twice), and every kind is counted per file, so MERGE gets
its per-clause row counts and its multiple-match check from the pass that builds the DVs. When a
duplicate is found no DV file is written by that task (the command fails).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyroaring

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.spark.task_errors import MapInArrowFn, on_executor
from dvlake.storage.paths import path_key

RESULT_SCHEMA = ("file_index int, dv string, cardinality long, previous_cardinality long, all_deleted boolean, "
                 "changed boolean, duplicate boolean, kind_counts string")
_RESULT_ARROW = pa.schema([("file_index", pa.int32()), ("dv", pa.string()), ("cardinality", pa.int64()),
                           ("previous_cardinality", pa.int64()), ("all_deleted", pa.bool_()), ("changed", pa.bool_()),
                           ("duplicate", pa.bool_()), ("kind_counts", pa.string())])


@dataclass(frozen=True)
class FileToMark:
    """What an executor needs about one candidate file (small: no row indexes)."""

    num_records: int | None
    old_dv: str | None  # the existing descriptor as JSON, if any
    path: str | None = None  # the data file's location (its footer settles "every row deleted")


@dataclass(frozen=True)
class Kinds:
    """Which pairs a kind column selects: ``marked`` kinds go into the DVs, ``checked`` kinds must name each row
    of a file at most once (else the file is reported ``duplicate``)."""

    column: str
    marked: frozenset[int]
    checked: frozenset[int] = frozenset()


@dataclass
class _FileMarks:
    marked: pyroaring.BitMap64 = field(default_factory=pyroaring.BitMap64)
    checked: pyroaring.BitMap64 = field(default_factory=pyroaring.BitMap64)
    checked_rows: int = 0
    counts: dict[int, int] = field(default_factory=dict)


class MarkAccumulator:
    """Gathers pairs per file (any number of Arrow batches), then writes the DVs of the files whose DV changes."""

    def __init__(self, kinds: Kinds | None) -> None:
        self.kinds = kinds
        self.files: dict[int, _FileMarks] = {}

    def add(self, fidx: np.ndarray, rows: np.ndarray, kinds: np.ndarray | None) -> None:
        """Add one batch: file keys (int64), physical row indexes, and kinds when a ``Kinds`` was given."""
        from dvlake.dv.roaring import from_indexes

        if fidx.size == 0:
            return
        order = np.argsort(fidx, kind="stable")
        fidx, rows = fidx[order], rows.astype(np.uint64, copy=False)[order]
        kinds = kinds[order] if kinds is not None else None
        bounds = np.flatnonzero(np.diff(fidx)) + 1
        for start, stop in zip(np.r_[0, bounds], np.r_[bounds, fidx.size], strict=True):
            entry = self.files.setdefault(int(fidx[start]), _FileMarks())
            chunk = rows[start:stop]
            if kinds is None or self.kinds is None:
                entry.marked |= from_indexes(chunk)
                continue
            k = kinds[start:stop]
            for kind, n in zip(*np.unique(k, return_counts=True), strict=True):
                entry.counts[int(kind)] = entry.counts.get(int(kind), 0) + int(n)
            marked = chunk[np.isin(k, list(self.kinds.marked))]
            if marked.size:
                entry.marked |= from_indexes(marked)
            if self.kinds.checked:
                checked = chunk[np.isin(k, list(self.kinds.checked))]
                if checked.size:
                    entry.checked_rows += int(checked.size)
                    entry.checked |= from_indexes(checked)

    def add_batch(self, batch: pa.RecordBatch | pa.Table, file_col: str, row_col: str,
                  index_of_path: dict[str, int] | None) -> None:
        """Add one Arrow batch whose file column holds keys, or locations that ``index_of_path`` maps to keys."""
        if batch.num_rows == 0:
            return
        kinds = None
        if self.kinds is not None:
            kinds = _numpy(batch.column(self.kinds.column)).astype(np.int64, copy=False)
        self.add(file_keys(batch.column(file_col), index_of_path), _numpy(batch.column(row_col)), kinds)

    @property
    def duplicate(self) -> bool:
        return any(len(m.checked) < m.checked_rows for m in self.files.values())

    def write(self, table_root: str, files: dict[int, FileToMark], target_file_size: int,
              confine: bool = True) -> dict[str, list]:
        """One result row per file seen: its new DV written (packed into one DV file) when the DV changes.

        A file is reported fully deleted only when its Parquet footer agrees: ``stats.numRecords`` alone is
        log metadata, and a low one would turn a partial delete into a file removal. With a duplicate anywhere
        nothing is written (the command fails on the driver)."""
        from dvlake.dv.store import DeletionVectorWriter, load_bitmap

        out: dict[str, list] = {name: [] for name in _RESULT_ARROW.names}
        duplicate = self.duplicate
        writer = None if duplicate else DeletionVectorWriter(table_root, target_file_size=target_file_size)
        try:
            for key in sorted(self.files):
                entry = self.files[key]
                info = files[key]
                bitmap, previous, card, all_deleted, desc_json, changed = entry.marked, 0, 0, False, None, False
                if writer is not None and len(bitmap):
                    if info.old_dv:
                        old = load_bitmap(DeletionVectorDescriptor.from_json(json.loads(info.old_dv)), table_root,
                                          confine=confine)
                        previous = len(old)
                        bitmap |= old
                    card = len(bitmap)
                    changed = card != previous  # else the rows matched were already deleted
                    if changed:
                        all_deleted = info.num_records is not None and card >= info.num_records and \
                            card >= _physical_rows(info.path)
                        if not all_deleted:  # a fully deleted file becomes a plain remove: no DV needed
                            desc_json = json.dumps(writer.add(bitmap).to_json())
                out["file_index"].append(key)
                out["dv"].append(desc_json)
                out["cardinality"].append(card)
                out["previous_cardinality"].append(previous)
                out["all_deleted"].append(all_deleted)
                out["changed"].append(changed)
                out["duplicate"].append(len(entry.checked) < entry.checked_rows)
                out["kind_counts"].append(json.dumps({str(k): v for k, v in sorted(entry.counts.items())}))
        finally:
            if writer is not None:
                writer.close()
        return out


def result_table(out: dict[str, list]) -> pa.Table:
    return pa.Table.from_pydict(out, schema=_RESULT_ARROW)


def _numpy(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(zero_copy_only=False))


def file_keys(column: pa.Array | pa.ChunkedArray, index_of_path: dict[str, int] | None) -> np.ndarray:
    """The file column as int64 keys: as is, or locations (Spark's ``file:/…`` URIs) mapped by ``index_of_path``."""
    if index_of_path is None:
        return _numpy(column).astype(np.int64, copy=False)
    distinct = pc.unique(column).to_pylist()
    lookup = pa.array([index_of_path[path_key(p)] for p in distinct], pa.int64())
    return np.asarray(pc.take(lookup, pc.index_in(column, value_set=pa.array(distinct, pa.string()))).to_numpy())


def build_and_write_dvs(table_root: str, files: dict[int, FileToMark], target_file_size: int,
                        file_path_col: str, row_index_col: str, index_of_path: dict[str, int] | None, *,
                        confine: bool = True, kinds: Kinds | None = None) -> MapInArrowFn:
    """A ``mapInArrow`` function: matched (file, row index[, kind]) rows in, one result row per file seen out.

    The file column holds either the file's location (``index_of_path`` maps it to its key in
    ``files``) or, when ``index_of_path`` is None, that key itself (an integer column).
    ``confine``: existing DV files must resolve inside ``table_root`` (``storage/confine.py``).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        acc = MarkAccumulator(kinds)
        for batch in batches:
            acc.add_batch(batch, file_path_col, row_index_col, index_of_path)
        if not acc.files:
            return
        yield from result_table(acc.write(table_root, files, target_file_size, confine)).to_batches()

    return on_executor(run)


def _physical_rows(location: str | None) -> int:
    """Rows in a data file by its Parquet footer (read only when a change would remove the file)."""
    if location is None:
        return 1 << 62  # unknown: never treat the file as fully deleted
    from dvlake.spark.file_stats import read_footer
    from dvlake.storage.base import storage_for

    return int(read_footer(storage_for(location), location).num_rows)
