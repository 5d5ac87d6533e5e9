"""Delta log actions with their exact JSON keys.

Each action keeps the fields it does not know in ``extra``, so a newer writer's fields survive
a read-modify-write (e.g. a remove made from an add) and never break reading. ``parse_action``
returns None for an action type we do not know, which readers must ignore.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from typing import Any

from dvlake.dv.descriptor import DeletionVectorDescriptor


def now_ms() -> int:
    """Milliseconds since the epoch, the unit of every Delta timestamp."""
    return int(time.time() * 1000)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class Protocol:
    """The ``protocol`` action: versions and (for reader 3 / writer 7) named table features."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Protocol:
        rf, wf = d.get("readerFeatures"), d.get("writerFeatures")
        return cls(int(d["minReaderVersion"]), int(d["minWriterVersion"]),
                   tuple(rf) if rf is not None else None, tuple(wf) if wf is not None else None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version}
        if self.reader_features is not None:
            out["readerFeatures"] = sorted(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = sorted(self.writer_features)
        return out


@dataclass(frozen=True)
class Metadata:
    """The ``metaData`` action: table id, schema, partitioning and properties."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: dict[str, str] = field(default_factory=dict)
    created_time: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def schema(self) -> dict[str, Any]:
        """The parsed schema JSON (a Spark/Delta struct type)."""
        return json.loads(self.schema_string)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Metadata:
        known = {"id", "name", "description", "format", "schemaString", "partitionColumns", "configuration", "createdTime"}
        fmt = d.get("format") or {}
        return cls(
            id=d["id"], schema_string=d["schemaString"], partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration=dict(d.get("configuration") or {}), name=d.get("name"), description=d.get("description"),
            format_provider=fmt.get("provider", "parquet"), format_options=dict(fmt.get("options") or {}),
            created_time=d.get("createdTime"), extra={k: v for k, v in d.items() if k not in known},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        out["format"] = {"provider": self.format_provider, "options": dict(self.format_options)}
        out["schemaString"] = self.schema_string
        out["partitionColumns"] = list(self.partition_columns)
        out["configuration"] = dict(self.configuration)
        if self.created_time is not None:
            out["createdTime"] = self.created_time
        out.update(self.extra)
        return out

    def with_configuration(self, **updates: str) -> Metadata:
        conf = dict(self.configuration)
        conf.update(updates)
        return replace(self, configuration=conf)


@dataclass(frozen=True)
class AddFile:
    """The ``add`` action. ``stats`` stays the JSON string Delta stores (parse with log.stats)."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = frozenset({"path", "partitionValues", "size", "modificationTime", "dataChange", "stats", "tags",
                        "deletionVector", "baseRowId", "defaultRowCommitVersion", "clusteringProvider"})

    @property
    def dv_unique_id(self) -> str | None:
        return self.deletion_vector.unique_id if self.deletion_vector else None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AddFile:
        dv = d.get("deletionVector")
        return cls(
            path=d["path"], partition_values=dict(d.get("partitionValues") or {}), size=int(d.get("size") or 0),
            modification_time=int(d.get("modificationTime") or 0), data_change=bool(d.get("dataChange", True)),
            stats=d.get("stats"), tags=d.get("tags"),
            deletion_vector=DeletionVectorDescriptor.from_json(dv) if dv else None,
            base_row_id=d.get("baseRowId"), default_row_commit_version=d.get("defaultRowCommitVersion"),
            clustering_provider=d.get("clusteringProvider"),
            extra={k: v for k, v in d.items() if k not in cls._KNOWN},
        )

    def to_json(self) -> dict[str, Any]:
        out = _drop_none({
            "path": self.path, "partitionValues": dict(self.partition_values), "size": self.size,
            "modificationTime": self.modification_time, "dataChange": self.data_change, "stats": self.stats,
            "tags": self.tags, "deletionVector": self.deletion_vector.to_json() if self.deletion_vector else None,
            "baseRowId": self.base_row_id, "defaultRowCommitVersion": self.default_row_commit_version,
            "clusteringProvider": self.clustering_provider,
        })
        out.update(self.extra)
        return out

    def remove(self, timestamp: int | None = None, data_change: bool = True) -> RemoveFile:
        """The tombstone for exactly this (path, DV): it carries the DV so replay drops the right key."""
        return RemoveFile(
            path=self.path, deletion_timestamp=timestamp if timestamp is not None else now_ms(), data_change=data_change,
            extended_file_metadata=True, partition_values=dict(self.partition_values), size=self.size, stats=self.stats,
            tags=self.tags, deletion_vector=self.deletion_vector, base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
        )


@dataclass(frozen=True)
class RemoveFile:
    """The ``remove`` action (a tombstone); keyed like an add by (path, DV unique id)."""

    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: dict[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: dict[str, str] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _KNOWN = frozenset({"path", "deletionTimestamp", "dataChange", "extendedFileMetadata", "partitionValues", "size",
                        "stats", "tags", "deletionVector", "baseRowId", "defaultRowCommitVersion"})

    @property
    def dv_unique_id(self) -> str | None:
        return self.deletion_vector.unique_id if self.deletion_vector else None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RemoveFile:
        dv = d.get("deletionVector")
        return cls(
            path=d["path"], deletion_timestamp=d.get("deletionTimestamp"), data_change=bool(d.get("dataChange", True)),
            extended_file_metadata=d.get("extendedFileMetadata"), partition_values=d.get("partitionValues"),
            size=d.get("size"), stats=d.get("stats"), tags=d.get("tags"),
            deletion_vector=DeletionVectorDescriptor.from_json(dv) if dv else None,
            base_row_id=d.get("baseRowId"), default_row_commit_version=d.get("defaultRowCommitVersion"),
            extra={k: v for k, v in d.items() if k not in cls._KNOWN},
        )

    def to_json(self) -> dict[str, Any]:
        out = _drop_none({
            "path": self.path, "deletionTimestamp": self.deletion_timestamp, "dataChange": self.data_change,
            "extendedFileMetadata": self.extended_file_metadata, "partitionValues": self.partition_values,
            "size": self.size, "stats": self.stats, "tags": self.tags,
            "deletionVector": self.deletion_vector.to_json() if self.deletion_vector else None,
            "baseRowId": self.base_row_id, "defaultRowCommitVersion": self.default_row_commit_version,
        })
        out.update(self.extra)
        return out


@dataclass(frozen=True)
class AddCDCFile:
    """The ``cdc`` action: a file of change rows for Change Data Feed."""

    path: str
    partition_values: dict[str, str | None]
    size: int
    data_change: bool = False
    tags: dict[str, str] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AddCDCFile:
        return cls(d["path"], dict(d.get("partitionValues") or {}), int(d.get("size") or 0),
                   bool(d.get("dataChange", False)), d.get("tags"))

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"path": self.path, "partitionValues": self.partition_values, "size": self.size,
                           "dataChange": self.data_change, "tags": self.tags})


@dataclass(frozen=True)
class Txn:
    """The ``txn`` action: the last version an application committed (idempotent writes)."""

    app_id: str
    version: int
    last_updated: int | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Txn:
        return cls(d["appId"], int(d["version"]), d.get("lastUpdated"))

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"appId": self.app_id, "version": self.version, "lastUpdated": self.last_updated})


@dataclass(frozen=True)
class DomainMetadata:
    """The ``domainMetadata`` action."""

    domain: str
    configuration: str
    removed: bool = False

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DomainMetadata:
        return cls(d["domain"], d.get("configuration", ""), bool(d.get("removed", False)))

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}


@dataclass(frozen=True)
class CommitInfo:
    """The ``commitInfo`` action. Free-form by the protocol, so it is kept as a dict."""

    values: dict[str, Any]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CommitInfo:
        return cls(dict(d))

    def to_json(self) -> dict[str, Any]:
        return dict(self.values)

    @property
    def in_commit_timestamp(self) -> int | None:
        return self.values.get("inCommitTimestamp")


@dataclass(frozen=True)
class CheckpointMetadata:
    """The ``checkpointMetadata`` action of a V2 checkpoint."""

    version: int
    tags: dict[str, str] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CheckpointMetadata:
        return cls(int(d["version"]), d.get("tags"))

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"version": self.version, "tags": self.tags})


@dataclass(frozen=True)
class Sidecar:
    """The ``sidecar`` action of a V2 checkpoint: a Parquet file of add/remove actions."""

    path: str
    size_in_bytes: int
    modification_time: int
    tags: dict[str, str] | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Sidecar:
        return cls(d["path"], int(d.get("sizeInBytes") or 0), int(d.get("modificationTime") or 0), d.get("tags"))

    def to_json(self) -> dict[str, Any]:
        return _drop_none({"path": self.path, "sizeInBytes": self.size_in_bytes,
                           "modificationTime": self.modification_time, "tags": self.tags})


Action = (Protocol | Metadata | AddFile | RemoveFile | AddCDCFile | Txn | DomainMetadata | CommitInfo
          | CheckpointMetadata | Sidecar)

#: JSON key of each action type, in the order delta-spark writes them in a commit.
ACTION_KEYS: dict[type, str] = {
    CommitInfo: "commitInfo", Protocol: "protocol", Metadata: "metaData", Txn: "txn", DomainMetadata: "domainMetadata",
    RemoveFile: "remove", AddFile: "add", AddCDCFile: "cdc", CheckpointMetadata: "checkpointMetadata", Sidecar: "sidecar",
}
_PARSERS = {key: cls for cls, key in ACTION_KEYS.items()}


def parse_action(line: dict[str, Any]) -> Action | None:
    """Parse one JSON-lines entry; None for an unknown action type (which readers must ignore)."""
    for key, value in line.items():
        cls = _PARSERS.get(key)
        if cls is not None and value is not None:
            return cls.from_json(value)  # type: ignore[attr-defined]
    return None


def serialize_actions(actions: list[Action]) -> bytes:
    """A commit file's bytes: one compact JSON object per line, commitInfo first."""
    order = list(ACTION_KEYS)
    ordered = sorted(actions, key=lambda a: order.index(type(a)))
    lines = [json.dumps({ACTION_KEYS[type(a)]: a.to_json()}, separators=(",", ":")) for a in ordered]
    return ("\n".join(lines) + "\n").encode("utf-8")
