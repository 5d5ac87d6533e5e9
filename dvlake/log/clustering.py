"""Liquid clustering's log side: the ``clustering`` writer feature and its ``delta.clustering`` metadata domain.

A clustered table names its clustering columns in a domain, not in the metadata (PROTOCOL.md "Clustered Table"), so
changing them (ALTER TABLE … CLUSTER BY) rewrites no data and touches no schema. The domain's configuration is JSON
``{"clusteringColumns": [[part, …], …], "domainName": "delta.clustering"}``: each column is the list of its *physical*
name parts, so a column-mapped table keeps its clustering through RENAME COLUMN. ``CLUSTER BY NONE`` keeps the domain
with an empty list (the feature stays: protocol features are never dropped by it).

Clustering columns must have min/max stats (one of the first ``delta.dataSkippingNumIndexedCols`` leaf columns) of a
type data skipping can use, because OPTIMIZE and reads lean on those bounds; at most four columns, as delta-spark.
Files a clustering OPTIMIZE wrote carry ``clusteringProvider = "liquid"`` (incremental OPTIMIZE skips them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dvlake.errors import ClusteringError
from dvlake.log.actions import DomainMetadata, Protocol
from dvlake.log.schema import physical_name

FEATURE = "clustering"
DOMAIN = "delta.clustering"
#: the ``clusteringProvider`` of an AddFile written by a clustering OPTIMIZE (delta-spark's value)
PROVIDER = "liquid"
#: delta-spark's limit on the number of clustering columns
MAX_COLUMNS = 4
#: the features a clustered table's protocol holds (delta-spark: writer features, reader version unchanged)
WRITER_FEATURES = (FEATURE, "domainMetadata")
#: the leaf types delta-spark's data skipping keeps bounds for (its SkippingEligibleDataType)
_SKIPPING_TYPES = frozenset({"byte", "short", "integer", "long", "float", "double", "date", "timestamp",
                             "timestamp_ntz", "string"})


def enabled(protocol: Protocol) -> bool:
    """Whether the table supports clustering (the writer feature is in its protocol)."""
    return FEATURE in (protocol.writer_features or ()) and protocol.min_writer_version >= 7


def _find(fields: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((f for f in fields if f["name"].lower() == name.lower()), None)


def _resolve(schema: dict[str, Any], column: Sequence[str], table: str) -> list[dict[str, Any]]:
    """The fields along a (possibly nested) column path; refuses a name the schema lacks."""
    out: list[dict[str, Any]] = []
    fields = schema["fields"]
    for part in column:
        field = _find(fields, part)
        if field is None:
            raise ClusteringError(f"clustering column {'.'.join(column)!r} is not a column of {table} "
                                  f"(columns: {[f['name'] for f in schema['fields']]})",
                                  error_class="DELTA_COLUMN_NOT_FOUND_IN_SCHEMA")
        out.append(field)
        t = field["type"]
        fields = t["fields"] if isinstance(t, dict) and t.get("type") == "struct" else []
    return out


def split(column: str) -> list[str]:
    """``a.b`` / ```a.b``` → the name parts of a clustering column (backquotes keep a dot inside one part)."""
    parts, current, quoted = [], "", False
    for ch in column.strip():
        if ch == "`":
            quoted = not quoted
        elif ch == "." and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [p.strip() for p in parts]


def check_columns(schema: dict[str, Any], columns: Sequence[str], mode: str, stats_paths: Sequence[str],
                  num_indexed: int, table: str) -> list[list[str]]:
    """Validate clustering columns as delta-spark does; returns each as its logical name parts (the schema's case).

    ``stats_paths``: the dotted physical leaf paths in stats order (``commands.common.stats_leaf_paths``); only the
    first ``num_indexed`` of them have bounds (-1: all)."""
    if len(columns) > MAX_COLUMNS:
        raise ClusteringError(f"CLUSTER BY takes at most {MAX_COLUMNS} columns; {len(columns)} were given "
                              f"({list(columns)})", error_class="DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS")
    with_stats = set(stats_paths if num_indexed < 0 else stats_paths[:num_indexed])
    out: list[list[str]] = []
    seen: set[str] = set()
    for column in columns:
        fields = _resolve(schema, split(column), table)
        logical = [f["name"] for f in fields]
        key = ".".join(logical).lower()
        if key in seen:
            raise ClusteringError(f"clustering column {column!r} is given twice", error_class="DELTA_DUPLICATE_COLUMNS_FOUND")
        seen.add(key)
        leaf = fields[-1]["type"]
        type_name = leaf if isinstance(leaf, str) else leaf.get("type")
        if not (isinstance(leaf, str) and (leaf in _SKIPPING_TYPES or leaf.startswith("decimal"))):
            raise ClusteringError(f"CLUSTER BY is not supported on {'.'.join(logical)!r} of type {type_name}: data "
                                  "skipping keeps no bounds for it; cluster by a numeric, string, date or timestamp "
                                  "column", error_class="DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED")
        if ".".join(physical_name(f, mode) for f in fields) not in with_stats:
            raise ClusteringError(f"liquid clustering needs stats on its columns, and {'.'.join(logical)!r} of {table} "
                                  f"is not among the {num_indexed} leaf columns with stats "
                                  "(delta.dataSkippingNumIndexedCols); move it forward or raise that property",
                                  error_class="DELTA_CLUSTERING_COLUMN_MISSING_STATS")
        out.append(logical)
    return out


def domain_action(schema: dict[str, Any], columns: Sequence[Sequence[str]], mode: str) -> DomainMetadata:
    """The ``delta.clustering`` domain naming ``columns`` (logical parts) by their physical names."""
    physical = [[physical_name(f, mode) for f in _resolve(schema, c, "the table")] for c in columns]
    config = json.dumps({"clusteringColumns": physical, "domainName": DOMAIN}, separators=(",", ":"))
    return DomainMetadata(DOMAIN, config)


def physical_columns(domains: dict[str, DomainMetadata]) -> list[list[str]] | None:
    """The physical name parts the domain records; None when the table has no (live) clustering domain."""
    dm = domains.get(DOMAIN)
    if dm is None or dm.removed:
        return None
    return [list(c) for c in json.loads(dm.configuration or "{}").get("clusteringColumns", [])]


def logical_columns(domains: dict[str, DomainMetadata], schema: dict[str, Any], mode: str) -> list[str]:
    """The clustering columns by logical, dotted name (DESCRIBE DETAIL's ``clusteringColumns``); empty when none."""
    out = []
    for parts in physical_columns(domains) or []:
        fields, names = schema["fields"], list[str]()
        for part in parts:
            field = next((f for f in fields if physical_name(f, mode) == part), None)
            if field is None:  # a dropped column: delta-spark refuses DROP COLUMN of one, so this is a foreign log
                names = []
                break
            names.append(field["name"])
            t = field["type"]
            fields = t["fields"] if isinstance(t, dict) and t.get("type") == "struct" else []
        if names:
            out.append(".".join(names))
    return out
