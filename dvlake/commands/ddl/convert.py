"""CONVERT TO DELTA: a directory of Parquet files becomes a Delta table in place.

No data file is read beyond its footer and none is rewritten: version 0 lists every file as an
``add`` whose stats come from the footer (as freshly written files get them), with partition values
parsed from ``col=value`` folder names checked against the given partition schema. As delta-spark:

- a directory that already holds a Delta table is left alone (converting is idempotent);
- an empty directory is refused (DELTA_EMPTY_DIRECTORY);
- a file that is not valid Parquet is refused, naming it (FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER);
- folders that do not match the partition schema are refused
  (DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME, DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME,
  DELTA_FAILED_CAST_PARTITION_VALUE);
- files whose schemas cannot be merged are refused (CANNOT_MERGE_SCHEMAS).
Files and folders whose names start with ``_`` or ``.`` (``_SUCCESS``, ``.crc``, ``_delta_log``) are skipped.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote

import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType

from dvlake.commands.common import num_indexed_cols, stats_leaf_paths, tight_bounds_flag, try_load
from dvlake.commands.writes.write import new_table_metadata
from dvlake.errors import ConvertToDeltaError
from dvlake.log.actions import AddFile
from dvlake.log.schema import MODE_KEY
from dvlake.spark.file_stats import footer_stats, read_footer
from dvlake.spark.write import HIVE_NULL
from dvlake.storage.base import FileInfo, Storage, storage_for
from dvlake.storage.paths import encode_relative_path, normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _partition_schema(spark: SparkSession, partition_schema: StructType | str | None) -> StructType:
    if partition_schema is None:
        return StructType([])
    if isinstance(partition_schema, StructType):
        return partition_schema
    return spark.createDataFrame([], partition_schema).schema


_INTEGRAL = {"tinyint": (-(2**7), 2**7 - 1), "smallint": (-(2**15), 2**15 - 1), "int": (-(2**31), 2**31 - 1),
             "bigint": (-(2**63), 2**63 - 1)}


def _check_cast(value: str, type_name: str) -> None:
    """Raise ValueError when Spark could not cast the folder's value to the partition column's type
    (``type_name`` is Spark's simple string: int, bigint, date, decimal(10,2), …)."""
    if type_name in _INTEGRAL:
        lo, hi = _INTEGRAL[type_name]
        if not lo <= int(value) <= hi:
            raise ValueError(value)
    elif type_name in ("float", "double"):
        float(value)
    elif type_name.startswith("decimal"):
        decimal.Decimal(value)
    elif type_name == "boolean":
        if value.lower() not in ("true", "false"):
            raise ValueError(value)
    elif type_name == "date":
        dt.date.fromisoformat(value)
    elif type_name.startswith("timestamp"):
        dt.datetime.fromisoformat(value)


def _partition_values(relative: str, partition: StructType) -> dict[str, str | None]:
    folders = relative.split("/")[:-1]
    pairs = [f.split("=", 1) for f in folders if "=" in f]
    expected = partition.names
    if len(pairs) != len(folders) or len(pairs) != len(expected):
        found = [unquote(p[0]) for p in pairs]
        raise ConvertToDeltaError(
            f"Expecting {len(expected)} partition column(s): {expected}, but found {len(folders)} partition column(s): "
            f"{found if len(pairs) == len(folders) else folders} from parsing the file name: {relative}. Give the "
            "partition schema with PARTITIONED BY (col type, …) / partitionSchema that matches the folders",
            "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME")
    values: dict[str, str | None] = {}
    for field, (key, raw) in zip(partition.fields, pairs, strict=True):
        key = unquote(key)
        if key.lower() != field.name.lower():
            raise ConvertToDeltaError(f"Expecting partition column {field.name}, but found partition column {key} "
                                      f"from parsing the file name: {relative}",
                                      "DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME")
        value = unquote(raw)
        if value == HIVE_NULL:
            values[field.name] = None
            continue
        try:
            _check_cast(value, field.dataType.simpleString())
        except (ValueError, decimal.InvalidOperation):
            raise ConvertToDeltaError(f"Failed to cast partition value `{value}` to {field.dataType.simpleString()} "
                                      f"(column {field.name}, file {relative})", "DELTA_FAILED_CAST_PARTITION_VALUE") from None
        values[field.name] = value
    return values


def _footers(storage: Storage, files: list[FileInfo], root: str) -> list[pq.FileMetaData]:
    def one(info: FileInfo) -> pq.FileMetaData:
        try:
            return read_footer(storage, info.path)
        except Exception as e:  # noqa: BLE001 - any reader failure means: not a Parquet file we can convert
            rel = info.path[len(root) + 1:]
            raise ConvertToDeltaError(f"Could not read footer for file {rel} of {root}: {e}. Only Parquet files may be "
                                      "in the directory (move other files out, or into a folder starting with _)",
                                      "FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER") from None

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(one, files))


def _merged_schema(footers: list[pq.FileMetaData], files: list[FileInfo], root: str) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    fields: dict[str, StructField] = {}
    order: list[str] = []
    for md, info in zip(footers, files, strict=True):
        schema = from_arrow_schema(md.schema.to_arrow_schema(), prefer_timestamp_ntz=True)
        for f in schema.fields:
            key = f.name.lower()
            if key not in fields:
                fields[key] = StructField(f.name, f.dataType, True, f.metadata)
                order.append(key)
            elif fields[key].dataType != f.dataType:
                raise ConvertToDeltaError(
                    f"Failed to merge the file schemas: column {f.name} is {fields[key].dataType.simpleString()} in one "
                    f"file and {f.dataType.simpleString()} in {info.path[len(root) + 1:]}", "CANNOT_MERGE_SCHEMAS")
    return StructType([fields[k] for k in order])


def convert_to_delta(spark: SparkSession, path: str, partition_schema: StructType | str | None = None, *,
                     provider: str = "parquet", collect_stats: bool = True,
                     session_defaults: dict[str, str] | None = None) -> int | None:
    """Turn the Parquet directory at ``path`` into a Delta table; returns version 0, or None if it was one already.

    Args:
        spark: the session (used to parse a DDL partition schema).
        path: the directory.
        partition_schema: the partition columns as a StructType or DDL (``"day DATE, region STRING"``),
            in folder order; None for an unpartitioned directory.
        provider: the format named in ``parquet.`<path>``` (``delta`` is accepted for an existing table).
        collect_stats: False leaves the ``add`` actions without stats (``NO STATISTICS``).
        session_defaults: ``delta.*`` table properties from the session's defaults.
    """
    root = normalize_table_root(path)
    if provider.lower() not in ("parquet", "delta"):
        raise ConvertToDeltaError(f"CONVERT TO DELTA only supports parquet tables, but the target is {provider}: "
                                  f"{provider}.`{path}`", "DELTA_CONVERT_NON_PARQUET_TABLE")
    if try_load(root) is not None:
        return None  # already a Delta table: nothing to do, as delta-spark
    storage = storage_for(root)
    try:
        listed = list(storage.walk(root))
    except FileNotFoundError:
        listed = []
    files = sorted((f for f in listed if not _hidden(f.path[len(root) + 1:])), key=lambda f: f.path)
    if not files:
        raise ConvertToDeltaError(f"No file found in the directory: {root}.", "DELTA_EMPTY_DIRECTORY")
    partition = _partition_schema(spark, partition_schema)
    values = [_partition_values(f.path[len(root) + 1:], partition) for f in files]
    footers = _footers(storage, files, root)
    data = _merged_schema(footers, files, root)
    clash = [p for p in partition.names if p.lower() in {n.lower() for n in data.names}]
    if clash:
        raise ConvertToDeltaError(f"partition column(s) {clash} are also columns inside the Parquet files of {root}",
                                  "DELTA_CONVERSION_FAILED")
    schema = StructType(list(data.fields) + [StructField(f.name, f.dataType, True, f.metadata) for f in partition.fields])
    metadata, protocol = new_table_metadata(json.loads(schema.json()), partition.names, {}, session_defaults=session_defaults)
    if metadata.configuration.get(MODE_KEY, "none") != "none":
        raise ConvertToDeltaError("CONVERT TO DELTA cannot apply a column mapping mode (the files keep their column "
                                  "names); unset spark.databricks.delta.properties.defaults.columnMapping.mode",
                                  "DELTA_CONVERSION_FAILED")
    stats_paths = stats_leaf_paths(metadata.schema, partition.names, "none")
    tight = tight_bounds_flag(protocol)
    n_indexed = num_indexed_cols(metadata.configuration)

    def add(item: tuple[FileInfo, pq.FileMetaData, dict[str, str | None]]) -> AddFile:
        info, md, parts = item
        rel = info.path[len(root) + 1:]
        stats = footer_stats(info.path, stats_paths, n_indexed, tight, metadata=md)[0] if collect_stats else None
        return AddFile(path=encode_relative_path(rel), partition_values=parts, size=info.size,
                       modification_time=info.mtime_ms, data_change=True, stats=stats)

    with ThreadPoolExecutor(max_workers=8) as pool:
        adds = list(pool.map(add, zip(files, footers, values, strict=True)))
    txn = OptimisticTransaction(root, None, storage)
    txn.update_metadata(metadata)
    txn.update_protocol(protocol)
    params: dict[str, Any] = {"numFiles": len(adds), "partitionedBy": json.dumps(partition.names),
                              "collectStats": json.dumps(collect_stats), "sourceFormat": "parquet"}
    return txn.commit(adds, "CONVERT", params)


def split_identifier(identifier: str) -> tuple[str, str]:
    """``parquet.`/data/p``` → ("parquet", "/data/p") (delta-spark's convertToDelta identifier)."""
    provider, _, rest = identifier.strip().partition(".")
    rest = rest.strip()
    if not provider or len(rest) < 2 or rest[0] != "`" or rest[-1] != "`":
        raise ConvertToDeltaError(f"expected parquet.`<path>`, got {identifier!r}; dvlake converts Parquet directories "
                                  "by path", "DELTA_MISSING_PROVIDER_FOR_CONVERT")
    return provider.strip(), rest[1:-1].replace("``", "`")
