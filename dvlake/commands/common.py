"""Small pieces several commands share: loading a snapshot, table identity, schema helpers."""

from __future__ import annotations

from typing import Any

from dvlake.config import DATA_SKIPPING_NUM_INDEXED_COLS
from dvlake.config import SKIP_EMPTY_COMMITS_CONF as SKIP_EMPTY_COMMITS_CONF
from dvlake.errors import TableNotFoundError
from dvlake.log import features
from dvlake.log.actions import Metadata, Protocol
from dvlake.log.schema import column_mapping_mode, physical_name
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import normalize_table_root


def try_load(path: str) -> Snapshot | None:
    """The latest snapshot, or None when no table exists at ``path``."""
    try:
        return Snapshot.load(normalize_table_root(path))
    except TableNotFoundError:
        return None


def records_empty_commits(conf_value: str | None) -> bool:
    """Whether a command that changed nothing still commits a version: only when the session turned delta-spark's
    ``skipRecordingEmptyCommits`` off (its own metric tests do, to read the metrics of a no-op from the history)."""
    return str(conf_value if conf_value is not None else "true").strip().lower() == "false"


def stats_leaf_paths(schema: dict[str, Any], partition_columns: list[str], mode: str) -> list[str]:
    """Dotted physical paths of the leaf columns Delta collects stats for, in schema order."""
    out: list[str] = []
    part = {p.lower() for p in partition_columns}

    def visit(fields: list[dict[str, Any]], prefix: str) -> None:
        for f in fields:
            name = physical_name(f, mode)
            t = f["type"]
            if isinstance(t, dict) and t.get("type") == "struct":
                visit(t["fields"], prefix + name + ".")
            elif not (isinstance(t, dict) and t.get("type") in ("array", "map")):
                out.append(prefix + name)

    visit([f for f in schema["fields"] if f["name"].lower() not in part], "")
    return out


def physical_partition_columns(snapshot_schema: dict[str, Any], partition_columns: list[str], mode: str) -> list[str]:
    by_name = {f["name"].lower(): f for f in snapshot_schema["fields"]}
    return [physical_name(by_name[c.lower()], mode) for c in partition_columns]


def num_indexed_cols(configuration: dict[str, str]) -> int:
    return int(configuration.get(DATA_SKIPPING_NUM_INDEXED_COLS, 32))


def tight_bounds_flag(snapshot_protocol: Protocol) -> bool | None:
    """delta-spark writes ``tightBounds: true`` on fresh files once a table supports DVs."""
    return True if features.dvs_supported(snapshot_protocol) else None


def mode_of(metadata: Metadata) -> str:
    return column_mapping_mode(metadata)
