"""The scenarios run in every deployment mode: local[2], a standalone cluster, Spark Connect.

Each scenario returns plain JSON-able data (sorted rows, metrics), so the results of a mode run
in a subprocess can be compared with local mode's and with an oracle computed by plain Spark
(no dvlake) on the same engine. Run as a script, this module connects to a cluster or a Connect
server, runs everything and writes the results as JSON:

    python -m tests.cluster.scenarios --master spark://127.0.0.1:7077 --py-files dvlake.zip --out r.json
    python -m tests.cluster.scenarios --remote sc://127.0.0.1:15002 --artifact dvlake.zip --out r.json

A new command (UPDATE, MERGE, OPTIMIZE, …) adds its scenario here: a function in ``SCENARIOS``
that runs the command on the shared table and returns what it read back (see CONTRIBUTING.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

DV = {"delta.enableDeletionVectors": "true"}
#: DELETEs of the shared scenario table, in commit order (versions 2.. of the table).
DELETES: list[tuple[str, str, Callable[[list[Any]], bool]]] = [  # (how, condition, the same in Python on [id, v, s, p])
    ("api", "v % 7 = 3", lambda r: r[1] % 7 == 3),                             # DVs on every file
    ("sql", "id < 300 AND id % 2 = 0", lambda r: r[0] < 300 and r[0] % 2 == 0),  # DVs updated (ORed into the old)
    ("cow", "id % 11 = 0", lambda r: r[0] % 11 == 0),                          # copy-on-write from a DV scan
    ("sql", "p = '1'", lambda r: r[3] == "1"),                                 # partition-only: whole files removed
]
DV_PERSISTENT = "spark.databricks.delta.delete.deletionVectors.persistent"
SHARED_TABLE = "dv-with-columnmapping"  # a delta-spark table: column mapping, partitions, DVs


def canonical(value: Any) -> Any:
    """A JSON-able, order-independent form of a Spark value (Row, map, date, decimal)."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple):
        return [canonical(v) for v in value]
    if isinstance(value, dt.date | dt.datetime | decimal.Decimal):
        return str(value)
    return value


def rows(df: Any) -> list[Any]:
    """All rows of ``df``, canonical and sorted (the scenarios' tables are small)."""
    return sorted((canonical(r) for r in df.collect()), key=lambda r: json.dumps(r))


def source(spark: Any, start: int, end: int) -> Any:
    """The scenario table's rows ``[start, end)``: id, a string, a partition column (plain Spark)."""
    from pyspark.sql import functions as F

    return (spark.range(start, end, numPartitions=4)
            .select("id", (F.col("id") * 3).alias("v"), F.concat(F.lit("s"), F.col("id").cast("string")).alias("s"),
                    (F.col("id") % 2).cast("string").alias("p")))


def oracle(deletes: int, end: int = 2500) -> list[Any]:
    """The table's rows after the first ``deletes`` DELETEs, computed in plain Python (no Spark, no dvlake):
    the rows ``source`` generates, minus those the DELETE conditions match."""
    out = [[i, i * 3, f"s{i}", str(i % 2)] for i in range(end)]
    for _, _, matches in DELETES[:deletes]:
        out = [r for r in out if not matches(r)]
    return sorted(out, key=lambda r: json.dumps(r))


def plan_text(df: Any) -> str:
    """``df.explain(True)`` as text, on classic and Connect sessions alike (both print it), plan ids blanked."""
    import contextlib
    import io
    import re

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain(True)
    return re.sub(r"#\d+L?|plan_id=\d+", "#", buf.getvalue())


def _history(spark: Any, path: str) -> list[Any]:
    from dvlake import DeltaTable

    out = []
    for r in DeltaTable.forPath(spark, path).history().collect():
        metrics = {k: v for k, v in (r["operationMetrics"] or {}).items() if not k.endswith(("TimeMs", "Bytes"))}
        out.append([r["version"], r["operation"], canonical(r["operationParameters"]), canonical(metrics)])
    return sorted(out)


def _detail(spark: Any, path: str) -> dict[str, Any]:
    from dvlake import DeltaTable

    [row] = DeltaTable.forPath(spark, path).detail().collect()
    keep = ("format", "partitionColumns", "numFiles", "properties", "minReaderVersion", "minWriterVersion",
            "tableFeatures", "statistics")
    return {k: canonical(row[k]) for k in keep}


def scenario_table(spark: Any, root: Path) -> dict[str, Any]:
    """Create, append, four DELETEs (DV, DV update, copy-on-write, partition-only), then read it all back."""
    import dvlake
    from dvlake import DeltaTable

    path = str(root / "events")
    out: dict[str, Any] = {}
    dvlake.write(source(spark, 0, 2000), path, partitionBy=["p"], properties=DV)
    dvlake.write(source(spark, 2000, 2500), path, mode="append")
    out["written"] = {"rows": rows(dvlake.read(spark, path)), "oracle": oracle(0)}
    for how, condition, _ in DELETES:
        if how == "api":
            DeltaTable.forPath(spark, path).delete(condition)
        elif how == "sql":
            dvlake.sql(spark, f"DELETE FROM delta.`{path}` WHERE {condition}").collect()
        else:
            spark.conf.set(DV_PERSISTENT, "false")
            try:
                DeltaTable.forPath(spark, path).delete(condition)
            finally:
                spark.conf.unset(DV_PERSISTENT)
        if how == "sql" and "detail_with_dvs" not in out:
            out["detail_with_dvs"] = _detail(spark, path)  # after the two DV DELETEs
    out["latest"] = {"rows": rows(dvlake.read(spark, path)), "oracle": oracle(len(DELETES))}
    # the read went through the jar (dvlake adds it to the session): a silent fallback to the pure-Python path would
    # give the same rows, so the plan must name the native scan. Version 3: the table after the two DV DELETEs (the
    # copy-on-write one then rewrote every file without a DV, and files without a DV need no native scan)
    out["native_scan"] = "DvlakeParquet" in plan_text(dvlake.read(spark, path, version=3))
    out["filtered"] = {"rows": rows(dvlake.read(spark, path, condition="id >= 1000 AND v % 2 = 0")),
                       "oracle": [r for r in oracle(len(DELETES)) if r[0] >= 1000 and r[1] % 2 == 0]}
    # versions 0 (create), 1 (append), 2.. (one per DELETE)
    out["time_travel"] = {str(v): {"rows": rows(dvlake.read(spark, path, version=v)), "oracle": oracle(v - 1)}
                          for v in (1, 2, 3, 4)}
    out["history"] = _history(spark, path)
    out["sql_history"] = [canonical(r) for r in dvlake.sql(spark, f"DESCRIBE HISTORY delta.`{path}` LIMIT 2")
                          .select("version", "operation").collect()]
    out["detail"] = _detail(spark, path)
    # one SQL query over two versions of the table (dvlake.sql hands each to Spark as a DataFrame argument)
    out["sql_join_versions"] = canonical(dvlake.sql(
        spark, f"SELECT count(*) AS n, sum(a.v) AS s FROM delta.`{path}` VERSION AS OF 1 a JOIN delta.`{path}@v4` b "
               "ON a.id = b.id").first())
    return out


def scenario_shared_table(spark: Any, testdata: Path | None) -> dict[str, Any] | None:
    """A delta-spark-written DV table (column mapping, partitions) read at its latest version and version 1."""
    if testdata is None:
        return None
    import dvlake

    path = str(testdata / SHARED_TABLE)
    return {"latest": rows(dvlake.read(spark, path)), "v1": rows(dvlake.read(spark, path, version=1))}


def scenario_row_tracking(spark: Any, root: Path) -> dict[str, Any]:
    """Row tracking: ids assigned, kept by a DV UPDATE and OPTIMIZE, read as ``_metadata.row_id`` (a user path whose
    per-file table is built on the driver and joined on executors)."""
    import dvlake
    from dvlake import DeltaTable

    path = str(root / "tracked")
    dvlake.write(source(spark, 0, 300), path, properties={**DV, "delta.enableRowTracking": "true"})
    table = DeltaTable.forPath(spark, path)
    before = rows(dvlake.read(spark, path, row_tracking=True).select("id", "_metadata.row_id"))
    table.update("id % 10 = 0", {"v": "v + 1"})
    table.optimize().executeCompaction()
    after = rows(dvlake.read(spark, path, row_tracking=True).select("id", "_metadata.row_id"))
    return {"before": before, "after": after}


def scenario_constraints(spark: Any, root: Path) -> dict[str, Any]:
    """CHECK constraints: ADD CONSTRAINT counts violating live rows on executors, a violating append and a violating
    MERGE fail inside their write jobs with delta-spark's error and commit nothing, valid rows go in."""
    import dvlake
    from dvlake import DeltaTable
    from dvlake.sql import sql

    path = str(root / "checked")
    dvlake.write(source(spark, 0, 200), path, properties=DV)
    sql(spark, f"ALTER TABLE delta.`{path}` ADD CONSTRAINT small_v CHECK (v < 1000)")
    refused: list[Any] = []
    bad = source(spark, 200, 201).selectExpr("id", "v + 5000 AS v", "s", "p")
    for run in (lambda: dvlake.write(bad, path, mode="append"),
                lambda: DeltaTable.forPath(spark, path).alias("t").merge(bad.alias("u"), "t.id = u.id")
                .whenNotMatchedInsertAll().execute()):
        try:
            run()
            refused.append(None)
        except Exception as e:  # the scenario reports the class and the values line it got
            refused.append([getattr(e, "error_class", None), [line for line in str(e).splitlines() if " - v : " in line]])
    DeltaTable.forPath(spark, path).update("id < 10", {"v": "v + 1"})
    return {"refused": refused, "rows": rows(dvlake.read(spark, path)), "version": dvlake.DeltaTable.forPath(spark, path)
            .history(1).collect()[0]["version"]}


SCENARIOS: dict[str, Callable[[Any, Path, Path | None], Any]] = {
    "table": lambda spark, root, testdata: scenario_table(spark, root),
    "constraints": lambda spark, root, testdata: scenario_constraints(spark, root),
    "row_tracking": lambda spark, root, testdata: scenario_row_tracking(spark, root),
    "shared_table": lambda spark, root, testdata: scenario_shared_table(spark, testdata),
}


def run_all(spark: Any, root: Path, testdata: Path | None) -> dict[str, Any]:
    """Every scenario; a failing one records its error (and traceback) instead of stopping the others."""
    results: dict[str, Any] = {}
    for name, fn in SCENARIOS.items():
        try:
            results[name] = {"ok": fn(spark, root / name, testdata)}
        except Exception as e:  # reported to the test, which fails with it
            results[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    return results


def prepare_without_dvlake(spark: Any, root: Path) -> str:
    """(With dvlake on executors) a table with DVs for ``without_dvlake`` to use."""
    import dvlake

    path = str(root / "no-dvlake")
    dvlake.write(source(spark, 0, 400), path, partitionBy=["p"], properties=DV)
    dvlake.DeltaTable.forPath(spark, path).delete("id % 5 = 0")
    return path


def _error(fn: Callable[[], Any]) -> dict[str, str] | None:
    try:
        fn()
    except Exception as e:
        return {"type": type(e).__name__, "module": type(e).__module__, "message": str(e)[:4000]}
    return None


def without_dvlake(spark: Any, root: Path, dv_table: str) -> dict[str, Any]:
    """On executors that cannot import dvlake: reading a DV table whose DVs are decoded on executors and a
    DELETE must fail loudly, and the table must stay at its last committed version; a table without DVs,
    and one whose DVs are small enough for the driver to decode, still read (no Python on executors)."""
    import dvlake
    from dvlake.config import DML_DRIVER_MARK_ROWS
    from dvlake.log.snapshot import Snapshot

    plain = str(root / "plain")
    dvlake.write(source(spark, 0, 400), plain, partitionBy=["p"], properties=DV)  # a plain Parquet write
    before = Snapshot.load(dv_table).version
    out: dict[str, Any] = {"version_before": before, "plain_read_count": dvlake.read(spark, plain).count()}
    # small DVs are decoded on the driver (dvlake.spark.dv_words): that read needs no Python on executors
    out["small_dv_read_count"] = dvlake.read(spark, dv_table).count()
    from dvlake.spark import dv_words, native

    saved, dv_words.DRIVER_DECODE_MAX_ROWS = dv_words.DRIVER_DECODE_MAX_ROWS, 0  # large DVs: decoded on executors
    try:
        # the native scan (the jar reaches the executors through ADD JAR) needs no Python there at all
        out["native_used"] = native.enabled(spark)
        out["native_dv_read_count"] = dvlake.read(spark, dv_table).count()
        # a stream of the DV table: on a classic session the JVM source reads its batches with the native scan
        counts: list[int] = []

        def stream() -> None:
            (dvlake.read_stream(spark, dv_table).writeStream.foreachBatch(lambda df, _: counts.append(df.count()))
             .option("checkpointLocation", str(root / "no-dvlake-stream")).trigger(availableNow=True).start()
             .awaitTermination())

        out["native_stream_error"] = _error(stream)
        out["native_stream_count"] = sum(counts)
        spark.conf.set(native.SETTING, "false")  # the pure-Python path decodes on executors: it must fail loudly
        out["read_error"] = _error(lambda: dvlake.read(spark, dv_table).count())
    finally:
        dv_words.DRIVER_DECODE_MAX_ROWS = saved
        spark.conf.unset(native.SETTING)
    # a DELETE whose DVs are built on executors (the driver's bound set to 0 rows, the pure-Python row-index scan)
    spark.conf.set(DML_DRIVER_MARK_ROWS, "0")
    spark.conf.set(native.SETTING, "false")
    try:
        out["delete_error"] = _error(lambda: dvlake.DeltaTable.forPath(spark, dv_table).delete("id % 3 = 0"))
    finally:
        spark.conf.unset(DML_DRIVER_MARK_ROWS)
        spark.conf.unset(native.SETTING)
    out["version_after"] = Snapshot.load(dv_table).version
    out["log_files"] = sorted(os.listdir(os.path.join(dv_table, "_delta_log")))
    # a small DELETE builds its DVs on the driver and finds rows with the native scan: no Python on executors
    out["small_delete_error"] = _error(lambda: dvlake.DeltaTable.forPath(spark, dv_table).delete("id % 3 = 0"))
    out["small_delete_read_count"] = dvlake.read(spark, dv_table).count()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--master", help="spark://host:port of a standalone cluster")
    ap.add_argument("--remote", help="sc://host:port of a Spark Connect server")
    ap.add_argument("--py-files", help="dvlake zip shipped with spark.submit.pyFiles (classic)")
    ap.add_argument("--artifact", help="dvlake zip shipped with spark.addArtifacts(pyfile=True) (Connect)")
    ap.add_argument("--executor-memory", default="512m")
    ap.add_argument("--without-dvlake", action="store_true",
                    help="then start a second application whose executors lack dvlake (classic only)")
    ap.add_argument("--testdata")
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    import dvlake  # noqa: F401 - the driver runs the checkout; executors import the shipped zip

    root = Path(args.work_dir)
    testdata = Path(args.testdata) if args.testdata else None
    results: dict[str, Any] = {}
    if args.remote:
        spark = SparkSession.builder.remote(args.remote).getOrCreate()
        if args.artifact:
            spark.addArtifacts(args.artifact, pyfile=True)
        results["scenarios"] = run_all(spark, root, testdata)
        spark.stop()
    else:
        spark = cluster_session(args.master, args.py_files, args.executor_memory)
        results["scenarios"] = run_all(spark, root, testdata)
        dv_table = prepare_without_dvlake(spark, root) if args.without_dvlake else None
        spark.stop()
        if dv_table is not None:
            # a second application: same cluster, executors without dvlake (nothing shipped)
            spark = cluster_session(args.master, None, args.executor_memory, app_name="dvlake-without-dvlake")
            try:
                results["without_dvlake"] = without_dvlake(spark, root, dv_table)
            except Exception as e:
                results["without_dvlake"] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            spark.stop()
    Path(args.out).write_text(json.dumps(results))


def cluster_session(master: str, py_files: str | None, executor_memory: str, app_name: str = "dvlake-cluster-tests") -> Any:
    """A classic session on a standalone cluster; executors run PYSPARK_PYTHON (set by the caller) and
    import dvlake from ``py_files`` (``spark.submit.pyFiles``), the way a user ships it."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.executor.memory", executor_memory)
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4").config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true"))
    # always set: the builder's options are shared by every builder in the process (a class attribute)
    builder = builder.config("spark.submit.pyFiles", py_files or "")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # classic only: the test harness's session, not a user path
    return spark


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
