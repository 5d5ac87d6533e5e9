"""The delta-spark-style Python API: ``DeltaTable`` and its builder, plus ``read``/``write``.

Signatures follow delta-spark's ``delta.tables`` so code written for it ports by changing the
import (``from dvlake import DeltaTable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from dvlake.commands.ddl import builder
from dvlake.commands.ddl import properties as alter
from dvlake.commands.ddl.builder import IdentityGenerator
from dvlake.commands.ddl.convert import convert_to_delta, split_identifier
from dvlake.commands.ddl.drop_feature import drop_feature
from dvlake.commands.ddl.protocol import add_feature_support, upgrade_table_protocol
from dvlake.commands.dml.api_args import check_condition, check_mapping, check_merge_start, require_type, require_value
from dvlake.commands.dml.delete import delete
from dvlake.commands.dml.merge import DeltaMergeBuilder
from dvlake.commands.dml.update import update
from dvlake.commands.inspection import describe
from dvlake.commands.inspection.read_changes import read_changes as run
from dvlake.commands.maintenance import optimize, reorg
from dvlake.commands.maintenance.generate import generate
from dvlake.commands.maintenance.restore import METRICS, RESULT_COLUMNS, restore
from dvlake.commands.maintenance.vacuum import vacuum
from dvlake.commands.writes import write as write_cmd
from dvlake.config import SESSION_TABLE_DEFAULTS_PREFIX
from dvlake.errors import InvalidArgumentError, TableNotFoundError
from dvlake.log.condition import conjunction
from dvlake.log.snapshot import Snapshot
from dvlake.spark import row_tracking as row_tracking_reads
from dvlake.spark import scan
from dvlake.spark.catalog import path_of_identifier, refresh_registration, table_location
from dvlake.spark.object_stores import configure_object_stores
from dvlake.spark.session_switches import apply_session_switches
from dvlake.spark.stream_support import open_delta_stream
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


def session_defaults(spark: SparkSession) -> dict[str, str]:
    """Table property defaults from the session (delta-spark's ``…properties.defaults.*``)."""
    prefix = SESSION_TABLE_DEFAULTS_PREFIX
    out = {}
    for key in ("enableDeletionVectors", "enableChangeDataFeed", "checkpointInterval", "columnMapping.mode"):
        value = spark.conf.get(prefix + key, None)
        if value is not None:
            out["delta." + key] = value.lower() if value.lower() in ("true", "false") else value
    return out


class DeltaTable:
    """A Delta table at a path, as in delta-spark's ``delta.tables.DeltaTable``.

    Open one with ``DeltaTable.forPath(spark, path)``; each method reads the table's latest
    committed version when it runs (the object holds no snapshot), so it always acts on the
    current state, as delta-spark's does.

    Example:
        >>> events = DeltaTable.forPath(spark, "/data/events")
        >>> events.delete("user_id = 3")
        >>> events.history(1).select("operation", "operationMetrics").show()
    """

    def __init__(self, spark: SparkSession, path: str, alias: str | None = None, *, name: str | None = None) -> None:
        self._spark = spark
        self._path = normalize_table_root(path)
        configure_object_stores(spark)  # spark.hadoop.fs.* settings for dvlake's own reads and commits
        apply_session_switches(spark)  # the snapshot cache's session setting
        self._alias = alias
        self._name = name  # the catalog name it was opened by (forName), whose columns follow schema changes

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def forPath(cls, sparkSession: SparkSession, path: str, hadoopConf: dict[str, str] | None = None) -> DeltaTable:
        """Open the Delta table at ``path``.

        Args:
            sparkSession: the session that runs the table's Spark jobs.
            path: a local path or a URI (``file:``, ``s3://`` …) of the table root.
            hadoopConf: accepted for delta-spark compatibility and ignored (storage options come from the URI).

        Returns:
            The table.

        Raises:
            TableNotFoundError: there is no ``_delta_log`` with a commit at ``path``.
            UnsupportedFeatureError: the table needs a reader feature dvlake does not implement.

        Example:
            >>> t = DeltaTable.forPath(spark, "/data/events")
        """
        apply_session_switches(sparkSession)  # before the first load: the session may turn the snapshot cache off
        Snapshot.load(normalize_table_root(path))  # validates: exists and readable
        return cls(sparkSession, path)

    @classmethod
    def forName(cls, sparkSession: SparkSession, tableOrViewName: str) -> DeltaTable:
        """Open the Delta table registered under a session-catalog name (or ``delta.`<path>```).

        Raises:
            NotADeltaTableNameError: the name is not a Delta table with a location (use ``forPath``).
        """

        location = table_location(sparkSession, tableOrViewName)
        apply_session_switches(sparkSession)
        Snapshot.load(normalize_table_root(location))  # validates: exists and readable
        return cls(sparkSession, location, name=None if path_of_identifier(tableOrViewName) else tableOrViewName)

    @classmethod
    def isDeltaTable(cls, sparkSession: SparkSession, identifier: str) -> bool:
        """Whether ``identifier`` (a path) holds a Delta table dvlake can read; False rather than an error otherwise."""
        try:
            Snapshot.load(normalize_table_root(identifier))
            return True
        except (TableNotFoundError, NotADirectoryError):  # nothing there, or a regular file
            return False

    @classmethod
    def create(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that creates a new table and fails if one exists (``DELTA_PATH_EXISTS``).

        Example:
            >>> DeltaTable.create(spark).location("/data/t").addColumn("id", "long") \\
            ...     .property("delta.enableDeletionVectors", "true").execute()
        """
        return DeltaTableBuilder(sparkSession, "create")

    @classmethod
    def createIfNotExists(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that creates the table unless one exists already (then it changes nothing)."""
        return DeltaTableBuilder(sparkSession, "createIfNotExists")

    @classmethod
    def createOrReplace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that creates the table, or replaces the schema, partitioning and data of an existing one."""
        return DeltaTableBuilder(sparkSession, "createOrReplace")

    @classmethod
    def replace(cls, sparkSession: SparkSession | None = None) -> DeltaTableBuilder:
        """A builder that replaces an existing table's schema, partitioning, properties and data (its history stays);
        ``execute()`` raises ``CannotReplaceMissingTableError`` (``DELTA_CANNOT_REPLACE_MISSING_TABLE``) when there is
        no table to replace.

        Example:
            >>> DeltaTable.replace(spark).tableName("events").addColumn("id", "bigint").execute()
        """
        return DeltaTableBuilder(sparkSession, "replace")

    # -- CONVERT TO DELTA (issue 14) ------------------------------------------------------------------
    @classmethod
    def convertToDelta(cls, sparkSession: SparkSession, identifier: str,
                       partitionSchema: str | StructType | None = None) -> DeltaTable:
        """Turn a Parquet directory into a Delta table in place (no data rewritten, stats from the footers).

        Args:
            sparkSession: the session.
            identifier: ``"parquet.`<path>`"``.
            partitionSchema: the partition columns in folder order, as a StructType or DDL string
                (``"day DATE, region STRING"``); required when the files sit in ``col=value`` folders.

        Returns:
            The Delta table (an existing Delta table at the path is returned unchanged).

        Raises:
            ConvertToDeltaError: a file that is not Parquet, folders that do not match ``partitionSchema``,
                an empty directory (delta-spark's error classes, in ``error_class``).

        Example:
            >>> DeltaTable.convertToDelta(spark, "parquet.`/data/events`", "day DATE")
        """

        provider, path = split_identifier(identifier)
        convert_to_delta(sparkSession, path, partitionSchema, provider=provider,
                         session_defaults=session_defaults(sparkSession))
        return cls(sparkSession, path)

    # -- reading ---------------------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The normalized table root (absolute local path or URI)."""
        return self._path

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The table's state (files, DVs, schema, protocol) at ``version`` (latest when None), without Spark.

        Raises:
            VersionNotFoundError: the log cannot reconstruct ``version``.
        """
        return Snapshot.load(self._path, version=version)

    def toDF(self) -> DataFrame:
        """The latest version as a DataFrame, deleted rows dropped (aliased if ``alias`` was called)."""
        df = scan.read(self._spark, self._path)
        return df.alias(self._alias) if self._alias else df

    def alias(self, aliasName: str) -> DeltaTable:
        """The same table, with ``aliasName`` applied to ``toDF()`` (and used by MERGE conditions)."""
        return DeltaTable(self._spark, self._path, aliasName, name=self._name)

    def _schema_may_have_changed(self) -> None:
        """After a change that can change the schema (MERGE with schema evolution, RESTORE): a table opened by name
        brings the catalog's column list up to date (``dvlake.spark.catalog.refresh_registration``)."""
        if self._name is not None:

            refresh_registration(self._spark, self._name)

    def history(self, limit: int | None = None) -> DataFrame:
        """The commits, newest first, in delta-spark's DESCRIBE HISTORY schema.

        Args:
            limit: at most this many of the newest commits (all when None).

        Returns:
            One row per commit: version, timestamp, operation, operationParameters, operationMetrics, …
        """
        rows = describe.history_rows(self.snapshot(), limit)
        return self._spark.createDataFrame([tuple(r[c] for c in HISTORY_SCHEMA.names) for r in rows], HISTORY_SCHEMA)

    def detail(self) -> DataFrame:
        """One row in delta-spark's DESCRIBE DETAIL schema, plus ``statistics`` with the DV counts
        (``numDeletionVectors``, ``numRowsDeletedByDeletionVectors``)."""
        row = describe.detail_row(self.snapshot())
        return self._spark.createDataFrame([tuple(row[c] for c in DETAIL_SCHEMA.names)], DETAIL_SCHEMA)

    # -- changing --------------------------------------------------------------------------------
    def setProperties(self, properties: dict[str, Any]) -> int:
        """ALTER TABLE … SET TBLPROPERTIES: set table properties in one commit.

        A property that needs a table feature (``delta.enableDeletionVectors=true`` needs
        ``deletionVectors``) upgrades the protocol as delta-spark does.

        Args:
            properties: property names (``delta.*`` are validated) to values.

        Returns:
            The committed version.

        Raises:
            InvalidArgumentError: an unknown ``delta.*`` property or a value of the wrong type.
        """
        return alter.set_properties(self._path, properties)

    def unsetProperties(self, keys: Sequence[str], ifExists: bool = True) -> int:
        """ALTER TABLE … UNSET TBLPROPERTIES; with ``ifExists=False`` an absent key is an error. Returns the version."""
        return alter.unset_properties(self._path, keys, ifExists)

    def delete(self, condition: str | Column | None = None) -> None:
        """Delete the rows matching ``condition``; with DVs enabled no Parquet file is rewritten.

        Args:
            condition: a SQL predicate string or a Column; None deletes every row. A condition on partition
                columns only removes whole files without reading them.

        Raises:
            DeltaConcurrentModificationException: a concurrent commit conflicted three times in a row.
            DvlakeError: a typed error (missing or corrupt DV, bad condition, …); the table is unchanged.

        Example:
            >>> DeltaTable.forPath(spark, "/data/events").delete("user_id = 3")
        """

        check_condition(condition)
        delete(self._spark, self._path, condition)

    # -- UPDATE and MERGE ------------------------------------------------------------------------
    def update(self, condition: str | Column | None = None,
               set: dict[str, str | Column] | None = None) -> None:  # noqa: A002 - delta-spark's keyword
        """Update the rows matching ``condition``, as delta-spark's ``update(condition=None, set=None)``.

        With DVs the updated rows are marked deleted in their files' DVs and written anew; only they are written.

        Args:
            condition: a SQL predicate string or Column (None updates every row).
            set: column name (dotted for nested fields) to a SQL expression string or Column.

        Raises:
            InvalidArgumentError: no ``set``, an unknown column or an unsafe cast (the message names the column).
            DeltaInvariantViolationException: a NULL would be written into a NOT NULL column; nothing is committed.

        Example:
            >>> events.update("user_id = 3", {"visits": "visits + 1"})
        """

        mapping = check_mapping(set, "'set'")  # delta-spark checks set first: update({...}) alone is a ValueError
        check_condition(condition)
        if not mapping:
            raise InvalidArgumentError("update() needs set={'column': <SQL string or Column>, ...}")
        update(self._spark, self._path, mapping, condition, alias=self._alias)

    def merge(self, source: DataFrame, condition: str | Column) -> DeltaMergeBuilder:
        """Start a MERGE of ``source`` into this table (delta-spark's ``merge``).

        Args:
            source: the source DataFrame (alias it with ``.alias("s")`` to qualify its columns).
            condition: the join condition, a SQL string or Column.

        Returns:
            A builder: add ``whenMatchedUpdate/UpdateAll/Delete``, ``whenNotMatchedInsert/InsertAll`` and
            ``whenNotMatchedBySourceUpdate/Delete`` clauses, then ``execute()``.

        Example:
            >>> (events.alias("t").merge(updates.alias("s"), "t.id = s.id")
            ...     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        """
        check_merge_start(source, condition)
        return DeltaMergeBuilder(self._spark, self._path, self._alias, source, condition,
                                 on_schema_evolution=self._schema_may_have_changed)

    # -- compaction (OPTIMIZE, REORG … APPLY (PURGE)) -------------------------------------------------
    def optimize(self) -> DeltaOptimizeBuilder:
        """delta-spark's builder: ``.optimize().where("day = '2024-06-01'").executeCompaction()`` or ``.executeZOrderBy(c)``."""
        return DeltaOptimizeBuilder(self._spark, self._path)

    def reorgPurge(self, condition: str | Column | None = None) -> DataFrame:
        """REORG TABLE … [WHERE condition] APPLY (PURGE): rewrite every file with a DV (delta-spark has this in SQL only)."""

        return reorg.run(self._spark, self._path, condition)

    # -- lifecycle: VACUUM, RESTORE, GENERATE, protocol ----------------------------------------------
    def vacuum(self, retentionHours: float | None = None) -> DataFrame:
        """Delete data and DV files that no version inside the retention period needs.

        Args:
            retentionHours: keep files removed less than this long ago (default: the table's
                ``delta.deletedFileRetentionDuration``, 7 days).

        Returns:
            An empty DataFrame, as delta-spark.

        Raises:
            VacuumRetentionError: a retention shorter than the table's while the retention check is on.
        """

        vacuum(self._spark, self._path, retentionHours)
        return self._spark.createDataFrame([], "path string")


    def restoreToVersion(self, version: int) -> DataFrame:
        """Restore the table to ``version``: each file comes back with the DV it had then.

        Returns:
            One row of delta-spark's metrics (``table_size_after_restore``, ``num_restored_files``, …).

        Raises:
            RestoreError: ``version`` is not in the table's history.
            RestoreMissingFilesError: a data or DV file that version needs is gone (e.g. vacuumed); nothing committed.
        """

        require_value(version, int, "version needs to be an int")
        result = restore_frame(self._spark, restore(self._spark, self._path, version=version))
        self._schema_may_have_changed()
        return result

    def restoreToTimestamp(self, timestamp: Any) -> DataFrame:
        """Restore the table to the version current at ``timestamp``; returns delta-spark's metrics as one row."""

        result = restore_frame(self._spark, restore(self._spark, self._path, timestamp=timestamp))
        self._schema_may_have_changed()
        return result


    def generate(self, mode: str) -> None:
        """Write ``_symlink_format_manifest`` files (mode 'symlink_format_manifest'); refused while live DVs exist."""

        generate(self._path, mode)

    def upgradeTableProtocol(self, readerVersion: int, writerVersion: int) -> None:
        """Raise the protocol versions (never lowers them; implied features become explicit at reader 3 / writer 7)."""

        require_value(readerVersion, int, "The readerVersion needs to be an integer")
        require_value(writerVersion, int, "The writerVersion needs to be an integer")
        upgrade_table_protocol(self._path, readerVersion, writerVersion)

    def addFeatureSupport(self, featureName: str) -> None:
        """Add a table feature to the protocol (reader 3 / writer 7), e.g. 'deletionVectors'."""

        require_value(featureName, str, "featureName needs to be a string")
        add_feature_support(self._path, featureName)

    def dropFeatureSupport(self, featureName: str, truncateHistory: bool | None = None) -> None:
        """Drop a table feature from the protocol; dvlake drops ``deletionVectors`` (as delta-spark 4.x does).

        Every deletion vector is purged first (the rows stay the same), so readers that do not know DVs
        (e.g. delta-rs' plain ``to_pyarrow_table``) can read the table afterwards.

        Args:
            featureName: the feature, ``"deletionVectors"``.
            truncateHistory: False/None (default): the fast drop with ``checkpointProtection``, one call. True:
                the legacy two-step drop that truncates the history; the first call fails with
                ``DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD`` and a call after
                ``delta.dropFeatureTruncateHistory.retentionDuration`` (24 hours) completes it.

        Raises:
            DeltaTableFeatureException: with delta-spark's ``DELTA_FEATURE_DROP_*`` error class.

        Example:
            >>> DeltaTable.forPath(spark, "/data/events").dropFeatureSupport("deletionVectors")
        """

        require_value(featureName, str, "featureName needs to be a string")
        if truncateHistory is not None:
            require_value(truncateHistory, bool, "truncateHistory needs to be a boolean")

        drop_feature(self._spark, self._path, featureName, bool(truncateHistory))

    # --- Change Data Feed ----------------------------------------------------------------------

    def readChanges(self, startingVersion: int | None = None, endingVersion: int | None = None,
                    startingTimestamp: Any = None, endingTimestamp: Any = None) -> DataFrame:
        """The table's change data feed between two versions or timestamps (both inclusive).

        The same rows as ``spark.read.format("delta").option("readChangeFeed", "true")`` with
        delta-spark: the table's columns plus ``_change_type``, ``_commit_version``, ``_commit_timestamp``.
        See ``dvlake.read_changes``.

        Example:
            >>> DeltaTable.forPath(spark, "/data/events").readChanges(5).filter("_change_type = 'delete'").count()
        """
        return read_changes(self._spark, self._path, startingVersion, endingVersion, startingTimestamp, endingTimestamp)


def restore_frame(spark: SparkSession, metrics: dict[str, int]) -> DataFrame:

    return spark.createDataFrame([tuple(int(metrics[m]) for m in METRICS)], ", ".join(f"{c} long" for c in RESULT_COLUMNS))


class DeltaOptimizeBuilder:
    """delta-spark's DeltaOptimizeBuilder: an optional partition filter, then compaction or Z-order."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self._path = path
        self._filters: list[str] = []

    @property
    def _condition(self) -> str | None:
        return conjunction(self._filters) if self._filters else None

    def where(self, partitionFilter: str) -> DeltaOptimizeBuilder:
        """Only optimize the partitions ``partitionFilter`` keeps (partition columns only); several calls must all hold."""
        conjunction([partitionFilter])  # a malformed filter is refused here, where it is given
        self._filters.append(partitionFilter)
        return self

    def executeCompaction(self) -> DataFrame:
        """Bin-pack small files and files with many deleted rows; returns delta-spark's ``path, metrics`` frame."""

        return optimize.run(self._spark, self._path, self._condition)

    def executeZOrderBy(self, *cols: str | Sequence[str]) -> DataFrame:
        """Rewrite the selected partitions clustered by a Z-order over ``cols``."""

        names = [c for group in cols for c in ([group] if isinstance(group, str) else list(group))]
        if not names:
            raise InvalidArgumentError("executeZOrderBy needs at least one column")
        return optimize.run(self._spark, self._path, self._condition, names)

class DeltaTableBuilder:
    """delta-spark's DeltaTableBuilder: ``DeltaTable.create(spark).tableName(n)…addColumns(s)…execute()``.

    Every setter returns the builder; ``execute()`` commits version 0 (or the replacement). A name alone makes a
    managed table in the database's folder, a location alone a path table, both an external table
    (``dvlake.commands.ddl.builder`` has the rules).

    Example:
        >>> (DeltaTable.createIfNotExists(spark).tableName("events")
        ...     .addColumn("id", "bigint", generatedAlwaysAs=IdentityGenerator())
        ...     .addColumn("day", "date").addColumn("month", "int", generatedAlwaysAs="month(day)")
        ...     .partitionedBy("month").property("delta.enableDeletionVectors", "true").execute())
    """

    def __init__(self, spark: SparkSession | None, mode: str) -> None:
        self._spark = spark
        self._mode = mode
        self._location: str | None = None
        self._fields: list[StructField] = []
        self._partitioned_by: list[str] = []
        self._cluster_by: list[str] | None = None
        self._properties: dict[str, str] = {}
        self._comment: str | None = None
        self._name: str | None = None

    def tableName(self, identifier: str) -> DeltaTableBuilder:
        """The catalog name (``db.t``) or ``delta.`<path>```; without ``location`` a name makes a managed table."""
        require_type(identifier, str, "Identifier must be str")
        self._name = identifier
        return self

    def location(self, location: str) -> DeltaTableBuilder:
        """The table root; with ``tableName`` the table is external, registered at this location."""
        require_type(location, str, "Location must be str")
        self._location = location
        return self

    def comment(self, comment: str) -> DeltaTableBuilder:
        """The table description (``metaData.description``)."""
        require_type(comment, str, "Table comment must be str")
        self._comment = comment
        return self

    def addColumn(self, colName: str, dataType: str | DataType, nullable: bool = True,
                  generatedAlwaysAs: str | IdentityGenerator | None = None,
                  generatedByDefaultAs: IdentityGenerator | None = None, comment: str | None = None) -> DeltaTableBuilder:
        """Add a column; ``dataType`` is a Spark type or a DDL string such as ``"decimal(10,2)"``.

        Args:
            colName: the column's name.
            dataType: its type.
            nullable: whether it may hold NULL.
            generatedAlwaysAs: a SQL expression over the other columns (a generated column, as SQL's
                ``GENERATED ALWAYS AS (expr)``), or an ``IdentityGenerator`` (``GENERATED ALWAYS AS IDENTITY``).
            generatedByDefaultAs: an ``IdentityGenerator`` (``GENERATED BY DEFAULT AS IDENTITY``).
            comment: the column's comment.

        Raises:
            InvalidArgumentTypeError: an argument of the wrong type (a ``TypeError``, as delta-spark).
            InvalidArgumentError: both generated arguments, or an identity step of 0 (a ``ValueError``).
        """
        self._fields.append(builder.column_field(colName, dataType, nullable, generatedAlwaysAs, generatedByDefaultAs,
                                                 comment))
        return self

    def addColumns(self, cols: StructType | list[StructField]) -> DeltaTableBuilder:
        """Add every field of a StructType (or a list of StructFields), metadata (comments) included."""
        self._fields.extend(builder.schema_fields(cols))
        return self

    def partitionedBy(self, *cols: str | Sequence[str]) -> DeltaTableBuilder:
        """Partition columns, in order (names or lists of names)."""
        names = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else list(cols)
        for c in names:
            require_type(c, str, "Partitioning column must be str")
        self._partitioned_by.extend(str(n) for n in names)
        return self

    def clusterBy(self, *cols: str | Sequence[str]) -> DeltaTableBuilder:
        """Liquid clustering columns (SQL's ``CLUSTER BY``): OPTIMIZE co-locates rows by them instead of partitioning.

        Args:
            cols: column names (``"s.a"`` for a nested field), or one list of them; at most four.

        Returns:
            The builder.

        Raises:
            ClusteringError: at ``execute()``, beside ``partitionedBy`` (DELTA_CLUSTER_BY_WITH_PARTITIONED_BY), or a
                column without stats or of a type data skipping cannot use.

        Example:
            >>> DeltaTable.create(spark).location("/data/lc").addColumn("k", "int").clusterBy("k").execute()
        """
        names = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else list(cols)
        for c in names:
            require_type(c, str, "Clustering column must be str")
        self._cluster_by = [str(n) for n in names]
        return self

    def property(self, key: str, value: str) -> DeltaTableBuilder:
        """A table property, e.g. ``("delta.enableDeletionVectors", "true")``."""
        require_type(key, str, "Key and value of property must be string")
        require_type(value, str, "Key and value of property must be string")
        self._properties[key] = value
        return self

    def execute(self) -> DeltaTable:
        """Create, or replace, the table.

        Returns:
            The table (opened by its name when it has one, so later schema changes reach the catalog).

        Raises:
            InvalidArgumentError: neither ``tableName`` nor ``location``, or no column.
            TableAlreadyExistsError: ``create()`` found a table (``DELTA_TABLE_ALREADY_EXISTS`` / ``DELTA_PATH_EXISTS``).
            CannotReplaceMissingTableError: ``replace()`` found none (``DELTA_CANNOT_REPLACE_MISSING_TABLE``).
            DeltaAnalysisException: a generation expression delta-spark refuses (its error class).
            IdentityColumnError: an identity column that is not BIGINT or is a partition column.
        """
        spark = self._spark or SparkSession.getActiveSession()
        if spark is None:
            raise InvalidArgumentError("no active SparkSession: pass one to DeltaTable.create(spark) (or start one)")
        spec = builder.TableSpec(self._mode, self._name, self._location, list(self._fields), list(self._partitioned_by),
                                 dict(self._properties), self._comment, self._cluster_by)
        root, name = builder.execute(spark, spec, session_defaults(spark))
        return DeltaTable(spark, root, name=name)


def read(spark: SparkSession, path: str, version: int | None = None, timestamp: Any = None,
         condition: str | Column | None = None, row_tracking: bool = False) -> DataFrame:
    """Read a Delta table as a DataFrame, deleted rows dropped.

    Args:
        spark: the session that runs the scan.
        path: the table root.
        version: time travel to this version (``VERSION AS OF``).
        timestamp: time travel to the version current at this time (datetime, date, epoch ms or ISO string).
        condition: a filter used for partition pruning and data skipping, then applied to the rows.
        row_tracking: add a ``_metadata`` struct column with each row's ``row_id`` and ``row_commit_version``
            (and ``base_row_id``, ``default_row_commit_version``, ``row_index``, ``file_path``, ``file_name``,
            ``file_size``); needs ``delta.enableRowTracking``.

    Returns:
        The table's rows with its logical column names (column mapping resolved).

    Raises:
        TableNotFoundError: no Delta table at ``path``.
        VersionNotFoundError: the version or timestamp is outside the table's history.
        InvalidArgumentError: both ``version`` and ``timestamp``, or a timestamp that cannot be parsed.
        RowTrackingError: ``row_tracking`` on a table without row tracking enabled.

    Example:
        >>> read(spark, "/data/events", version=3, condition="day = '2024-06-01'").count()
        >>> read(spark, "/data/events", row_tracking=True).select("id", "_metadata.row_id")
    """
    if row_tracking:
        return row_tracking_reads.read_with_metadata(spark, Snapshot.load(path, version=version, timestamp=timestamp),
                                                     condition)
    return scan.read(spark, path, version=version, timestamp=timestamp, condition=condition)


def write(df: DataFrame, path: str, mode: str = "error", partitionBy: Sequence[str] | str | None = None,
          properties: dict[str, Any] | None = None, overwriteSchema: bool = False) -> int | None:
    """Write a DataFrame as a Delta table (created on first write).

    Args:
        df: the rows to write.
        path: the table root.
        mode: ``error`` (default), ``append``, ``overwrite`` or ``ignore``, as Spark's writer.
        partitionBy: partition columns for a new table (must match an existing table's).
        properties: ``delta.*`` table properties for a new table, e.g. ``{"delta.enableDeletionVectors": "true"}``.
        overwriteSchema: with ``mode="overwrite"``, replace the schema and partitioning too.

    Returns:
        The committed version, or None when ``mode="ignore"`` found a table.

    Raises:
        TableAlreadyExistsError: ``mode="error"`` and a table exists.
        SchemaMismatchError: the data does not fit the table's schema.

    Example:
        >>> write(df, "/data/events", partitionBy="day", properties={"delta.enableDeletionVectors": "true"})
    """
    parts = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy or [])
    return write_cmd.write(df, path, mode, parts, properties, overwrite_schema=overwriteSchema,
                           session_defaults=session_defaults(df.sparkSession))



# --- Change Data Feed ------------------------------------------------------------------------------


def read_changes(spark: SparkSession, path: str, startingVersion: int | None = None, endingVersion: int | None = None,
                 startingTimestamp: Any = None, endingTimestamp: Any = None) -> DataFrame:
    """Read a table's change data feed (``delta.enableChangeDataFeed=true``) between two versions or timestamps.

    Args:
        spark: the session that runs the read.
        path: the table root.
        startingVersion / startingTimestamp: where the range starts (inclusive); exactly one is required.
        endingVersion / endingTimestamp: where it ends (inclusive); at most one; default the latest version.

    Returns:
        The table's columns (schema of the ending version) plus ``_change_type`` (``insert``, ``delete``,
        ``update_preimage``, ``update_postimage``), ``_commit_version`` and ``_commit_timestamp``.
        A DELETE with deletion vectors contributes only the rows its DVs newly mark; those rows are
        read by row index, decoding only the Parquet row groups that hold them.

    Raises:
        NoStartForCdcReadError, MultipleCdcBoundaryError, InvalidCdcRangeError,
        CdcStartVersionAfterLatestError: the range is missing, ambiguous or outside the history.
        MissingChangeDataError: the change feed was off at a version of the range (``DELTA_MISSING_CHANGE_DATA``).
        ChangeDataFileNotFoundError: VACUUM removed a file the range needs.

    Example:
        >>> read_changes(spark, "/data/events", startingVersion=3, endingVersion=5).show()
    """

    return run(spark, path, startingVersion, endingVersion, startingTimestamp, endingTimestamp)


# --- Structured Streaming ----------------------------------------------------------------------------


def read_stream(spark: SparkSession, path: str, **options: Any) -> DataFrame:
    """A streaming DataFrame of the Delta table at ``path``, as ``spark.readStream.format("delta").load(path)``.

    The stream starts with the table's rows at the latest version (deletion vectors applied), then emits
    each later commit's added rows. Options are delta-spark's: ``startingVersion`` (a version or
    ``"latest"``: no initial snapshot, commits from there), ``startingTimestamp``, ``maxFilesPerTrigger``
    (default 1000), ``maxBytesPerTrigger``, ``ignoreDeletes``, ``ignoreChanges``, ``skipChangeCommits``,
    ``excludeRegex``, ``readChangeFeed`` (or its older name ``readChangeData``). Commits with ``dataChange=false``
    (OPTIMIZE) emit nothing. On a classic session with the native scan any PySpark 4 streams; the Python engine
    (Spark Connect, or ``spark.dvlake.stream.engine=python``) needs PySpark 4.2 or newer.

    Raises:
        TableNotFoundError: no Delta table at ``path``.
        DeltaOptionError: a malformed option.
        DeltaSourceIgnoreChangesError: (when the query runs) a commit rewrote data, e.g. a DELETE with
            deletion vectors, and neither ``skipChangeCommits`` nor ``ignoreChanges`` is set.
        DeltaSourceIgnoreDeleteError: (when the query runs) a commit only removed files and no option allows it.
        StreamingSchemaChangedError, StreamingIncompatibleSchemaChangeError: (when the query runs) a schema change
            the stream's schema cannot read across (see README "Structured Streaming").
        UnsupportedFeatureError: the Python engine on PySpark older than 4.2 (no admission control for Python
            streaming sources).

    Example:
        >>> q = (read_stream(spark, "/data/bronze", maxFilesPerTrigger=10).writeStream.format("delta")
        ...      .option("checkpointLocation", "/chk/silver").trigger(availableNow=True).start("/data/silver"))
    """

    return open_delta_stream(spark, path, options)
