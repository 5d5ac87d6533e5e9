"""The WHERE of a DELETE whose subqueries read Delta tables, handed to the command in its placeholder form.

Spark cannot read a Delta table by itself (a ``delta.`<path>``` or a name dvlake registered), so each such
reference in the condition's subqueries becomes a DataFrame argument (``refs.delta_tables_as_frames``), the rest
of the text staying the user's. A reference to the DELETE's own target (same root, no time travel) is marked, so
that the command reads it at its own snapshot (``commands/dml/subquery_condition.py``), never at whatever version
was newest when the statement was parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from dvlake.log.condition import Condition
from dvlake.sqlfront.parse import written_condition
from dvlake.sqlfront.refs import delta_tables_as_frames, maybe_catalog_location, name_of, reads_delta_tables, table_ref
from dvlake.storage.paths import normalize_table_root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def delete_condition(spark: SparkSession, where: exp.Expr, text: str, root: str, alias: str | None) -> Condition:
    """The condition of ``DELETE … WHERE <where>`` on the table at ``root``, from the statement's own tree (not parsed
    again): as written when Spark can read it so, else carrying the placeholder form of its subqueries."""
    condition = written_condition(text, where, alias)
    if not any(isinstance(n, exp.Query | exp.Subquery | exp.Exists) for n in where.walk()) \
            or not reads_delta_tables(spark, where):
        return condition
    spliced, frames, nodes = delta_tables_as_frames(spark, where, text)
    target = normalize_table_root(root)
    own = {key for key, node in nodes.items() if _names_target(spark, node, target)}
    return condition.with_tables(spliced, {k: v for k, v in frames.items() if k not in own}, own)


def _names_target(spark: SparkSession, node: exp.Table, target: str) -> bool:
    """Whether a table reference reads the target's latest version: its path or catalog name, without time travel
    (an old version of the target is another table for the condition, read as it was)."""
    if node.args.get("version") is not None or not isinstance(node.this, exp.Identifier):
        return False
    ref = table_ref(node)
    if ref is not None:
        return ref.version is None and ref.timestamp is None and ref.path is not None \
            and normalize_table_root(ref.path) == target
    location = maybe_catalog_location(spark, name_of(node))
    return location is not None and normalize_table_root(location) == target
