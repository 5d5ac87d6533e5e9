"""Creating tables and writing DataFrames into them (append / overwrite / error / ignore)."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dvlake.commands.common import (
    mode_of,
    try_load,
)
from dvlake.commands.data_files import write_table_files
from dvlake.commands.ddl import clustering as table_clustering
from dvlake.commands.dml.delete import matching_rows_actions
from dvlake.commands.writes import type_evolution
from dvlake.commands.writes.options import WriteOptions
from dvlake.config import normalize_properties
from dvlake.errors import (
    DeltaOptionError,
    InvalidArgumentError,
    PartitionColumnNotFoundError,
    ReplaceWhereMismatchError,
    SchemaMismatchError,
    TableAlreadyExistsError,
)
from dvlake.log import defaults, features, generated, identity
from dvlake.log.actions import AddFile, Metadata, Txn, now_ms
from dvlake.log.condition import display_text as condition_text
from dvlake.log.schema import (
    MAX_COLUMN_ID_KEY,
    MODE_KEY,
    assign_column_mapping,
    schema_json,
    strip_column_mapping,
)
from dvlake.log.snapshot import Snapshot
from dvlake.spark import constraints
from dvlake.spark import identity as identity_values
from dvlake.spark.layout import all_nullable, logical_struct
from dvlake.spark.task_errors import translated
from dvlake.storage.base import storage_for
from dvlake.storage.local import check_creatable_root
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction
from dvlake.uniform import compat

MODES = {"error": "ErrorIfExists", "errorifexists": "ErrorIfExists", "append": "Append", "overwrite": "Overwrite",
         "ignore": "Ignore"}


def new_table_metadata(schema: dict[str, Any], partition_by: Sequence[str], properties: dict[str, Any] | None,
                       name: str | None = None, description: str | None = None,
                       session_defaults: dict[str, str] | None = None,
                       generated_columns: bool = False, identity_columns: bool = False) -> tuple[Metadata, Any]:
    """Metadata and protocol of a new table; column mapping 'name'/'id' assigns physical names.
    ``generated_columns`` / ``identity_columns``: the schema defines generated / identity columns (their feature joins
    the protocol)."""
    conf = dict(session_defaults or {})
    conf.update(normalize_properties(properties))
    _check_columns(schema, partition_by)
    if MODE_KEY not in conf and any(conf.get(f"delta.enableIcebergCompatV{v}", "").lower() == "true" for v in (2, 3)):
        conf[MODE_KEY] = "name"  # delta-spark turns column mapping on for a new IcebergCompat table
    conf.update(compat.properties_to_set(None, conf, name or "the new table"))  # V3 turns row tracking on
    mode = conf.get(MODE_KEY, "none").lower()
    if mode not in ("none", "name", "id"):
        raise InvalidArgumentError(f"{MODE_KEY} must be none, name or id; got {mode!r}")
    if mode != "none":
        schema, max_id = assign_column_mapping(schema)
        conf[MAX_COLUMN_ID_KEY] = str(max_id)
    metadata = Metadata(id=str(uuid.uuid4()), schema_string=schema_json(schema), partition_columns=tuple(partition_by),
                        configuration=conf, name=name, description=description, created_time=now_ms())
    protocol = features.protocol_for_new_table(conf, column_mapping=mode != "none", schema_string=metadata.schema_string,
                                               generated_columns=generated_columns, identity_columns=identity_columns)
    return metadata, protocol


def _check_columns(schema: dict[str, Any], partition_by: Sequence[str]) -> None:
    names = [f["name"].lower() for f in schema["fields"]]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"duplicate column names in the schema: {names}")
    for p in partition_by:
        if p.lower() not in names:
            raise InvalidArgumentError(f"partition column {p!r} is not in the schema (columns: {names})")


def _same_type(a: Any, b: Any) -> bool:
    """Types equal ignoring nullability and metadata."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.get("type") != b.get("type"):
            return False
        if a["type"] == "struct":
            fa, fb = a["fields"], b["fields"]
            return len(fa) == len(fb) and all(x["name"].lower() == y["name"].lower() and _same_type(x["type"], y["type"])
                                              for x, y in zip(fa, fb, strict=True))
        if a["type"] == "array":
            return _same_type(a["elementType"], b["elementType"])
        if a["type"] == "map":
            return _same_type(a["keyType"], b["keyType"]) and _same_type(a["valueType"], b["valueType"])
        return True
    return a == b


#: How a user changes a table's schema on write, in the words of the writer options they use (one place, so every
#: schema message names the option the user would type, not a dvlake keyword).
ADD_COLUMNS_HINT = ('to add the new columns to the table, write with .option("mergeSchema", "true") '
                    "(SQL: SET spark.databricks.delta.schema.autoMerge.enabled = true)")
REPLACE_SCHEMA_HINT = ('to replace the table\'s schema, write with .mode("overwrite").option("overwriteSchema", "true") '
                       "(dvlake.write: mode=\"overwrite\", overwriteSchema=True)")

_WIDENING = {("byte", "short"), ("byte", "integer"), ("byte", "long"), ("short", "integer"), ("short", "long"),
             ("integer", "long"), ("float", "double"), ("byte", "double"), ("short", "double"), ("integer", "double")}


def align_to_table(df: DataFrame, table_schema: dict[str, Any], table: str, *, fill_missing: bool = False,
                   generated: Collection[str] = ()) -> DataFrame:
    """Reorder ``df``'s columns to the table's and widen safe numeric types (int → long, float → double);
    refuse extra or otherwise differently typed columns. Missing columns are refused too, unless
    ``fill_missing``: then nullable ones are written as NULL, as delta-spark's writer does. A missing column
    named in ``generated`` is a NULL placeholder whatever its nullability: the caller computes it
    (``constraints.fill_generated``)."""
    logical = strip_column_mapping(table_schema)
    df_fields = {f["name"].lower(): f for f in json.loads(df.schema.json())["fields"]}
    expected = [f["name"] for f in logical["fields"]]
    extra = sorted(set(df_fields) - {e.lower() for e in expected})
    nullable = {f["name"] for f in logical["fields"] if f.get("nullable", True)} | set(generated)
    missing = [e for e in expected if e.lower() not in df_fields and not (fill_missing and e in nullable)]
    if extra or missing:
        hints = ([ADD_COLUMNS_HINT] if extra else []) + [REPLACE_SCHEMA_HINT]
        raise SchemaMismatchError(
            f"the data does not match the schema of {table}: missing columns {missing}, extra columns {extra}. "
            f"Table columns: {expected}. To write it: " + "; or ".join(hints),
            error_class="DELTA_METADATA_MISMATCH")
    cols = []
    for f in logical["fields"]:
        if f["name"].lower() not in df_fields:  # a nullable column the data lacks (fill_missing), or a generated one
            from pyspark.sql.types import _parse_datatype_json_value

            cols.append(F.lit(None).cast(_parse_datatype_json_value(f["type"])).alias(f["name"]))
            continue
        got = df_fields[f["name"].lower()]
        col = F.col(f"`{got['name']}`")
        if not _same_type(f["type"], got["type"]):
            if (got["type"], f["type"]) not in _WIDENING:
                raise SchemaMismatchError(
                    f"column {f['name']!r} of {table} has type {json.dumps(f['type'])} but the data has "
                    f"{json.dumps(got['type'])}; cast the column in the DataFrame, or {REPLACE_SCHEMA_HINT}",
                    error_class="DELTA_FAILED_TO_MERGE_FIELDS")
            col = col.cast(f["type"])
        cols.append(col.alias(f["name"]))
    return df.select(*cols)


def write(df: DataFrame, path: str, mode: str = "error", partition_by: Sequence[str] | None = None,
          properties: dict[str, Any] | None = None, *, overwrite_schema: bool = False,
          session_defaults: dict[str, str] | None = None, options: WriteOptions | None = None,
          as_select: bool = False, cluster_by: Sequence[str] | None = None) -> int | None:
    """Write ``df`` as a Delta table at ``path``; returns the committed version (None if ignored or skipped).

    ``cluster_by``: CTAS's CLUSTER BY columns (the new table is clustered; its rows are written as they come, as
    delta-spark writes them: OPTIMIZE clusters them).

    A write that creates the table is recorded as delta-spark records it: ``WRITE`` for a path write
    (``df.write…save``, ``dvlake.write``), ``CREATE TABLE AS SELECT`` with ``as_select`` (CTAS, ``saveAsTable``,
    ``writeTo…create``), which delta-spark runs as a table creation.

    ``options`` carries the DataFrameWriter options (``dvlake.commands.writes.options``): mergeSchema,
    replaceWhere, dynamic partition overwrite, userMetadata, idempotent ``txnAppId``/``txnVersion``
    (a version the application already committed is skipped) and ``delta.*`` properties for a new table.
    """
    mode_key = mode.lower() if isinstance(mode, str) else None
    if mode_key not in MODES:
        raise InvalidArgumentError(f"unknown save mode {mode!r}; use one of error, append, overwrite, ignore")
    opts = options or WriteOptions(overwrite_schema=overwrite_schema)
    root = normalize_table_root(path)
    snapshot = try_load(root)
    with translated():
        return _write(df, root, snapshot, mode, mode_key, partition_by, properties, overwrite_schema or opts.overwrite_schema,
                      session_defaults, opts, as_select, cluster_by)


def _write(df: DataFrame, root: str, snapshot: Snapshot | None, mode: str, mode_key: str,
           partition_by: Sequence[str] | None, properties: dict[str, Any] | None, overwrite_schema: bool,
           session_defaults: dict[str, str] | None, opts: WriteOptions, as_select: bool = False,
           cluster_by: Sequence[str] | None = None) -> int | None:
    if _nothing_to_write(snapshot, mode_key, opts, root):
        return None
    storage = snapshot.storage if snapshot else storage_for(root)
    if snapshot is None and storage.is_local:
        check_creatable_root(root)
    txn = OptimisticTransaction(root, snapshot, storage)
    txn_actions: list[Any] = []
    if opts.txn_app_id is not None and opts.txn_version is not None:
        done = txn.read_app_txn(opts.txn_app_id)
        if done is not None and done >= opts.txn_version:
            return None  # delta-spark skips a write whose application version is already committed
        txn_actions.append(Txn(opts.txn_app_id, opts.txn_version, now_ms()))
    # delta-spark's sink writes the data's schema with every column nullable (ImplicitMetadataOperation's asNullable):
    # a NOT NULL column of a streaming DataFrame does not become a NOT NULL column of the table it creates
    df_schema = json.loads((all_nullable(df.schema) if opts.streaming is not None else df.schema).json())
    replace_schema = snapshot is None or (mode_key == "overwrite" and overwrite_schema)
    if replace_schema:
        _stage_new_schema(txn, snapshot, df_schema, partition_by, properties, opts, session_defaults)
        if cluster_by or (as_select and snapshot is not None):  # CTAS's CLUSTER BY; CREATE OR REPLACE … AS SELECT
            protocol, domain = table_clustering.for_new_table(txn.metadata, txn.protocol, txn.metadata.partition_columns,
                                                              cluster_by, snapshot, root)
            txn.update_protocol(protocol)
            txn_actions += [domain] if domain is not None else []
    else:
        assert snapshot is not None  # replace_schema is True whenever there is no table yet
        df = _aligned_to_table(df, df_schema, snapshot, partition_by, properties, opts, txn, root)
    if opts.replace_where is not None and mode_key == "overwrite" and opts.check_replace_where:
        _check_replace_where(df, opts.replace_where, root)
    metadata, protocol = txn.metadata, txn.protocol
    features.check_can_write(protocol, metadata, root)
    cm = mode_of(metadata)
    schema = metadata.schema
    logical_df = df.toDF(*[f["name"] for f in schema["fields"]]) if replace_schema else df
    # NOT NULL columns, CHECK constraints, invariants and generated columns fail the write job itself on a bad row
    # (nothing is committed)
    checked = constraints.enforce(logical_df, logical_struct(schema), metadata, protocol)
    try:
        adds = write_table_files(checked, root, storage, metadata, protocol)
    except Exception as exc:  # noqa: BLE001 - a NOT NULL failure is raised typed; CHECK ones by translated()
        constraints.raise_typed(exc, root)
        raise
    if not opts.data_change:
        adds = [dataclasses.replace(a, data_change=False) for a in adds]
    if identity.enforced(protocol):  # the identity high-water marks move in the same commit as the data
        moved = identity_values.moved_schema(adds, schema, cm, root, df)
        if moved is not None:
            txn.update_metadata(dataclasses.replace(metadata, schema_string=schema_json(moved)))
    dynamic = opts.dynamic_partition_overwrite and bool(metadata.partition_columns)
    removal_metrics, removal = _replaced(df, snapshot, mode_key, replace_schema, dynamic, adds, opts, txn)
    operation, params, metrics = _commit_description(snapshot, mode_key, as_select, dynamic, adds, removal_metrics,
                                                     metadata, opts)
    if operation != "WRITE" and cluster_by:
        params = {**params, **table_clustering.create_parameter(cluster_by)}
    return txn.commit([*removal, *adds, *txn_actions], operation, params, metrics, user_metadata=opts.user_metadata)


def _nothing_to_write(snapshot: Snapshot | None, mode_key: str, opts: WriteOptions, root: str) -> bool:
    """True for ``mode="ignore"`` on an existing table; refuses an ``error`` mode write to one, and a
    ``dataChange=false`` write that would create a table."""
    if snapshot is not None and mode_key in ("error", "errorifexists"):
        raise TableAlreadyExistsError(f"a Delta table already exists at {root}; use mode='append' or 'overwrite'")
    if snapshot is not None and mode_key == "ignore":
        return True
    if snapshot is None and not opts.data_change:
        raise DeltaOptionError(f"dataChange=false cannot create a table ({root} has none yet): it only rearranges data",
                               error_class="DELTA_DATA_CHANGE_FALSE")
    return False


def _stage_new_schema(txn: OptimisticTransaction, snapshot: Snapshot | None, df_schema: dict[str, Any],
                      partition_by: Sequence[str] | None, properties: dict[str, Any] | None, opts: WriteOptions,
                      session_defaults: dict[str, str] | None) -> None:
    """A new table, or ``overwriteSchema``: the data's schema becomes the table's (same table id, protocol only grows)."""
    parts = list(partition_by or (snapshot.partition_columns if snapshot and not partition_by else []))
    data_columns = {f["name"].lower() for f in df_schema["fields"]}
    if not partition_by and any(p.lower() not in data_columns for p in parts):
        parts = []  # overwriteSchema with data lacking the old partition columns: the new table is unpartitioned
    props = dict(snapshot.configuration) if snapshot else {}
    props.update(normalize_properties(opts.table_properties))
    props.update(normalize_properties(properties))
    metadata, protocol = new_table_metadata(df_schema, parts, props, session_defaults=session_defaults)
    if snapshot is not None:
        metadata = Metadata(**{**metadata.__dict__, "id": snapshot.metadata.id})
        protocol = features.with_features(snapshot.protocol, features.reader_features(protocol),
                                          features.writer_features(protocol))
    txn.update_metadata(metadata)
    txn.update_protocol(protocol)


def _aligned_to_table(df: DataFrame, df_schema: dict[str, Any], snapshot: Snapshot, partition_by: Sequence[str] | None,
                      properties: dict[str, Any] | None, opts: WriteOptions, txn: OptimisticTransaction,
                      root: str) -> DataFrame:
    """Data for an existing table's schema (``mergeSchema`` first extends it); refuses another partitioning,
    table properties, and data without a partition column."""
    if partition_by and [p.lower() for p in partition_by] != [p.lower() for p in snapshot.partition_columns]:
        raise InvalidArgumentError(
            f"partitionBy {list(partition_by)} differs from the table's partitioning {snapshot.partition_columns}; "
            'to change it, write with .mode("overwrite").option("overwriteSchema", "true") '
            '(dvlake.write: mode="overwrite", overwriteSchema=True)')
    if properties:
        raise InvalidArgumentError("table properties can only be set at creation or with ALTER TABLE SET TBLPROPERTIES")
    data_columns = {f["name"].lower() for f in df_schema["fields"]}
    computed = generated.expressions(txn.protocol, txn.metadata)  # delta-spark computes a generated column the data lacks
    missing_generated = {c for c in computed if c.lower() not in data_columns}
    absent = [p for p in snapshot.partition_columns if p.lower() not in data_columns and p not in missing_generated]
    if absent:  # filling it with NULL would put every row in a NULL partition; delta-spark refuses too
        raise PartitionColumnNotFoundError(
            f"partition column {absent[0]!r} of {root} is not in the data (columns: "
            f"{[f['name'] for f in df_schema['fields']]}); add it to the DataFrame before writing")
    identities = identity.columns(txn.metadata.schema) if identity.enforced(txn.protocol) else []
    identity.refuse_explicit(identities, [f["name"] for f in df_schema["fields"]])
    missing_identity = [i for i in identities if i.name.lower() not in data_columns]
    table_schema = (_merged_schema(snapshot, df_schema, txn, type_evolution.automatic_mode(df.sparkSession))
                    if opts.merge_schema else snapshot.schema)
    aligned = align_to_table(df, table_schema, root, fill_missing=True,
                             generated=missing_generated | {i.name for i in missing_identity})
    aligned = identity_values.fill(aligned, missing_identity)  # before generated columns, which may read them
    return constraints.fill_generated(aligned, logical_struct(table_schema), txn.protocol, txn.metadata, missing_generated)


def _replaced(df: DataFrame, snapshot: Snapshot | None, mode_key: str, replace_schema: bool, dynamic: bool,
              adds: list[AddFile], opts: WriteOptions, txn: OptimisticTransaction) -> tuple[dict[str, Any], list[Any]]:
    """What an overwrite removes, as (metrics, actions): the rows ``replaceWhere`` matches, the partitions the new
    data writes into (dynamic overwrite), or every live file; nothing for other modes."""
    if snapshot is None or mode_key != "overwrite":
        return {}, []
    if opts.replace_where is not None and not replace_schema:
        return matching_rows_actions(df.sparkSession, snapshot, opts.replace_where, txn)
    txn.read_whole_table()
    current = snapshot.add_files()
    if dynamic:  # only the partitions the new data writes into are replaced
        written = {_partition_key(a.partition_values) for a in adds}
        current = [a for a in current if _partition_key(a.partition_values) in written]
    txn.read_files(current)
    ts = now_ms()
    return {}, [a.remove(ts, data_change=opts.data_change) for a in current]


def _commit_description(snapshot: Snapshot | None, mode_key: str, as_select: bool, dynamic: bool, adds: list[AddFile],
                        removal_metrics: dict[str, Any], metadata: Metadata,
                        opts: WriteOptions) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The commit's operation, operationParameters and operationMetrics, as delta-spark records a write."""
    num_rows = sum(json.loads(a.stats)["numRecords"] for a in adds if a.stats)
    operation = "CREATE TABLE AS SELECT" if snapshot is None and as_select else "WRITE"
    params: dict[str, Any] = {"mode": MODES[mode_key], "partitionBy": json.dumps(list(metadata.partition_columns))}
    if opts.replace_where is not None and mode_key == "overwrite":
        params["predicate"] = json.dumps([condition_text(opts.replace_where) or repr(opts.replace_where)])
    if dynamic and mode_key == "overwrite":
        params["isDynamicPartitionOverwrite"] = "true"
    metrics = {"numFiles": len(adds), "numOutputRows": num_rows, "numOutputBytes": sum(a.size for a in adds)}
    for key in ("numRemovedFiles", "numDeletedRows", "numCopiedRows", "numRemovedBytes"):
        if key in removal_metrics:
            metrics[key] = removal_metrics[key]
    if operation != "WRITE":
        params = {"isManaged": "false", "partitionBy": params["partitionBy"],
                  "properties": json.dumps(metadata.configuration)}  # delta-spark's description is null: left out
    if opts.streaming is not None:  # delta-spark's sink: one STREAMING UPDATE per micro-batch, creating the table too
        output_mode, query_id, epoch = opts.streaming
        operation, params = "STREAMING UPDATE", {"outputMode": output_mode, "queryId": query_id, "epochId": str(epoch)}
    return operation, params, metrics


def _partition_key(values: dict[str, str | None]) -> tuple[tuple[str, str | None], ...]:
    return tuple(sorted(values.items()))


def _merged_schema(snapshot: Snapshot, df_schema: dict[str, Any], txn: OptimisticTransaction,
                   widening_mode: str) -> dict[str, Any]:
    """mergeSchema: the table's schema plus the data's new top-level columns (nullable, appended at the end), and on
    a typeWidening table the widenings the data brings (``type_evolution``, under ``widening_mode``).

    The merged metadata is staged on ``txn``; nested struct fields are not added (a struct with other fields
    is still a schema mismatch).
    """
    table = snapshot.schema
    known = {f["name"].lower() for f in table["fields"]}
    new = [{**f, "nullable": True} for f in df_schema["fields"] if f["name"].lower() not in known]
    existing = type_evolution.evolved_fields(snapshot, table["fields"], df_schema["fields"], widening_mode)
    if not new and existing == table["fields"]:
        return table
    conf = dict(snapshot.configuration)
    if new and mode_of(snapshot.metadata) != "none":
        start = int(conf.get(MAX_COLUMN_ID_KEY, "0"))
        mapped, max_id = assign_column_mapping({"type": "struct", "fields": new}, start_id=start)
        new = mapped["fields"]
        conf[MAX_COLUMN_ID_KEY] = str(max_id)
    merged = {**table, "fields": [*existing, *new]}
    txn.update_metadata(Metadata(**{**snapshot.metadata.__dict__, "schema_string": schema_json(merged),
                                    "configuration": conf}))
    return merged


def _check_replace_where(df: DataFrame, condition: Any, root: str) -> None:
    """delta-spark's constraint check: every written row must satisfy the replaceWhere condition (SQL or Column)."""
    cond = F.expr(condition) if isinstance(condition, str) else condition
    outside = df.filter(~F.coalesce(cond, F.lit(False))).limit(1).count()
    if outside:
        raise ReplaceWhereMismatchError(
            f"data written to {root} with replaceWhere {condition!r} has rows the condition does not accept; "
            "filter the data to the condition, or set spark.databricks.delta.replaceWhere.constraintCheck.enabled=false")


def create_table(path: str, schema: dict[str, Any], partition_by: Sequence[str] = (), properties: dict[str, Any] | None = None,
                 *, if_not_exists: bool = False, replace: bool = False, name: str | None = None,
                 description: str | None = None, session_defaults: dict[str, str] | None = None,
                 operation: str | None = None, managed: bool = False,
                 cluster_by: Sequence[str] | None = None) -> int | None:
    """CREATE TABLE with no data (the DeltaTableBuilder's ``execute``).

    ``operation`` is the name the commit records when the caller knows better than "create or replace, by whether a
    table was there" (delta-spark's builder records ``CREATE OR REPLACE TABLE`` for ``createOrReplace`` whether or
    not it found one); ``managed`` is ``operationParameters.isManaged``; ``cluster_by``: CLUSTER BY's columns (a
    clustered table, ``dvlake.commands.ddl.clustering``)."""
    root = normalize_table_root(path)
    snapshot = try_load(root)
    if snapshot is not None and not replace:
        if if_not_exists:
            return None
        raise TableAlreadyExistsError(f"a Delta table already exists at {root}")
    defines_generated = any(generated.KEY in (f.get("metadata") or {}) for f in schema.get("fields", []))
    identity.check_definitions(schema, tuple(partition_by))
    with_defaults = defaults.requested(properties)
    if defaults.expressions(schema) and not with_defaults:
        defaults.refuse_without_feature("CREATE TABLE", root)
    if with_defaults:  # a protocol feature, not a property (delta-spark keeps delta.feature.* out of the configuration)
        properties = {k: v for k, v in (properties or {}).items() if k != defaults.PROPERTY}
    metadata, protocol = new_table_metadata(schema, partition_by, properties, name, description, session_defaults,
                                            generated_columns=defines_generated,
                                            identity_columns=identity.defines_identity(schema))
    if with_defaults:
        protocol = features.with_features(protocol, (), [defaults.FEATURE])
    protocol, domain = table_clustering.for_new_table(metadata, protocol, partition_by, cluster_by, snapshot, root)
    if snapshot is None and storage_for(root).is_local:
        check_creatable_root(root)
    txn = OptimisticTransaction(root, snapshot)
    actions: list[Any] = []
    if snapshot is not None:
        protocol = features.with_features(snapshot.protocol, features.reader_features(protocol),
                                          features.writer_features(protocol))
        txn.read_whole_table()
        actions = [a.remove() for a in snapshot.add_files()]
    txn.update_metadata(metadata)
    txn.update_protocol(protocol)
    if domain is not None:
        actions.append(domain)
    params = {"isManaged": str(managed).lower(), "description": description, "partitionBy": json.dumps(list(partition_by)),
              **table_clustering.create_parameter(cluster_by), "properties": json.dumps(metadata.configuration)}
    return txn.commit(actions, operation or ("REPLACE TABLE" if snapshot is not None else "CREATE TABLE"),
                      {k: v for k, v in params.items() if v is not None})


def load(path: str, version: int | None = None) -> Snapshot:
    return Snapshot.load(normalize_table_root(path), version=version)
