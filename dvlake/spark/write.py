"""Writing data files with Spark's own Parquet writer and turning them into ``add`` actions.

Spark writes each job into a private staging folder inside the table (so we know exactly
which files are ours even with concurrent writers); the files are then moved to their final
place (a rename on a local filesystem) and described by ``add`` actions whose stats come from
the Parquet footers. Nothing is visible to readers until the commit names the files.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructType

from dvlake.log.actions import AddFile, now_ms
from dvlake.log.schema import physical_schema
from dvlake.log.stats import num_records_of
from dvlake.spark.file_stats import footer_stats
from dvlake.storage.base import FileInfo, Storage
from dvlake.storage.paths import encode_relative_path, join

HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
STAGING_DIR = "_dvlake_staging"


def to_physical(df: DataFrame, logical_schema: dict[str, Any], mode: str, extra: tuple[str, ...] = ()) -> DataFrame:
    """Rename columns (nested too) to column-mapping physical names and attach Parquet field ids.

    ``extra`` columns (not in the schema, e.g. CDF's ``_change_type``) are passed through unchanged.
    """
    if mode == "none":
        return df
    phys = physical_schema(logical_schema, mode)
    cols = []
    for logical, physical in zip(logical_schema["fields"], phys["fields"], strict=True):
        target: DataType = StructType.fromJson({"type": "struct", "fields": [physical]})[0].dataType
        meta = physical.get("metadata") or {}
        cols.append(F.col(f"`{logical['name']}`").cast(target).alias(physical["name"], metadata=meta))
    return df.select(*cols, *[F.col(f"`{c}`") for c in extra])


def _partition_values(relative_dir: str, partition_columns: list[str]) -> dict[str, str | None]:
    """``k=v`` folder names (Hive-escaped by Spark) back to Delta's string partition values."""
    values: dict[str, str | None] = {}
    for segment in relative_dir.split("/"):
        if "=" in segment:
            k, v = segment.split("=", 1)
            k, v = unquote(k), unquote(v)
            values[k] = None if v == HIVE_NULL else v
    return {c: values.get(c) for c in partition_columns}


def write_data_files(df: DataFrame, table_root: str, storage: Storage, partition_columns: list[str],
                     stats_columns: list[str] | None, *, tight_bounds: bool | None,
                     num_indexed_cols: int = 32, target_subdir: str = "", skip_empty: bool = False) -> list[AddFile]:
    """Write ``df`` (already in physical column names) as Parquet files of the table; return their adds.

    ``stats_columns``: dotted physical leaf paths to collect stats for (partition columns excluded).
    ``skip_empty``: a file without rows (Spark writes one for an empty frame) is left in staging, not added: for
    callers that write a frame they have not counted (MERGE's inserts).
    """
    staging = join(table_root, STAGING_DIR, uuid.uuid4().hex)
    writer = df.write.mode("overwrite").option("compression", "snappy")
    if partition_columns:
        writer = writer.partitionBy(*partition_columns)
    writer.parquet(staging)
    try:
        written = [f for f in storage.walk(staging) if f.path.endswith(".parquet")
                   and not os.path.basename(f.path).startswith((".", "_"))]

        def describe(info: FileInfo) -> AddFile | None:
            rel_in_staging = info.path[len(staging) + 1:]
            rel_dir = os.path.dirname(rel_in_staging)
            final_rel = "/".join(p for p in (target_subdir, rel_in_staging) if p)
            stats, _ = footer_stats(info.path, stats_columns, num_indexed_cols, tight_bounds, storage=storage)
            if skip_empty and num_records_of(stats) == 0:
                return None  # deleted with the staging folder
            storage.move(info.path, join(table_root, final_rel))
            return AddFile(path=encode_relative_path(final_rel), partition_values=_partition_values(rel_dir, partition_columns),
                           size=info.size, modification_time=now_ms(), data_change=True, stats=stats)

        with ThreadPoolExecutor(max_workers=8) as pool:
            return [a for a in pool.map(describe, written) if a is not None]
    finally:
        storage.delete_dir(staging)
        _remove_if_empty(join(table_root, STAGING_DIR))


def _remove_if_empty(folder: str) -> None:
    """Drop the shared staging folder once no writer uses it (a concurrent writer's job keeps it)."""
    if "://" in folder:
        return  # object stores have no empty folders to leave behind
    try:
        os.rmdir(folder)
    except OSError:
        pass  # not empty (another write is staging) or already gone
