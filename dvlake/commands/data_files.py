"""Writing rows as a table's data files, laid out as the table says.

DELETE's copy-on-write, UPDATE and MERGE (``dml.shared.write_rows``), a plain write and OPTIMIZE all turn logical
rows into Parquet files of the table. What makes the files right for *this* table is the same every time: the
physical names and field ids of column mapping, the physical partition columns, which leaves get statistics (and
how many), and whether fresh files carry ``tightBounds``. It is derived here once from the metadata and protocol
the commit will carry, so a command cannot write files laid out for another table version than it commits.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from dvlake.commands.common import mode_of, num_indexed_cols, physical_partition_columns, stats_leaf_paths, tight_bounds_flag
from dvlake.log.actions import AddFile, Metadata, Protocol
from dvlake.spark.write import to_physical, write_data_files
from dvlake.storage.base import Storage


def write_table_files(df: DataFrame, table_root: str, storage: Storage, metadata: Metadata, protocol: Protocol, *,
                      extra: tuple[str, ...] = (), skip_empty: bool = False) -> list[AddFile]:
    """Write ``df`` (the table's logical columns in schema order, plus ``extra`` columns such as row tracking's
    kept ids) as new data files of the table at ``table_root``; returns their adds, not committed.

    ``skip_empty``: a file that turns out to hold no row is not added (for a frame the caller did not count)."""
    mode = mode_of(metadata)
    schema = metadata.schema
    parts = list(metadata.partition_columns)
    return write_data_files(to_physical(df, schema, mode, extra=extra), table_root, storage,
                            physical_partition_columns(schema, parts, mode), stats_leaf_paths(schema, parts, mode),
                            tight_bounds=tight_bounds_flag(protocol), num_indexed_cols=num_indexed_cols(metadata.configuration),
                            skip_empty=skip_empty)
