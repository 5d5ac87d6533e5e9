"""Snapshot → Spark DataFrame of the table's logical rows.

Planning (which files, their DVs, their typed partition values, pruning) happens here from
the snapshot's Arrow file index; reading and applying DVs is ``dv_scan.scan_files``. Column
mapping is undone on top: Parquet is read by physical names and renamed to logical ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructType

from dvlake.config import CONFINE_SESSION_KEY, confinement_enabled
from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.log.arrow import take_rows
from dvlake.log.condition import Condition
from dvlake.log.partition_index import partition_index
from dvlake.log.predicates import FileFacts, prune
from dvlake.log.schema import column_types, physical_name
from dvlake.log.snapshot import Snapshot
from dvlake.spark.dv_scan import FILE_INDEX_COL, FILE_PATH_COL, ROW_INDEX_COL, ScanFile, scan_files, scan_for_matches
from dvlake.spark.layout import TableLayout, logical_struct, to_logical
from dvlake.spark.pruning import condition_column, partition_only_mask, session_time_zone
from dvlake.spark.task_errors import install as install_typed_errors
from dvlake.spark.task_errors import remember_table
from dvlake.storage.confine import check_local_files, data_file_location

if TYPE_CHECKING:
    from pyspark.errors import PySparkException


@dataclass
class ScanPlan:
    """The files a scan reads and the schemas it reads them with."""

    files: list[ScanFile]
    data_schema: StructType          # physical names, non-partition columns
    partition_schema: StructType     # logical names
    logical_schema: StructType       # the table's columns as users see them
    physical_to_logical: list[tuple[str, str, Any]]  # (physical, logical, logical Spark type) for data columns
    rows_indexes: np.ndarray         # index into snapshot.files of each planned file
    # data and DV paths must stay inside the table root (storage/confine.py); no default, so no plan built from
    # another can silently turn a table's "confinement off" back on (or off): derive plans with ``restricted``
    confine: bool

    def restricted(self, positions: list[int] | np.ndarray) -> ScanPlan:
        """The plan narrowed to some of its files (positions in ``files``), everything else kept, ``confine`` too."""
        return replace(self, files=[self.files[i] for i in positions], rows_indexes=self.rows_indexes[positions])


def plan_scan(spark: SparkSession, snapshot: Snapshot, condition: str | Column | Condition | None = None) -> ScanPlan:
    """Choose files (partition pruning + data skipping) and describe them for the reader.

    Pruning runs first, over Arrow columns: partition values are judged once per distinct tuple
    (``log/partition_index.py``) and stats are parsed only for the files those keep (``predicates.prune``);
    Python objects (``ScanFile``, DV descriptors, typed partition tuples) are built for the kept files alone, so a
    command that touches ten files of a million-file table plans in time that grows with the ten."""
    layout = TableLayout.of(snapshot)
    parts = [p.lower() for p in snapshot.partition_columns]
    partition_schema = layout.partition_schema

    files = snapshot.files
    n = files.num_rows
    keep = np.ones(n, dtype=bool)
    index = partition_index(snapshot.partition_codes(tuple(k for k, _ in layout.keyed_partitions)),
                            layout.typed_partitions)
    cond = Condition.of(condition)
    if cond is not None and n:
        facts = _file_facts(spark, snapshot, files.column("stats"), index.rows, index.codes)
        pruned = prune(cond, facts)
        keep &= pruned.keep
        if not pruned.exact and cond.references_only(set(parts)):  # constant conditions too (1 = 0)
            keep &= partition_only_mask(spark, cond, partition_schema, index.rows)[index.codes]
    idx = np.nonzero(keep)[0]
    return _described(spark, snapshot, layout, idx, index.rows_of(idx))


def schema_plan(spark: SparkSession, snapshot: Snapshot) -> ScanPlan:
    """A plan of no file with the snapshot's schemas: what a command needs to resolve names before it knows which
    files its conditions keep (MERGE), without describing every file of the table first."""
    return _described(spark, snapshot, TableLayout.of(snapshot), np.zeros(0, dtype=np.int64), [])


def plan_scan_any(spark: SparkSession, snapshot: Snapshot, conditions: list[Condition]) -> ScanPlan:
    """The snapshot's files where one of ``conditions`` may hold, proven from stats and partition values alone: the
    files a whole-table plan pruned by each condition would keep, but pruned over Arrow columns before any file is
    described (one verdict per distinct partition tuple, stats of partition survivors)."""
    layout = TableLayout.of(snapshot)
    files = snapshot.files
    index = partition_index(snapshot.partition_codes(tuple(k for k, _ in layout.keyed_partitions)),
                            layout.typed_partitions)
    keep = np.ones(files.num_rows, dtype=bool)
    if conditions and files.num_rows:
        facts = _file_facts(spark, snapshot, files.column("stats"), index.rows, index.codes)
        keep[:] = False
        for cond in conditions:
            keep |= prune(cond, facts).keep
    idx = np.nonzero(keep)[0]
    return _described(spark, snapshot, layout, idx, index.rows_of(idx))


def _described(spark: SparkSession, snapshot: Snapshot, layout: TableLayout, idx: np.ndarray,
               partition_rows: list[tuple]) -> ScanPlan:
    """The plan of the snapshot's files at ``idx`` (their typed partition tuples given): only their rows leave Arrow."""
    # No file is skipped because its DV's cardinality reaches numRecords: both are unverified log
    # metadata, and a lie in either would hide live rows. Such files are read with the DV applied.
    kept = take_rows(snapshot.files.select(["path", "size", "deletionVector"]), idx)
    num_records = snapshot.num_records(idx)
    confine = confinement_enabled(spark.conf.get(CONFINE_SESSION_KEY, None), snapshot.configuration)
    paths = kept.column("path").to_pylist()
    sizes = kept.column("size").to_numpy(zero_copy_only=False)
    dvs = kept.column("deletionVector").to_pylist()
    out = []
    for j in range(len(idx)):
        dv = dvs[j]
        desc = DeletionVectorDescriptor.from_json(dv) if dv and dv.get("storageType") else None
        out.append(ScanFile(path=data_file_location(snapshot.table_root, paths[j], confine), size=int(sizes[j]),
                            num_records=int(num_records[j]) if num_records[j] >= 0 else None, dv=desc,
                            partition_values=partition_rows[j]))
    check_local_files(snapshot.table_root, [f.path for f in out], confine)
    return ScanPlan(out, layout.data_schema, layout.partition_schema, layout.logical_schema, layout.physical_to_logical,
                    idx, confine)


def _file_facts(spark: SparkSession, snapshot: Snapshot, stats: Any, partition_rows: list[tuple],
                codes: np.ndarray | None = None) -> FileFacts:
    """What pruning knows of files: their stats column and typed partition tuples, in one order (or the distinct
    tuples and each file's code into them)."""
    schema, mode = snapshot.schema, snapshot.column_mapping_mode
    parts = [p.lower() for p in snapshot.partition_columns]
    part_names = [next(f["name"] for f in schema["fields"] if f["name"].lower() == p) for p in parts]
    return FileFacts(stats, part_names, partition_rows, column_types(schema), _physical_paths(schema, mode, parts),
                     session_time_zone(spark), codes)


def check_condition(spark: SparkSession, snapshot: Snapshot, condition: str | Column | Condition | None,
                    command: str) -> DataFrame | None:
    """Resolve ``condition`` against the table's own columns before any internal column exists; returns the empty
    frame of those columns (under the condition's alias) it was resolved over, for further checks of the same
    expression (None without a condition).

    Spark's "did you mean" list would otherwise offer dvlake's ``__dvlake_*`` helper columns;
    here it offers the table's columns only, and the error is an ``InvalidArgumentError``.
    """
    cond = Condition.of(condition)
    if cond is None:
        return None
    from pyspark.errors import AnalysisException, ParseException

    logical = logical_struct(snapshot.schema)
    probe = spark.createDataFrame([], logical)
    if cond.alias:
        probe = probe.alias(cond.alias)
    try:
        probe.filter(condition_column(cond, logical.fieldNames())).schema  # noqa: B018 - analysis (Connect is lazy)
    except (AnalysisException, ParseException) as exc:
        raise unresolved_condition(command, cond, snapshot.table_root, exc) from exc
    return probe


def unresolved_condition(command: str, condition: Condition, table_root: str, exc: PySparkException) -> Exception:
    """The typed error for a condition Spark could not analyse: Spark's class (UNRESOLVED_COLUMN…,
    PARSE_SYNTAX_ERROR) and SQLSTATE, as delta-spark lets them through, on dvlake's ``InvalidArgumentError``."""
    from dvlake.errors import InvalidArgumentError

    err = InvalidArgumentError(f"{command} condition {condition.display()!r} on {table_root} cannot be "
                               f"resolved: {str(exc).splitlines()[0]}", error_class=exc.getCondition())
    err.sql_state = exc.getSqlState() or err.sql_state
    return err


def all_column_names(snapshot: Snapshot) -> set[str]:
    """Lower-cased logical names of the table's top-level columns."""
    return {f["name"].lower() for f in snapshot.schema["fields"]}


def _physical_paths(schema: dict[str, Any], mode: str, parts: list[str]) -> dict[str, str]:
    """Logical dotted name (lower-case) → physical dotted path, for stats lookups."""
    out: dict[str, str] = {}

    def visit(fields: list[dict[str, Any]], lprefix: str, pprefix: str) -> None:
        for f in fields:
            lname, pname = lprefix + f["name"].lower(), pprefix + physical_name(f, mode)
            t = f["type"]
            if isinstance(t, dict) and t.get("type") == "struct":
                visit(t["fields"], lname + ".", pname + ".")
            else:
                out[lname] = pname

    visit([f for f in schema["fields"] if f["name"].lower() not in parts], "", "")
    return out


def logical_frame(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, *, include_row_index: bool = False,
                  hidden_columns: tuple[str, ...] = ()) -> DataFrame:
    """The planned files' live rows under logical column names.

    With ``include_row_index`` the frame also has ``FILE_INDEX_COL`` (position in ``plan.files``)
    and ``ROW_INDEX_COL`` (physical row index in that file), which DML uses to build DVs.
    ``hidden_columns``: physical columns of ``plan.data_schema`` outside the table's schema (row
    tracking's materialized columns) kept after the logical ones.
    """
    install_typed_errors()
    remember_table(snapshot.table_root)
    df = scan_files(spark, plan.files, plan.data_schema, plan.partition_schema, snapshot.table_root,
                    include_row_index=include_row_index, confine=plan.confine)
    return _to_logical(df, plan, [*hidden_columns, *([FILE_INDEX_COL, ROW_INDEX_COL] if include_row_index else [])])


def match_frame(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan) -> DataFrame:
    """The planned files' rows (deleted ones included) with ``FILE_PATH_COL`` and ``ROW_INDEX_COL``, logical names."""
    install_typed_errors()
    remember_table(snapshot.table_root)
    df = scan_for_matches(spark, plan.files, plan.data_schema, plan.partition_schema)
    return _to_logical(df, plan, [FILE_PATH_COL, ROW_INDEX_COL])


def _to_logical(df: DataFrame, plan: ScanPlan, extra: list[str]) -> DataFrame:
    return to_logical(df, plan.logical_schema, plan.physical_to_logical, extra)


def scan_snapshot(spark: SparkSession, snapshot: Snapshot, condition: str | Column | Condition | None = None) -> DataFrame:
    """The logical rows of the snapshot (deleted rows dropped), filtered by ``condition`` if given."""
    cond = Condition.of(condition)
    check_condition(spark, snapshot, cond, "read")
    plan = plan_scan(spark, snapshot, cond)
    out = logical_frame(spark, snapshot, plan)
    return out.filter(condition_column(cond, plan.logical_schema.fieldNames())) if cond is not None else out


def metadata_row_count(snapshot: Snapshot) -> int | None:
    """The table's live row count from the log alone: Σ numRecords − Σ DV cardinality, or None when a
    file's stats lack numRecords.

    As delta-spark answers an unfiltered ``COUNT(*)`` (``optimizeMetadataQuery``): it trusts the log's
    counts, which dvlake's own writers record exactly; a scan re-counts the rows themselves.
    """
    records = snapshot.num_records()
    if (records < 0).any():
        return None
    return int(records.sum()) - int(snapshot.dv_cardinalities().sum())


def read(spark: SparkSession, path: str, version: int | None = None, timestamp: Any = None,
         condition: str | Column | None = None) -> DataFrame:
    """Read a Delta table (optionally at a version or timestamp) as a DataFrame (with row tracking's ``_metadata``:
    ``row_tracking.read_with_metadata``, which builds on this module)."""
    return scan_snapshot(spark, Snapshot.load(path, version=version, timestamp=timestamp), condition)
