"""Building deletion vectors on executors: (file, row index) pairs → bitmaps → packed DV files.

Each task gets every matched row of its files (the rows are repartitioned by file), ORs them
into the file's existing DV, and appends the result to *one* DV file of its own — so a DELETE
touching hundreds of data files writes a handful of DV files, and no step ever holds all
deleted row indexes on the driver. The task returns only descriptors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyroaring

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.spark.task_errors import MapInArrowFn, on_executor

RESULT_SCHEMA = "file_index int, dv string, cardinality long, previous_cardinality long, all_deleted boolean"


@dataclass(frozen=True)
class FileToMark:
    """What an executor needs about one candidate file (small: no row indexes)."""

    num_records: int | None
    old_dv: str | None  # the existing descriptor as JSON, if any
    path: str | None = None  # the data file's location (its footer settles "every row deleted")


def build_and_write_dvs(table_root: str, files: dict[int, FileToMark], target_file_size: int,
                        file_path_col: str, row_index_col: str, index_of_path: dict[str, int] | None, *,
                        confine: bool = True) -> MapInArrowFn:
    """A ``mapInArrow`` function: matched (file, row index) rows in, one result row per touched file out.

    The file column holds either the file's location (``index_of_path`` maps it to its key in
    ``files``) or, when ``index_of_path`` is None, that key itself (an integer column).
    ``confine``: existing DV files must resolve inside ``table_root`` (``storage/confine.py``).
    A file is reported fully deleted only when its Parquet footer agrees: ``stats.numRecords``
    alone is log metadata, and a low one would turn a partial delete into a file removal.
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dvlake.dv.roaring import from_indexes
        from dvlake.dv.store import DeletionVectorWriter, load_bitmap

        marked: dict[int, pyroaring.BitMap64] = {}
        for batch in batches:
            if batch.num_rows == 0:
                continue
            from dvlake.spark.dv_scan import path_key

            paths = batch.column(file_path_col)
            if index_of_path is None:
                fidx = paths.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            else:
                distinct = pc.unique(paths).to_pylist()
                lookup = pa.array([index_of_path[path_key(p)] for p in distinct], pa.int64())
                fidx = pc.take(lookup, pc.index_in(paths, value_set=pa.array(distinct, pa.string()))).to_numpy()
            rows = batch.column(row_index_col).to_numpy(zero_copy_only=False).astype(np.uint64, copy=False)
            order = np.argsort(fidx, kind="stable")
            fidx, rows = fidx[order], rows[order]
            bounds = np.flatnonzero(np.diff(fidx)) + 1
            for chunk_f, chunk_r in zip(np.split(fidx, bounds), np.split(rows, bounds), strict=True):
                key = int(chunk_f[0])
                bm = from_indexes(chunk_r)
                if key in marked:
                    marked[key] |= bm
                else:
                    marked[key] = bm
        if not marked:
            return
        out: dict[str, list] = {"file_index": [], "dv": [], "cardinality": [], "previous_cardinality": [], "all_deleted": []}
        writer = DeletionVectorWriter(table_root, target_file_size=target_file_size)
        try:
            for key in sorted(marked):
                info = files[key]
                bitmap = marked[key]
                previous = 0
                if info.old_dv:
                    old_desc = DeletionVectorDescriptor.from_json(json.loads(info.old_dv))
                    old = load_bitmap(old_desc, table_root, confine=confine)
                    previous = len(old)
                    bitmap |= old
                card = len(bitmap)
                if card == previous:
                    continue  # nothing new (rows matched were already deleted)
                all_deleted = info.num_records is not None and card >= info.num_records and \
                    card >= _physical_rows(info.path)
                desc_json = None
                if not all_deleted:  # a fully deleted file becomes a plain remove: no DV needed
                    desc_json = json.dumps(writer.add(bitmap).to_json())
                out["file_index"].append(key)
                out["dv"].append(desc_json)
                out["cardinality"].append(card)
                out["previous_cardinality"].append(previous)
                out["all_deleted"].append(all_deleted)
        finally:
            writer.close()
        yield pa.RecordBatch.from_pydict(out, schema=pa.schema([
            ("file_index", pa.int32()), ("dv", pa.string()), ("cardinality", pa.int64()),
            ("previous_cardinality", pa.int64()), ("all_deleted", pa.bool_())]))

    return on_executor(run)


def _physical_rows(location: str | None) -> int:
    """Rows in a data file by its Parquet footer (read only when a DELETE would remove the file)."""
    if location is None:
        return 1 << 62  # unknown: never treat the file as fully deleted
    from dvlake.spark.file_stats import read_footer
    from dvlake.storage.base import storage_for

    return int(read_footer(storage_for(location), location).num_rows)
