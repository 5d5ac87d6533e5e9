"""ALTER TABLE … ADD CONSTRAINT name CHECK (expr) | DROP CONSTRAINT [IF EXISTS] name, as delta-spark runs them.

Adding a constraint stores ``delta.constraints.<lower-cased name> = <expr>`` and, when the protocol lacks
it, the ``checkConstraints`` writer feature (legacy writer version 3, or the feature listed), in one
commit. Before committing, the expression is analysed against the table (it must be a deterministic
boolean expression of its columns) and every live row (deletion vectors applied) is counted against it
on the executors: a row for which it is false or NULL refuses the constraint. The whole table is
registered as read, so a concurrent append conflicts instead of slipping a violating row past the check.
Dropping removes the property and leaves the protocol as it is.
"""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dvlake.errors import DeltaAnalysisException
from dvlake.log import constraints, features
from dvlake.log.actions import Protocol
from dvlake.log.protocol_ops import merge_protocols, normalize_protocol
from dvlake.log.snapshot import Snapshot
from dvlake.spark.scan import scan_snapshot
from dvlake.spark.task_errors import translated
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction


def protocol_with_constraints(protocol: Protocol) -> Protocol:
    """The protocol a table with CHECK constraints needs: ``protocol`` merged with writer version 3, normalized
    as delta-spark's ``Protocol.merge`` does ((1, 2) → (1, 3); a table-features protocol lists the feature)."""
    if constraints.FEATURE in features.writer_features(protocol):
        return protocol
    return normalize_protocol(merge_protocols(protocol, Protocol(1, 3)))


def add_constraint(spark: SparkSession, path: str, name: str, expression: str) -> int:
    """Add the CHECK constraint ``name``; returns the committed version.

    Raises:
        DeltaAnalysisException: DELTA_CONSTRAINT_ALREADY_EXISTS, DELTA_NON_BOOLEAN_CHECK_CONSTRAINT,
            DELTA_NON_DETERMINISTIC_EXPRESSION_IN_CHECK_CONSTRAINT, or DELTA_NEW_CHECK_CONSTRAINT_VIOLATION when
            live rows of the table violate it (nothing is committed then).
    """
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    features.check_can_write(snapshot.protocol, snapshot.metadata, root)
    key = constraints.property_key(name)
    old = snapshot.configuration.get(key)
    if old is not None:
        raise DeltaAnalysisException(
            f"Constraint '{name}' already exists. Please delete the old constraint first.\nOld constraint:\n{old}",
            error_class="DELTA_CONSTRAINT_ALREADY_EXISTS")
    call = constraints.non_deterministic_call(expression)
    if call is not None:
        raise DeltaAnalysisException(
            f"Found {call} in a CHECK constraint. A CHECK constraint cannot use a nondeterministic expression.",
            error_class="DELTA_NON_DETERMINISTIC_EXPRESSION_IN_CHECK_CONSTRAINT")
    with translated():
        rows = scan_snapshot(spark, snapshot)
        kind = rows.select(F.expr(expression).alias("c")).schema.fields[0].dataType.typeName()  # analysis errors surface here
        if kind not in ("boolean", "void"):
            raise DeltaAnalysisException(f"CHECK constraint '{name}' ({expression}) should be a boolean expression.",
                                         error_class="DELTA_NON_BOOLEAN_CHECK_CONSTRAINT")
        violating = rows.where(~F.coalesce(F.expr(expression).cast("boolean"), F.lit(False))).count()
    if violating:
        raise DeltaAnalysisException(
            f"{violating} rows in delta.`{root}` violate the new CHECK constraint ({expression})",
            error_class="DELTA_NEW_CHECK_CONSTRAINT_VIOLATION")
    txn = OptimisticTransaction(root, snapshot)
    txn.read_whole_table()
    txn.update_metadata(snapshot.metadata.with_configuration(**{key: expression}))
    protocol = protocol_with_constraints(snapshot.protocol)
    if protocol != snapshot.protocol:
        txn.update_protocol(protocol)
    return txn.commit([], "ADD CONSTRAINT", {"name": name, "expr": expression})


def drop_constraint(spark: SparkSession, path: str, name: str, if_exists: bool = False) -> int:
    """Drop the CHECK constraint ``name`` (the protocol keeps its feature); returns the committed version.

    A missing constraint is an error unless ``if_exists`` or ``spark.databricks.delta.constraints.
    assumesDropIfExists.enabled`` is set; delta-spark then still commits, recording ``existed = false``.

    Raises:
        DeltaAnalysisException: DELTA_CONSTRAINT_DOES_NOT_EXIST.
    """
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    key = constraints.property_key(name)
    old = snapshot.configuration.get(key)
    assume = str(spark.conf.get(constraints.ASSUME_DROP_IF_EXISTS, "false")).lower() == "true"
    if old is None and not if_exists and not assume:
        raise DeltaAnalysisException(
            f"Cannot drop nonexistent constraint {name} from table delta.`{root}`. To avoid throwing an error, provide "
            f"the parameter IF EXISTS or set the SQL session configuration {constraints.ASSUME_DROP_IF_EXISTS} to true.",
            error_class="DELTA_CONSTRAINT_DOES_NOT_EXIST")
    conf = {k: v for k, v in snapshot.configuration.items() if k != key}
    from dataclasses import replace

    txn = OptimisticTransaction(root, snapshot)
    txn.update_metadata(replace(snapshot.metadata, configuration=conf))
    params = {"name": name, "expr": old, "existed": "true"} if old is not None else {"name": name, "existed": "false"}
    return txn.commit([], "DROP CONSTRAINT", params)
