"""Writing change data files (``_change_data/``) for tables with ``delta.enableChangeDataFeed=true``.

UPDATE and MERGE (on the DV path too) and copy-on-write DELETE record their changes explicitly,
as delta-spark does: the change rows (the table's columns plus ``_change_type``) go to Parquet
files under ``_change_data/[partition folders/]`` and each file becomes a ``cdc`` action
(``dataChange: false``) in the command's own commit. A reader then takes that commit's changes
from these files only. DV DELETE writes none: the DV diff is the change.

Column mapping applies as in data files (physical names, field ids); ``_change_type`` is not mapped.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dvlake.commands.common import mode_of, physical_partition_columns
from dvlake.errors import ReservedCdcColumnsOnWriteError
from dvlake.log.actions import AddCDCFile, Metadata
from dvlake.log.cdf_plan import CDC_COLUMNS, CHANGE_TYPE_COL, cdf_enabled
from dvlake.log.snapshot import Snapshot
from dvlake.spark.layout import logical_struct
from dvlake.spark.write import to_physical, write_data_files

CDC_DIR = "_change_data"

__all__ = ["CDC_DIR", "cdf_enabled", "check_no_reserved_columns", "with_change_type", "write_change_files"]


def check_no_reserved_columns(metadata: Metadata, table: str) -> None:
    """A change-feed table must not have columns named like the feed's own (``RESERVED_CDC_COLUMNS_ON_WRITE``)."""
    if not cdf_enabled(metadata):
        return
    clash = [f["name"] for f in metadata.schema["fields"] if f["name"].lower() in CDC_COLUMNS]
    if clash:
        raise ReservedCdcColumnsOnWriteError(
            f"{table} has delta.enableChangeDataFeed=true and column(s) {clash}, which the change feed reserves for "
            f"itself ({list(CDC_COLUMNS)}); rename them (or disable the change feed) before writing to the table")


def with_change_type(df: DataFrame, change_type: str | None) -> DataFrame:
    """``df`` with ``_change_type`` set to ``change_type`` (a literal)."""
    return df.select("*", F.lit(change_type).cast("string").alias(CHANGE_TYPE_COL))


def write_change_files(df: DataFrame, snapshot: Snapshot, metadata: Metadata | None = None) -> list[AddCDCFile]:
    """Write change rows (the table's logical columns + ``_change_type``) as change data files; their ``cdc`` actions.

    ``metadata`` is the metadata the command commits (MERGE's schema evolution), else the snapshot's.
    """
    md = metadata or snapshot.metadata
    check_no_reserved_columns(md, snapshot.table_root)
    schema_json = md.schema
    logical = logical_struct(schema_json)
    ordered = df.select(*[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in logical.fields],
                        F.col(CHANGE_TYPE_COL))
    cm = mode_of(md)
    parts = list(md.partition_columns)
    written = write_data_files(to_physical(ordered, schema_json, cm, extra=(CHANGE_TYPE_COL,)), snapshot.table_root,
                               snapshot.storage, physical_partition_columns(schema_json, parts, cm), [],
                               tight_bounds=None, num_indexed_cols=0, target_subdir=CDC_DIR)
    return [AddCDCFile(path=a.path, partition_values=dict(a.partition_values), size=a.size, data_change=False)
            for a in written]
