"""``SELECT COUNT(*) FROM <Delta table>`` answered from the log, as delta-spark does.

An unfiltered count of a Delta table is Σ numRecords − Σ DV cardinality over its live files
(``scan.metadata_row_count``): no data file is opened. Scanning instead costs a full read of every
file with a DV (its row indexes go through the DV test). delta-spark answers such counts the same
way while ``spark.databricks.delta.optimizeMetadataQuery.enabled`` is true (the default); dvlake
honours that setting, and falls back to the scan when a file's stats lack ``numRecords``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from dvlake.config import OPTIMIZE_METADATA_QUERY as OPTIMIZE_METADATA_QUERY
from dvlake.sqlfront.refs import TableRef, _time_travel, resolve, table_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_CLAUSES_THAT_NEED_ROWS = ("joins", "laterals", "where", "group", "having", "qualify", "distinct", "limit", "offset",
                           "windows", "sort", "cluster", "distribute", "order", "with")


def _counted_table(tree: exp.Expr) -> tuple[exp.Table, str] | None:
    """The one Delta table and the output name of ``SELECT COUNT(*) [AS x] FROM delta.`p```, else None."""
    if not isinstance(tree, exp.Select) or len(tree.expressions) != 1:
        return None
    if any(tree.args.get(clause) for clause in _CLAUSES_THAT_NEED_ROWS):
        return None
    projection = tree.expressions[0]
    count = projection.this if isinstance(projection, exp.Alias) else projection
    if not isinstance(count, exp.Count) or count.args.get("big_int") is False:
        return None
    arg = count.this
    if not (isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not arg.is_string and arg.this == "1")):
        return None
    source = tree.args.get("from_") or tree.args.get("from")
    node = source.this if source is not None else None
    if not isinstance(node, exp.Table) or table_ref(node) is None:
        return None
    name = projection.alias if isinstance(projection, exp.Alias) else "count(1)"
    return node, name


def count_from_metadata(spark: SparkSession, tree: exp.Expr, text: str) -> DataFrame | None:
    """The count as a one-row DataFrame when the statement is an unfiltered COUNT(*) of one Delta table."""
    if str(spark.conf.get(OPTIMIZE_METADATA_QUERY, "true")).lower() != "true":
        return None
    found = _counted_table(tree)
    if found is None:
        return None
    node, name = found
    ref = table_ref(node)
    assert isinstance(ref, TableRef)
    version, timestamp = _time_travel(spark, node, ref, text)
    from pyspark.sql.types import LongType, StructField, StructType

    from dvlake.log.snapshot import Snapshot
    from dvlake.spark.scan import metadata_row_count

    count = metadata_row_count(Snapshot.load(resolve(spark, ref, text), version=version, timestamp=timestamp))
    if count is None:
        return None
    return spark.createDataFrame([(count,)], StructType([StructField(name, LongType(), False)]))
