"""Type widening through schema evolution: data of a wider type widens the column instead of failing, as delta-spark 4.x.

On a table with ``delta.enableTypeWidening`` (the ``typeWidening`` feature in its protocol), a write with schema
evolution (``mergeSchema``, ``spark.databricks.delta.schema.autoMerge.enabled``, the streaming sink with either) and
a MERGE with schema evolution change a column's type to the data's when that is a widening the feature allows: a
metadata change only, recorded in ``delta.typeChanges`` exactly as ALTER COLUMN … TYPE records it, so the files
already there keep their narrow type and readers widen them (``log/type_widening.py``).

Which widenings are applied by themselves is delta-spark's ``spark.databricks.delta.typeWidening.allowAutomaticWidening``:
``always`` (the default since delta-spark 4.1: every widening of the feature), ``same_family_type`` (4.0's behaviour:
integer → wider integer, float → double, decimal → wider decimal, date → timestamp_ntz; not integer → double or
decimal) or ``never``. With UniForm Iceberg on, only what Iceberg V2 can express. Anything else (data narrower than
the column, string for int, no feature) is left to the caller's rules of today: the writer casts a narrower value or
refuses with DELTA_FAILED_TO_MERGE_FIELDS, MERGE casts per store assignment.

A column a CHECK constraint or a generated column reads keeps its type: delta-spark refuses the write with
DELTA_CONSTRAINT_DATA_TYPE_MISMATCH / DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH, since the expression was checked
against the old type.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from dvlake.commands.ddl.columns import _dotted, _reads
from dvlake.config import AUTOMATIC_WIDENING_CONF
from dvlake.errors import DeltaAnalysisException, DeltaOptionError
from dvlake.log import constraints, features, generated, type_widening
from dvlake.log.snapshot import Snapshot
from dvlake.log.type_sql import sql_type
from dvlake.uniform.convert import iceberg_enabled


def automatic_mode(spark: SparkSession) -> str:
    """The session's automatic-widening mode (``always`` unless set), validated as delta-spark validates it."""
    text = str(spark.conf.get(AUTOMATIC_WIDENING_CONF, type_widening.AUTOMATIC_ALWAYS) or "").strip().lower()
    if text not in type_widening.AUTOMATIC_MODES:
        raise DeltaOptionError(f"{AUTOMATIC_WIDENING_CONF} must be one of {list(type_widening.AUTOMATIC_MODES)}; got "
                               f"{text!r}", error_class="DELTA_ILLEGAL_OPTION")
    return text


def widening_on(snapshot: Snapshot) -> bool:
    """The table lets writers widen types: the property is true and the protocol has the feature (readers widen)."""
    return type_widening.is_enabled(snapshot.configuration) and \
        type_widening.is_supported(features.reader_features(snapshot.protocol))


def evolved_fields(snapshot: Snapshot, fields: list[dict[str, Any]], data_fields: list[dict[str, Any]],
                   mode: str) -> list[dict[str, Any]]:
    """``fields`` (the table's top-level fields, maybe already grown by the caller) with the widenings schema evolution
    applies for data whose fields are ``data_fields``; ``fields`` itself when the table does not allow widening.

    Raises:
        DeltaAnalysisException: a widened column is read by a CHECK constraint or a generated column.
    """
    if not widening_on(snapshot):
        return fields
    iceberg = iceberg_enabled(snapshot.configuration)

    def allows(old: Any, new: Any) -> bool:
        return type_widening.evolution_allows(old, new, mode, iceberg)

    by_name = {f["name"].lower(): f for f in data_fields}
    out = []
    for field in fields:
        data = by_name.get(field["name"].lower())
        evolved = type_widening.evolve_field(field, data["type"], allows) if data is not None else field
        if evolved is not field:
            _refuse_dependents(snapshot, field, evolved)
        out.append(evolved)
    return out


def _refuse_dependents(snapshot: Snapshot, old: dict[str, Any], new: dict[str, Any]) -> None:
    """delta-spark's check before it merges schemas: no expression may read a column whose type the data changes."""
    before = {(tuple(p), repr(c)) for p, c in type_widening.type_changes({"type": "struct", "fields": [old]})}
    changed = [(p, c) for p, c in type_widening.type_changes({"type": "struct", "fields": [new]})
               if (tuple(p), repr(c)) not in before]
    for path, change in changed:
        checks = [f"{constraints.property_key(c.name)} -> {c.text}" for c in constraints.check_constraints(snapshot.metadata)
                  if _reads(c.text, path)]
        exprs = [f"{name} -> {e}" for name, e in generated.expressions(snapshot.protocol, snapshot.metadata).items()
                 if _reads(e, path)]
        if not checks and not exprs:
            continue
        what, listed, error_class = (("check constraint(s)", checks, "DELTA_CONSTRAINT_DATA_TYPE_MISMATCH") if checks else
                                     ("generated column(s)", exprs, "DELTA_GENERATED_COLUMNS_DATA_TYPE_MISMATCH"))
        raise DeltaAnalysisException(
            f"Column {_dotted(path)} of {snapshot.table_root} has data type {sql_type(change['fromType'])} and cannot be "
            f"altered to data type {sql_type(change['toType'])} because this column is referenced by the following "
            f"{what}: {'; '.join(listed)}. Cast the data to {sql_type(change['fromType'])} before writing.",
            error_class=error_class)
