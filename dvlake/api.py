"""The delta-spark-style Python API: ``DeltaTable`` and its builder, plus ``read``/``write``.

Signatures follow delta-spark's ``delta.tables`` so code written for it ports by changing the
import (``from dvlake import DeltaTable``).
"""

from __future__ import annotations

from typing import Any, Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dvlake.commands import alter, describe
from dvlake.commands import write as write_cmd
from dvlake.errors import InvalidArgumentError, TableNotFoundError
from dvlake.log.snapshot import Snapshot
from dvlake.spark import scan
from dvlake.storage.paths import normalize_table_root

_STR_MAP = MapType(StringType(), StringType())
HISTORY_SCHEMA = StructType([
    StructField("version", LongType()), StructField("timestamp", TimestampType()),
    StructField("userId", StringType()), StructField("userName", StringType()), StructField("operation", StringType()),
    StructField("operationParameters", _STR_MAP),
    StructField("job", StructType([StructField(n, StringType()) for n in
                                   ("jobId", "jobName", "jobRunId", "runId", "jobOwnerId", "triggerType")])),
    StructField("notebook", StructType([StructField("notebookId", StringType())])),
    StructField("clusterId", StringType()), StructField("readVersion", LongType()),
    StructField("isolationLevel", StringType()), StructField("isBlindAppend", BooleanType()),
    StructField("operationMetrics", _STR_MAP), StructField("userMetadata", StringType()),
    StructField("engineInfo", StringType()),
])
DETAIL_SCHEMA = StructType([
    StructField("format", StringType()), StructField("id", StringType()), StructField("name", StringType()),
    StructField("description", StringType()), StructField("location", StringType()),
    StructField("createdAt", TimestampType()), StructField("lastModified", TimestampType()),
    StructField("partitionColumns", ArrayType(StringType())), StructField("clusteringColumns", ArrayType(StringType())),
    StructField("numFiles", LongType()), StructField("sizeInBytes", LongType()), StructField("properties", _STR_MAP),
    StructField("minReaderVersion", LongType()), StructField("minWriterVersion", LongType()),
    StructField("tableFeatures", ArrayType(StringType())), StructField("statistics", MapType(StringType(), LongType())),
])


def _session_defaults(spark: SparkSession) -> dict[str, str]:
    """Table property defaults from the session (delta-spark's ``…properties.defaults.*``)."""
    prefix = "spark.databricks.delta.properties.defaults."
    out = {}
    for key in ("enableDeletionVectors", "enableChangeDataFeed", "checkpointInterval", "columnMapping.mode"):
        value = spark.conf.get(prefix + key, None)
        if value is not None:
            out["delta." + key] = value.lower() if value.lower() in ("true", "false") else value
    return out


class DeltaTable:
    """A Delta table at a path, as in delta-spark."""

    def __init__(self, spark: SparkSession, path: str, alias: str | None = None) -> None:
        self._spark = spark
        self._path = normalize_table_root(path)
        self._alias = alias

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def forPath(cls, sparkSession: SparkSession, path: str, hadoopConf: dict[str, str] | None = None) -> DeltaTable:
        """Open the table at ``path`` (raises TableNotFoundError when there is none)."""
        Snapshot.load(normalize_table_root(path))  # validates: exists and readable
        return cls(sparkSession, path)

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        try:
            Snapshot.load(normalize_table_root(identifier))
            return True
        except (TableNotFoundError, NotADirectoryError):  # nothing there, or a regular file
            return False

    @classmethod
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        return DeltaTableBuilder(sparkSession, "create")

    @classmethod
    def createIfNotExists(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        return DeltaTableBuilder(sparkSession, "createIfNotExists")

    @classmethod
    def createOrReplace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        return DeltaTableBuilder(sparkSession, "createOrReplace")

    # -- reading ---------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self._path

    def snapshot(self, version: int | None = None) -> Snapshot:
        return Snapshot.load(self._path, version=version)

    def toDF(self) -> DataFrame:
        df = scan.read(self._spark, self._path)
        return df.alias(self._alias) if self._alias else df

    def alias(self, aliasName: str) -> DeltaTable:
        return DeltaTable(self._spark, self._path, aliasName)

    def history(self, limit: int | None = None) -> DataFrame:
        rows = describe.history_rows(self.snapshot(), limit)
        return self._spark.createDataFrame([tuple(r[c] for c in HISTORY_SCHEMA.names) for r in rows], HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        row = describe.detail_row(self.snapshot())
        return self._spark.createDataFrame([tuple(row[c] for c in DETAIL_SCHEMA.names)], DETAIL_SCHEMA)

    # -- changing --------------------------------------------------------------------------------
    def setProperties(self, properties: dict[str, Any]) -> int:
        """ALTER TABLE … SET TBLPROPERTIES (upgrades the protocol where a property needs it)."""
        return alter.set_properties(self._path, properties)

    def unsetProperties(self, keys: Sequence[str], ifExists: bool = True) -> int:
        return alter.unset_properties(self._path, keys, ifExists)

    def delete(self, condition: str | Column | None = None) -> None:
        """Delete the rows matching ``condition`` (all rows when None); writes DVs when enabled."""
        from dvlake.commands.delete import delete

        delete(self._spark, self._path, condition)


class DeltaTableBuilder:
    """delta-spark's DeltaTableBuilder: ``DeltaTable.create(spark).location(p).addColumns(s)…execute()``."""

    def __init__(self, spark: SparkSession | None, mode: str) -> None:
        self._spark = spark
        self._mode = mode
        self._location: str | None = None
        self._fields: list[StructField] = []
        self._partitioned_by: list[str] = []
        self._properties: dict[str, str] = {}
        self._comment: str | None = None
        self._name: str | None = None

    def tableName(self, identifier: str) -> DeltaTableBuilder:
        self._name = identifier
        return self

    def location(self, location: str) -> DeltaTableBuilder:
        self._location = location
        return self

    def comment(self, comment: str) -> DeltaTableBuilder:
        self._comment = comment
        return self

    def addColumn(self, colName: str, dataType: Any, nullable: bool = True, generatedAlwaysAs: str | None = None,
                  comment: str | None = None) -> DeltaTableBuilder:
        if generatedAlwaysAs is not None:
            raise InvalidArgumentError("generated columns are not supported by dvlake yet")
        if isinstance(dataType, str):
            from pyspark.sql.types import _parse_datatype_string

            dataType = _parse_datatype_string(dataType)
        meta = {"comment": comment} if comment else {}
        self._fields.append(StructField(colName, dataType, nullable, meta))
        return self

    def addColumns(self, cols: StructType | list[StructField]) -> DeltaTableBuilder:
        self._fields.extend(list(cols.fields if isinstance(cols, StructType) else cols))
        return self

    def partitionedBy(self, *cols: str | Sequence[str]) -> DeltaTableBuilder:
        for c in cols:
            self._partitioned_by.extend([c] if isinstance(c, str) else list(c))
        return self

    def property(self, key: str, value: str) -> DeltaTableBuilder:
        self._properties[key] = value
        return self

    def execute(self) -> DeltaTable:
        if self._location is None:
            raise InvalidArgumentError("dvlake tables are path-based: call .location(path) before execute()")
        if not self._fields:
            raise InvalidArgumentError("the table needs at least one column: call addColumn/addColumns")
        import json

        schema = json.loads(StructType(self._fields).json())
        defaults = _session_defaults(self._spark) if self._spark is not None else {}
        write_cmd.create_table(self._location, schema, self._partitioned_by, self._properties,
                               if_not_exists=self._mode == "createIfNotExists", replace=self._mode == "createOrReplace",
                               name=self._name, description=self._comment, session_defaults=defaults)
        return DeltaTable(self._spark, self._location) if self._spark is not None else DeltaTable(None, self._location)  # type: ignore[arg-type]


def read(spark: SparkSession, path: str, version: int | None = None, timestamp: Any = None,
         condition: str | Column | None = None) -> DataFrame:
    """Read a Delta table as a DataFrame (deleted rows dropped), with optional time travel and filter."""
    return scan.read(spark, path, version=version, timestamp=timestamp, condition=condition)


def write(df: DataFrame, path: str, mode: str = "error", partitionBy: Sequence[str] | str | None = None,
          properties: dict[str, Any] | None = None, overwriteSchema: bool = False) -> int | None:
    """Write a DataFrame as a Delta table; returns the committed version."""
    parts = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy or [])
    return write_cmd.write(df, path, mode, parts, properties, overwrite_schema=overwriteSchema,
                           session_defaults=_session_defaults(df.sparkSession))
