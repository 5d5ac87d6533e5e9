"""Delta's utility statements, read token by token (sqlglot's Spark dialect has no grammar for them).

OPTIMIZE, REORG … APPLY (PURGE), VACUUM, RESTORE, DESCRIBE HISTORY | DETAIL, GENERATE, CONVERT TO
DELTA, ALTER TABLE … UNSET TBLPROPERTIES | DROP FEATURE | ADD CONSTRAINT | DROP CONSTRAINT, SHOW
TBLPROPERTIES, SHOW PARTITIONS and TRUNCATE TABLE. Each reader walks
the tokens with :class:`Cursor` and hands conditions and expressions to sqlglot's expression
parser; anything unexpected is a typed error at its position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sqlglot.tokens import TokenType

from dvlake.errors import DeltaSqlError
from dvlake.sqlfront.parse import Cursor, TableRef, column_name, parse_expression, sql_error
from dvlake.sqlfront.refs import literal_value, maybe_catalog_location, refresh_catalog_columns, resolve

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _empty(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame([], "result string")


def _target(spark: SparkSession, cur: Cursor, statement: str) -> str:
    return _target_ref(spark, cur, statement)[0]


def _target_ref(spark: SparkSession, cur: Cursor, statement: str) -> tuple[str, TableRef]:
    ref = cur.table()
    if ref.version is not None or ref.timestamp is not None:
        raise sql_error(cur.text, ref.offset, f"{statement} works on the current table: remove the @ suffix")
    return resolve(spark, ref, cur.text), ref


def optimize(spark: SparkSession, cur: Cursor) -> DataFrame:
    """OPTIMIZE <table> [FULL] [WHERE <partition predicate>] [ZORDER BY (col, …) | col, …]"""
    from dvlake.commands.maintenance import optimize as run

    form = "OPTIMIZE delta.`<path>` [FULL] [WHERE <partition predicate>] [ZORDER BY (col, …)]"
    cur.expect("OPTIMIZE")
    path = _target(spark, cur, "OPTIMIZE")
    full = cur.accept("FULL")  # a clustered table: recluster every file, not only those no OPTIMIZE clustered yet
    where = cur.condition(("ZORDER", "BY"))[0] if cur.accept("WHERE") else None
    zorder: list[str] = []
    if cur.accept("ZORDER", "BY"):
        if cur.peek() is not None and cur.peek().text == "(":  # type: ignore[union-attr]
            zorder = [column_name(cur.text, t, o) for t, o in cur.paren_list()]
        else:
            text, start = cur.span_until()
            zorder = [column_name(cur.text, part.strip(), start) for part in text.split(",")]
        if not zorder:
            raise cur.error("ZORDER BY needs at least one column", parse=True)
    cur.expect_end(form)
    return run.run(spark, path, where, zorder, full=full)


def reorg(spark: SparkSession, cur: Cursor) -> DataFrame:
    """REORG TABLE <table> [WHERE <partition predicate>] APPLY (PURGE)"""
    from dvlake.commands.maintenance import reorg as run

    form = "REORG TABLE delta.`<path>` [WHERE <partition predicate>] APPLY (PURGE)"
    cur.expect("REORG", "TABLE", form=form)
    path = _target(spark, cur, "REORG")
    where = cur.condition(("APPLY",))[0] if cur.accept("WHERE") else None
    cur.expect("APPLY", form=form)
    start = cur.offset()
    items = [t.upper() for t, _ in cur.paren_list()]
    if items != ["PURGE"]:
        raise sql_error(cur.text, start, f"only APPLY (PURGE) is supported by dvlake, got APPLY ({', '.join(items)})")
    cur.expect_end(form)
    return run.run(spark, path, where)


def vacuum(spark: SparkSession, cur: Cursor) -> DataFrame:
    """VACUUM <table> [LITE | FULL] [RETAIN n HOURS] [DRY RUN], the modifiers in any order."""
    from dvlake.commands.maintenance.vacuum import vacuum as run

    form = "VACUUM delta.`<path>` [LITE|FULL] [RETAIN n HOURS] [DRY RUN]"
    cur.expect("VACUUM")
    path = _target(spark, cur, "VACUUM")
    mode: str | None = None
    hours: float | None = None
    dry = False
    while not cur.done():
        if cur.at("LITE") or cur.at("FULL"):
            mode = cur.next().text.upper()
        elif cur.accept("RETAIN"):
            hours = cur.number("RETAIN")
            if not cur.accept("HOURS"):
                raise cur.error(f"cannot parse VACUUM: RETAIN takes a number of HOURS; the form is {form}", parse=True)
        elif cur.accept("DRY", "RUN"):
            dry = True
        else:
            raise cur.error(f"cannot parse VACUUM here; the form is {form}", parse=True)
    result = run(spark, path, hours, mode, dry)
    paths = result.paths if dry else [result.table_root]
    return spark.createDataFrame([(p,) for p in paths], "path string")


def restore(spark: SparkSession, cur: Cursor) -> DataFrame:
    """RESTORE [TABLE] <table> [TO] VERSION AS OF n | TIMESTAMP AS OF <expression>"""
    from dvlake.api import restore_frame
    from dvlake.commands.maintenance.restore import restore as run

    form = "RESTORE [TABLE] delta.`<path>` [TO] VERSION AS OF <n> | TIMESTAMP AS OF <timestamp>"
    cur.expect("RESTORE")
    cur.accept("TABLE")
    path, ref = _target_ref(spark, cur, "RESTORE")
    cur.accept("TO")
    if cur.accept("VERSION", "AS", "OF"):
        version = cur.integer("VERSION AS OF")
        cur.expect_end(form)
        metrics = run(spark, path, version=version)
    elif cur.accept("TIMESTAMP", "AS", "OF"):
        text, start = cur.span_until()
        if not text.strip():
            raise cur.error("TIMESTAMP AS OF needs a timestamp", parse=True)
        value = literal_value(spark, parse_expression(cur.text, text, start))
        metrics = run(spark, path, timestamp=value)
    else:
        raise cur.error(f"expected VERSION AS OF or TIMESTAMP AS OF; the form is {form}", parse=True)
    refresh_catalog_columns(spark, ref)  # the restored version may have other columns
    return restore_frame(spark, metrics)


def describe(spark: SparkSession, cur: Cursor) -> DataFrame:
    """DESCRIBE HISTORY <table> [LIMIT n] | DESCRIBE DETAIL <table>"""
    from dvlake.api import DeltaTable

    cur.next()  # DESCRIBE / DESC
    if cur.accept("HISTORY"):
        path = _target(spark, cur, "DESCRIBE HISTORY")
        limit = cur.integer("LIMIT") if cur.accept("LIMIT") else None
        cur.expect_end("DESCRIBE HISTORY delta.`<path>` [LIMIT n]")
        return DeltaTable(spark, path).history(limit)
    cur.expect("DETAIL")
    path = _target(spark, cur, "DESCRIBE DETAIL")
    cur.expect_end("DESCRIBE DETAIL delta.`<path>`")
    return DeltaTable(spark, path).detail()


def generate(spark: SparkSession, cur: Cursor) -> DataFrame:
    """GENERATE <mode> FOR TABLE <table>"""
    from dvlake.commands.maintenance.generate import generate as run

    form = "GENERATE symlink_format_manifest FOR TABLE delta.`<path>`"
    cur.expect("GENERATE")
    mode = cur.next().text
    cur.expect("FOR", "TABLE", form=form)
    path = _target(spark, cur, "GENERATE")
    cur.expect_end(form)
    run(path, mode)
    return _empty(spark)


def convert(spark: SparkSession, cur: Cursor) -> DataFrame:
    """CONVERT TO DELTA parquet.`<path>` [NO STATISTICS] [PARTITIONED BY (col type, …)]"""
    from dvlake.api import session_defaults
    from dvlake.commands.ddl.convert import convert_to_delta

    form = "CONVERT TO DELTA parquet.`<path>` [NO STATISTICS] [PARTITIONED BY (col type, …)]"
    cur.expect("CONVERT", "TO", "DELTA", form=form)
    ref = cur.table(providers=None)
    if ref.path is None:
        raise sql_error(cur.text, ref.offset, "dvlake converts Parquet directories by path: CONVERT TO DELTA parquet.`<path>`")
    collect_stats = not cur.accept("NO", "STATISTICS")
    partition_ddl = None
    if cur.accept("PARTITIONED", "BY"):
        partition_ddl = ", ".join(t for t, _ in cur.paren_list())
    cur.expect_end(form)
    convert_to_delta(spark, ref.path, partition_ddl, provider=ref.provider, collect_stats=collect_stats,
                     session_defaults=session_defaults(spark))
    return _empty(spark)


def alter(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """ALTER TABLE <table> UNSET TBLPROPERTIES [IF EXISTS] (keys) | DROP FEATURE name [TRUNCATE HISTORY] |
    ADD CONSTRAINT name CHECK (expr) | DROP CONSTRAINT [IF EXISTS] name | ALTER [COLUMN] …;
    None for other ALTER forms (sqlglot's AST handles them) and for tables that are not Delta tables."""
    cur.expect("ALTER", "TABLE")
    try:
        ref = cur.table()
    except DeltaSqlError:
        return None  # not a table name dvlake reads: Spark (or the AST path) reports it
    if not (cur.at("UNSET", "TBLPROPERTIES") or cur.at("DROP", "FEATURE") or cur.at("ADD", "CONSTRAINT")
            or cur.at("DROP", "CONSTRAINT") or cur.at("ALTER") or cur.at("CLUSTER", "BY") or cur.at("CHANGE")):
        return None
    path = _delta_path(spark, ref, cur)
    if path is None:
        return None
    if cur.accept("CLUSTER", "BY"):
        return _cluster_by(spark, cur, path)
    if cur.at("ALTER") or cur.at("CHANGE"):
        return _alter_column(spark, cur, path, ref)
    if cur.at("ADD", "CONSTRAINT") or cur.at("DROP", "CONSTRAINT"):
        _constraint(spark, cur, path)
        refresh_catalog_columns(spark, ref)
        return _empty(spark)
    if cur.accept("UNSET", "TBLPROPERTIES"):
        from dvlake.commands.ddl.properties import unset_properties

        if_exists = cur.accept("IF", "EXISTS")
        keys = [_key(t) for t, _ in cur.paren_list()]
        cur.expect_end("ALTER TABLE delta.`<path>` UNSET TBLPROPERTIES [IF EXISTS] (key, …)")
        unset_properties(path, keys, if_exists=if_exists)
        return _empty(spark)
    if cur.accept("DROP", "FEATURE"):
        from dvlake.commands.ddl.drop_feature import drop_feature

        name = _key(cur.next().text)
        truncate = cur.accept("TRUNCATE", "HISTORY")
        cur.expect_end("ALTER TABLE delta.`<path>` DROP FEATURE <name> [TRUNCATE HISTORY]")
        drop_feature(spark, path, name, truncate_history=truncate)
        return _empty(spark)
    return None


def _cluster_by(spark: SparkSession, cur: Cursor, path: str) -> DataFrame:
    """ALTER TABLE … CLUSTER BY (col, …) | NONE (the table and CLUSTER BY already read): liquid clustering's columns."""
    from dvlake.commands.ddl.clustering import alter_cluster_by

    form = "ALTER TABLE delta.`<path>` CLUSTER BY (col, …) | NONE"
    columns = [] if cur.accept("NONE") else [column_name(cur.text, t, o) for t, o in cur.paren_list()]
    cur.expect_end(form)
    alter_cluster_by(path, columns)
    return _empty(spark)


def _alter_column(spark: SparkSession, cur: Cursor, path: str, ref: TableRef) -> DataFrame | None:
    """ALTER [COLUMN] … (the table already read); None for SET/DROP DEFAULT, which the AST path answers."""
    from dvlake.commands.ddl.alter_column import alter_columns
    from dvlake.sqlfront.alter_column import read_change_column, read_changes

    changes = read_change_column(spark, cur) if cur.at("CHANGE") else read_changes(spark, cur)
    if changes is None:
        return None
    alter_columns(path, changes)
    refresh_catalog_columns(spark, ref)
    return _empty(spark)


def _constraint(spark: SparkSession, cur: Cursor, path: str) -> None:
    """ADD CONSTRAINT name CHECK (expr) | DROP CONSTRAINT [IF EXISTS] name (the table already read)."""
    from dvlake.commands.ddl.constraints import add_constraint, drop_constraint

    if cur.accept("DROP", "CONSTRAINT"):
        if_exists = cur.accept("IF", "EXISTS")
        name = _key(cur.next().text)
        cur.expect_end("ALTER TABLE delta.`<path>` DROP CONSTRAINT [IF EXISTS] <name>")
        drop_constraint(spark, path, name, if_exists=if_exists)
        return
    form = "ALTER TABLE delta.`<path>` ADD CONSTRAINT <name> CHECK (<expression>)"
    cur.expect("ADD", "CONSTRAINT")
    name = _key(cur.next().text)
    cur.expect("CHECK", form=form)
    start = cur.offset()
    opening = cur.next()
    if opening.token_type != TokenType.L_PAREN:
        raise sql_error(cur.text, start, f"expected ( after CHECK; the form is {form}", parse=True)
    pieces: list[str] = []
    depth = 0
    while True:
        tok = cur.next()
        if tok.token_type == TokenType.R_PAREN and depth == 0:
            break
        depth += (tok.token_type == TokenType.L_PAREN) - (tok.token_type == TokenType.R_PAREN)
        pieces.append(cur.text[tok.start:tok.end + 1])
    cur.expect_end(form)
    if not pieces:
        raise sql_error(cur.text, start, "CHECK needs an expression", parse=True)
    # delta-spark keeps the expression as its tokens joined by single spaces (``a>0`` is stored as ``a > 0``)
    add_constraint(spark, path, name, " ".join(pieces))


def show_properties(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """SHOW TBLPROPERTIES <table> [(key)]: the table's properties as (key, value) rows."""
    from dvlake.commands.writes.write import load

    cur.expect("SHOW", "TBLPROPERTIES")
    path = _delta_path(spark, cur.table(), cur)
    if path is None:
        return None
    conf = load(path).configuration
    if not cur.done():
        keys = [_key(t) for t, _ in cur.paren_list()]
        conf = {k: conf.get(k, f"Table {path} does not have property: {k}") for k in keys}
    cur.expect_end("SHOW TBLPROPERTIES delta.`<path>` [(key)]")
    return spark.createDataFrame(sorted(conf.items()), "key string, value string")


def show_partitions(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """SHOW PARTITIONS <table> [PARTITION (col = value, …)]: as delta-spark 4.3 answers it, one typed column per
    partition column and one row per distinct partition of the live files (read from the log, sorted)."""
    from pyspark.sql import functions as F

    from dvlake.commands.writes.write import load
    from dvlake.errors import DeltaAnalysisException
    from dvlake.log.schema import physical_name
    from dvlake.spark.layout import logical_struct

    form = "SHOW PARTITIONS delta.`<path>` | name [PARTITION (col = value, …)]"
    cur.expect("SHOW", "PARTITIONS", form=form)
    try:
        ref = cur.table()
    except DeltaSqlError:
        return None
    path = _delta_path(spark, ref, cur)
    if path is None:
        return None
    spec: list[tuple[str, object]] = []
    if cur.accept("PARTITION"):
        for item, at in cur.paren_list():
            name, eq, value = item.partition("=")
            if not eq or not name.strip():
                raise sql_error(cur.text, at, f"expected col = value in PARTITION (…), got {item!r}", parse=True)
            spec.append((_key(name), literal_value(spark, parse_expression(cur.text, value, at + len(name) + 1))))
    cur.expect_end(form)
    snapshot = load(path)
    columns = list(snapshot.metadata.partition_columns)
    if not columns:
        raise DeltaAnalysisException(f"SHOW PARTITIONS needs a partitioned table; {path} is not partitioned",
                                     error_class="DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_TABLE")
    lowered = {c.lower(): c for c in columns}
    for name, _ in spec:
        if name.lower() not in lowered:
            raise DeltaAnalysisException(f"{name!r} in the PARTITION clause of SHOW PARTITIONS is not a partition column "
                                         f"of {path} (partition columns: {', '.join(columns)})",
                                         error_class="DELTA_SHOW_PARTITION_IN_NON_PARTITIONED_COLUMN")
    struct = logical_struct(snapshot.schema)
    fields = [next(f for f in struct.fields if f.name.lower() == c.lower()) for c in columns]
    keys = [physical_name(next(f for f in snapshot.schema["fields"] if f["name"].lower() == c.lower()),
                          snapshot.column_mapping_mode) for c in columns]
    distinct = sorted({tuple(a.partition_values.get(k) for k in keys) for a in snapshot.add_files()}, key=repr)
    raw = spark.createDataFrame(distinct, ", ".join(f"`p{i}` string" for i in range(len(keys))))
    df = raw.select(*[F.col(f"p{i}").cast(f.dataType).alias(f.name) for i, f in enumerate(fields)])
    for column, wanted in spec:
        df = df.filter(F.col(f"`{lowered[column.lower()]}`") == F.lit(wanted))
    return df.orderBy(*[F.col(f"`{f.name}`") for f in fields])  # in the columns' own order (9 before 10)


def _delta_path(spark: SparkSession, ref: TableRef, cur: Cursor) -> str | None:
    if ref.path is not None:
        if ref.version is not None or ref.timestamp is not None:
            raise sql_error(cur.text, ref.offset, "this statement works on the current table: remove the @ suffix")
        return ref.path
    assert ref.name is not None
    return maybe_catalog_location(spark, ref.name)


def _key(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"`":
        return text[1:-1]
    return text


def truncate(spark: SparkSession, cur: Cursor) -> DataFrame | None:
    """TRUNCATE TABLE <table>: every row removed in one TRUNCATE commit (delta-spark's); None for other tables."""
    from dvlake.commands.writes.truncate import truncate as run

    form = "TRUNCATE TABLE delta.`<path>` | name"
    cur.expect("TRUNCATE", "TABLE", form=form)
    try:
        ref = cur.table()
    except DeltaSqlError:
        return None  # not a table name dvlake reads: Spark reports it
    path = _delta_path(spark, ref, cur)
    if path is None:
        return None
    if cur.at("PARTITION"):
        raise cur.error("TRUNCATE TABLE … PARTITION is not supported on Delta tables (delta-spark refuses it too); use "
                        "DELETE FROM <table> WHERE <partition column> = <value>")
    cur.expect_end(form)
    run(path)
    return _empty(spark)


# first word(s) → reader; ALTER, SHOW and TRUNCATE return None for tables that are not Delta tables
READERS: dict[str, Callable[[SparkSession, Cursor], DataFrame | None]] = {
    "OPTIMIZE": optimize, "REORG": reorg, "VACUUM": vacuum, "RESTORE": restore, "GENERATE": generate,
    "CONVERT": convert, "TRUNCATE": truncate,
}
