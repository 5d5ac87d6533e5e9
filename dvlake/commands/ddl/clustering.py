"""Liquid clustering's DDL: CLUSTER BY on CREATE / CTAS / REPLACE, and ALTER TABLE … CLUSTER BY (cols) | NONE.

The clustering columns are one ``delta.clustering`` domain (``dvlake.log.clustering``); this module decides when a
commit carries it and with which protocol, as delta-spark does:

- a new table with CLUSTER BY gets the ``clustering`` and ``domainMetadata`` writer features and the domain; CLUSTER BY
  beside PARTITIONED BY is refused (DELTA_CLUSTER_BY_WITH_PARTITIONED_BY): files are laid out one way or the other;
- REPLACE without CLUSTER BY of a clustered table empties the domain (the feature cannot leave the protocol);
- ALTER TABLE … CLUSTER BY (cols) sets the domain, turning an unpartitioned table into a clustered one; on a
  partitioned, unclustered table it is refused (DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED);
  CLUSTER BY NONE empties it, and on a table that is not clustered does nothing (no commit).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dvlake.commands.common import mode_of, num_indexed_cols, stats_leaf_paths
from dvlake.errors import ClusteringError
from dvlake.log import clustering, features
from dvlake.log.actions import DomainMetadata, Metadata, Protocol
from dvlake.log.snapshot import Snapshot
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction


def checked_columns(metadata: Metadata, columns: Sequence[str], table: str) -> list[list[str]]:
    """``columns`` validated against the table's schema and stats columns (logical name parts)."""
    mode = mode_of(metadata)
    paths = stats_leaf_paths(metadata.schema, list(metadata.partition_columns), mode)
    return clustering.check_columns(metadata.schema, columns, mode, paths, num_indexed_cols(metadata.configuration), table)


def for_new_table(metadata: Metadata, protocol: Protocol, partition_by: Sequence[str], cluster_by: Sequence[str] | None,
                  replaced: Snapshot | None, table: str) -> tuple[Protocol, DomainMetadata | None]:
    """The protocol and clustering domain of a table CREATE / CTAS / REPLACE writes (``replaced``: the table a REPLACE
    overwrites); ``cluster_by`` None or empty: no CLUSTER BY."""
    if not cluster_by:
        if replaced is not None and clustering.physical_columns(replaced.domains):
            return protocol, clustering.domain_action(metadata.schema, [], mode_of(metadata))
        return protocol, None
    if partition_by:
        raise ClusteringError(f"{table}: clustering and partitioning cannot both be specified (CLUSTER BY "
                              f"{list(cluster_by)}, PARTITIONED BY {list(partition_by)}); give one of them",
                              error_class="DELTA_CLUSTER_BY_WITH_PARTITIONED_BY")
    columns = checked_columns(metadata, cluster_by, table)
    return (features.with_features(protocol, (), clustering.WRITER_FEATURES),
            clustering.domain_action(metadata.schema, columns, mode_of(metadata)))


def create_parameter(cluster_by: Sequence[str] | None) -> dict[str, str]:
    """CREATE TABLE's ``clusterBy`` operation parameter (delta-spark records it for a clustered table only)."""
    names = [".".join(clustering.split(c)) for c in cluster_by or ()]
    return {"clusterBy": json.dumps(names, separators=(",", ":"))} if names else {}


def alter_cluster_by(path: str, columns: Sequence[str]) -> int | None:
    """ALTER TABLE … CLUSTER BY (columns), or CLUSTER BY NONE with no columns; returns the committed version (None:
    NONE on a table that is not clustered, which delta-spark skips).

    Raises:
        ClusteringError: a partitioned table that is not clustered
            (DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED), or columns CLUSTER BY refuses.
    """
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    features.check_can_write(snapshot.protocol, snapshot.metadata, root)
    is_clustered = clustering.enabled(snapshot.protocol)
    if not columns and not is_clustered:
        return None
    if not is_clustered and snapshot.partition_columns:
        raise ClusteringError(f"ALTER TABLE CLUSTER BY cannot be applied to the partitioned table {root} (partitioned "
                              f"by {list(snapshot.partition_columns)})",
                              error_class="DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED")
    md = snapshot.metadata
    new = checked_columns(md, columns, root)
    old = clustering.logical_columns(snapshot.domains, md.schema, mode_of(md))
    txn = OptimisticTransaction(root, snapshot)
    if not is_clustered:
        txn.update_protocol(features.with_features(snapshot.protocol, (), clustering.WRITER_FEATURES))
    params: dict[str, Any] = {"oldClusteringColumns": ",".join(old),
                              "newClusteringColumns": ",".join(".".join(c) for c in new)}
    return txn.commit([clustering.domain_action(md.schema, new, mode_of(md))], "CLUSTER BY", params)


def columns_of(snapshot: Snapshot) -> list[str]:
    """The table's clustering columns by logical name (empty for a table that is not clustered)."""
    if not clustering.enabled(snapshot.protocol):
        return []
    return clustering.logical_columns(snapshot.domains, snapshot.schema, mode_of(snapshot.metadata))


def refuse_drop(snapshot: Snapshot, column: Sequence[str]) -> None:
    """DROP COLUMN of a clustering column (or of a struct holding one) is refused, as delta-spark refuses it: the
    domain would name a column the table no longer has."""
    path = [p.lower() for p in column]
    hit = [c for c in columns_of(snapshot) if [p.lower() for p in clustering.split(c)][:len(path)] == path]
    if hit:
        raise ClusteringError(f"cannot drop {'.'.join(column)} of {snapshot.table_root}: it is or holds the clustering "
                              f"columns {hit}; change them first (ALTER TABLE … CLUSTER BY (…) or NONE)",
                              error_class="DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN")
