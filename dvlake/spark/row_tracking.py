"""Row tracking in Spark plans: each row's stable row id and row commit version, read and carried into rewrites.

A row's id is its file's materialized row-id column when that holds a value, else the file's
``baseRowId`` + the row's physical index; its commit version is the materialized commit-version
column, else the file's ``defaultRowCommitVersion`` (``log/row_tracking.py`` has the rules). Both are
computed on top of the scan that DML already uses (``FILE_INDEX_COL``/``ROW_INDEX_COL``: Spark's
``_metadata.row_index``, physical on the native and the pure-Python path alike), joined with a small
broadcast table of each planned file's ``baseRowId``/``defaultRowCommitVersion``.

Rewrites keep the ids by writing them into the materialized columns of the new files: OPTIMIZE and
PURGE keep both values (rows are only copied); an updated row keeps its id but gets NULL as commit
version (the new file's ``defaultRowCommitVersion``, i.e. the commit that changed it, applies); an
inserted row gets NULL for both (fresh values from its new file). The materialized columns never
enter the table's schema: readers see them only as ``_metadata.row_id``/``_metadata.row_commit_version``.
On an IcebergCompatV3 table they carry Iceberg's reserved field ids for ``_row_id`` and
``_last_updated_sequence_number``, so Iceberg readers take a copied row's id from them too.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from dvlake.errors import RowTrackingError
from dvlake.log import row_tracking as rt
from dvlake.log.actions import Metadata, Protocol
from dvlake.log.condition import Condition
from dvlake.log.schema import PARQUET_FIELD_ID_KEY
from dvlake.log.snapshot import Snapshot
from dvlake.spark.dv_scan import FILE_INDEX_COL, ROW_INDEX_COL
from dvlake.spark.pruning import condition_column
from dvlake.spark.scan import ScanPlan, check_condition, logical_frame, plan_scan
from dvlake.uniform import compat

ROW_ID_COL = "__dvlake_row_id"
ROW_COMMIT_VERSION_COL = "__dvlake_row_commit_version"
METADATA_COL = "_metadata"
_BASE = "__dvlake_base_row_id"
_DEFAULT_VERSION = "__dvlake_default_row_commit_version"
_PATH = "__dvlake_rt_file_path"
_SIZE = "__dvlake_rt_file_size"


def materialized_columns(snapshot: Snapshot) -> tuple[str, str] | None:
    """The hidden columns' physical names when row tracking is enabled (rewrites must preserve ids), else None."""
    if not rt.is_enabled(snapshot.protocol, snapshot.metadata):
        return None
    return rt.materialized_columns_or_raise(snapshot.metadata, snapshot.table_root)


def tracked_frame(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, *, keep_row_index: bool = False,
                  with_file: bool = False) -> DataFrame:
    """The planned files' live rows (logical columns) with ``ROW_ID_COL`` and ``ROW_COMMIT_VERSION_COL``.

    ``keep_row_index`` keeps ``FILE_INDEX_COL``/``ROW_INDEX_COL`` (DML's DV building); ``with_file`` keeps
    each row's file location and size (for ``_metadata``).
    """
    names = rt.materialized_columns_or_raise(snapshot.metadata, snapshot.table_root)
    extra = [StructField(n, LongType(), True) for n in names if n not in plan.data_schema.fieldNames()]
    wide = replace(plan, data_schema=StructType(list(plan.data_schema.fields) + extra))
    df = logical_frame(spark, snapshot, wide, include_row_index=True, hidden_columns=names)
    df = df.join(F.broadcast(_file_ids(spark, snapshot, plan)), FILE_INDEX_COL, "inner")
    rid, rcv = (F.col(f"`{n}`") for n in names)
    df = df.select(
        *[F.col(f"`{f.name}`") for f in plan.logical_schema.fields],
        F.coalesce(rid, F.col(_BASE) + F.col(ROW_INDEX_COL)).alias(ROW_ID_COL),
        F.coalesce(rcv, F.col(_DEFAULT_VERSION)).alias(ROW_COMMIT_VERSION_COL),
        *([F.col(FILE_INDEX_COL), F.col(ROW_INDEX_COL)] if keep_row_index or with_file else []),
        *([F.col(_PATH), F.col(_SIZE), F.col(_BASE), F.col(_DEFAULT_VERSION)] if with_file else []))
    return df


def _file_ids(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan) -> DataFrame:
    """One row per planned file: its position in the plan, ``baseRowId``, ``defaultRowCommitVersion``, location, size.

    Enabled row tracking promises ids on every live file; one without them is a broken table, refused
    rather than read with made-up ids.
    """
    files = snapshot.files.take(plan.rows_indexes) if len(plan.rows_indexes) else snapshot.files.slice(0, 0)
    bases = files.column("baseRowId").to_pylist()
    versions = files.column("defaultRowCommitVersion").to_pylist()
    paths = files.column("path").to_pylist()
    for path, base, version in zip(paths, bases, versions, strict=True):
        if base is None or version is None:
            raise RowTrackingError(
                f"{snapshot.table_root} has row tracking enabled but its file {path} has no baseRowId/"
                "defaultRowCommitVersion (written by a writer that ignored the feature): its rows have no ids. "
                "Rewrite the file with a row-tracking writer.", error_class="DVLAKE_ROW_TRACKING_ILLEGAL_STATE")
    rows = [(i, int(b), int(v), f.path, int(f.size))
            for i, (f, b, v) in enumerate(zip(plan.files, bases, versions, strict=True))]
    schema = StructType([StructField(FILE_INDEX_COL, IntegerType(), False), StructField(_BASE, LongType(), False),
                         StructField(_DEFAULT_VERSION, LongType(), False), StructField(_PATH, StringType(), False),
                         StructField(_SIZE, LongType(), False)])
    return spark.createDataFrame(rows, schema)


def read_with_metadata(spark: SparkSession, snapshot: Snapshot, condition: str | Column | Condition | None = None) -> DataFrame:
    """The table's rows plus a ``_metadata`` struct: ``row_id``, ``row_commit_version``, ``base_row_id``,
    ``default_row_commit_version``, ``row_index``, ``file_path``, ``file_name``, ``file_size`` (delta-spark's names)."""
    if not rt.is_enabled(snapshot.protocol, snapshot.metadata):
        raise RowTrackingError(
            f"cannot read row ids of {snapshot.table_root}: row tracking is not enabled on it (version "
            f"{snapshot.version}). Enable it with ALTER TABLE … SET TBLPROPERTIES ('{rt.ENABLE_KEY}' = 'true').",
            error_class="DVLAKE_ROW_TRACKING_NOT_ENABLED")
    if METADATA_COL in {f["name"] for f in snapshot.schema["fields"]}:
        raise RowTrackingError(f"{snapshot.table_root} has a column named {METADATA_COL}: the row tracking struct "
                               "would hide it; rename the column", error_class="DVLAKE_ROW_TRACKING_ILLEGAL_STATE")
    cond = Condition.of(condition)
    check_condition(spark, snapshot, cond, "read")
    plan = plan_scan(spark, snapshot, cond)
    df = tracked_frame(spark, snapshot, plan, with_file=True)
    meta = F.struct(
        F.col(_PATH).alias("file_path"), F.element_at(F.split(F.col(_PATH), "/"), -1).alias("file_name"),
        F.col(_SIZE).alias("file_size"), F.col(ROW_INDEX_COL).alias("row_index"),
        F.col(ROW_ID_COL).alias("row_id"), F.col(_BASE).alias("base_row_id"),
        F.col(ROW_COMMIT_VERSION_COL).alias("row_commit_version"),
        F.col(_DEFAULT_VERSION).alias("default_row_commit_version"))
    out = df.select(*[F.col(f"`{f.name}`") for f in plan.logical_schema.fields], meta.alias(METADATA_COL))
    return out.filter(condition_column(cond, plan.logical_schema.fieldNames())) if cond is not None else out


# --- writing: what goes into the new files' materialized columns -------------------------------------
# The commands call these small hooks; each is the old behaviour when row tracking is not enabled.


def scan_frame(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan) -> DataFrame:
    """``logical_frame`` for a rewrite: with row tracking enabled, plus ``ROW_ID_COL``/``ROW_COMMIT_VERSION_COL``
    (which ``materialize`` and ``write_rows`` turn into the new files' hidden columns)."""
    if materialized_columns(snapshot) is None:
        return logical_frame(spark, snapshot, plan)
    return tracked_frame(spark, snapshot, plan)


def carried(df: DataFrame, updated: Column | None) -> list[Column]:
    """The tracking columns through an UPDATE's projection (none when ``df`` has none).

    ``updated``: which rows the assignments change (None: all of them). A changed row keeps its id and
    gets NULL as commit version, so its new file's ``defaultRowCommitVersion`` (this commit) applies.
    """
    if ROW_ID_COL not in df.columns:
        return []
    null = F.lit(None).cast(LongType())
    version = null if updated is None else F.when(updated, null).otherwise(F.col(ROW_COMMIT_VERSION_COL))
    return [F.col(ROW_ID_COL), version.alias(ROW_COMMIT_VERSION_COL)]


def materialized_out(df: DataFrame, metadata: Metadata, protocol: Protocol) -> tuple[list[Column], tuple[str, ...]]:
    """(columns to write after the table's, their names for ``to_physical(extra=…)``): the tracking columns of
    ``df`` under the table's materialized names; nothing when ``df`` has none or row tracking is off."""
    if ROW_ID_COL not in df.columns or not rt.is_enabled(protocol, metadata):
        return [], ()
    rid, rcv = rt.materialized_columns_or_raise(metadata)
    ids: tuple[dict[str, int], dict[str, int]] = ({}, {})
    if compat.is_v3(metadata.configuration):  # Iceberg readers find the row lineage columns by these field ids
        ids = ({PARQUET_FIELD_ID_KEY: compat.ICEBERG_ROW_ID_FIELD_ID},
               {PARQUET_FIELD_ID_KEY: compat.ICEBERG_LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID})
    return [F.col(ROW_ID_COL).alias(rid, metadata=ids[0]),
            F.col(ROW_COMMIT_VERSION_COL).alias(rcv, metadata=ids[1])], (rid, rcv)


def materialize(df: DataFrame, snapshot: Snapshot) -> tuple[DataFrame, tuple[str, ...]]:
    """``df`` (logical columns, maybe the tracking ones) ready for ``to_physical(…, extra=names)``."""
    cols, names = materialized_out(df, snapshot.metadata, snapshot.protocol)
    if not names:
        return df, ()
    logical = [c for c in df.columns if c not in (ROW_ID_COL, ROW_COMMIT_VERSION_COL)]
    return df.select(*[F.col(f"`{c}`") for c in logical], *cols), names


def ids_frame(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan) -> DataFrame | None:
    """(``FILE_INDEX_COL``, ``ROW_INDEX_COL``, ``ROW_ID_COL``, ``ROW_COMMIT_VERSION_COL``) of every live row of
    ``plan``, for MERGE, whose changed rows carry their target (file, row) position; None without row tracking."""
    if materialized_columns(snapshot) is None:
        return None
    df = tracked_frame(spark, snapshot, plan, keep_row_index=True)
    return df.select(FILE_INDEX_COL, ROW_INDEX_COL, ROW_ID_COL, ROW_COMMIT_VERSION_COL)


def with_kept_ids(df: DataFrame, ids: DataFrame | None, file_col: str, row_col: str, columns: list[str], *,
                  keep_commit_version: bool) -> DataFrame:
    """``df``'s ``columns``, plus (when ``ids``) the tracking values of the target row at (``file_col``, ``row_col``).

    Rows without a target position (a MERGE insert) get NULL for both; ``keep_commit_version`` is for rows
    copied unchanged, the others (updated) get NULL as version.
    """
    out = [F.col(f"`{c}`") for c in columns]
    if ids is None:
        return df.select(*out)
    keyed = ids.withColumnRenamed(FILE_INDEX_COL, file_col).withColumnRenamed(ROW_INDEX_COL, row_col)
    joined = df.join(keyed, [file_col, row_col], "left")
    version = F.col(ROW_COMMIT_VERSION_COL) if keep_commit_version else F.lit(None).cast(LongType())
    return joined.select(*out, F.col(ROW_ID_COL), version.alias(ROW_COMMIT_VERSION_COL))

