"""DESCRIBE HISTORY and DESCRIBE DETAIL, as rows with delta-spark's columns."""

from __future__ import annotations

import datetime as dt
from typing import Any

from dvlake.commands.ddl.clustering import columns_of
from dvlake.log import features
from dvlake.log.snapshot import Snapshot

HISTORY_COLUMNS = ["version", "timestamp", "userId", "userName", "operation", "operationParameters", "job", "notebook",
                   "clusterId", "readVersion", "isolationLevel", "isBlindAppend", "operationMetrics", "userMetadata",
                   "engineInfo"]


def _ts(ms: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC) if ms is not None else None


def history_rows(snapshot: Snapshot, limit: int | None = None) -> list[dict[str, Any]]:
    """One dict per commit, newest first, keyed by HISTORY_COLUMNS."""
    rows = []
    for info in snapshot.history(limit):
        rows.append({
            "version": info["version"], "timestamp": _ts(info.get("timestamp")),
            "userId": info.get("userId"), "userName": info.get("userName"), "operation": info.get("operation"),
            "operationParameters": {k: str(v) for k, v in (info.get("operationParameters") or {}).items()},
            "job": info.get("job"), "notebook": info.get("notebook"), "clusterId": info.get("clusterId"),
            "readVersion": info.get("readVersion"), "isolationLevel": info.get("isolationLevel"),
            "isBlindAppend": info.get("isBlindAppend"),
            "operationMetrics": {k: str(v) for k, v in (info.get("operationMetrics") or {}).items()},
            "userMetadata": info.get("userMetadata"), "engineInfo": info.get("engineInfo"),
        })
    return rows


def detail_row(snapshot: Snapshot) -> dict[str, Any]:
    """DESCRIBE DETAIL's one row; ``statistics`` carries the DV counts as delta-spark reports them."""
    md, proto = snapshot.metadata, snapshot.protocol
    cards = snapshot.dv_cardinalities()
    table_features = sorted(features.reader_features(proto) | features.writer_features(proto))
    return {
        "format": "delta", "id": md.id, "name": md.name, "description": md.description,
        "location": snapshot.table_root if "://" in snapshot.table_root else f"file:{snapshot.table_root}",
        "createdAt": _ts(md.created_time), "lastModified": _ts(snapshot.commit_timestamp()),
        "partitionColumns": list(md.partition_columns), "clusteringColumns": columns_of(snapshot),
        "numFiles": snapshot.num_files,
        "sizeInBytes": int(snapshot.files.column("size").to_numpy(zero_copy_only=False).sum()) if snapshot.num_files else 0,
        "properties": dict(md.configuration), "minReaderVersion": proto.min_reader_version,
        "minWriterVersion": proto.min_writer_version, "tableFeatures": table_features,
        "statistics": {"numDeletionVectors": int((cards > 0).sum()), "numRowsDeletedByDeletionVectors": int(cards.sum())},
    }
