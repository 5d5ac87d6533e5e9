"""The physical scan: Parquet files → rows, with each file's deletion vector applied.

Design (measured in bench/read_overhead.py; the alternatives are in BENCHMARKS.md):

- Files without a DV are read by Spark's plain Parquet scan: no added column, no join, no
  Python. Partition values are literals, one scan per distinct partition tuple while there are
  few of them; with many, files are keyed by size and the values come from one broadcast join.
- Files with a DV are read with two long metadata columns: ``_metadata.file_size`` (the file's
  key; files of equal size go to different scan groups so the key is unique within a group) and
  ``_metadata.row_index`` (the physical row index in the whole file, so splits, row-group skipping
  and pushed filters cannot shift it). Deleted rows are removed by one broadcast **left anti
  join**: the build side has one row per 4,096-row block of a file that holds a deletion —
  key ``file_size << 20 | row_index >> 12`` (one long, so Spark uses its long-keyed hash
  relation) and the block's 64 bit words — and the join condition tests the row's bit with
  built-in functions. The anti join emits the scan's own columns only: no per-row string, no
  Python per row, no column to drop afterwards.
- The block words of small DVs are decoded on the driver within fixed bounds and kept between
  queries (``dv_words``): Spark broadcasts that local relation without running a job. Larger DVs
  are decoded on executors (``mapInArrow`` over a small DataFrame of key + descriptor JSON); the
  driver ships their descriptors only. The broadcast is
  bounded: a scan group's estimated words stay under ``MAX_BROADCAST_BYTES`` (files are packed
  into groups by that estimate); a single file above it is joined with a shuffled hash join.
- With the native scan (``native.py``, used by default when its jar loads) files with a DV are read by
  dvlake's own Parquet format, which drops the deleted rows inside Spark's reader: no join for the DVs. A read of a
  partitioned table (or of files with a DV) is ONE native relation: the format fills the partition columns from
  the listing (the log's values), so a query's own ``_metadata`` resolves and the plan does not grow with the
  partitions. DML's file index (and its partition values) still come as above (literals, or the size-keyed
  broadcast join). DML's scans read
  every file through it, with a DV or not: DML's row index is Spark's ``_metadata.row_index`` (physical: numbered
  before any row is dropped), which the format fills itself from each batch's row group.
- A file whose DV claims to delete every row is still read (metadata is not trusted to skip it:
  the codec verifies the DV). An empty file list gives an empty frame.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.spark.dv_words import (
    BLOCK_BITS,
    BLOCK_COL,
    BLOCK_KEY_COL,
    BLOCK_ROW_BYTES,
    KEY_BLOCK_BITS,
    KEY_COL,
    WORDS_COL,
    WORDS_PER_BLOCK,
    KeyedDv,
    block_words,
    driver_words_table,
    estimated_words_bytes,
    split_for_driver,
    words_batch,
)
from dvlake.spark.engines import refuse_scan_replacing_engines
from dvlake.spark.native import enabled as native_enabled
from dvlake.spark.native import read as native_read
from dvlake.spark.native import shared_listing
from dvlake.spark.scan_listing import ListingRef
from dvlake.spark.task_errors import MapInArrowFn, on_executor
from dvlake.storage.base import Storage, storage_for
from dvlake.storage.paths import path_key as path_key

FILE_INDEX_COL = "__dvlake_file_index"
FILE_PATH_COL = "__dvlake_file_path"
ROW_INDEX_COL = "__dvlake_row_index"
_KEY = KEY_COL
_BLOCK = BLOCK_COL
_WORDS = WORDS_COL
_BLOCK_KEY = BLOCK_KEY_COL
_BLOCK_ROW_BYTES = BLOCK_ROW_BYTES

#: File sizes that fit the one-long key ``file_size << KEY_BLOCK_BITS | block`` (below 8 TiB);
#: a group with a larger file (or a file of unknown or >= 2**32 rows) uses a two-column key.
WORD_KEY_FILE_BITS = 63 - KEY_BLOCK_BITS
#: Upper bound on the estimated DV words one scan group broadcasts; files are packed into
#: groups by this estimate, and a single file above it is joined by a shuffled hash join.
MAX_BROADCAST_BYTES = 64 * 1024 * 1024
#: Distinct partition-value tuples read as separate literal-tagged scans up to this many; above
#: it, files are keyed by size and the values are attached by one broadcast join.
MAX_LITERAL_PARTITION_GROUPS = 16
#: A keyed scan of at most this many files sharing one partition tuple finds each row's file index by looking its key
#: up in a literal map instead of a join with a broadcast (file key → index) table.
MAX_LOOKUP_KEYS = 64


@dataclass(frozen=True)
class ScanFile:
    """One data file to read, as planned from the log."""

    path: str                    # absolute location Spark can read (plain local path or URI)
    size: int                    # bytes (add.size)
    num_records: int | None      # physical rows in the file (stats.numRecords), None if unknown
    dv: DeletionVectorDescriptor | None
    partition_values: tuple = ()  # typed Python values in partition_schema order


Indexed = list[tuple[int, ScanFile]]


def _empty(spark: SparkSession, schema: StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


def _read(spark: SparkSession, paths: list[str], data_schema: StructType, data_filter: Column | None) -> DataFrame:
    df = spark.read.schema(data_schema).parquet(*paths)
    return df if data_filter is None else df.filter(data_filter)


def _output_schema(data_schema: StructType, partition_schema: StructType, include_row_index: bool) -> StructType:
    fields = list(data_schema.fields) + list(partition_schema.fields)
    if include_row_index:
        fields += [StructField(FILE_INDEX_COL, IntegerType(), False), StructField(ROW_INDEX_COL, LongType(), False)]
    return StructType(fields)


def _partition_literals(partition_schema: StructType, values: tuple) -> list[Column]:
    return [F.lit(v).cast(f.dataType).alias(f.name) for f, v in zip(partition_schema.fields, values, strict=True)]


def _has_dv(f: ScanFile) -> bool:
    """Any descriptor counts, whatever its cardinality says: planning never skips loading a DV on the
    strength of metadata the codec has not verified (a ``cardinality: 0`` lie would resurrect rows)."""
    return f.dv is not None


def _with_actual_sizes(indexed: Indexed, storage: Storage) -> Indexed:
    """The files with ``size`` set to what the filesystem reports.

    The scan keys rows by Spark's ``_metadata.file_size``; a log whose ``add.size`` disagrees with
    the file (a foreign writer's bug) would otherwise leave that file's DV silently unapplied.
    One batched stat per keyed file buys that certainty.
    """
    if not indexed:
        return indexed
    infos = storage.stat_many([f.path for _, f in indexed])
    out = []
    for (i, f), info in zip(indexed, infos, strict=True):
        if info is None:
            from dvlake.errors import DataFileNotFoundError

            raise DataFileNotFoundError(
                f"data file {f.path} listed in the Delta log does not exist; restore it, or time travel to a "
                "version that does not reference it")
        out.append((i, f if info.size == f.size else replace(f, size=int(info.size))))
    return out


def _estimated_words_bytes(f: ScanFile) -> int:
    """Upper bound of the build-side bytes of one file's DV (one row per block with a deletion)."""
    return estimated_words_bytes(f.dv, f.num_records)


def _scan_groups(indexed: Indexed, budget: int | None = None, *, by_partition: bool = False) -> list[Indexed]:
    """Split files into groups where the size identifies what the scan keys by (first fit).

    Normally no two files of a group share a size (the size is the file's key). With
    ``by_partition`` files of equal size may share a group when their partition values are equal
    (the key then only has to find those values). With a ``budget``, a group's estimated DV
    words stay within it (a file alone above it gets a group of its own).
    """
    groups: list[Indexed] = []
    keys: list[dict[int, tuple]] = []
    loads: list[int] = []
    for item in indexed:
        f = item[1]
        cost = _estimated_words_bytes(f) if budget is not None else 0
        for g, (seen, load) in enumerate(zip(keys, loads, strict=True)):
            clash = f.size in seen and not (by_partition and seen[f.size] == tuple(f.partition_values))
            if not clash and (budget is None or load + cost <= budget):
                groups[g].append(item)
                seen[f.size] = tuple(f.partition_values)
                loads[g] += cost
                break
        else:
            groups.append([item])
            keys.append({f.size: tuple(f.partition_values)})
            loads.append(cost)
    return groups


def _one_long_key_fits(group: Indexed) -> bool:
    """Whether ``file_size << KEY_BLOCK_BITS | row_index >> BLOCK_BITS`` is unique in the group."""
    return all(f.size < (1 << WORD_KEY_FILE_BITS) and f.num_records is not None and f.num_records <= (1 << 32)
               for _, f in group)


def _dv_block_words(table_root: str, one_long: bool, confine: bool = True) -> MapInArrowFn:
    """mapInArrow: (file key, descriptor JSON) rows → one row per block holding a deletion.

    Output ``(block key, words)`` with the one-long key, else ``(file key, block, words)``. The
    codec verifies each DV (size, checksum, cardinality) and raises its typed error, naming the
    DV file, which fails the query (and reaches the caller typed: ``task_errors.on_executor``).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dvlake.dv.roaring import to_numpy
        from dvlake.dv.store import load_bitmap

        for batch in batches:
            for key, dv_json in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist(), strict=True):
                rows = to_numpy(load_bitmap(DeletionVectorDescriptor.from_json(json.loads(dv_json)), table_root,
                                            confine=confine))
                blocks, words = block_words(rows)
                if blocks.size:
                    yield words_batch(key, blocks, words, one_long)

    return on_executor(run)


def _dv_table(spark: SparkSession, group: Indexed, table_root: str, one_long: bool, confine: bool = True) -> DataFrame:
    """The group's DV words as a DataFrame, hinted for the join.

    Small DVs are decoded on the driver (bounded, cached: ``dv_words``) and become a local relation
    that Spark broadcasts without a job; the rest are decoded on executors.
    """
    import pandas as pd

    schema = f"{_BLOCK_KEY} long, {_WORDS} array<long>" if one_long else \
        f"{_KEY} long, {_BLOCK} long, {_WORDS} array<long>"
    local, remote = split_for_driver([KeyedDv(f.size, f.dv, f.num_records) for _, f in group if f.dv is not None])
    frames = []
    if local or not remote:
        frames.append(spark.createDataFrame(driver_words_table(local, table_root, one_long, confine), schema))
    if remote:
        frame = pd.DataFrame({"key": [d.key for d in remote], "dv": [json.dumps(d.dv.to_json()) for d in remote]})
        descriptors = spark.createDataFrame(frame, "key long, dv string")
        frames.append(descriptors.mapInArrow(_dv_block_words(table_root, one_long, confine), schema))
    words = frames[0] if len(frames) == 1 else frames[0].union(frames[1])
    if sum(_estimated_words_bytes(f) for _, f in group) <= MAX_BROADCAST_BYTES:
        return F.broadcast(words)
    return words.hint("shuffle_hash")


def _drop_deleted(df: DataFrame, words: DataFrame, key: Column, row: Column, one_long: bool) -> DataFrame:
    """``df`` without the rows whose bit is set: a left anti join on the row's block."""
    word = F.get(words[_WORDS], F.shiftright(row, 6).bitwiseAND(WORDS_PER_BLOCK - 1).cast("int"))
    deleted = F.getbit(word, row.bitwiseAND(63).cast("int")) == 1
    if one_long:
        on = F.shiftleft(key, KEY_BLOCK_BITS).bitwiseOR(F.shiftright(row, BLOCK_BITS)) == words[_BLOCK_KEY]
    else:
        on = (key == words[_KEY]) & (F.shiftright(row, BLOCK_BITS) == words[_BLOCK])
    return df.join(words, on & deleted, "left_anti")


def _partition_table(spark: SparkSession, group: Indexed, partition_schema: StructType) -> DataFrame:
    """(file key → file index, partition values) of a group, broadcast (one row per key)."""
    rows = list({f.size: (f.size, i, *f.partition_values) for i, f in group}.values())
    schema = StructType([StructField(_KEY, LongType(), False), StructField(FILE_INDEX_COL, IntegerType(), False),
                         *partition_schema.fields])
    return F.broadcast(spark.createDataFrame(rows, schema))


def _keyed_scan(spark: SparkSession, group: Indexed, data_schema: StructType, partition_schema: StructType,
                table_root: str, data_filter: Column | None, include_row_index: bool, confine: bool = True,
                native: bool = False, shared: ListingRef | None = None) -> DataFrame:
    """One unique-size group read as one scan; DVs dropped, file index and partition values joined by key (for a
    few files of one partition tuple: literals, and the index looked up by key in a literal map).

    ``native``: the native reader drops the deleted rows itself; the key and ``_metadata.row_index`` (the physical
    index: the reader filters after Spark numbered the rows) are Spark's metadata columns on either path. When the
    caller does not keep the row index, Spark prunes it and the native reader finds row indexes its faster way.
    ``shared``: the read's native listing file (``native.shared_listing``), else the group's listing is inline.
    """
    if native:
        df = native_read(spark, [f for _, f in group], data_schema, table_root, confine, shared)
        df = df if data_filter is None else df.filter(data_filter)
    else:
        df = _read(spark, [f.path for _, f in group], data_schema, data_filter)
    df = df.select("*", F.col("_metadata.file_size").alias(_KEY), F.col("_metadata.row_index").alias(ROW_INDEX_COL))
    if not native and any(_has_dv(f) for _, f in group):
        one_long = _one_long_key_fits(group)
        df = _drop_deleted(df, _dv_table(spark, group, table_root, one_long, confine), F.col(_KEY), F.col(ROW_INDEX_COL),
                           one_long)
    data_cols = [F.col(f"`{f.name}`") for f in data_schema.fields]
    tuples = {tuple(f.partition_values) for _, f in group}
    if len(tuples) == 1 and len(group) <= MAX_LOOKUP_KEYS:
        # few files of one partition tuple: values as literals and the file index from the key, no join (a broadcast
        # of a table built from driver data costs a Spark job of its own)
        cols = data_cols + _partition_literals(partition_schema, next(iter(tuples)))
        if include_row_index:
            # A map lookup, not a CASE with one arm per file: the arms sit on the path of the rows a DML condition
            # matches, and each file's first matched row took an arm the JIT had never seen taken, so C2 threw the
            # scan stage's compiled loop away and compiled it again, once per file (BENCHMARKS.md, "A row's file
            # index from a map"); the map is one loop and a referenced literal, so the stage's code does not change
            # with the files either. One expression text, not a chain of Column calls (each call is driver round trips).
            pairs = ", ".join(f"{int(f.size)}L, {int(i)}" for i, f in group)
            index = F.expr(f"CAST(try_element_at(map({pairs}), `{_KEY}`) AS INT)")
            cols += [index.alias(FILE_INDEX_COL), F.col(ROW_INDEX_COL)]
        return df.select(*cols)
    df = df.join(_partition_table(spark, group, partition_schema), _KEY, "inner")
    cols = data_cols + [F.col(f"`{f.name}`") for f in partition_schema.fields]
    if include_row_index:
        cols += [F.col(FILE_INDEX_COL), F.col(ROW_INDEX_COL)]
    return df.select(*cols)


def _literal_scans(spark: SparkSession, group: Indexed, data_schema: StructType, partition_schema: StructType,
                   table_root: str, data_filter: Column | None, confine: bool = True) -> list[DataFrame]:
    """One scan per partition tuple of the group, values as literals; the group's DVs (one table,
    reused by every scan) dropped by the anti join on Spark's metadata columns."""
    by_partition: dict[tuple, list[str]] = defaultdict(list)
    for _, f in group:
        by_partition[tuple(f.partition_values)].append(f.path)
    words = None
    if any(_has_dv(f) for _, f in group):
        one_long = _one_long_key_fits(group)
        words = _dv_table(spark, group, table_root, one_long, confine)
    out = []
    for values, paths in by_partition.items():
        df = _read(spark, paths, data_schema, data_filter)
        if words is not None:
            # the metadata columns as plain columns first: a join condition that names ``_metadata`` makes Spark 4.0's
            # analyzer put a Project over the Join, which its Dataset.join then fails to cast (ClassCastException)
            df = df.select("*", F.col("_metadata.file_size").alias(_KEY), F.col("_metadata.row_index").alias(ROW_INDEX_COL))
            df = _drop_deleted(df, words, F.col(_KEY), F.col(ROW_INDEX_COL), one_long).drop(_KEY, ROW_INDEX_COL)
        if partition_schema.fields:
            df = df.select("*", *_partition_literals(partition_schema, values))
        out.append(df)
    return out


def _dv_groups(with_dv: Indexed, storage: Storage, native: bool, *, by_partition: bool) -> list[Indexed]:
    """Scan groups of the files with a DV. The native reader broadcasts no DV words: its groups only keep the size
    key unique (``by_partition``: unique per partition tuple); the pure-Python path's also bound the words."""
    sized = _with_actual_sizes(with_dv, storage)
    return _scan_groups(sized, by_partition=by_partition) if native else _scan_groups(sized, MAX_BROADCAST_BYTES)


def scan_files(spark: SparkSession, files: Sequence[ScanFile], data_schema: StructType, partition_schema: StructType,
               table_root: str, *, data_filter: Column | None = None, include_row_index: bool = False,
               confine: bool = True) -> DataFrame:
    """Rows of ``files`` (``data_schema`` columns, then ``partition_schema`` columns), DVs applied.

    ``data_filter`` is applied to the rows as read (Spark pushes it into the Parquet reader).
    With ``include_row_index`` two more columns come out: ``FILE_INDEX_COL`` (position of the
    file in ``files``) and ``ROW_INDEX_COL`` (its physical row index), for DML. ``confine``: DV
    files must resolve inside ``table_root`` (``storage/confine.py``).

    A file whose DV claims to delete every row is still read with its DV applied: skipping it on
    the strength of ``cardinality`` and ``numRecords`` would hide live rows when either lies.
    """
    out_schema = _output_schema(data_schema, partition_schema, include_row_index)
    live = list(enumerate(files))
    if not live:
        return _empty(spark, out_schema)
    plain = [(i, f) for i, f in live if not _has_dv(f)]
    with_dv = [(i, f) for i, f in live if _has_dv(f)]
    storage = storage_for(table_root)
    if with_dv or include_row_index:  # an engine that swaps Spark's Parquet scan for its own would skip the DVs
        refuse_scan_replacing_engines(spark, f"reading {len(with_dv)} file(s) with a DV would return deleted rows"
                                      if with_dv else "the row indexes DML marks deleted would not be Spark's")
    parts: list[DataFrame] = []
    if include_row_index:
        # DML: every file through the native scan when it loads, DV or not: it fills the row index from the row groups
        native = native_enabled(spark)
        shared = shared_listing(spark, files, table_root, confine) if native else None
        parts = _row_index_scans(spark, plain, with_dv, storage, native, data_schema, partition_schema,
                                 table_root, data_filter, confine, shared)
    elif (with_dv or partition_schema.fields) and native_enabled(spark):
        return _one_native_relation(spark, [f for _, f in live], data_schema, partition_schema, table_root,
                                    data_filter, confine)
    else:
        literal = len({tuple(f.partition_values) for _, f in live}) <= MAX_LITERAL_PARTITION_GROUPS
        if plain and literal:
            parts += _literal_scans(spark, plain, data_schema, partition_schema, table_root, data_filter, confine)
        elif plain:
            for group in _scan_groups(_with_actual_sizes(plain, storage), by_partition=True):
                parts.append(_keyed_scan(spark, group, data_schema, partition_schema, table_root, data_filter, False,
                                         confine))
        if with_dv:
            for group in _dv_groups(with_dv, storage, False, by_partition=False):
                if literal:
                    parts += _literal_scans(spark, group, data_schema, partition_schema, table_root, data_filter,
                                            confine)
                else:
                    parts.append(_keyed_scan(spark, group, data_schema, partition_schema, table_root, data_filter,
                                             False, confine))
    result = parts[0]
    for p in parts[1:]:
        result = result.union(p)
    return result


def _one_native_relation(spark: SparkSession, files: list[ScanFile], data_schema: StructType,
                         partition_schema: StructType, table_root: str, data_filter: Column | None,
                         confine: bool) -> DataFrame:
    """Every planned file as ONE native relation: the reader drops each file's deleted rows and fills the partition
    columns from the listing (the log's ``partitionValues``). One relation, not a union of scans per partition: a
    query's own ``_metadata`` columns resolve (a union has none) and the plan does not grow with the partitions.
    Above the inline bound the listing is a file the plan names (``native.shared_listing``)."""
    shared = shared_listing(spark, files, table_root, confine)
    df = native_read(spark, files, data_schema, table_root, confine, shared, partition_schema)
    return df if data_filter is None else df.filter(data_filter)


def _row_index_scans(spark: SparkSession, plain: Indexed, with_dv: Indexed,
                     storage: Storage, native: bool, data_schema: StructType, partition_schema: StructType,
                     table_root: str, data_filter: Column | None, confine: bool,
                     shared: ListingRef | None = None) -> list[DataFrame]:
    """DML's scans with ``FILE_INDEX_COL`` and ``ROW_INDEX_COL``: every file keyed, the file index from the key.

    With ``native`` files without a DV go through the native scan too: Spark's reader fills the row index one boxed
    value at a time (about a tenth of a small UPDATE's scan), the native one from each batch's row group."""
    parts = [_keyed_scan(spark, group, data_schema, partition_schema, table_root, data_filter, True, confine, native,
                         shared)
             for group in _scan_groups(_with_actual_sizes(plain, storage))]
    parts += [_keyed_scan(spark, group, data_schema, partition_schema, table_root, data_filter, True, confine, native,
                          shared)
              for group in _dv_groups(with_dv, storage, native, by_partition=False)]
    return parts


def scan_for_matches(spark: SparkSession, files: Sequence[ScanFile], data_schema: StructType,
                     partition_schema: StructType) -> DataFrame:
    """Rows of ``files`` with ``FILE_PATH_COL`` and ``ROW_INDEX_COL``, deleted rows *not* dropped.

    For DML that marks rows: OR-ing an already deleted row into a DV again changes nothing, so
    the DV join is skipped; the file path string is only materialised for rows that survive the
    caller's filter (Spark evaluates the projection above the filter).
    """
    out_schema = StructType(list(data_schema.fields) + list(partition_schema.fields) + [
        StructField(FILE_PATH_COL, StringType(), False), StructField(ROW_INDEX_COL, LongType(), False)])
    by_partition: dict[tuple, list[str]] = defaultdict(list)
    for f in files:
        by_partition[tuple(f.partition_values)].append(f.path)
    if not by_partition:
        return _empty(spark, out_schema)
    refuse_scan_replacing_engines(spark, "the row indexes DML marks deleted would not be Spark's")
    parts = []
    for values, paths in by_partition.items():
        df = _read(spark, paths, data_schema, None)
        parts.append(df.select("*", *_partition_literals(partition_schema, values),
                               F.col("_metadata.file_path").alias(FILE_PATH_COL),
                               F.col("_metadata.row_index").alias(ROW_INDEX_COL)))
    result = parts[0]
    for p in parts[1:]:
        result = result.unionByName(p)
    return result
