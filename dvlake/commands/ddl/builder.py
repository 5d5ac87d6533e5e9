"""What ``DeltaTable.create / createIfNotExists / replace / createOrReplace`` do, behind the builder in ``api.py``.

The builder defines the same tables SQL does, so it produces the same field metadata (generation expressions,
identity columns) and goes through the same checks and commit (``writes.write.create_table``); only the argument
checks are the builder's own, with delta-spark's Python exception types and messages (a ``TypeError`` for a wrong
argument type, a ``ValueError`` for a wrong value), so code written against ``delta.tables`` behaves the same.

Where the table goes follows delta-spark's builder: a name alone is a managed table in the database's folder, a
location alone a path table, both an external table registered at the location. ``replace`` needs an existing
table (``DELTA_CANNOT_REPLACE_MISSING_TABLE``), ``create`` refuses one (``DELTA_TABLE_ALREADY_EXISTS`` for a name,
``DELTA_PATH_EXISTS`` for a location), and the commit is recorded as ``CREATE TABLE``, ``REPLACE TABLE`` or
``CREATE OR REPLACE TABLE`` by the mode, as delta-spark records it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, StructField, StructType, _parse_datatype_string

from dvlake.commands.dml.api_args import require_type
from dvlake.commands.writes.write import create_table, try_load
from dvlake.errors import (
    CannotReplaceMissingTableError,
    DeltaAnalysisException,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    TableAlreadyExistsError,
)
from dvlake.log import generated, identity
from dvlake.spark import catalog
from dvlake.spark.generated_columns import check_generation_expressions
from dvlake.storage.paths import normalize_table_root

#: builder mode → the operation its commit records (delta-spark's ``CreateTable`` / ``ReplaceTable(orCreate)``)
OPERATIONS = {"create": "CREATE TABLE", "createIfNotExists": "CREATE TABLE", "replace": "REPLACE TABLE",
              "createOrReplace": "CREATE OR REPLACE TABLE"}


@dataclasses.dataclass
class IdentityGenerator:
    """An identity column's values, as delta-spark's ``delta.tables.IdentityGenerator``: ``start``, ``start + step``, …

    Pass it as ``addColumn(..., generatedAlwaysAs=IdentityGenerator(...))`` (only the writer chooses the values) or
    ``generatedByDefaultAs=IdentityGenerator(...)`` (an explicit value may be inserted too). The column must be
    BIGINT and the step must not be 0.

    Example:
        >>> DeltaTable.create(spark).tableName("ids").addColumn("id", "bigint",
        ...     generatedAlwaysAs=IdentityGenerator(start=1, step=1)).addColumn("v", "string").execute()
    """

    start: int = 1
    step: int = 1


def _type_error(message: str, *found: Any) -> InvalidArgumentTypeError:
    """delta-spark's builder wording: the message, then each offending value and its type."""
    return InvalidArgumentTypeError(message + "".join(f" Found {v} with type {type(v)}" for v in found))


def _check_identity(generator: IdentityGenerator) -> None:
    if generator.step == 0:
        raise InvalidArgumentError("Column identity generation requires step to be non-zero.")


def column_field(colName: str, dataType: str | DataType, nullable: bool = True,  # noqa: C901 - one check per argument
                 generatedAlwaysAs: str | IdentityGenerator | None = None,
                 generatedByDefaultAs: IdentityGenerator | None = None, comment: str | None = None) -> StructField:
    """One ``addColumn`` call as a schema field, its arguments checked in delta-spark's order.

    Raises:
        InvalidArgumentTypeError: an argument of the wrong type (a ``TypeError``).
        InvalidArgumentError: both ``generatedAlwaysAs`` and ``generatedByDefaultAs``, or an identity step of 0
            (a ``ValueError``).
    """
    if not isinstance(colName, str):
        raise _type_error("Column name must be str.", colName)
    if not isinstance(dataType, str | DataType):
        raise _type_error("Column data type must be str or DataType.", dataType)
    if not isinstance(nullable, bool):
        raise _type_error("Column nullable must be bool.", nullable)
    if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
        raise InvalidArgumentError("generatedByDefaultAs and generatedAlwaysAs cannot both be set.")
    metadata: dict[str, Any] = {}
    if generatedAlwaysAs is not None:
        if isinstance(generatedAlwaysAs, IdentityGenerator):
            _check_identity(generatedAlwaysAs)
            metadata.update(identity.field_metadata(generatedAlwaysAs.start, generatedAlwaysAs.step,
                                                    allow_explicit_insert=False))
        elif isinstance(generatedAlwaysAs, str):
            metadata[generated.KEY] = generatedAlwaysAs
        else:
            raise _type_error("Generated always as expression must be str or IdentityGenerator.", generatedAlwaysAs)
    elif generatedByDefaultAs is not None:
        if not isinstance(generatedByDefaultAs, IdentityGenerator):
            raise _type_error("Generated by default expression must be IdentityGenerator.", generatedByDefaultAs)
        _check_identity(generatedByDefaultAs)
        metadata.update(identity.field_metadata(generatedByDefaultAs.start, generatedByDefaultAs.step,
                                                allow_explicit_insert=True))
    if comment is not None:
        if not isinstance(comment, str):
            raise _type_error("Column comment must be str.", comment)
        metadata["comment"] = comment
    data_type = _parse_datatype_string(dataType) if isinstance(dataType, str) else dataType
    return StructField(colName, data_type, nullable, metadata)


def schema_fields(cols: StructType | list[StructField]) -> list[StructField]:
    """``addColumns``' argument as fields: a StructType or a list of StructFields, nothing else."""
    if isinstance(cols, list):
        for col in cols:
            if not isinstance(col, StructField):
                raise _type_error("Column in existing schema must be StructField.", col)
        return list(cols)
    require_type(cols, StructType, "Schema must be StructType or a list of StructField.")
    return list(cols.fields)


def check_generated(spark: SparkSession, fields: list[StructField]) -> None:
    """The generation expressions given with ``generatedAlwaysAs="…"``, checked as CREATE TABLE checks them."""
    expressions = {f.name: f.metadata[generated.KEY] for f in fields if generated.KEY in (f.metadata or {})}
    if expressions:
        check_generation_expressions(spark, StructType(fields), expressions,
                                     lambda column, problem, cls: DeltaAnalysisException(problem, error_class=cls))


@dataclasses.dataclass
class TableSpec:
    """Everything a builder was told, in delta-spark's terms."""

    mode: str
    name: str | None
    location: str | None
    fields: list[StructField]
    partitioned_by: list[str]
    properties: dict[str, str]
    comment: str | None
    #: ``clusterBy``'s columns (a liquid-clustered table), None when not called
    cluster_by: list[str] | None = None


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a builder's table lives: its root, the catalog name to register (None for a path table), whether it
    is managed, and whether the mode finds a table there already (in the catalog for a name, else at the root)."""

    root: str
    catalog_name: str | None
    managed: bool
    exists: bool


def place(spark: SparkSession, spec: TableSpec) -> Placement:
    """The table's location and name, every refusal made before anything is written.

    By name the catalog decides whether the table exists, as in delta-spark (``replace`` of a name the catalog
    lacks is refused even if a table sits at the location); a create by name at a location that already holds a
    Delta table is refused rather than adopting that table's schema unchecked."""
    name, location = spec.name, spec.location
    if name is not None and (path := catalog.path_of_identifier(name)) is not None:
        name, location = None, location or path  # delta.`<path>` names a path table
    if name is None:
        if location is None:
            raise InvalidArgumentError("the builder needs a table name (tableName) or a location (location) before "
                                       "execute()")
        root = normalize_table_root(location)
        exists = try_load(root) is not None
        _check_mode(spec.mode, exists, f"delta.`{root}`", root)
        return Placement(root, None, False, exists)
    existing = catalog.location_for_create(spark, name)  # a name that is not a Delta table is refused here
    if existing is not None and location is not None and normalize_table_root(location) != normalize_table_root(existing):
        raise DeltaAnalysisException(
            f"The location of the existing table {name} is {existing}. It doesn't match the specified location "
            f"{location}; drop the location(...) call to use the table's own, or DROP TABLE first",
            error_class="DELTA_TABLE_LOCATION_MISMATCH")
    _check_mode(spec.mode, existing is not None, name, None)
    if existing is not None:
        return Placement(normalize_table_root(existing), name, catalog.is_managed(spark, name), True)
    root = normalize_table_root(location or catalog.default_table_location(spark, name))
    if location is not None and try_load(root) is not None and spec.mode == "create":
        _check_mode(spec.mode, True, name, root)
    return Placement(root, name, location is None, False)


def _check_mode(mode: str, exists: bool, shown: str, root: str | None) -> None:
    if exists and mode == "create":
        if root is None:
            raise TableAlreadyExistsError(f"Table {shown} already exists; use createIfNotExists to keep it or "
                                          "createOrReplace to replace it", error_class="DELTA_TABLE_ALREADY_EXISTS")
        raise TableAlreadyExistsError(f"a Delta table already exists at {root}; use createIfNotExists to keep it or "
                                      "createOrReplace to replace it")
    if not exists and mode == "replace":
        raise CannotReplaceMissingTableError(f"Table {shown} cannot be replaced as it does not exist. Use "
                                             "DeltaTable.createOrReplace (CREATE OR REPLACE TABLE) to create the table.")


def execute(spark: SparkSession, spec: TableSpec, session_defaults: dict[str, str]) -> tuple[str, str | None]:
    """Create or replace the table ``spec`` describes; returns its root and the catalog name it is registered under.

    Raises:
        InvalidArgumentError: no column, or neither a name nor a location.
        TableAlreadyExistsError: ``create`` found a table (``DELTA_TABLE_ALREADY_EXISTS`` by name, ``DELTA_PATH_EXISTS``
            by location).
        CannotReplaceMissingTableError: ``replace`` found none.
        DeltaAnalysisException: a generation expression delta-spark refuses (its error class).
        IdentityColumnError: an identity column that is not BIGINT, or is a partition column.
    """
    if not spec.fields:
        raise InvalidArgumentError("the table needs at least one column: call addColumn/addColumns")
    placement = place(spark, spec)
    replace = spec.mode in ("replace", "createOrReplace")
    check_generated(spark, spec.fields)
    schema = json.loads(StructType(spec.fields).json())
    if not (spec.mode == "createIfNotExists" and placement.exists):
        create_table(placement.root, schema, spec.partitioned_by, spec.properties, replace=replace,
                     if_not_exists=spec.mode == "createIfNotExists", name=placement.catalog_name,
                     description=spec.comment, session_defaults=session_defaults, operation=OPERATIONS[spec.mode],
                     managed=placement.managed, cluster_by=spec.cluster_by)
    if placement.catalog_name is not None:
        catalog.register_table(spark, placement.catalog_name, placement.root, if_not_exists=True,
                               managed=placement.managed)
    return placement.root, placement.catalog_name
