"""Steps every MERGE path shares: the multiple-match check, broadcasting, gathering marks, change-data files, metrics
and the commit.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, MapType, StringType, StructType

from dvlake.commands.dml.cdc_write import write_change_files
from dvlake.commands.dml.dv_marking import driver_room
from dvlake.commands.dml.dv_pairs import PairWatch, watch_pairs
from dvlake.commands.dml.merge.clauses import clause_index, kind_of
from dvlake.commands.dml.merge.frames import Sides, flat_target
from dvlake.commands.dml.merge.spec import (
    M_DELETE,
    M_UPDATE,
    MARKED,
    MATCHED,
    N_INSERT,
    NOT_MATCHED,
    NOT_MATCHED_BY_SOURCE,
    OUTCOMES,
    S_DELETE,
    S_UPDATE,
    WRITTEN,
    MergeClause,
    MergeSpec,
)
from dvlake.commands.dml.shared import (
    sub_plan,
    unique_name,
)
from dvlake.config import (
    DEFAULT_MERGE_BROADCAST_SOURCE_ROWS,
    MERGE_BROADCAST_SOURCE_MAX_BYTES,
    MERGE_BROADCAST_SOURCE_ROWS,
)
from dvlake.errors import (
    MultipleSourceRowMatchingTargetRowError,
)
from dvlake.log.actions import AddCDCFile, Metadata
from dvlake.log.cdf_plan import CHANGE_TYPE_COL, DELETE, INSERT, UPDATE_POSTIMAGE, UPDATE_PREIMAGE
from dvlake.log.condition import display_text as condition_text
from dvlake.log.snapshot import Snapshot
from dvlake.spark.scan import ScanPlan


def gathering_marks(spark: SparkSession, joined: DataFrame, plan: ScanPlan, sides: Sides,
                     matched: list[Any]) -> tuple[DataFrame, PairWatch, str]:
    """The matches with each one's clause index, watched so the job materializing them also gathers their marks
    (file, row, clause outcome). Only with a broadcast source: its tasks are then the target scan's, as
    ``watch_pairs`` needs; the clauses are evaluated there, once."""
    index_col = unique_name("clause")
    joined = joined.withColumn(index_col, clause_index(matched))
    kind = kind_of(F.col(index_col), matched, OUTCOMES[MATCHED])
    joined, watch = watch_pairs(spark, joined, plan, driver_room(spark, plan), sides.fid, sides.rid, kind)
    return joined, watch, index_col


def without_duplicate_matches(matches: DataFrame, sides: Sides, exempt: bool, root: str) -> DataFrame:
    """Refuse a target row matched by two source rows (delta-spark's multiple-match error, before any write), unless
    the only clause is an unconditional delete (``exempt``): then each row is kept once."""
    dup = matches.groupBy(sides.fid, sides.rid).count().filter(F.col("count") > 1).limit(1).collect()
    if dup and not exempt:
        raise multiple_matches(root, int(dup[0]["count"]))
    return matches.dropDuplicates([sides.fid, sides.rid]) if dup else matches


def unmatched_target(spark: SparkSession, target: DataFrame, matches: DataFrame, sides: Sides,
                      num_pairs: int) -> DataFrame:
    """The target rows no source row matched: an anti join, which needs no distinct (it would shuffle) and takes
    the matched (file, row) pairs as a broadcast when they are few."""
    matched = matches.select(sides.fid, sides.rid)
    if broadcastable(spark, matched.schema, num_pairs):
        matched = F.broadcast(matched)
    return target.join(matched, [sides.fid, sides.rid], "left_anti")


def multiple_matches(root: str, count: int | None) -> MultipleSourceRowMatchingTargetRowError:
    times = f"{count} source rows" if count is not None else "more than one source row"
    return MultipleSourceRowMatchingTargetRowError(
        f"MERGE INTO {root}: a target row matched "
        f"{times}, so it is ambiguous how to update or delete it. Nothing was committed. "
        "De-duplicate the source (one row per key), or make the ON condition match at most one source row per "
        "target row. See https://docs.delta.io/latest/delta-update.html#upsert-into-a-table-using-merge")


def broadcastable(spark: SparkSession, schema: StructType, rows: int) -> bool:
    """Whether to hint a broadcast of the materialized source: few rows (``spark.dvlake.merge.broadcastSourceRows``)
    whose estimated size stays small, unless the session turned broadcasts off. Spark's own estimate of a
    checkpoint can miss (the plan it came from), and a sort-merge join would shuffle the whole target."""
    limit = int(spark.conf.get(MERGE_BROADCAST_SOURCE_ROWS, str(DEFAULT_MERGE_BROADCAST_SOURCE_ROWS)) or 0)
    threshold = str(spark.conf.get("spark.sql.autoBroadcastJoinThreshold", "10485760") or "").strip().lower()
    if limit <= 0 or rows > limit or threshold.startswith("-1"):
        return False
    return rows * (8 + _width(schema)) <= MERGE_BROADCAST_SOURCE_MAX_BYTES


def _width(dtype: Any) -> int:
    """Bytes a value of ``dtype`` takes, as Spark's planner guesses (``defaultSize``: strings 20, arrays and maps
    of 1 element): an estimate, only to keep a hinted broadcast small."""
    if isinstance(dtype, StructType):
        return sum(_width(f.dataType) for f in dtype.fields)
    if isinstance(dtype, ArrayType):
        return _width(dtype.elementType)
    if isinstance(dtype, MapType):
        return _width(dtype.keyType) + _width(dtype.valueType)
    if isinstance(dtype, StringType):
        return 20
    return 8 if dtype.typeName() not in ("binary", "decimal") else 16


def change_files(spark: SparkSession, snapshot: Snapshot, plan: ScanPlan, changes: DataFrame, sides: Sides,
                  old_row: list[Column], schema: StructType, md: Metadata, positions: list[int]) -> list[AddCDCFile]:
    """The change feed's rows of this MERGE: the old values of every updated or deleted target row
    (``update_preimage`` / ``delete``, read back from the touched files by file and row index) and the
    written rows (``update_postimage`` / ``insert``), as change data files."""
    kinds = changes.filter(F.col(sides.kind).isin(*MARKED)).select(sides.fid, sides.rid, sides.kind)
    old = flat_target(spark, snapshot, sub_plan(plan, positions), sides)
    plan_positions = F.array(*[F.lit(i) for i in positions])
    old = old.withColumn(sides.fid, F.element_at(plan_positions, F.col(sides.fid) + 1))
    before = old.join(kinds, [sides.fid, sides.rid], "inner")
    pre_type = F.when(F.col(sides.kind).isin(M_DELETE, S_DELETE), F.lit(DELETE)).otherwise(F.lit(UPDATE_PREIMAGE))
    pre = before.select(*old_row, pre_type.alias(CHANGE_TYPE_COL))
    post_type = F.when(F.col(sides.kind) == N_INSERT, F.lit(INSERT)).otherwise(F.lit(UPDATE_POSTIMAGE))
    post = changes.filter(F.col(sides.kind).isin(*WRITTEN)).select(
        *[F.col(f"`{f.name}`") for f in schema.fields], post_type.alias(CHANGE_TYPE_COL))
    return write_change_files(pre.unionByName(post), snapshot, md)


def row_metrics(num_source_rows: int, counts: dict[int, int], copied: int) -> dict[str, int]:
    m_upd, s_upd = counts.get(M_UPDATE, 0), counts.get(S_UPDATE, 0)
    m_del, s_del = counts.get(M_DELETE, 0), counts.get(S_DELETE, 0)
    inserted = counts.get(N_INSERT, 0)
    return {"numSourceRows": num_source_rows, "numTargetRowsInserted": inserted, "numTargetRowsUpdated": m_upd + s_upd,
            "numTargetRowsMatchedUpdated": m_upd, "numTargetRowsNotMatchedBySourceUpdated": s_upd,
            "numTargetRowsDeleted": m_del + s_del, "numTargetRowsMatchedDeleted": m_del,
            "numTargetRowsNotMatchedBySourceDeleted": s_del, "numTargetRowsCopied": copied,
            "numOutputRows": inserted + m_upd + s_upd + copied}


def _clause_params(clauses: list[MergeClause]) -> str:
    out = []
    for c in clauses:
        entry: dict[str, str] = {}
        text = condition_text(c.condition)
        if text:
            entry["predicate"] = text
        entry["actionType"] = c.action
        out.append(entry)
    return json.dumps(out)


def merge_parameters(spec: MergeSpec) -> dict[str, str]:
    """MERGE's ``operationParameters`` as delta-spark records them: the ON text and each kind's clauses."""
    return {"predicate": json.dumps([condition_text(spec.condition) or ""]),
            "matchedPredicates": _clause_params([c for c in spec.clauses if c.kind == MATCHED]),
            "notMatchedPredicates": _clause_params([c for c in spec.clauses if c.kind == NOT_MATCHED]),
            "notMatchedBySourcePredicates": _clause_params([c for c in spec.clauses if c.kind == NOT_MATCHED_BY_SOURCE])}
