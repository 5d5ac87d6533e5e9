"""CREATE TABLE / CTAS / temporary views, INSERT, ALTER TABLE … SET TBLPROPERTIES | ADD COLUMNS, DESCRIBE.

Each function gets sqlglot's AST of a statement that involves a Delta table and runs it through
dvlake's write/alter commands. Column definitions are turned into a Spark schema by Spark itself
(``createDataFrame([], ddl)``), so every type Spark's DDL knows works on classic and Connect alike.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from dvlake.sqlfront.parse import DIALECT, sql_error, written
from dvlake.sqlfront.refs import (
    catalog_function,
    maybe_catalog_location,
    name_of,
    offset_of,
    reads_delta_tables,
    refresh_catalog_columns,
    run_query,
    table_ref,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def empty(spark: SparkSession) -> DataFrame:
    """The empty result delta-spark returns for DDL."""
    return spark.createDataFrame([], "result string")


def _property_text(node: exp.Expr) -> str:
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Column):
        return ".".join(p.name for p in node.parts)
    if isinstance(node, exp.Dot):  # delta.feature.x is Dot(Dot(delta, feature), x)
        return f"{_property_text(node.this)}.{_property_text(node.expression)}"
    if isinstance(node, exp.Identifier | exp.Var):
        return str(node.name)
    return node.sql(DIALECT)


def properties_of(nodes: list[exp.Expr], text: str) -> dict[str, str]:
    """TBLPROPERTIES ('k' = 'v', delta.x = true) → {"k": "v", "delta.x": "true"}."""
    out: dict[str, str] = {}
    for p in nodes:
        if not isinstance(p, exp.Property):
            raise sql_error(text, offset_of(p), f"cannot read the table property {p.sql(DIALECT)!r}")
        out[_property_text(p.this)] = _property_text(p.args["value"])
    return out


def spark_schema(spark: SparkSession, column_defs: list[exp.Expr], text: str, *, generated: bool = False) -> StructType:
    """Column definitions → a Spark StructType (parsed by Spark's own DDL parser).

    ``generated`` (CREATE TABLE): ``GENERATED ALWAYS AS (expr)`` is kept as delta-spark keeps it, the expression's
    text in the field metadata ``delta.generationExpression`` (``_generation_expressions`` checks it first)."""
    from pyspark.sql.types import StructField, StructType

    from dvlake.log.defaults import KEY as DEFAULT_KEY
    from dvlake.log.generated import KEY as GENERATION_KEY

    expressions: dict[str, str] = {}
    extra: dict[str, dict[str, Any]] = {}  # field metadata of identity columns and defaults
    plain: list[exp.Expr] = []
    for cd in column_defs:
        kept = []
        for c in cd.args.get("constraints") or []:
            kind = c.args.get("kind")
            if generated and isinstance(kind, exp.ComputedColumnConstraint):
                expressions[cd.name] = written(text, kind.this)
                continue
            if generated and isinstance(kind, exp.GeneratedAsIdentityColumnConstraint):
                extra.setdefault(cd.name, {}).update(_identity_metadata(kind, text))
                continue
            if generated and isinstance(kind, exp.DefaultColumnConstraint):
                extra.setdefault(cd.name, {})[DEFAULT_KEY] = written(text, kind.this)  # kept as Spark keeps a default
                continue
            if isinstance(kind, exp.DefaultColumnConstraint):
                raise sql_error(text, offset_of(cd), f"ADD COLUMNS with a DEFAULT ({c.sql(DIALECT)!r}) is not supported "
                                "for Delta tables: add the column, then ALTER TABLE … ALTER COLUMN … SET DEFAULT",
                                error_class="WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED")
            if not isinstance(kind, exp.NotNullColumnConstraint | exp.CommentColumnConstraint):
                allowed = "this constraint is not" if generated else \
                    "generated columns, defaults and identity columns are not"
                raise sql_error(text, offset_of(cd), f"column constraint {c.sql(DIALECT)!r} is not supported by dvlake "
                                                     f"({allowed})")
            kept.append(c)
        if cd.name in expressions or cd.name in extra:  # Spark's DDL parser gets the column without the clause
            cd = cd.copy()
            cd.set("constraints", kept)
        plain.append(cd)
    ddl = ", ".join(cd.sql(DIALECT) for cd in plain)
    schema = spark.createDataFrame([], ddl).schema
    if not expressions and not extra:
        return schema
    if expressions:
        _check_generation_expressions(spark, schema, expressions, text, column_defs)
    return StructType([StructField(f.name, f.dataType, f.nullable,
                                   {**f.metadata, **({GENERATION_KEY: expressions[f.name]} if f.name in expressions else {}),
                                    **extra.get(f.name, {})})
                       if f.name in expressions or f.name in extra else f for f in schema.fields])


def _identity_metadata(kind: exp.GeneratedAsIdentityColumnConstraint, text: str) -> dict[str, Any]:
    """``GENERATED ALWAYS | BY DEFAULT AS IDENTITY [(START WITH s INCREMENT BY k)]`` → the field metadata of
    ``dvlake.log.identity`` (start and step 1 unless given, as in delta-spark)."""
    from dvlake.log import identity

    def number(node: exp.Expr | None) -> int:
        if node is None:
            return 1
        try:
            return int(written(text, node))
        except ValueError:
            raise sql_error(text, offset_of(node), f"an identity column's START WITH and INCREMENT BY take whole "
                                                   f"numbers, not {written(text, node)!r}") from None

    for unsupported in ("minvalue", "maxvalue", "cycle", "order"):
        if kind.args.get(unsupported) is not None:
            raise sql_error(text, offset_of(kind), f"{unsupported.upper()} is not part of Delta's identity columns; "
                                                   "give START WITH and INCREMENT BY only")
    return identity.field_metadata(number(kind.args.get("start")), number(kind.args.get("increment")),
                                   allow_explicit_insert=not kind.this)


def _check_generation_expressions(spark: SparkSession, schema: StructType, expressions: dict[str, str], text: str,
                                  column_defs: list[exp.Expr]) -> None:
    """The checks of ``dvlake.spark.generated_columns`` (shared with the table builder), refusals naming the column's
    position in the statement."""
    from dvlake.spark.generated_columns import check_generation_expressions

    at = {cd.name: offset_of(cd) for cd in column_defs}
    check_generation_expressions(spark, schema, expressions,
                                 lambda column, problem, cls: sql_error(text, at[column], problem, error_class=cls))


class _CreateParts:
    """The clauses of a CREATE TABLE that dvlake reads."""

    def __init__(self, node: exp.Create, text: str) -> None:
        self.using: str | None = None
        self.partitioned_by: list[str] = []
        self.cluster_by: list[str] | None = None
        self.location: str | None = None
        self.comment: str | None = None
        self.properties: dict[str, str] = {}
        self.temporary = self.is_global = False
        props = node.args.get("properties")
        for p in props.expressions if props is not None else []:
            if isinstance(p, exp.FileFormatProperty):
                self.using = _property_text(p.this).lower()
            elif isinstance(p, exp.PartitionedByProperty):
                cols = p.this.expressions if isinstance(p.this, exp.Schema | exp.Tuple) else [p.this]
                self.partitioned_by = [c.name for c in cols]
            elif isinstance(p, exp.LocationProperty):
                self.location = _property_text(p.this)
            elif isinstance(p, exp.SchemaCommentProperty):
                self.comment = _property_text(p.this)
            elif isinstance(p, exp.TemporaryProperty):
                self.temporary = True
            elif isinstance(p, exp.GlobalProperty):
                self.is_global = True
            elif isinstance(p, exp.ClusterProperty):  # a Property without a value: it must not reach properties_of
                self.cluster_by = [".".join(f"`{part}`" if "." in part else part for part in _column_parts(c, text))
                                   for c in p.expressions]  # liquid clustering (commands/ddl/clustering.py)
            elif isinstance(p, exp.Property):
                self.properties.update(properties_of([p], text))
            else:
                raise sql_error(text, offset_of(p), f"the clause {p.sql(DIALECT)!r} is not supported by dvlake for Delta tables")


def _column_parts(node: exp.Expr, text: str) -> list[str]:
    """A CLUSTER BY column as its name parts (``s.a`` → ``["s", "a"]``)."""
    if isinstance(node, exp.Column | exp.Dot):
        return [p.name for p in node.parts]
    if isinstance(node, exp.Identifier):
        return [node.name]
    raise sql_error(text, offset_of(node), f"CLUSTER BY takes column names, not {node.sql(DIALECT)!r}")


def _split_target(node: exp.Expr) -> tuple[exp.Expr, list[exp.Expr]]:
    """Create/Insert targets are a Table or Schema(Table, [columns])."""
    if isinstance(node, exp.Schema):
        return node.this, list(node.expressions)
    return node, []


def create(spark: SparkSession, node: exp.Create, text: str) -> DataFrame | None:
    """CREATE TABLE / CTAS / CREATE VIEW involving Delta tables; None when it is Spark's business."""
    kind = str(node.args.get("kind") or "").upper()
    target, columns = _split_target(node.this)
    parts = _CreateParts(node, text)
    query = node.args.get("expression")
    if kind == "VIEW":
        return _create_view(spark, node, target, columns, parts, query, text)
    if kind != "TABLE" or not isinstance(target, exp.Table):
        return None
    ref = table_ref(target)
    if ref is None and parts.using != "delta":
        if query is not None and reads_delta_tables(spark, query):
            raise sql_error(text, offset_of(node), "CREATE TABLE … AS SELECT from a Delta table needs USING delta (dvlake "
                                                   "writes Delta tables only); or read it with dvlake.read and save it")
        return None
    if parts.using not in (None, "delta"):
        raise sql_error(text, offset_of(node), f"delta.`<path>` tables are Delta tables; USING {parts.using} contradicts it")
    name = None if ref is not None else name_of(target)
    path = ref.path if ref is not None else parts.location
    if ref is not None and parts.location is not None and parts.location != ref.path:
        raise sql_error(text, offset_of(node), "LOCATION differs from the delta.`<path>` of the table; give one of them")
    replace = bool(node.args.get("replace"))
    if_not_exists = bool(node.args.get("exists"))
    managed = False
    if name is not None:
        check_name = catalog_function("table_name_parts")
        if check_name is not None:
            check_name(name)  # a name Spark refuses writes nothing, even with IF NOT EXISTS or a LOCATION
        if if_not_exists and spark.catalog.tableExists(name):
            return empty(spark)  # whatever the name is, IF NOT EXISTS writes nothing (as Spark does)
        path, managed = _placement(spark, name, path, replace, text, offset_of(target))
    assert path is not None
    from dvlake.api import session_defaults
    from dvlake.commands.writes import write as write_cmd
    from dvlake.commands.writes.write import create_table
    from dvlake.commands.writes.write import load as load_snapshot

    if query is not None:
        if columns:
            raise sql_error(text, offset_of(columns[0]), "CREATE TABLE … AS SELECT takes its columns from the query; "
                                                         "remove the column list")
        df = run_query(spark, query, text)
        mode = "overwrite" if replace else ("ignore" if if_not_exists else "error")
        write_cmd.write(df, path, mode, list(parts.partitioned_by or []), parts.properties or None, overwrite_schema=replace,
                        session_defaults=session_defaults(spark), as_select=True,  # recorded as CREATE TABLE AS SELECT
                        cluster_by=parts.cluster_by)
    else:
        if not columns:
            try:  # CREATE TABLE … USING delta LOCATION '<existing table>' registers it without a schema
                load_snapshot(path)
            except Exception:  # noqa: BLE001 - no table there: a schema is needed
                raise sql_error(text, offset_of(target), "CREATE TABLE needs a column list when there is no table "
                                                         "at the location yet") from None
        else:
            schema = json.loads(spark_schema(spark, columns, text, generated=True).json())
            create_table(path, schema, parts.partitioned_by, parts.properties, if_not_exists=if_not_exists,
                         replace=replace, name=name, description=parts.comment, session_defaults=session_defaults(spark),
                         cluster_by=parts.cluster_by)
    if name is not None:
        _register(spark, name, path, if_not_exists or replace, text, offset_of(target), managed)
    return empty(spark)


def _placement(spark: SparkSession, name: str, location: str | None, replace: bool, text: str,
               offset: int) -> tuple[str, bool]:
    """Where CREATE [OR REPLACE] TABLE name … puts the table, and whether it is managed: the LOCATION given, the
    location the name already has (OR REPLACE), or ``<database location>/<table>`` as delta-spark places a managed
    table. Every refusal happens here, before any data is written."""
    from dvlake.errors import TableAlreadyExistsError
    from dvlake.storage.paths import normalize_table_root

    location_for_create = catalog_function("location_for_create")
    default_location = catalog_function("default_table_location")
    if location_for_create is None or default_location is None:
        raise sql_error(text, offset, f"table names need dvlake.spark.catalog, which this build lacks; create {name} as "
                                      "delta.`<path>` instead")
    existing = location_for_create(spark, name)  # a name that is not a Delta table is refused here
    if existing is not None and not replace:
        raise TableAlreadyExistsError(f"table {name} already exists (a Delta table at {existing})",
                                      error_class="DELTA_TABLE_ALREADY_EXISTS")
    if existing is not None and location is not None and normalize_table_root(location) != normalize_table_root(existing):
        raise sql_error(text, offset, f"{name} is a Delta table at {existing}, not at {location}; CREATE OR REPLACE "
                                      "keeps the location: remove LOCATION, or DROP TABLE first")
    if location is not None:
        return location, False
    if existing is not None:
        return str(existing), False
    return str(default_location(spark, name)), True


def _register(spark: SparkSession, name: str, path: str, if_not_exists: bool, text: str, offset: int,
              managed: bool = False) -> None:
    register_table = catalog_function("register_table")
    if register_table is None:
        raise sql_error(text, offset, f"the table was created at {path}, but registering the name {name} in the "
                                      "catalog needs dvlake.spark.catalog, which this build lacks; use delta.`<path>`")
    register_table(spark, name, path, if_not_exists=if_not_exists, managed=managed)


def drop(spark: SparkSession, node: exp.Drop, text: str) -> DataFrame | None:
    """DROP TABLE [IF EXISTS] of a Delta table dvlake registered: the name goes; a managed table's files too,
    as delta-spark drops a managed table. Anything else is Spark's business."""
    tables = node.args.get("tables") or ([node.this] if node.this is not None else [])
    if str(node.args.get("kind") or "").upper() != "TABLE" or len(tables) != 1 or not isinstance(tables[0], exp.Table):
        return None
    if table_ref(tables[0]) is not None:
        raise sql_error(text, offset_of(node), "DROP TABLE takes a table name; a delta.`<path>` table has no name to "
                                               "drop (delete its directory to remove it)")
    name = name_of(tables[0])
    location = maybe_catalog_location(spark, name)
    if location is None:
        return None
    is_managed = catalog_function("is_managed")
    unregister = catalog_function("unregister_table")
    if is_managed is None or unregister is None:
        return None
    managed = bool(is_managed(spark, name))
    unregister(spark, name)
    if managed:
        from dvlake.storage import storage_for

        storage_for(location).delete_dir(location)
    return empty(spark)


def _create_view(spark: SparkSession, node: exp.Create, target: exp.Expr, columns: list[exp.Expr],
                 parts: _CreateParts, query: exp.Expr | None, text: str) -> DataFrame | None:
    if query is None or not reads_delta_tables(spark, query):
        return None
    if not parts.temporary:
        raise sql_error(text, offset_of(node), "a permanent view cannot read Delta tables through dvlake (Spark stores "
                                               "its SQL text); create a TEMPORARY VIEW instead")
    df = run_query(spark, query, text)
    if columns:
        df = df.toDF(*[c.name for c in columns])
    view = target.name
    if parts.is_global:
        (df.createOrReplaceGlobalTempView if node.args.get("replace") else df.createGlobalTempView)(view)
    elif node.args.get("replace"):
        df.createOrReplaceTempView(view)
    else:
        df.createTempView(view)
    return empty(spark)


def _table_struct(path: str) -> StructType:
    from dvlake.commands.writes.write import load
    from dvlake.spark.layout import logical_struct

    return logical_struct(load(path).schema)


def _generated_columns(path: str) -> dict[str, str]:
    """The table's generated columns and their expressions (empty when its protocol does not enforce them)."""
    from dvlake.commands.writes.write import load
    from dvlake.log import generated

    snapshot = load(path)
    return generated.expressions(snapshot.protocol, snapshot.metadata)


def _identity_columns(path: str) -> list[str]:
    """The table's identity columns (empty when its protocol does not enforce them)."""
    from dvlake.commands.writes.write import load
    from dvlake.log import identity

    snapshot = load(path)
    return [i.name for i in identity.columns(snapshot.schema)] if identity.enforced(snapshot.protocol) else []


def delta_target(spark: SparkSession, node: exp.Expr, text: str) -> str | None:
    """The table root of a Table node that is a Delta table (path or Delta table of the catalog), else None."""
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        return None
    ref = table_ref(node)
    if ref is not None:
        if ref.version is not None or ref.timestamp is not None or node.args.get("version") is not None:
            raise sql_error(text, offset_of(node), "cannot change an old version of a table (remove the time travel)")
        return ref.path
    return maybe_catalog_location(spark, name_of(node))


def insert(spark: SparkSession, node: exp.Insert, text: str) -> DataFrame | None:
    """INSERT INTO | OVERWRITE [TABLE] <delta table> [PARTITION (…)] [(columns)] [BY NAME] SELECT … | VALUES …"""
    from pyspark.sql import functions as F

    from dvlake.api import write as write_df
    from dvlake.spark.names import case_sensitive, name_key

    target, columns = _split_target(node.this)
    path = delta_target(spark, target, text)
    if path is None:  # not a Delta target: Spark writes it, from the Delta tables the source reads through dvlake
        source = node.args.get("expression")
        return run_query(spark, node, text, whole=True) if source is not None and reads_delta_tables(spark, source) else None
    replace_where = node.args.get("where")
    if replace_where is not None and _replace_where_writer() is None:
        raise sql_error(text, offset_of(replace_where), "INSERT … REPLACE WHERE is not supported by this dvlake build "
                                                        "(it needs the replaceWhere writer option); use DELETE then INSERT")
    overwrite = bool(node.args.get("overwrite"))
    table = _table_struct(path)
    static: dict[str, Any] = {}
    partition = target.args.get("partition")
    at_partition = offset_of(partition) if partition is not None else offset_of(target)
    for spec in partition.expressions if partition is not None else []:
        if isinstance(spec, exp.EQ):
            static[spec.this.name] = spec.expression
        elif not isinstance(spec, exp.Column):
            raise sql_error(text, offset_of(spec), f"cannot read the partition spec {spec.sql(DIALECT)!r}")
    if static and overwrite and _replace_where_writer() is None:
        raise sql_error(text, at_partition, "INSERT OVERWRITE … PARTITION (col = value) is not supported by this dvlake "
                                            "build (it needs the replaceWhere writer option); use DELETE … WHERE then INSERT")
    source = node.args.get("expression")
    if source is None:
        raise sql_error(text, offset_of(node), "INSERT needs SELECT … or VALUES …")
    from dvlake.sqlfront import defaults as column_defaults

    sensitive = case_sensitive(spark)  # a column list names the table's columns as Spark resolves names

    def key(name: str) -> str:
        return name_key(name, sensitive)

    defaults = column_defaults.table_defaults(path)
    targets = None if node.args.get("by_name") else (
        [c.name for c in columns] if columns else [f.name for f in table.fields if key(f.name) not in
                                                   {key(s) for s in static}])
    with_defaults = column_defaults.values_with_defaults(spark, source, text, targets, defaults) \
        if targets is not None else None
    df = with_defaults if with_defaults is not None else run_query(spark, source, text)
    by_name = {key(f.name): f for f in table.fields}
    for col in static:
        if key(col) not in by_name:
            raise sql_error(text, at_partition, f"{col!r} is not a column of the table")
    if node.args.get("by_name"):
        names = list(df.columns)
    else:
        named = [c.name for c in columns] if columns else [f.name for f in table.fields if key(f.name) not in
                                                           {key(s) for s in static}]
        if len(named) != len(df.columns):
            raise sql_error(text, offset_of(source), f"the table takes {len(named)} columns {named} but the query gives "
                                                     f"{len(df.columns)}", error_class="INSERT_COLUMN_ARITY_MISMATCH")
        names = named
        df = df.toDF(*names)
    for col, value in static.items():
        df = df.withColumn(col, F.expr(written(text, value)))
    present = {key(c) for c in df.columns}
    _refuse_unknown([c for c in df.columns if key(c) not in by_name], table, sensitive, text, offset_of(node))
    # left out, the writer computes them (delta-spark): NULL would break a generated column's rule, and an identity
    # column left out gets fresh values
    computed = {**_generated_columns(path), **dict.fromkeys(_identity_columns(path), "")}
    cols = [(F.col(f"`{next(c for c in df.columns if key(c) == key(f.name))}`") if key(f.name) in present
             else F.expr(defaults[f.name]) if f.name in defaults  # an omitted column gets its default (Spark's rule)
             else F.lit(None)).cast(f.dataType).alias(f.name) for f in table.fields
            if key(f.name) in present or f.name not in computed]
    rows = df.select(*cols)
    if replace_where is not None or (static and overwrite):
        # only the rows the condition (or the static partition) selects are replaced, atomically
        condition = (written(text, replace_where) if replace_where is not None else
                     " AND ".join(f"`{c}` = ({written(text, v)})" for c, v in static.items()))
        writer = _replace_where_writer()
        assert writer is not None
        writer(rows, path, condition)
    else:
        write_df(rows, path, "overwrite" if overwrite else "append")
    return empty(spark)


def _refuse_unknown(unknown: list[str], table: StructType, sensitive: bool, text: str, offset: int) -> None:
    """An INSERT column the table lacks; under ``spark.sql.caseSensitive`` a name differing only in case is one, with
    Spark's class for a name it cannot resolve."""
    if unknown:
        raise sql_error(text, offset, f"the table has no column {unknown[0]!r} (columns: {list(table.names)})",
                        error_class="UNRESOLVED_COLUMN.WITH_SUGGESTION" if sensitive else None)


def _replace_where_writer() -> Callable[[DataFrame, str, str], None] | None:
    """A writer that replaces the rows matching a condition in one commit (the ``replaceWhere`` option of
    ``dvlake.commands.writes.options``), or None in a build without it."""
    try:
        options = importlib.import_module("dvlake.commands.writes.options")
    except ImportError:
        return None
    from dvlake.commands.writes import write as write_cmd

    def run(rows: DataFrame, path: str, condition: str) -> None:
        write: Any = write_cmd.write
        write(rows, path, "overwrite", [], None, options=options.WriteOptions(replace_where=condition))

    return run


def alter(spark: SparkSession, node: exp.Alter, text: str) -> DataFrame | None:
    """ALTER TABLE <delta table> SET TBLPROPERTIES (…) | ADD COLUMNS (…) | RENAME COLUMN | DROP COLUMN(S); None for
    other tables."""
    from dvlake.commands.ddl.properties import add_columns, set_properties

    path = delta_target(spark, node.this, text)
    if path is None:
        return None
    actions = node.args.get("actions") or []
    if len(actions) == 1 and isinstance(actions[0], exp.AlterRename):
        return _rename_table(spark, node.this, actions[0], path, text)
    for action in node.args.get("actions") or []:
        if isinstance(action, exp.AlterSet):
            for props in action.expressions:
                if not isinstance(props, exp.Properties):
                    raise sql_error(text, offset_of(action), "only ALTER TABLE … SET TBLPROPERTIES (…) is supported")
                set_properties(path, properties_of(list(props.expressions), text))
        elif isinstance(action, exp.Schema) and all(isinstance(c, exp.ColumnDef) for c in action.expressions):
            fields = json.loads(spark_schema(spark, list(action.expressions), text).json())["fields"]
            add_columns(path, fields)
        elif not _column_change(path, action, text) and not _alter_default(spark, path, action, text):
            raise sql_error(text, offset_of(action) or offset_of(node),
                            f"ALTER TABLE … {action.sql(DIALECT)[:40]!r} is not supported by dvlake; supported: SET/UNSET "
                            "TBLPROPERTIES, ADD COLUMNS, RENAME COLUMN, DROP COLUMN(S), DROP FEATURE, ADD/DROP CONSTRAINT")
    refresh_catalog_columns(spark, node.this)
    return empty(spark)


def _rename_table(spark: SparkSession, source: exp.Table, action: exp.AlterRename, path: str, text: str) -> DataFrame:
    """ALTER TABLE name RENAME TO new_name, as Spark's session catalog renames a Delta table for delta-spark: the new
    name stays in the old one's database; an external table keeps its files where they are (only the name changes); a
    managed table's directory moves to the new name's place under the database, the location following it."""
    import os

    from dvlake.errors import TableAlreadyExistsError
    from dvlake.storage.paths import has_scheme, normalize_table_root

    if table_ref(source) is not None:
        raise sql_error(text, offset_of(source), "a delta.`<path>` table has no name to rename; move its directory instead")
    target = action.this
    old_db = source.args.get("db")
    if target.args.get("db") is not None and old_db is not None and target.args["db"].name.lower() != old_db.name.lower():
        raise sql_error(text, offset_of(target), "RENAME TO keeps the table in its database: give the new name without "
                                                 "another database")
    if target.args.get("db") is None and old_db is not None:
        target = exp.Table(this=target.this, db=old_db.copy())
    old_name, new_name = name_of(source), name_of(target)
    if spark.catalog.tableExists(new_name):
        raise TableAlreadyExistsError(f"cannot rename {old_name} to {new_name}: {new_name} already exists",
                                      error_class="TABLE_OR_VIEW_ALREADY_EXISTS")
    is_managed, unregister = catalog_function("is_managed"), catalog_function("unregister_table")
    default_location = catalog_function("default_table_location")
    if is_managed is None or unregister is None or default_location is None:
        raise sql_error(text, offset_of(source), "renaming tables needs dvlake.spark.catalog, which this build lacks")
    managed = bool(is_managed(spark, old_name))
    location = path
    if managed:
        location = str(default_location(spark, new_name))
        old_dir, new_dir = normalize_table_root(path), normalize_table_root(location)
        if has_scheme(old_dir) or has_scheme(new_dir):  # never a rename on an object store
            raise sql_error(text, offset_of(source), f"renaming a managed table moves its directory, which dvlake does only "
                                                     f"on a local file system ({old_dir} is not); copy the table instead")
        if os.path.exists(new_dir):
            raise TableAlreadyExistsError(f"cannot rename {old_name} to {new_name}: its location {new_dir} already exists",
                                          error_class="LOCATION_ALREADY_EXISTS")
        os.makedirs(os.path.dirname(new_dir), exist_ok=True)
        os.rename(old_dir, new_dir)  # one directory rename: the log's file paths are relative to it
    _register(spark, new_name, location, False, text, offset_of(target), managed)
    unregister(spark, old_name)
    return empty(spark)


def _alter_default(spark: SparkSession, path: str, action: exp.Expr, text: str) -> bool:
    """ALTER COLUMN c SET DEFAULT / DROP DEFAULT (``sqlfront.defaults``); False for other actions."""
    from dvlake.sqlfront.defaults import alter_default

    return alter_default(spark, path, action, text)


def _column_path(node: exp.Expr, text: str) -> list[str]:
    """A column reference of RENAME/DROP COLUMN as its path (``s.a`` → ``["s", "a"]``), quotes removed."""
    if isinstance(node, exp.Paren):
        return _column_path(node.this, text)
    if isinstance(node, exp.Column):
        return [p.name for p in node.parts]
    if isinstance(node, exp.Dot):
        return _column_path(node.this, text) + _column_path(node.expression, text)
    if isinstance(node, exp.Identifier):
        return [node.name]
    raise sql_error(text, offset_of(node), f"cannot read the column {node.sql(DIALECT)!r}; name it as col or struct.field")


def _column_change(path: str, action: exp.Expr, text: str) -> bool:
    """RENAME COLUMN / DROP COLUMN(S) (column mapping's metadata-only changes); False for other actions."""
    from dvlake.commands.ddl.columns import drop_columns, rename_column

    if isinstance(action, exp.RenameColumn):
        if action.args.get("exists"):
            raise sql_error(text, offset_of(action), "RENAME COLUMN IF EXISTS is not Spark SQL; remove IF EXISTS")
        new = _column_path(action.args["to"], text)
        if len(new) != 1:
            raise sql_error(text, offset_of(action.args["to"]), "RENAME COLUMN … TO takes the new name of the field "
                                                                "alone (RENAME COLUMN s.a TO b renames s.a to s.b)")
        rename_column(path, _column_path(action.this, text), new[0])
        return True
    if isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() in ("COLUMN", "COLUMNS"):
        columns: list[list[str]] = []
        for item in action.args.get("tables") or []:
            parts = item.expressions if isinstance(item, exp.Schema | exp.Tuple) else [item]
            columns.extend(_column_path(p, text) for p in parts)
        drop_columns(path, columns, if_exists=bool(action.args.get("exists")))
        return True
    return False


def describe(spark: SparkSession, node: exp.Describe, text: str) -> DataFrame | None:
    """DESCRIBE [TABLE] <delta table>: the columns (col_name, data_type, comment), as Spark prints them."""
    path = delta_target(spark, node.this, text)
    if path is None:
        return None
    table = _table_struct(path)
    rows = [(f.name, f.dataType.simpleString(), (f.metadata or {}).get("comment")) for f in table.fields]
    return spark.createDataFrame(rows, "col_name string, data_type string, comment string")
