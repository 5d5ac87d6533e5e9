"""``dvlake.log.clustering`` without Spark: the domain's exact JSON, physical names under column mapping and back,
nested columns, and delta-spark's refusals with their classes."""

from __future__ import annotations

import pytest

from dvlake.errors import ClusteringError
from dvlake.log import clustering
from dvlake.log.actions import DomainMetadata, Protocol

SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True,
     "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"}},
    {"name": "s", "type": {"type": "struct", "fields": [
        {"name": "a.b", "type": "string", "nullable": True,
         "metadata": {"delta.columnMapping.id": 3, "delta.columnMapping.physicalName": "col-3"}}]},
     "nullable": True, "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-2"}},
    {"name": "flag", "type": "boolean", "nullable": True,
     "metadata": {"delta.columnMapping.id": 4, "delta.columnMapping.physicalName": "col-4"}},
]}
STATS = ["col-1", "col-2.col-3", "col-4"]


def test_domain_json_names_physical_columns_and_reads_back_logical_ones() -> None:
    columns = clustering.check_columns(SCHEMA, ["ID", "s.`a.b`"], "name", STATS, 32, "t")
    assert columns == [["id"], ["s", "a.b"]]
    dm = clustering.domain_action(SCHEMA, columns, "name")
    assert dm.to_json() == {"domain": "delta.clustering", "removed": False,
                            "configuration": '{"clusteringColumns":[["col-1"],["col-2","col-3"]],'
                                             '"domainName":"delta.clustering"}'}
    domains = {clustering.DOMAIN: dm}
    assert clustering.physical_columns(domains) == [["col-1"], ["col-2", "col-3"]]
    assert clustering.logical_columns(domains, SCHEMA, "name") == ["id", "s.a.b"]
    assert clustering.logical_columns({clustering.DOMAIN: DomainMetadata(clustering.DOMAIN, "", True)}, SCHEMA,
                                      "name") == []
    assert clustering.enabled(Protocol(1, 7, None, ("clustering", "domainMetadata")))
    assert not clustering.enabled(Protocol(1, 2))


@pytest.mark.parametrize(("columns", "indexed", "error_class"), [
    (["id", "id"], 32, "DELTA_DUPLICATE_COLUMNS_FOUND"),
    (["nope"], 32, "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
    (["flag"], 32, "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),
    (["s"], 32, "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),
    (["s.`a.b`"], 1, "DELTA_CLUSTERING_COLUMN_MISSING_STATS"),
    (["id"] * 5, 32, "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS"),
])
def test_refusals(columns: list[str], indexed: int, error_class: str) -> None:
    with pytest.raises(ClusteringError) as info:
        clustering.check_columns(SCHEMA, columns, "name", STATS, indexed, "t")
    assert info.value.error_class == error_class


def test_split_keeps_backquoted_dots() -> None:
    assert clustering.split("s.`a.b`") == ["s", "a.b"]
    assert clustering.split(" k ") == ["k"]
