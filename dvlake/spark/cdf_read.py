"""The executor side of reading a change feed: planned changes (``log/cdf_plan.py``) → one DataFrame.

Three kinds of input, each read the cheapest way it can be:

- **change data files** (commits with ``cdc`` actions): Spark's Parquet reader, the commit's
  version, timestamp and the file's partition values as literals;
- **whole files** (a lone ``add`` is ``insert``, a lone ``remove`` is ``delete``): the regular
  DV-applying scan (``dv_scan.scan_files``) over all of them at once, each row tagged with its
  version and change type by a broadcast join on the file's position;
- **DV changes** (``remove`` + ``add`` of one path): only the rows whose DV bit flipped changed.
  Those rows are read *by row index*: a ``mapInArrow`` task per file loads both DVs on the
  executor, takes their differences (new∖old = ``delete``, old∖new = ``insert``), reads the
  Parquet footer through ``dvlake.storage``, and decodes only the row groups that hold a changed
  row, then takes the rows. A file whose DVs do not differ is never opened, and the deleted
  row indexes never reach the driver.

  Why not Spark's Parquet reader with a ``_metadata.row_index`` filter: that column is generated
  while decoding, so no row group can be skipped by it and the whole file is decoded to keep a
  handful of rows (bench/cdf.py measures both).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.log.cdf_plan import (
    CHANGE_TYPE_COL,
    COMMIT_TIMESTAMP_COL,
    COMMIT_VERSION_COL,
    DELETE,
    INSERT,
    DataFile,
    VersionChanges,
)
from dvlake.log.snapshot import Snapshot
from dvlake.spark.dv_scan import FILE_INDEX_COL, ScanFile, scan_files
from dvlake.spark.layout import TableLayout
from dvlake.spark.scan import ScanPlan
from dvlake.spark.task_errors import MapInArrowFn, on_executor, remember_table
from dvlake.spark.task_errors import install as install_typed_errors
from dvlake.storage.base import storage_for
from dvlake.storage.confine import data_file_location

_TASK_LOCATION = "__dvlake_cdf_location"
_TASK_OLD_DV = "__dvlake_cdf_old_dv"
_TASK_NEW_DV = "__dvlake_cdf_new_dv"
_TASK_VERSION = "__dvlake_cdf_version"
_TASK_TS = "__dvlake_cdf_ts"
_META_CHANGE = "__dvlake_cdf_change"
_META_VERSION = "__dvlake_cdf_meta_version"
_META_TS = "__dvlake_cdf_meta_ts"

CDC_FIELDS = [StructField(CHANGE_TYPE_COL, StringType()), StructField(COMMIT_VERSION_COL, LongType()),
              StructField(COMMIT_TIMESTAMP_COL, TimestampType())]


class _Layout:
    """The end version's layout (``spark/layout.py``) and the schema-only plan the CDF scans are built from."""

    def __init__(self, table: TableLayout) -> None:
        self.table = table
        self.data_schema = self.table.data_schema
        self.partition_schema = self.table.partition_schema
        self.typed_partitions = self.table.typed_partitions
        # schemas only (no files): the scans built from a layout take ``confine`` as an argument
        self.plan = ScanPlan([], self.data_schema, self.partition_schema, self.table.logical_schema,
                             self.table.physical_to_logical, np.zeros(0, np.int64), confine=True)

    @property
    def physical_output(self) -> StructType:
        """Data columns (physical names), partition columns, then the three change columns."""
        return StructType([*[StructField(f.name, f.dataType, True) for f in self.data_schema.fields],
                           *self.partition_schema.fields, *CDC_FIELDS])


def changes_frame(spark: SparkSession, snapshot: Snapshot, versions: Sequence[VersionChanges],
                  confine: bool = True) -> DataFrame:
    """The change rows of ``versions`` (planned by ``cdf_plan``) under the schema of ``snapshot``.

    Columns: the table's columns (logical names), ``_change_type``, ``_commit_version``, ``_commit_timestamp``.
    """
    return layout_changes_frame(spark, TableLayout.of(snapshot), snapshot.table_root, versions, confine)


def layout_changes_frame(spark: SparkSession, table: TableLayout, root: str, versions: Sequence[VersionChanges],
                         confine: bool) -> DataFrame:
    """``changes_frame`` under a layout given directly (the streaming source reads with the schema of the query's
    start, not of a snapshot it holds)."""
    install_typed_errors()
    remember_table(root)
    layout = _Layout(table)
    parts = _cdc_file_scans(spark, layout, root, versions, confine)
    whole = _whole_file_scan(spark, layout, root, versions, confine)
    if whole is not None:
        parts.append(whole)
    diffs = _dv_change_scan(spark, layout, root, versions, confine)
    if diffs is not None:
        parts.append(diffs)
    if not parts:
        out = spark.createDataFrame([], layout.physical_output)
    else:
        out = parts[0]
        for p in parts[1:]:
            out = out.unionByName(p)
    return layout.table.to_logical(out, [c.name for c in CDC_FIELDS])


def _change_literals(change_type: str | Column, version: int, ts_ms: int) -> list[Column]:
    ct = change_type if isinstance(change_type, Column) else F.lit(change_type)
    return [ct.cast("string").alias(CHANGE_TYPE_COL), F.lit(version).cast("long").alias(COMMIT_VERSION_COL),
            F.timestamp_millis(F.lit(ts_ms)).alias(COMMIT_TIMESTAMP_COL)]


def _cdc_file_scans(spark: SparkSession, layout: _Layout, root: str, versions: Sequence[VersionChanges],
                    confine: bool) -> list[DataFrame]:
    """One Spark Parquet scan per (version, partition values) of the change data files."""
    groups: dict[tuple[int, int, tuple], list[str]] = defaultdict(list)
    for vc in versions:
        for c in vc.cdc_files:
            typed = layout.typed_partitions(c.partition_values)
            groups[(vc.version, vc.timestamp_ms, typed)].append(data_file_location(root, c.path, confine))
    read_schema = StructType([*layout.data_schema.fields, StructField(CHANGE_TYPE_COL, StringType())])
    out = []
    for (version, ts, typed), locations in groups.items():
        df = spark.read.schema(read_schema).parquet(*locations)
        partition_cols = [F.lit(v).cast(f.dataType).alias(f.name)
                          for f, v in zip(layout.partition_schema.fields, typed, strict=True)]
        out.append(df.select(*[F.col(f"`{f.name}`") for f in layout.data_schema.fields], *partition_cols,
                             *_change_literals(F.col(CHANGE_TYPE_COL), version, ts)))
    return out


def _scan_file(layout: _Layout, root: str, f: DataFile, confine: bool) -> ScanFile:
    return ScanFile(path=data_file_location(root, f.path, confine), size=f.size, num_records=f.num_records, dv=f.dv,
                    partition_values=layout.typed_partitions(f.partition_values))


def _whole_file_scan(spark: SparkSession, layout: _Layout, root: str, versions: Sequence[VersionChanges],
                     confine: bool) -> DataFrame | None:
    """Lone adds (``insert``) and lone removes (``delete``) of every version: one DV-applying scan,
    tagged by a broadcast join on the file's position in it."""
    files: list[ScanFile] = []
    meta: list[tuple[int, str, int, int]] = []
    for vc in versions:
        for kind, group in ((INSERT, vc.inserted), (DELETE, vc.deleted)):
            for f in group:
                meta.append((len(files), kind, vc.version, vc.timestamp_ms))
                files.append(_scan_file(layout, root, f, confine))
    if not files:
        return None
    rows = scan_files(spark, files, layout.data_schema, layout.partition_schema, root, include_row_index=True,
                      confine=confine)
    tags = spark.createDataFrame(meta, StructType([
        StructField(FILE_INDEX_COL, IntegerType(), False), StructField(_META_CHANGE, StringType(), False),
        StructField(_META_VERSION, LongType(), False), StructField(_META_TS, LongType(), False)]))
    tagged = rows.join(F.broadcast(tags), FILE_INDEX_COL, "inner")
    return tagged.select(*[F.col(f"`{f.name}`") for f in layout.data_schema.fields],
                         *[F.col(f"`{f.name}`") for f in layout.partition_schema.fields],
                         F.col(_META_CHANGE).alias(CHANGE_TYPE_COL), F.col(_META_VERSION).alias(COMMIT_VERSION_COL),
                         F.timestamp_millis(F.col(_META_TS)).alias(COMMIT_TIMESTAMP_COL))


def _dv_change_scan(spark: SparkSession, layout: _Layout, root: str, versions: Sequence[VersionChanges],
                    confine: bool) -> DataFrame | None:
    """The rows whose DV bit flipped, read by row index on executors (one task row per changed file)."""
    tasks = []
    for vc in versions:
        for ch in vc.dv_changes:
            tasks.append((data_file_location(root, ch.file.path, confine), _dv_json(ch.old_dv), _dv_json(ch.new_dv),
                          vc.version, vc.timestamp_ms, *layout.typed_partitions(ch.file.partition_values)))
    if not tasks:
        return None
    task_schema = StructType([
        StructField(_TASK_LOCATION, StringType(), False), StructField(_TASK_OLD_DV, StringType()),
        StructField(_TASK_NEW_DV, StringType()), StructField(_TASK_VERSION, LongType(), False),
        StructField(_TASK_TS, LongType(), False), *layout.partition_schema.fields])
    task_df = spark.createDataFrame(tasks, task_schema)
    # no repartition: a local list is already sliced over the default parallelism, and the shuffle a
    # repartition adds cost more than the reads themselves in bench/cdf.py
    out_schema = layout.physical_output
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(out_schema, timezone="UTC")
    fn = changed_rows_reader(root, confine, [f.name for f in layout.data_schema.fields],
                             len(layout.partition_schema.fields), arrow_schema)
    return task_df.mapInArrow(fn, out_schema)


def _dv_json(dv: DeletionVectorDescriptor | None) -> str | None:
    return json.dumps(dv.to_json()) if dv is not None else None


def changed_rows_reader(table_root: str, confine: bool, data_columns: list[str], num_partition_columns: int,
                        out_schema: pa.Schema) -> MapInArrowFn:
    """mapInArrow: task rows (location, old DV, new DV, version, timestamp ms, partition values…) →
    the rows whose DV bit flipped, with their change type; only the row groups holding them are read."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        storage = storage_for(table_root)
        for batch in batches:
            locations = batch.column(0).to_pylist()
            old_dvs = batch.column(1).to_pylist()
            new_dvs = batch.column(2).to_pylist()
            versions = batch.column(3).to_pylist()
            stamps = batch.column(4).to_pylist()
            for i, location in enumerate(locations):
                old = _bitmap(old_dvs[i], table_root, storage, confine)
                new = _bitmap(new_dvs[i], table_root, storage, confine)
                deleted = _sorted_rows(new - old)
                inserted = _sorted_rows(old - new)
                if deleted.size == 0 and inserted.size == 0:
                    continue  # the DVs differ in name only: the file is not opened
                rows = np.concatenate([deleted, inserted])
                is_delete = np.concatenate([np.ones(deleted.size, bool), np.zeros(inserted.size, bool)])
                order = np.argsort(rows, kind="stable")
                rows, is_delete = rows[order], is_delete[order]
                table = read_rows(storage, location, rows, data_columns)
                n = rows.size
                arrays: list[pa.Array] = []
                for j, name in enumerate(data_columns):
                    target = out_schema.field(j).type
                    if name in table.column_names:
                        arrays.append(table.column(name).combine_chunks().cast(target, safe=False))
                    else:
                        arrays.append(pa.nulls(n, target))
                repeat = pa.array(np.full(n, i, np.int64))
                base = len(data_columns)
                for k in range(num_partition_columns):
                    arrays.append(batch.column(5 + k).take(repeat).cast(out_schema.field(base + k).type))
                arrays.append(pa.array(np.where(is_delete, DELETE, INSERT).tolist(), pa.string()))
                arrays.append(pa.array(np.full(n, versions[i], np.int64)))
                micros = pa.array(np.full(n, int(stamps[i]) * 1000, np.int64))
                arrays.append(micros.cast(out_schema.field(len(out_schema) - 1).type))
                yield pa.RecordBatch.from_arrays(arrays, schema=out_schema)

    return on_executor(run)


def _bitmap(dv_json: str | None, table_root: str, storage: Any, confine: bool) -> Any:
    import pyroaring

    from dvlake.dv.store import load_bitmap

    if dv_json is None:
        return pyroaring.BitMap64()
    return load_bitmap(DeletionVectorDescriptor.from_json(json.loads(dv_json)), table_root, storage, confine=confine)


def _sorted_rows(bitmap: Any) -> np.ndarray:
    from dvlake.dv.roaring import to_numpy

    return to_numpy(bitmap).astype(np.int64)


#: Rows decoded per batch inside a row group: decoding stops after the batch holding its last wanted row.
READ_BATCH_ROWS = 16384


def _rows_of_group(pf: Any, group: int, local: np.ndarray, names: list[str]) -> list[pa.RecordBatch]:
    """The rows at ``local`` (sorted) of one row group, decoding batch by batch and stopping after the last one."""
    out = []
    offset = 0
    last = int(local[-1])
    for batch in pf.iter_batches(batch_size=READ_BATCH_ROWS, row_groups=[group], columns=names, use_threads=True):
        end = offset + batch.num_rows
        inside = local[(local >= offset) & (local < end)]
        if inside.size:
            out.append(batch.take(pa.array(inside - offset)))
        offset = end
        if offset > last:
            break
    return out


def read_rows(storage: Any, location: str, rows: np.ndarray, columns: list[str]) -> pa.Table:
    """The rows at physical indexes ``rows`` (sorted) of one Parquet file, reading only their row groups.

    The footer gives each row group's row count; a row group without a wanted row is not read.
    Columns the file lacks (added to the table later) are left out (the caller fills nulls).
    """
    import pyarrow.parquet as pq

    from dvlake.errors import DeletionVectorIntegrityError

    f = storage.open_input(location)
    try:
        pf = pq.ParquetFile(f)
        md = pf.metadata
        starts = np.concatenate(([0], np.cumsum([md.row_group(g).num_rows for g in range(md.num_row_groups)])))
        if rows.size and int(rows[-1]) >= int(starts[-1]):
            raise DeletionVectorIntegrityError(
                f"a deletion vector of {location} names row {int(rows[-1])}, but the file has {int(starts[-1])} rows",
                error_class="DELTA_DELETION_VECTOR_INVALID_ROW_INDEX")
        present = set(pf.schema_arrow.names)
        names = [c for c in columns if c in present]
        groups = np.searchsorted(starts, rows, side="right") - 1
        pieces = []
        for g in np.unique(groups):
            pieces += _rows_of_group(pf, int(g), rows[groups == g] - starts[g], names)
        if not pieces:
            return pf.schema_arrow.empty_table().select(names)
        return pa.Table.from_batches(pieces)
    finally:
        f.close()
