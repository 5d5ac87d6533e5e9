"""Liquid clustering (``CLUSTER BY``), as delta-spark 4.x writes and runs it.

Rules checked (PROTOCOL.md "Clustered Table", "Domain Metadata"; delta-spark's ``ClusteredTableUtils``,
``AlterTableClusterByDeltaCommand``, ``OptimizeTableCommand``): a clustered table has the ``clustering`` and
``domainMetadata`` writer features and a ``delta.clustering`` domain naming its columns by physical name; CLUSTER BY
refuses partitioning, columns without stats and types data skipping cannot use; ALTER TABLE … CLUSTER BY changes only
the domain (NONE empties it); OPTIMIZE clusters the files no clustering OPTIMIZE wrote (``clusteringProvider``
"liquid"), DVs applied, and refuses ZORDER BY and WHERE; every other commit and checkpoints keep the domain.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import dvlake
from dvlake.errors import ClusteringError, ConcurrentTransactionException
from dvlake.log import clustering
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction
from tests.peers import read_with_deltalake
from tests.spark.catalog_helpers import configured_with_database, target_location


@pytest.fixture
def dspark(spark: SparkSession, tmp_path: Path) -> Iterator[SparkSession]:
    """Faces on, and a database in tmp_path for the tests by name."""
    with configured_with_database(spark, "lc_db", str(tmp_path / "lc_db")) as session:
        yield session


def _commit(path: str, version: int) -> list[dict]:
    with open(Path(path) / "_delta_log" / f"{version:020d}.json") as f:
        return [json.loads(line) for line in f if line.strip()]


def _domain(path: str, version: int) -> dict | None:
    """The ``domainMetadata`` action of one commit, as written in the log."""
    return next((a["domainMetadata"] for a in _commit(path, version) if "domainMetadata" in a), None)


def _config(columns: list[list[str]]) -> str:
    return json.dumps({"clusteringColumns": columns, "domainName": "delta.clustering"}, separators=(",", ":"))


def _detail(spark: SparkSession, target: str) -> list[str]:
    return list(spark.sql(f"DESCRIBE DETAIL {target}").collect()[0]["clusteringColumns"])


def _rows(spark: SparkSession, target: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM {target} ORDER BY id").collect()]


def _props(dvs: bool) -> str:
    return f"TBLPROPERTIES ('delta.enableDeletionVectors' = '{str(dvs).lower()}')"


@pytest.mark.parametrize(("by_name", "dvs"), [(False, True), (True, False)], ids=["path-dv", "name-cow"])
def test_create_writes_the_feature_and_the_domain(dspark: SparkSession, tmp_path: Path, by_name: bool, dvs: bool) -> None:
    """CREATE TABLE … CLUSTER BY (k, id): the protocol gains clustering + domainMetadata, version 0 carries the domain
    exactly as delta-spark serializes it, DESCRIBE DETAIL and DESCRIBE HISTORY show the columns."""
    target = "lc_db.lc" if by_name else f"delta.`{tmp_path / 'lc'}`"
    dspark.sql(f"CREATE TABLE {target} (id BIGINT, k INT, s STRING) USING delta CLUSTER BY (k, id) {_props(dvs)}")
    path = target_location(dspark, target)
    protocol = Snapshot.load(path).protocol
    assert {"clustering", "domainMetadata"} <= set(protocol.writer_features or ())
    assert ("deletionVectors" in (protocol.reader_features or ())) is dvs
    assert _domain(path, 0) == {"domain": "delta.clustering", "configuration": _config([["k"], ["id"]]),
                                "removed": False}
    assert _detail(dspark, target) == ["k", "id"]
    history = dspark.sql(f"DESCRIBE HISTORY {target}").collect()[0]
    assert (history["operation"], history["operationParameters"]["clusterBy"]) == ("CREATE TABLE", '["k","id"]')


def test_ctas_replace_and_column_mapping(dspark: SparkSession, tmp_path: Path) -> None:
    """CTAS with CLUSTER BY keeps the query's rows (unclustered: OPTIMIZE clusters); CREATE OR REPLACE without CLUSTER BY
    empties the domain, with CLUSTER BY sets the new columns; under column mapping the domain holds physical names and
    RENAME COLUMN keeps the clustering (DESCRIBE DETAIL shows the new logical name)."""
    ctas = f"delta.`{tmp_path / 'ctas'}`"
    dspark.sql(f"CREATE TABLE {ctas} USING delta CLUSTER BY (k) AS SELECT * FROM VALUES (1L, 20), (2L, 10) AS t(id, k)")
    path = str(tmp_path / "ctas")
    assert _rows(dspark, ctas) == [(1, 20), (2, 10)]
    assert _domain(path, 0)["configuration"] == _config([["k"]])
    providers = [a["add"].get("clusteringProvider") for a in _commit(path, 0) if "add" in a]
    assert providers and set(providers) == {None}
    assert dspark.sql(f"DESCRIBE HISTORY {ctas}").collect()[0]["operationParameters"]["clusterBy"] == '["k"]'
    dspark.sql(f"CREATE OR REPLACE TABLE {ctas} (id BIGINT, k INT) USING delta")
    assert _domain(path, 1) == {"domain": "delta.clustering", "configuration": _config([]), "removed": False}
    assert _detail(dspark, ctas) == []
    dspark.sql(f"CREATE OR REPLACE TABLE {ctas} (id BIGINT, k INT) USING delta CLUSTER BY (id)")
    assert _domain(path, 2)["configuration"] == _config([["id"]])
    assert _detail(dspark, ctas) == ["id"]

    mapped = f"delta.`{tmp_path / 'mapped'}`"
    dspark.sql(f"CREATE TABLE {mapped} (id BIGINT, k INT) USING delta CLUSTER BY (k) "
               "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    mpath = str(tmp_path / "mapped")
    k_field = next(f for f in Snapshot.load(mpath).schema["fields"] if f["name"] == "k")
    physical = k_field["metadata"]["delta.columnMapping.physicalName"]
    assert physical != "k" and _domain(mpath, 0)["configuration"] == _config([[physical]])
    dspark.sql(f"ALTER TABLE {mapped} RENAME COLUMN k TO key")
    assert _detail(dspark, mapped) == ["key"]
    with pytest.raises(ClusteringError) as info:
        dspark.sql(f"ALTER TABLE {mapped} DROP COLUMN key")
    assert info.value.error_class == "DELTA_UNSUPPORTED_DROP_CLUSTERING_COLUMN"
    dspark.sql(f"ALTER TABLE {mapped} DROP COLUMN id")  # not a clustering column
    assert [f["name"] for f in Snapshot.load(mpath).schema["fields"]] == ["key"]
    assert _detail(dspark, mapped) == ["key"]


def test_cluster_by_refusals(dspark: SparkSession, tmp_path: Path) -> None:
    """delta-spark's classes: CLUSTER BY beside PARTITIONED BY, more than four columns, an unknown column, a type data
    skipping cannot use, a column past dataSkippingNumIndexedCols; nothing is written."""
    def refused(statement: str) -> str:
        with pytest.raises(ClusteringError) as info:
            dspark.sql(statement.format(t=f"delta.`{tmp_path / 'bad'}`"))
        assert not (tmp_path / "bad").exists()
        return str(info.value.error_class)

    cols = "(a INT, b INT, c INT, d INT, e INT, m MAP<STRING, INT>, f BOOLEAN)"
    assert refused(f"CREATE TABLE {{t}} {cols} USING delta PARTITIONED BY (a) CLUSTER BY (b)") == \
        "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY"
    assert refused(f"CREATE TABLE {{t}} {cols} USING delta CLUSTER BY (a, b, c, d, e)") == \
        "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS"
    assert refused(f"CREATE TABLE {{t}} {cols} USING delta CLUSTER BY (zz)") == "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"
    assert refused(f"CREATE TABLE {{t}} {cols} USING delta CLUSTER BY (m)") == \
        "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"
    assert refused(f"CREATE TABLE {{t}} {cols} USING delta CLUSTER BY (f)") == \
        "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"
    assert refused(f"CREATE TABLE {{t}} {cols} USING delta CLUSTER BY (b) "
                   "TBLPROPERTIES ('delta.dataSkippingNumIndexedCols' = '1')") == "DELTA_CLUSTERING_COLUMN_MISSING_STATS"
    with pytest.raises(ClusteringError) as info:
        (dvlake.DeltaTable.create(dspark).location(str(tmp_path / "bad")).addColumn("id", "BIGINT")
         .addColumn("d", "STRING").partitionedBy("d").clusterBy("id").execute())
    assert info.value.error_class == "DELTA_CLUSTER_BY_WITH_PARTITIONED_BY"


def test_alter_cluster_by(dspark: SparkSession, tmp_path: Path) -> None:
    """ALTER TABLE … CLUSTER BY (cols) sets the domain (operation CLUSTER BY with old/new columns), NONE empties it; an
    unpartitioned plain table becomes clustered; a partitioned one is refused; NONE on a plain table commits nothing."""
    target, path = f"delta.`{tmp_path / 'lc'}`", str(tmp_path / "lc")
    dspark.sql(f"CREATE TABLE {target} (id BIGINT, a INT, b STRING) USING delta CLUSTER BY (id)")
    dspark.sql(f"ALTER TABLE {target} CLUSTER BY (a, b)")
    assert _domain(path, 1) == {"domain": "delta.clustering", "configuration": _config([["a"], ["b"]]),
                                "removed": False}
    history = dspark.sql(f"DESCRIBE HISTORY {target}").collect()[0]
    assert (history["operation"], dict(history["operationParameters"])) == \
        ("CLUSTER BY", {"oldClusteringColumns": "id", "newClusteringColumns": "a,b"})
    dspark.sql(f"ALTER TABLE {target} CLUSTER BY NONE")
    assert _domain(path, 2)["configuration"] == _config([])
    assert _detail(dspark, target) == []

    plain, ppath = f"delta.`{tmp_path / 'plain'}`", str(tmp_path / "plain")
    dspark.sql(f"CREATE TABLE {plain} (id BIGINT, a INT) USING delta")
    dspark.sql(f"ALTER TABLE {plain} CLUSTER BY NONE")
    assert Snapshot.load(ppath).version == 0
    dspark.sql(f"ALTER TABLE {plain} CLUSTER BY (a)")
    assert {"clustering", "domainMetadata"} <= set(Snapshot.load(ppath).protocol.writer_features or ())
    assert _detail(dspark, plain) == ["a"]

    parted = f"delta.`{tmp_path / 'parted'}`"
    dspark.sql(f"CREATE TABLE {parted} (id BIGINT, a INT) USING delta PARTITIONED BY (a)")
    with pytest.raises(ClusteringError) as info:
        dspark.sql(f"ALTER TABLE {parted} CLUSTER BY (id)")
    assert info.value.error_class == "DELTA_ALTER_TABLE_CLUSTER_BY_ON_PARTITIONED_TABLE_NOT_ALLOWED"
    assert Snapshot.load(str(tmp_path / "parted")).version == 0


def _adds(path: str) -> dict[str, str | None]:
    """Live file path → its clusteringProvider."""
    snap = Snapshot.load(path)
    return {a.path: a.clustering_provider for a in snap.add_files()}


@pytest.mark.parametrize("dvs", [True, False], ids=["dv", "cow"])
def test_optimize_clusters_incrementally_and_writes_keep_the_domain(dspark: SparkSession, tmp_path: Path,
                                                                    dvs: bool) -> None:
    """INSERT, DataFrame append, DELETE, UPDATE, MERGE into a clustered table; OPTIMIZE rewrites the live rows (DVs
    applied) Z-ordered by the clustering column into files tagged "liquid"; the next OPTIMIZE touches only files written
    since; FULL reclusters all; ZORDER BY and WHERE are refused. The domain survives every commit and a checkpoint, and
    delta-rs reads the same rows."""
    target, path = f"delta.`{tmp_path / 'lc'}`", str(tmp_path / "lc")
    dspark.sql(f"CREATE TABLE {target} (id BIGINT, k INT) USING delta CLUSTER BY (k) {_props(dvs)}")
    dspark.sql(f"INSERT INTO {target} VALUES (1, 50), (2, 40), (3, 30)")
    dvlake.write(dspark.createDataFrame([(4, 20), (5, 10), (6, 60)], "id long, k int").coalesce(1), path, "append")
    dspark.sql(f"DELETE FROM {target} WHERE id = 2")
    dspark.sql(f"UPDATE {target} SET k = 70 WHERE id = 5")
    dspark.sql(f"MERGE INTO {target} t USING (SELECT 7L AS id, 5 AS k) s ON t.id = s.id "
               "WHEN NOT MATCHED THEN INSERT *")
    expected = [(1, 50), (3, 30), (4, 20), (5, 70), (6, 60), (7, 5)]
    assert _rows(dspark, target) == expected
    with pytest.raises(ClusteringError) as info:
        dspark.sql(f"OPTIMIZE {target} ZORDER BY (id)")
    assert info.value.error_class == "DELTA_CLUSTERING_WITH_ZORDER_BY"
    with pytest.raises(ClusteringError) as info:
        dspark.sql(f"OPTIMIZE {target} WHERE k > 1")
    assert info.value.error_class == "DELTA_CLUSTERING_WITH_PARTITION_PREDICATE"

    before = _adds(path)
    assert len(before) > 1 and set(before.values()) == {None}
    dspark.sql(f"OPTIMIZE {target}").collect()
    clustered = _adds(path)
    assert set(clustered.values()) == {"liquid"} and not set(clustered) & set(before)
    assert _rows(dspark, target) == expected
    snap = Snapshot.load(path)
    assert all(a.deletion_vector is None for a in snap.add_files())
    params = dict(snap.history(1)[0]["operationParameters"])
    assert (params["clusterBy"], params["zOrderBy"], params["isFull"]) == ('["k"]', "[]", "false")
    # the rows come out of one clustered file in k order
    assert sorted(r.k for r in dspark.read.format("delta").load(path).collect()) == [5, 20, 30, 50, 60, 70]

    dspark.sql(f"INSERT INTO {target} VALUES (8, 1)")
    dspark.sql(f"OPTIMIZE {target}").collect()
    after = _adds(path)
    assert set(clustered) <= set(after) and len(after) == len(clustered) + 1  # only the new file was rewritten
    assert set(after.values()) == {"liquid"}
    dspark.sql(f"OPTIMIZE {target} FULL").collect()
    assert not set(_adds(path)) & set(after)
    assert Snapshot.load(path).history(1)[0]["operationParameters"]["isFull"] == "true"

    dvlake.DeltaTable.forPath(dspark, path).delete("id = 3")
    hooks = __import__("dvlake.txn.hooks", fromlist=["checkpoint"])
    hooks.checkpoint(path)
    [checkpoint] = (Path(path) / "_delta_log").glob("*.checkpoint.parquet")
    rows = pq.read_table(checkpoint, columns=["domainMetadata"]).column("domainMetadata").to_pylist()
    assert [r for r in rows if r] == [{"domain": "delta.clustering", "configuration": _config([["k"]]),
                                       "removed": False}]
    snap = Snapshot.load(path)
    assert snap.domains[clustering.DOMAIN].configuration == _config([["k"]])
    assert _detail(dspark, target) == ["k"]
    final = [(1, 50), (4, 20), (5, 70), (6, 60), (7, 5), (8, 1)]
    assert _rows(dspark, target) == final
    got = read_with_deltalake(path).to_pylist()
    assert sorted((r["id"], r["k"]) for r in got) == final


def test_concurrent_cluster_by_changes_conflict(dspark: SparkSession, tmp_path: Path) -> None:
    """Two ALTER TABLE … CLUSTER BY from the same version: the second sets a domain the first set, which delta-spark
    refuses (ConcurrentTransactionException); a concurrent blind append beside an ALTER does not conflict."""
    target, path = f"delta.`{tmp_path / 'lc'}`", str(tmp_path / "lc")
    dspark.sql(f"CREATE TABLE {target} (id BIGINT, k INT) USING delta CLUSTER BY (k)")
    stale = Snapshot.load(path)
    dspark.sql(f"ALTER TABLE {target} CLUSTER BY (id)")
    loser = OptimisticTransaction(path, stale)
    with pytest.raises(ConcurrentTransactionException):
        loser.commit([clustering.domain_action(stale.schema, [["k"], ["id"]], "none")], "CLUSTER BY",
                     {"oldClusteringColumns": "k", "newClusteringColumns": "k,id"})
    before_alter = Snapshot.load(path)
    dspark.sql(f"ALTER TABLE {target} CLUSTER BY (k)")
    append = OptimisticTransaction(path, before_alter)
    append.commit([], "WRITE", {"mode": "Append"})
    assert _detail(dspark, target) == ["k"]


def test_builder_cluster_by(dspark: SparkSession, tmp_path: Path) -> None:
    """DeltaTable.create(…).clusterBy(…) writes what CREATE TABLE … CLUSTER BY writes."""
    path = str(tmp_path / "built")
    (dvlake.DeltaTable.create(dspark).location(path).addColumn("id", "BIGINT").addColumn("k", "INT")
     .clusterBy("k", "id").execute())
    assert _domain(path, 0)["configuration"] == _config([["k"], ["id"]])
    assert {"clustering", "domainMetadata"} <= set(Snapshot.load(path).protocol.writer_features or ())
    assert _detail(dspark, f"delta.`{path}`") == ["k", "id"]


def test_by_name_ctas_alter_and_replace_as_select(dspark: SparkSession) -> None:
    """By name: CTAS with CLUSTER BY, ALTER TABLE name CLUSTER BY, CREATE OR REPLACE … CLUSTER BY … AS SELECT (new
    columns and rows), OPTIMIZE by name."""
    dspark.sql("CREATE TABLE lc_db.named USING delta CLUSTER BY (k) AS SELECT * FROM VALUES (1L, 2), (2L, 1) AS t(id, k)")
    path = target_location(dspark, "lc_db.named")
    assert _detail(dspark, "lc_db.named") == ["k"]
    dspark.sql("ALTER TABLE lc_db.named CLUSTER BY (id, k)")
    assert _domain(path, 1)["configuration"] == _config([["id"], ["k"]])
    dspark.sql("CREATE OR REPLACE TABLE lc_db.named USING delta CLUSTER BY (id) AS SELECT * FROM VALUES (5L, 9) AS t(id, k)")
    assert _domain(path, 2)["configuration"] == _config([["id"]])
    dspark.sql("OPTIMIZE lc_db.named").collect()
    assert _rows(dspark, "lc_db.named") == [(5, 9)]
    assert set(_adds(path).values()) == {"liquid"}
