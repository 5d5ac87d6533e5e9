"""OPTIMIZE: compact small files and files with many deleted rows (bin-packing), or Z-order them.

Deletion vectors amortise the cost of a DELETE; compaction is where that cost is finally paid:
the rewritten files hold only live rows (they are read through the DV-applying scan), so the
DVs go away with the files that carried them and reads are plain Parquet scans again.

1. **Selection** (delta-spark's): among the files the partition filter keeps, a file is chosen when
   it is smaller than ``optimize.minFileSize``, when its deleted-row ratio exceeds
   ``optimize.maxDeletedRowsRatio`` (0.05), or when it has a DV but no ``numRecords``. Z-order
   chooses every file; REORG … APPLY (PURGE) chooses every file with a DV (``reorg.py``). On a clustered
   table (liquid clustering, ``log/clustering.py``) OPTIMIZE Z-orders by the clustering columns every file
   no clustering OPTIMIZE wrote (``clusteringProvider`` unset), or whose DV needs purging; FULL takes every
   file. delta-spark orders by a Hilbert curve; dvlake's Z-order curve gives the same kind of layout.
2. **Bins**: per partition, files sorted by size are packed greedily up to ``optimize.maxFileSize``.
   delta-spark drops bins holding one file; dvlake keeps a lone file whose deleted ratio is above
   the threshold (or whose DV lacks ``numRecords``), because compaction exists to purge those
   (delta-spark and Trino leave them, trinodb/trino#29041).
3. **Rewrite**: every bin becomes one file (Z-order: ``ceil(bytes / maxFileSize)`` range-partitioned
   files per partition), bins in parallel jobs (``optimize.maxThreads``). New files get tight stats.
4. **Commit** (SnapshotIsolation): ``remove`` of each input carrying exactly its DV and
   ``add`` of each output, all ``dataChange=false``. On a conflict the commit is retried on the
   new snapshot only if every input is still live with the *same* (path, DV id) - a concurrent
   DELETE that changed an input's DV makes OPTIMIZE fail instead of resurrecting the rows the
   DELETE hid (delta-io/delta#3981).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from dvlake.commands.common import (
    mode_of,
    num_indexed_cols,
    stats_leaf_paths,
)
from dvlake.commands.data_files import write_table_files
from dvlake.config import (
    DEFAULT_MAX_DELETED_ROWS_RATIO,
    DEFAULT_OPTIMIZE_FILE_SIZE,
    DEFAULT_OPTIMIZE_MAX_THREADS,
    OPTIMIZE_MAX_DELETED_ROWS_RATIO,
    OPTIMIZE_MAX_FILE_SIZE,
    OPTIMIZE_MAX_THREADS,
    OPTIMIZE_MIN_FILE_SIZE,
    OPTIMIZE_REPARTITION,
)
from dvlake.errors import (
    ClusteringError,
    DeltaConcurrentModificationException,
    NonPartitionColumnReferenceError,
    ZOrderingColumnDoesNotExistError,
    ZOrderingOnPartitionColumnError,
)
from dvlake.log import clustering, features
from dvlake.log.actions import Action, AddFile, RemoveFile, now_ms
from dvlake.log.catalyst_text import catalyst_text
from dvlake.log.condition import Condition
from dvlake.log.replay import normalize_path
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import build_stats, num_records_of
from dvlake.spark import row_tracking
from dvlake.spark.dv_scan import ScanFile
from dvlake.spark.pruning import partition_only_mask
from dvlake.spark.scan import ScanPlan, plan_scan
from dvlake.spark.zorder import with_zorder_value
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction

#: How often a commit that lost a race is retried on the new snapshot (its inputs unchanged).
MAX_COMMIT_ATTEMPTS = 10
ISOLATION = "SnapshotIsolation"


# -- settings ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OptimizeSettings:
    """The thresholds of one run (delta-spark's session settings, or REORG's/auto-compaction's overrides)."""

    min_file_size: int = DEFAULT_OPTIMIZE_FILE_SIZE
    max_file_size: int = DEFAULT_OPTIMIZE_FILE_SIZE
    max_deleted_rows_ratio: float = DEFAULT_MAX_DELETED_ROWS_RATIO
    max_threads: int = DEFAULT_OPTIMIZE_MAX_THREADS
    #: ``repartition(1)`` (inputs read in parallel, one shuffle) instead of ``coalesce(1)`` (one task reads and writes)
    repartition: bool = False

    @classmethod
    def from_session(cls, spark: SparkSession) -> OptimizeSettings:
        def conf(key: str, default: Any) -> str:
            return str(spark.conf.get(key, str(default)))

        return cls(min_file_size=int(conf(OPTIMIZE_MIN_FILE_SIZE, DEFAULT_OPTIMIZE_FILE_SIZE)),
                   max_file_size=int(conf(OPTIMIZE_MAX_FILE_SIZE, DEFAULT_OPTIMIZE_FILE_SIZE)),
                   max_deleted_rows_ratio=float(conf(OPTIMIZE_MAX_DELETED_ROWS_RATIO, DEFAULT_MAX_DELETED_ROWS_RATIO)),
                   max_threads=max(1, int(conf(OPTIMIZE_MAX_THREADS, DEFAULT_OPTIMIZE_MAX_THREADS))),
                   repartition=conf(OPTIMIZE_REPARTITION, "false").strip().lower() == "true")


# -- selection and bin packing ------------------------------------------------------------------
def deleted_ratio(add: AddFile) -> float | None:
    """Deleted rows / physical rows; None when the file has a DV but no ``numRecords``."""
    if add.deletion_vector is None:
        return 0.0
    n = num_records_of(add.stats)
    if not n:
        return None
    return add.deletion_vector.cardinality / n


def dv_needs_purge(add: AddFile, max_ratio: float) -> bool:
    """A DV that compaction must not leave behind: too many deleted rows, or unknown row count."""
    ratio = deleted_ratio(add)
    return ratio is None or ratio > max_ratio


def select_for_compaction(add: AddFile, settings: OptimizeSettings) -> bool:
    return add.size < settings.min_file_size or dv_needs_purge(add, settings.max_deleted_rows_ratio)


def select_for_purge(add: AddFile) -> bool:
    return add.deletion_vector is not None and (add.deletion_vector.cardinality > 0 or deleted_ratio(add) is None)


def _partition_key(add: AddFile) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(add.partition_values.items()))


def pack_bins(files: Sequence[AddFile], max_bin_size: int, keep_single: bool | None = None,
              max_ratio: float = DEFAULT_MAX_DELETED_ROWS_RATIO) -> list[list[AddFile]]:
    """Per partition, files by ascending size packed greedily up to ``max_bin_size``.

    A bin of one file is kept when ``keep_single`` is True (REORG), or - when it is None
    (compaction) - only if that file carries a DV that needs purging.
    """
    by_partition: dict[tuple[tuple[str, str | None], ...], list[AddFile]] = defaultdict(list)
    for f in files:
        by_partition[_partition_key(f)].append(f)
    bins: list[list[AddFile]] = []
    for _, group in sorted(by_partition.items(), key=lambda kv: repr(kv[0])):
        current: list[AddFile] = []
        current_size = 0
        for f in sorted(group, key=lambda a: (a.size, a.path)):
            if current and current_size + f.size > max_bin_size:
                bins.append(current)
                current, current_size = [], 0
            current.append(f)
            current_size += f.size
        if current:
            bins.append(current)
    if keep_single is True:
        return bins
    return [b for b in bins if len(b) > 1 or (keep_single is None and dv_needs_purge(b[0], max_ratio))]


# -- the command -----------------------------------------------------------------------------------
@dataclass
class OptimizeRequest:
    """What to optimize and how (filled by the faces: DeltaTable.optimize(), SQL, REORG, auto-compaction)."""

    condition: str | Column | None = None
    zorder_by: list[str] = field(default_factory=list)
    purge: bool = False
    auto: bool = False
    #: only files in these partitions (partitionValues dicts) - auto-compaction's scope
    partitions: list[dict[str, str | None]] | None = None
    settings: OptimizeSettings | None = None
    #: OPTIMIZE … FULL: on a clustered table, recluster every file (not only those no clustering OPTIMIZE wrote)
    full: bool = False
    #: with ``purge``: rewrite exactly these files (their log paths) instead of those with DVs - DROP FEATURE
    #: typeWidening's rewrite of files that still hold an older type (each read with the table's types)
    rewrite_paths: frozenset[str] | None = None


@dataclass
class OptimizeOutcome:
    """The result of one run: delta-spark's OptimizeMetrics, and the committed version (None: no commit)."""

    table_root: str
    metrics: dict[str, Any]
    version: int | None


def optimize(spark: SparkSession, path: str, request: OptimizeRequest) -> OptimizeOutcome:
    """Run OPTIMIZE (or REORG PURGE, with ``request.purge``) on the table at ``path``."""
    started = now_ms()
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    features.check_can_write(snapshot.protocol, snapshot.metadata, root)
    settings = request.settings or OptimizeSettings.from_session(spark)
    cluster_by = _clustering_columns(snapshot, request)
    _check_condition(snapshot, request.condition)
    zorder = cluster_by or _check_zorder_columns(snapshot, request.zorder_by)

    plan = plan_scan(spark, snapshot, request.condition)
    adds = snapshot.add_files()
    considered_idx = {int(i) for i in plan.rows_indexes} | _fully_deleted_in_scope(spark, snapshot, plan, adds,
                                                                                     request.condition)
    if request.partitions is not None:
        wanted = {tuple(sorted(p.items())) for p in request.partitions}
        considered_idx = {i for i in considered_idx if _partition_key(adds[i]) in wanted}
    considered = [adds[i] for i in sorted(considered_idx)]
    if cluster_by:  # incremental: files a clustering OPTIMIZE wrote stay unless FULL or their DV needs purging
        bins = pack_bins([a for a in considered if request.full or a.clustering_provider != clustering.PROVIDER
                          or dv_needs_purge(a, settings.max_deleted_rows_ratio)], 2**62, keep_single=True)
    elif zorder:
        bins = pack_bins(considered, 2**62, keep_single=True)
    elif request.purge:
        chosen = [a for a in considered if (select_for_purge(a) if request.rewrite_paths is None
                                            else a.path in request.rewrite_paths)]
        bins = pack_bins(chosen, settings.max_file_size, keep_single=True)
    else:
        bins = pack_bins([a for a in considered if select_for_compaction(a, settings)], settings.max_file_size,
                         keep_single=None, max_ratio=settings.max_deleted_rows_ratio)

    scan_file_of = {int(idx): sf for idx, sf in zip(plan.rows_indexes, plan.files, strict=True)}
    index_of = {a.path: i for i, a in enumerate(adds)}
    new_files = _rewrite_bins(spark, snapshot, plan, bins, scan_file_of, index_of, zorder, settings)
    if cluster_by:  # delta-spark's mark of a clustered file: the next incremental OPTIMIZE leaves it
        new_files = [replace(a, clustering_provider=clustering.PROVIDER) for a in new_files]
    removed = [a for b in bins for a in b]
    version = None
    # delta-spark commits only when something was written; dvlake also commits bins whose every row was deleted
    # (removes only), so PURGE never leaves a DV behind - DROP FEATURE deletionVectors depends on that
    if removed:
        ts = now_ms()
        actions: list[Action] = [_remove_of(a, ts) for a in removed]
        actions += [replace(a, data_change=False) for a in new_files]
        params: dict[str, Any] = {"predicate": _predicate_param(request.condition)}
        if request.purge:
            params["applyPurge"] = True
        elif cluster_by:
            params.update({"zOrderBy": json.dumps([]), "clusterBy": json.dumps(cluster_by, separators=(",", ":")),
                           "auto": request.auto,
                           "isFull": request.full})
        else:
            params.update({"zOrderBy": json.dumps(zorder), "clusterBy": json.dumps([]), "auto": request.auto})
        version = commit_with_retry(root, snapshot, removed, actions, "REORG" if request.purge else "OPTIMIZE", params,
                                    commit_metrics(new_files, removed))
    metrics = optimize_metrics(snapshot, considered, removed, new_files, bins, zorder, started)
    return OptimizeOutcome(root, metrics, version)


def _clustering_columns(snapshot: Snapshot, request: OptimizeRequest) -> list[str]:
    """The clustering columns OPTIMIZE clusters by (empty: not a clustered table, or CLUSTER BY NONE); refuses what
    delta-spark refuses on a clustered table (ZORDER BY, a WHERE) and FULL on one that is not clustered."""
    if not clustering.enabled(snapshot.protocol) or request.purge:
        if request.full:
            raise ClusteringError(f"OPTIMIZE FULL is only supported for clustered tables with non-empty clustering "
                                  f"columns; {snapshot.table_root} is not clustered",
                                  error_class="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED")
        return []
    if request.zorder_by:
        raise ClusteringError(f"OPTIMIZE of the clustered table {snapshot.table_root} cannot specify ZORDER BY: it is "
                              f"clustered by its clustering columns; remove ZORDER BY ({', '.join(request.zorder_by)})",
                              error_class="DELTA_CLUSTERING_WITH_ZORDER_BY")
    cond = Condition.of(request.condition)
    if cond is not None:
        raise ClusteringError(f"OPTIMIZE of the clustered table {snapshot.table_root} does not take partition "
                              f"predicates (a clustered table has no partitions); remove the predicate {cond.display()}",
                              error_class="DELTA_CLUSTERING_WITH_PARTITION_PREDICATE")
    columns = clustering.logical_columns(snapshot.domains, snapshot.schema, snapshot.column_mapping_mode)
    if request.full and not columns:
        raise ClusteringError(f"OPTIMIZE FULL is only supported for clustered tables with non-empty clustering "
                              f"columns; {snapshot.table_root} is clustered by none (CLUSTER BY NONE)",
                              error_class="DELTA_OPTIMIZE_FULL_NOT_SUPPORTED")
    return columns


def _check_condition(snapshot: Snapshot, condition: str | Column | None) -> None:
    """delta-spark's ``verifyPartitionPredicates``: OPTIMIZE and REORG pick whole files, so the filter may only name
    partition columns; its message names the first other column and lists the partition columns."""
    parts = list(snapshot.partition_columns)
    cond = Condition.of(condition)
    if cond is None or cond.references_only(set(parts)):
        return
    allowed = {p.lower() for p in parts}
    others = sorted(c for c in (cond.columns or ()) if c.lower() not in allowed)
    named = f"column '{others[0]}'" if others else f"column (in {cond.display()!r})"
    raise NonPartitionColumnReferenceError(
        f"Predicate references non-partition {named}. Only the partition columns may be referenced: [{', '.join(parts)}]"
        f" (OPTIMIZE and REORG choose whole files of {snapshot.table_root}, so WHERE may only filter partitions).")


def _check_zorder_columns(snapshot: Snapshot, columns: Sequence[str]) -> list[str]:
    names = {f["name"].lower(): f["name"] for f in snapshot.schema["fields"]}
    parts = {p.lower() for p in snapshot.partition_columns}
    out = []
    for c in columns:
        key = c.strip("`").lower()
        if key in parts:
            raise ZOrderingOnPartitionColumnError(
                f"{c!r} is a partition column of {snapshot.table_root}; "
                "Z-ordering can only use data columns. Filter partitions with WHERE instead.")
        if key not in names:
            raise ZOrderingColumnDoesNotExistError(
                f"Z-order column {c!r} does not exist in {snapshot.table_root} "
                f"(columns: {sorted(names.values())}).")
        out.append(names[key])
    return out


def _fully_deleted_in_scope(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, adds: list[AddFile],
                           condition: str | Column | None) -> set[int]:
    """Files whose DV deletes every row (the scan skips them, but compaction must still remove them)."""
    if snapshot.num_files == 0:
        return set()
    num_records, cards = snapshot.num_records(), snapshot.dv_cardinalities()
    idx = [int(i) for i in np.nonzero((num_records >= 0) & (cards >= num_records) & (cards > 0))[0]]
    if not idx or condition is None:
        return set(idx)
    cond = Condition.of(condition)
    assert cond is not None
    mask = partition_only_mask(spark, cond, plan.partition_schema, [_typed_partition(snapshot, adds[i]) for i in idx])
    return {i for i, keep in zip(idx, mask, strict=True) if keep}


def _typed_partition(snapshot: Snapshot, add: AddFile) -> tuple[Any, ...]:
    from dvlake.log.partitions import parse_partition_value
    from dvlake.log.schema import physical_name

    mode = snapshot.column_mapping_mode
    fields = {f["name"].lower(): f for f in snapshot.schema["fields"]}
    out = []
    for p in snapshot.partition_columns:
        f = fields[p.lower()]
        out.append(parse_partition_value(add.partition_values.get(physical_name(f, mode)), f["type"]))
    return tuple(out)


def _rewrite_bins(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, bins: list[list[AddFile]],
                  scan_file_of: dict[int, ScanFile], index_of: dict[str, int], zorder: list[str],
                  settings: OptimizeSettings) -> list[AddFile]:
    """Write each bin's live rows as new files (bins run as parallel Spark jobs); returns their adds."""
    if not bins:
        return []

    def rewrite(bin_files: list[AddFile]) -> list[AddFile]:
        files = [scan_file_of[index_of[a.path]] for a in bin_files if index_of[a.path] in scan_file_of]
        if not files:
            return []  # every row of every input is deleted: nothing to write
        # the same plan narrowed to the bin (its ``confine`` with it: a table with confinement off keeps it off)
        sub = replace(plan, files=files,
                      rows_indexes=np.array([index_of[a.path] for a in bin_files if index_of[a.path] in scan_file_of]))
        df = row_tracking.scan_frame(spark, snapshot, sub)  # row ids and versions kept (row tracking)
        if zorder:
            out_files = max(1, math.ceil(sum(a.size for a in bin_files) / settings.max_file_size))
            live = sum(max(0, (num_records_of(a.stats) or 0) - (a.deletion_vector.cardinality if a.deletion_vector else 0))
                       for a in bin_files)
            z = "__dvlake_zorder"
            df = with_zorder_value(df, zorder, live, z)
            df = df.repartitionByRange(out_files, F.col(z)).sortWithinPartitions(z).drop(z)
        else:
            df = df.repartition(1) if settings.repartition else df.coalesce(1)
        df, kept_ids = row_tracking.materialize(df, snapshot)
        written = write_table_files(df, snapshot.table_root, snapshot.storage, snapshot.metadata, snapshot.protocol,
                                    extra=kept_ids)
        return [a for a in written if (num_records_of(a.stats) or 0) > 0]  # empty outputs are dropped

    with ThreadPoolExecutor(max_workers=min(settings.max_threads, len(bins))) as pool:
        return [a for out in pool.map(rewrite, bins) for a in out]


def _remove_of(add: AddFile, ts: int) -> RemoveFile:
    """The tombstone of an input: its exact DV, ``dataChange=false``, stats reduced to numRecords."""
    n = num_records_of(add.stats)
    return replace(add.remove(ts, data_change=False), stats=build_stats(n) if n is not None else None)


def _predicate_param(condition: str | Column | None) -> str:
    """The partition filter as delta-spark records it: its unresolved Catalyst expression's text (``["('p = 1)"]``),
    the user's text where dvlake cannot render that exactly (``log.catalyst_text``)."""
    cond = Condition.of(condition)
    if cond is None:
        return json.dumps([])
    rendered = catalyst_text(cond.tree)
    return json.dumps([rendered]) if rendered is not None else cond.predicate_param()


# -- committing ---------------------------------------------------------------------------------
def _live_keys(snapshot: Snapshot) -> set[tuple[str, str | None]]:
    dvs = snapshot.files.column("deletionVector").to_pylist()
    paths = snapshot.files.column("path").to_pylist()
    out = set()
    for p, dv in zip(paths, dvs, strict=True):
        uid = None
        if dv and dv.get("storageType"):
            from dvlake.dv.descriptor import DeletionVectorDescriptor

            uid = DeletionVectorDescriptor.from_json({k: v for k, v in dv.items() if v is not None}).unique_id
        out.add((normalize_path(p), uid))
    return out


def inputs_unchanged(snapshot: Snapshot, inputs: Sequence[AddFile]) -> bool:
    """Whether every input is still live with the same (path, DV id) - the only safe ground for a retry."""
    live = _live_keys(snapshot)
    return all((normalize_path(a.path), a.dv_unique_id) in live for a in inputs)


def commit_with_retry(root: str, snapshot: Snapshot, inputs: Sequence[AddFile], actions: list[Action], operation: str,
                      params: dict[str, Any], metrics: dict[str, Any]) -> int:
    """Commit; after a conflict, retry on the newest snapshot only while the inputs are unchanged."""
    read_snapshot = snapshot
    for attempt in range(MAX_COMMIT_ATTEMPTS):
        txn = OptimisticTransaction(root, read_snapshot, isolation_level=ISOLATION)
        txn.read_files(inputs)
        try:
            return txn.commit(actions, operation, params, metrics)
        except DeltaConcurrentModificationException:
            latest = Snapshot.load(root)
            same_layout = (list(latest.partition_columns) == list(snapshot.partition_columns)
                           and latest.metadata.schema_string == snapshot.metadata.schema_string)
            if attempt == MAX_COMMIT_ATTEMPTS - 1 or not same_layout or not inputs_unchanged(latest, inputs):
                raise
            read_snapshot = latest
    raise AssertionError("unreachable")


# -- metrics ------------------------------------------------------------------------------------
def _dv_removed(removed: Sequence[AddFile]) -> tuple[int, int]:
    with_dv = [a for a in removed if a.deletion_vector is not None]
    return len(with_dv), sum(a.deletion_vector.cardinality for a in with_dv if a.deletion_vector)


def commit_metrics(added: Sequence[AddFile], removed: Sequence[AddFile]) -> dict[str, Any]:
    """delta-spark's DeltaOperationMetrics.OPTIMIZE (percentiles of the added files' sizes)."""
    sizes = sorted(a.size for a in added)
    n = len(sizes)
    return {"numRemovedFiles": len(removed), "numRemovedBytes": sum(a.size for a in removed),
            "p25FileSize": sizes[n // 4] if n else 0, "numDeletionVectorsRemoved": _dv_removed(removed)[0],
            "minFileSize": sizes[0] if n else 0, "numAddedFiles": n, "maxFileSize": sizes[-1] if n else 0,
            "p75FileSize": sizes[n * 3 // 4] if n else 0, "p50FileSize": sizes[n // 2] if n else 0,
            "numAddedBytes": sum(sizes)}


def _size_stats(files: Sequence[AddFile]) -> dict[str, Any]:
    sizes = [a.size for a in files]
    return {"min": min(sizes) if sizes else None, "max": max(sizes) if sizes else None,
            "avg": float(sum(sizes) / len(sizes)) if sizes else 0.0, "totalFiles": len(sizes), "totalSize": sum(sizes)}


def optimize_metrics(snapshot: Snapshot, considered: Sequence[AddFile], removed: Sequence[AddFile],
                     added: Sequence[AddFile], bins: Sequence[Sequence[AddFile]], zorder: list[str],
                     started: int) -> dict[str, Any]:
    """delta-spark's OptimizeMetrics as a dict shaped like ``METRICS_SCHEMA``."""
    dv_files, dv_rows = _dv_removed(removed)
    md = snapshot.metadata
    leaf = stats_leaf_paths(md.schema, list(md.partition_columns), mode_of(md))
    zstats = None
    if zorder:
        zstats = {"strategyName": "all", "inputCubeFiles": {"num": 0, "size": 0},
                  "inputOtherFiles": {"num": len(removed), "size": sum(a.size for a in removed)}, "inputNumCubes": 0,
                  "mergedFiles": {"num": len(removed), "size": sum(a.size for a in removed)},
                  "numOutputCubes": len(bins)}
    return {
        "numFilesAdded": len(added), "numFilesRemoved": len(removed),
        "filesAdded": _size_stats(added), "filesRemoved": _size_stats(removed),
        "partitionsOptimized": len({_partition_key(b[0]) for b in bins}),
        "zOrderStats": zstats, "clusteringStats": None, "numBins": len(bins), "numBatches": 1 if bins else 0,
        "totalConsideredFiles": len(considered), "totalFilesSkipped": len(considered) - len(removed),
        "preserveInsertionOrder": False, "numFilesSkippedToReduceWriteAmplification": 0,
        "numBytesSkippedToReduceWriteAmplification": 0, "startTimeMs": started, "endTimeMs": now_ms(),
        "totalClusterParallelism": 0, "totalScheduledTasks": len(bins), "autoCompactParallelismStats": None,
        "deletionVectorStats": ({"numDeletionVectorsRemoved": dv_files, "numDeletionVectorRowsRemoved": dv_rows}
                                if dv_files else None),
        "numTableColumns": len(md.schema["fields"]),
        "numTableColumnsWithStats": min(len(leaf), max(num_indexed_cols(md.configuration), 0)),
    }


_FILE_SIZES = StructType([StructField("min", LongType()), StructField("max", LongType()), StructField("avg", DoubleType()),
                          StructField("totalFiles", LongType()), StructField("totalSize", LongType())])
_ZORDER_FILES = StructType([StructField("num", LongType()), StructField("size", LongType())])
_ZORDER_STATS = StructType([
    StructField("strategyName", StringType()), StructField("inputCubeFiles", _ZORDER_FILES),
    StructField("inputOtherFiles", _ZORDER_FILES), StructField("inputNumCubes", LongType()),
    StructField("mergedFiles", _ZORDER_FILES), StructField("numOutputCubes", LongType()),
])
_CLUSTERING_STATS = StructType([StructField("numOutputZCubes", LongType())])
_PARALLELISM = StructType([StructField(n, LongType()) for n in (
    "maxClusterActiveParallelism", "minClusterActiveParallelism", "maxSessionActiveParallelism",
    "minSessionActiveParallelism")])
_DV_STATS = StructType([StructField("numDeletionVectorsRemoved", LongType()),
                        StructField("numDeletionVectorRowsRemoved", LongType())])
METRICS_SCHEMA = StructType([
    StructField("numFilesAdded", LongType()), StructField("numFilesRemoved", LongType()),
    StructField("filesAdded", _FILE_SIZES), StructField("filesRemoved", _FILE_SIZES),
    StructField("partitionsOptimized", LongType()), StructField("zOrderStats", _ZORDER_STATS),
    StructField("clusteringStats", _CLUSTERING_STATS), StructField("numBins", LongType()),
    StructField("numBatches", LongType()), StructField("totalConsideredFiles", LongType()),
    StructField("totalFilesSkipped", LongType()), StructField("preserveInsertionOrder", BooleanType()),
    StructField("numFilesSkippedToReduceWriteAmplification", LongType()),
    StructField("numBytesSkippedToReduceWriteAmplification", LongType()),
    StructField("startTimeMs", LongType()), StructField("endTimeMs", LongType()),
    StructField("totalClusterParallelism", LongType()), StructField("totalScheduledTasks", LongType()),
    StructField("autoCompactParallelismStats", _PARALLELISM), StructField("deletionVectorStats", _DV_STATS),
    StructField("numTableColumns", LongType()), StructField("numTableColumnsWithStats", LongType()),
])
RESULT_SCHEMA = StructType([StructField("path", StringType()), StructField("metrics", METRICS_SCHEMA)])


def _as_row(schema: StructType, value: dict[str, Any] | None) -> tuple[Any, ...] | None:
    if value is None:
        return None
    return tuple(_as_row(f.dataType, value.get(f.name)) if isinstance(f.dataType, StructType) else value.get(f.name)
                 for f in schema.fields)


def result_frame(spark: SparkSession, outcome: OptimizeOutcome) -> DataFrame:
    """delta-spark's OPTIMIZE/REORG result: one row ``(path, metrics)``."""
    return spark.createDataFrame([(outcome.table_root, _as_row(METRICS_SCHEMA, outcome.metrics))], RESULT_SCHEMA)


def run(spark: SparkSession, path: str, condition: str | Column | None = None, zorder_by: Sequence[str] = (),
        *, auto: bool = False, full: bool = False) -> DataFrame:
    """OPTIMIZE ``path`` [FULL] [WHERE condition] [ZORDER BY zorder_by]; returns delta-spark's result DataFrame."""
    outcome = optimize(spark, path, OptimizeRequest(condition=condition, zorder_by=list(zorder_by), auto=auto, full=full))
    return result_frame(spark, outcome)

