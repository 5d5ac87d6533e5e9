"""The physical scan: Parquet files → rows, with each file's deletion vector applied.

Design (measured in bench/read_overhead.py; alternatives in BENCHMARKS.md):
- Files without a DV are read by Spark's plain Parquet scan, with partition values attached as
  literals per partition group — no extra column, no join, no Python.
- Files with a DV are read with two constant-per-file metadata longs, ``_metadata.file_size``
  (the file's key) and ``_metadata.row_index`` (the physical row index in the whole file, so
  splits and row-group skipping cannot shift it). Files of equal size go to separate scan
  groups so the key is unique within each group. Deleted rows are dropped by a broadcast hash
  join on (key, row_index >> 16) against 65,536-row chunks of the DV as 1,024 bit words, the bit
  tested with built-in ``getbit`` — no per-row string, no Python per row. The join key is one
  long, ``file_size << 26 | row_index >> 6`` (a 64-row word), so Spark uses its fastest hash
  relation and a build row is 16 bytes; the older (key, 65,536-row chunk) → 1,024-word array
  join remains for files whose size or row count does not fit that key.
- The words are built on executors from the DV descriptors (``mapInArrow``); the driver ships
  descriptors only and never holds deleted row indexes. The broadcast of the (compact) words is
  used only while the DVs are small on disk; above that Spark shuffles instead.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dvlake.dv.descriptor import DeletionVectorDescriptor

FILE_INDEX_COL = "__dvlake_file_index"
FILE_PATH_COL = "__dvlake_file_path"
ROW_INDEX_COL = "__dvlake_row_index"
_KEY = "__dvlake_file_key"
_CHUNK = "__dvlake_chunk"
_WORDS = "__dvlake_words"
_WORD_KEY = "__dvlake_word_key"
CHUNK_BITS = 16
WORDS_PER_CHUNK = (1 << CHUNK_BITS) // 64
#: Partition groups read as separate literal-tagged scans up to this many; above it a join attaches values.
MAX_LITERAL_PARTITION_GROUPS = 64
#: Broadcast the DV chunk table when the DVs are at most this large on disk (the words are ~8 KiB per chunk).
BROADCAST_DV_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ScanFile:
    """One data file to read, as planned from the log."""

    path: str
    size: int
    num_records: int | None
    dv: DeletionVectorDescriptor | None
    partition_values: tuple = ()


def _empty(spark: SparkSession, schema: StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


def _read(spark: SparkSession, paths: list[str], data_schema: StructType) -> DataFrame:
    return spark.read.schema(data_schema).parquet(*paths)


def _output_schema(data_schema: StructType, partition_schema: StructType, include_row_index: bool) -> StructType:
    fields = list(data_schema.fields) + list(partition_schema.fields)
    if include_row_index:
        fields += [StructField(FILE_INDEX_COL, IntegerType(), False), StructField(ROW_INDEX_COL, LongType(), False)]
    return StructType(fields)


def _partition_literals(partition_schema: StructType, values: tuple) -> list[Column]:
    return [F.lit(v).cast(f.dataType).alias(f.name) for f, v in zip(partition_schema.fields, values)]


def _with_actual_sizes(indexed: list[tuple[int, ScanFile]]) -> list[tuple[int, ScanFile]]:
    """The files with ``size`` set to what the filesystem reports.

    The scan keys rows by Spark's ``_metadata.file_size``; a log whose ``add.size`` disagrees with
    the file (a foreign writer's bug) would otherwise leave that file's DV silently unapplied.
    One batched stat per keyed file buys that certainty.
    """
    from dataclasses import replace as _replace

    from dvlake.dv.store import filesystem_for

    if not indexed:
        return indexed
    fs, _ = filesystem_for(indexed[0][1].path)
    paths = [filesystem_for(f.path)[1] for _, f in indexed]
    infos = fs.get_file_info(paths)
    out = []
    for (i, f), info in zip(indexed, infos):
        if info.size is None:
            from dvlake.errors import DataFileNotFoundError

            raise DataFileNotFoundError(
                f"data file {f.path} listed in the Delta log does not exist; restore it, or time travel to a "
                "version that does not reference it")
        out.append((i, f if info.size == f.size else _replace(f, size=int(info.size))))
    return out


def _unique_size_groups(indexed: list[tuple[int, ScanFile]]) -> list[list[tuple[int, ScanFile]]]:
    """Split files so that within a group no two share a size (the size is the file's key there)."""
    groups: list[list[tuple[int, ScanFile]]] = []
    seen: list[set[int]] = []
    for item in indexed:
        size = item[1].size
        for g, sizes in zip(groups, seen):
            if size not in sizes:
                g.append(item)
                sizes.add(size)
                break
        else:
            groups.append([item])
            seen.append({size})
    return groups


def _dv_chunk_words(table_root: str):
    """mapInArrow: (key, dv json) rows → (key, chunk, 1,024 bit words) rows for every chunk with a deletion."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dvlake.dv.roaring import to_numpy
        from dvlake.dv.store import load_bitmap

        for batch in batches:
            keys_out, chunks_out, words_out = [], [], []
            for key, dv_json in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                rows = to_numpy(load_bitmap(DeletionVectorDescriptor.from_json(json.loads(dv_json)), table_root))
                if rows.size == 0:
                    continue
                chunk_ids = rows >> np.uint64(CHUNK_BITS)
                bounds = np.flatnonzero(np.diff(chunk_ids)) + 1
                for part in np.split(rows, bounds):
                    words = np.zeros(WORDS_PER_CHUNK, dtype=np.uint64)
                    pos = part & np.uint64((1 << CHUNK_BITS) - 1)
                    np.bitwise_or.at(words, (pos >> np.uint64(6)).astype(np.int64),
                                     np.left_shift(np.uint64(1), pos & np.uint64(63)))
                    keys_out.append(key)
                    chunks_out.append(int(part[0] >> np.uint64(CHUNK_BITS)))
                    words_out.append(words.view(np.int64))
            if keys_out:
                words_arr = pa.ListArray.from_arrays(
                    pa.array(np.arange(0, (len(words_out) + 1) * WORDS_PER_CHUNK, WORDS_PER_CHUNK, dtype=np.int32)),
                    pa.array(np.concatenate(words_out)))
                yield pa.RecordBatch.from_arrays(
                    [pa.array(keys_out, pa.int64()), pa.array(chunks_out, pa.int64()), words_arr],
                    names=[_KEY, _CHUNK, _WORDS])

    return run


WORD_KEY_FILE_BITS = 37  # file sizes below 128 GiB
WORD_KEY_ROW_BITS = 26   # 64-row words: row indexes below 2**32


def word_batch(pairs: list[tuple[int, np.ndarray]]) -> pa.RecordBatch:
    """(file key, deleted rows) pairs → one row per 64-row word holding a deletion: (combined key, bits)."""
    keys_out, words_out = [np.zeros(0, np.uint64)], [np.zeros(0, np.uint64)]
    for key, rows in pairs:
        if rows.size == 0:
            continue
        bits = np.left_shift(np.uint64(1), rows & np.uint64(63))
        uniq, start = np.unique(rows >> np.uint64(6), return_index=True)  # rows are sorted
        keys_out.append((np.uint64(key) << np.uint64(WORD_KEY_ROW_BITS)) | uniq)
        words_out.append(np.bitwise_or.reduceat(bits, start))
    return pa.RecordBatch.from_arrays(
        [pa.array(np.concatenate(keys_out).view(np.int64)), pa.array(np.concatenate(words_out).view(np.int64))],
        names=[_WORD_KEY, _WORDS])


def _dv_words(table_root: str):
    """mapInArrow: (key, dv json) rows → one (combined key, 64-bit word) row per word with a deletion.

    The combined key ``file_size << 26 | row_index >> 6`` lets Spark use its single-long hash
    relation, and a build row is 16 bytes, so the broadcast stays small (≤ rows/64 entries).
    """

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from dvlake.dv.roaring import to_numpy
        from dvlake.dv.store import load_bitmap

        for batch in batches:
            pairs = [(key, to_numpy(load_bitmap(DeletionVectorDescriptor.from_json(json.loads(dv_json)), table_root)))
                     for key, dv_json in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist())]
            out = word_batch(pairs)
            if out.num_rows:
                yield out

    return run


def _keyed_scan(spark: SparkSession, group: list[tuple[int, ScanFile]], data_schema: StructType,
                partition_schema: StructType, table_root: str, include_row_index: bool,
                data_filter: Column | None) -> DataFrame:
    """Files of one unique-size group: key + row index columns, DVs applied, partition values joined."""
    df = _read(spark, [f.path for _, f in group], data_schema)
    if data_filter is not None:
        df = df.filter(data_filter)
    df = df.select("*", F.col("_metadata.file_size").alias(_KEY), F.col("_metadata.row_index").alias(ROW_INDEX_COL))
    dv_files = [(i, f) for i, f in group if f.dv is not None]
    word_keys_fit = all(f.size < (1 << WORD_KEY_FILE_BITS) and (f.num_records or 0) < (1 << 32) for _, f in group)
    if dv_files and word_keys_fit:
        # DVs are decoded where the data is read: the driver ships descriptors only
        descriptors = spark.createDataFrame([(f.size, json.dumps(f.dv.to_json())) for _, f in dv_files],
                                            f"{_KEY} long, dv string")
        words = descriptors.mapInArrow(_dv_words(table_root), f"{_WORD_KEY} long, {_WORDS} long")
        if sum(f.dv.size_in_bytes for _, f in dv_files) <= BROADCAST_DV_BYTES:
            words = F.broadcast(words)
        df = df.withColumn(_WORD_KEY, F.shiftleft(F.col(_KEY), WORD_KEY_ROW_BITS) + F.shiftright(F.col(ROW_INDEX_COL), 6))
        df = df.join(words, on=_WORD_KEY, how="left")
        deleted = F.call_function("getbit", F.col(_WORDS), (F.col(ROW_INDEX_COL) % 64).cast("int")) == 1
        df = df.filter(F.col(_WORDS).isNull() | ~deleted).drop(_WORD_KEY, _WORDS)
    elif dv_files:
        descriptors = spark.createDataFrame([(f.size, json.dumps(f.dv.to_json())) for _, f in dv_files],
                                            f"{_KEY} long, dv string")
        chunks = descriptors.mapInArrow(_dv_chunk_words(table_root),
                                        f"{_KEY} long, {_CHUNK} long, {_WORDS} array<long>")
        if sum(f.dv.size_in_bytes for _, f in dv_files) <= BROADCAST_DV_BYTES:
            chunks = F.broadcast(chunks)
        df = df.withColumn(_CHUNK, F.shiftright(F.col(ROW_INDEX_COL), CHUNK_BITS))
        df = df.join(chunks, on=[_KEY, _CHUNK], how="left")
        word = F.element_at(F.col(_WORDS), (F.shiftright(F.col(ROW_INDEX_COL), 6) % WORDS_PER_CHUNK + 1).cast("int"))
        deleted = F.call_function("getbit", word, (F.col(ROW_INDEX_COL) % 64).cast("int")) == 1
        df = df.filter(F.col(_WORDS).isNull() | ~deleted).drop(_CHUNK, _WORDS)
    needs_join = bool(partition_schema.fields) or include_row_index
    if needs_join:
        rows = [(f.size, i, *f.partition_values) for i, f in group]
        schema = StructType([StructField(_KEY, LongType(), False), StructField(FILE_INDEX_COL, IntegerType(), False),
                             *partition_schema.fields])
        df = df.join(F.broadcast(spark.createDataFrame(rows, schema)), on=_KEY, how="inner")
    cols = [F.col(f"`{f.name}`") for f in data_schema.fields] + [F.col(f"`{f.name}`") for f in partition_schema.fields]
    if include_row_index:
        cols += [F.col(FILE_INDEX_COL), F.col(ROW_INDEX_COL)]
    return df.select(*cols)


def scan_files(spark: SparkSession, files: Sequence[ScanFile], data_schema: StructType, partition_schema: StructType,
               table_root: str, *, data_filter: Column | None = None, include_row_index: bool = False) -> DataFrame:
    """Rows of ``files`` (data columns, then partition columns), DVs applied.

    With ``include_row_index`` two more columns come out: ``FILE_INDEX_COL`` (position of the
    file in ``files``) and ``ROW_INDEX_COL`` (its physical row index), for DML.
    """
    out_schema = _output_schema(data_schema, partition_schema, include_row_index)
    live = [(i, f) for i, f in enumerate(files)
            if not (f.dv is not None and f.num_records is not None and f.dv.cardinality >= f.num_records)]
    if not live:
        return _empty(spark, out_schema)
    parts: list[DataFrame] = []
    plain = [(i, f) for i, f in live if f.dv is None and not include_row_index]
    keyed = [(i, f) for i, f in live if f.dv is not None or include_row_index]
    if plain:
        by_partition: dict[tuple, list[str]] = defaultdict(list)
        for _, f in plain:
            by_partition[tuple(f.partition_values)].append(f.path)
        if len(by_partition) <= MAX_LITERAL_PARTITION_GROUPS:
            for values, paths in by_partition.items():
                df = _read(spark, paths, data_schema)
                if data_filter is not None:
                    df = df.filter(data_filter)
                parts.append(df.select("*", *_partition_literals(partition_schema, values)))
        else:
            keyed = plain + keyed
    for group in _unique_size_groups(_with_actual_sizes(keyed)):
        parts.append(_keyed_scan(spark, group, data_schema, partition_schema, table_root, include_row_index, data_filter))
    result = parts[0]
    for p in parts[1:]:
        result = result.unionByName(p)
    return result


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
    parts = []
    for values, paths in by_partition.items():
        df = _read(spark, paths, data_schema)
        parts.append(df.select("*", *_partition_literals(partition_schema, values),
                               F.col("_metadata.file_path").alias(FILE_PATH_COL),
                               F.col("_metadata.row_index").alias(ROW_INDEX_COL)))
    result = parts[0]
    for p in parts[1:]:
        result = result.unionByName(p)
    return result


def path_key(location: str) -> str:
    """One spelling for a file location, whether Spark's ``file:/…`` URI or dvlake's plain path."""
    from urllib.parse import unquote, urlparse

    if location.startswith("file:"):
        return unquote(urlparse(location).path)
    if "://" in location:
        parsed = urlparse(location)
        return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
    return location
