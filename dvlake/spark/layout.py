"""A table's layout as Spark sees it, built once per snapshot: logical, physical and partition schemas, renames.

Every reader of a Delta table needs the same few facts: the columns users see (logical names, column
mapping stripped), the data columns as they are named inside the Parquet files (physical names under
column mapping), the partition columns typed by their logical types, and how to turn a row read with
physical names into the logical row. The scan, the change feed, the streaming source, DML and the
catalog each used to derive them again; :class:`TableLayout` derives them once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StructField, StructType

from dvlake.log.partitions import parse_partition_value
from dvlake.log.schema import physical_name, physical_schema, strip_column_mapping

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from dvlake.log.snapshot import Snapshot


def logical_struct(schema_json: dict[str, Any]) -> StructType:
    """The table's columns as users see them: the Delta schema with column-mapping metadata stripped."""
    return StructType.fromJson(strip_column_mapping(schema_json))


def all_nullable(dtype: Any) -> Any:
    """The type with every nested field nullable: Parquet reads give nullable fields, and Spark
    refuses to cast a nullable field into a NOT NULL one (the rename casts only change names)."""
    if isinstance(dtype, StructType):
        return StructType([StructField(f.name, all_nullable(f.dataType), True, f.metadata) for f in dtype.fields])
    if isinstance(dtype, ArrayType):
        return ArrayType(all_nullable(dtype.elementType), True)
    if isinstance(dtype, MapType):
        return MapType(all_nullable(dtype.keyType), all_nullable(dtype.valueType), True)
    return dtype


@dataclass(frozen=True)
class TableLayout:
    """The schemas one snapshot is read with (see the module docstring)."""

    logical_schema: StructType       # the table's columns as users see them
    data_schema: StructType          # non-partition columns, physical names (what the Parquet files hold)
    partition_schema: StructType     # partition columns, logical names and types
    #: (physical partition key in ``partitionValues``, the column's Delta field JSON), in partition order
    keyed_partitions: list[tuple[str, dict[str, Any]]]
    #: (physical name, logical name, logical Spark type with nested fields nullable) for each data column
    physical_to_logical: list[tuple[str, str, Any]]

    @classmethod
    def of(cls, snapshot: Snapshot) -> TableLayout:
        """The layout of ``snapshot``'s schema, partition columns and column-mapping mode."""
        return cls.from_schema(snapshot.schema, snapshot.partition_columns, snapshot.column_mapping_mode)

    @classmethod
    def from_schema(cls, schema: dict[str, Any], partition_columns: list[str], mode: str) -> TableLayout:
        """The layout of a Delta schema JSON with these partition columns under column-mapping ``mode``."""
        logical = logical_struct(schema)
        parts = [p.lower() for p in partition_columns]
        phys = physical_schema(schema, mode, with_field_ids=False)
        data_fields = [(f, pf) for f, pf in zip(schema["fields"], phys["fields"], strict=True)
                       if f["name"].lower() not in parts]
        data_schema = StructType.fromJson({"type": "struct", "fields": [pf for _, pf in data_fields]})
        part_fields = [next(f for f in schema["fields"] if f["name"].lower() == p) for p in parts]
        by_name = {f.name: f for f in logical.fields}
        return cls(logical_schema=logical, data_schema=data_schema,
                   partition_schema=StructType([logical[f["name"]] for f in part_fields]),
                   keyed_partitions=[(physical_name(f, mode), f) for f in part_fields],
                   physical_to_logical=[(pf["name"], f["name"], all_nullable(by_name[f["name"]].dataType))
                                        for f, pf in data_fields])

    def typed_partitions(self, values: dict[str, str | None]) -> tuple:
        """A file's ``partitionValues`` (physical keys, strings) as a tuple typed by the partition columns."""
        return tuple(parse_partition_value(values.get(k), f["type"]) for k, f in self.keyed_partitions)

    def to_logical(self, df: DataFrame, extra: list[str]) -> DataFrame:
        """Rows read with physical data columns and logical partition columns, as the logical row, then ``extra``."""
        return to_logical(df, self.logical_schema, self.physical_to_logical, extra)


def to_logical(df: DataFrame, logical_schema: StructType, physical_to_logical: list[tuple[str, str, Any]],
               extra: list[str]) -> DataFrame:
    """Rename (and cast to the logical types) the physical data columns, keep the others, append ``extra``."""
    renamed = {logical: F.col(f"`{phys}`").cast(dtype).alias(logical) if phys != logical else F.col(f"`{phys}`")
               for phys, logical, dtype in physical_to_logical}
    cols = [_with_comment(renamed.get(f.name, F.col(f"`{f.name}`")), f) for f in logical_schema.fields]
    return df.select(*cols, *[F.col(c) for c in extra])


def _with_comment(column: Column, field: StructField) -> Column:
    """A column as delta-spark's ``toDF().schema`` shows it: with its comment (and other user metadata), without the
    table's internal field metadata (``delta.*``: generation expressions, identity marks), which a data file's own
    schema may carry from its writer but which belongs to the log, not to the rows."""
    meta = field.metadata or {}
    if "comment" not in meta and not any(k.startswith("delta.") for k in meta):
        return column
    return column.alias(field.name, metadata={k: v for k, v in meta.items() if not k.startswith("delta.")})
