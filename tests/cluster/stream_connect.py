"""Structured Streaming with ``format("delta")`` over Spark Connect, run in a subprocess (a Connect session switches
PySpark to Connect mode for the whole process); ``test_stream_connect.py`` asserts on the JSON it writes.

One pipeline: a DV table read as a stream (the reader runs in the server's Python workers) into a Delta table (the
sink's ``foreachBatch`` function is pickled to the server and commits there), ``availableNow``, twice, so the second
run shows the restarted query resuming from its checkpoint with the same query id. With ``source_only_run`` (a server
whose Python lacks dvlake, where the source must fail) only the source, into Spark's Parquet sink. Each step reports
its result or its error, so a failure names the step.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _ids(df: Any) -> list[int]:
    return sorted(int(r[0]) for r in df.collect())


def run(spark: Any, root: Path, source_only_run: bool = False) -> dict[str, Any]:
    from dvlake import DeltaTable
    from dvlake.log.snapshot import Snapshot

    out: dict[str, Any] = {}
    bronze, silver, chk = str(root / "bronze"), str(root / "silver"), str(root / "chk")

    def step(name: str, fn: Callable[[], Any]) -> None:
        try:
            out[name] = {"ok": fn()}
        except Exception as e:  # reported, not raised: the test says which step failed and why
            out[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}

    def started(run: Callable[[], Any]) -> None:
        for attempt in range(3):
            try:
                run()
                return
            except Exception as e:
                # Spark gives a new streaming Python worker (source runner, foreachBatch worker) a hard-coded 10 s to
                # start and connect back; on a loaded machine that can fail before any dvlake code runs. Restarting
                # from the checkpoint is exactly what the query supports (and exactly once)
                if "failed to connect back" not in str(e) or attempt == 2:
                    raise
                time.sleep(10)

    def pipeline() -> Any:
        started(lambda: spark.readStream.format("delta").option("maxFilesPerTrigger", 1).load(bronze)
                .writeStream.format("delta").option("checkpointLocation", chk).trigger(availableNow=True).start(silver)
                .awaitTermination())
        return [_ids(spark.read.format("delta").load(silver)), _ids(spark.read.format("delta").load(bronze))]

    def bronze_table() -> None:
        spark.range(0, 20, numPartitions=2).write.format("delta").option("delta.enableDeletionVectors", "true").save(bronze)
        DeltaTable.forPath(spark, bronze).delete("id % 4 = 0")  # the snapshot's files carry DVs

    def source_only() -> Any:
        """The source alone (into Spark's Parquet sink): the reader runs in the server's Python workers."""
        bronze_table()
        target = str(root / "parquet-out")
        started(lambda: spark.readStream.format("delta").load(bronze).writeStream.format("parquet")
                .option("checkpointLocation", str(root / "chk-parquet")).trigger(availableNow=True).start(target)
                .awaitTermination())
        return _ids(spark.read.parquet(target))

    if source_only_run:
        step("source_only", source_only)
        return out

    def first_run() -> Any:
        bronze_table()
        return pipeline()

    step("first_run", first_run)

    def second_run() -> Any:
        spark.range(20, 25).write.format("delta").mode("append").save(bronze)
        rows = pipeline()
        snap = Snapshot.load(silver)
        ids = {h["operationParameters"]["queryId"] for h in snap.history() if h["operation"] == "STREAMING UPDATE"}
        return {"rows": rows, "query_ids": len(ids), "txn_ids": sorted(snap.txns) == sorted(ids)}

    step("second_run", second_run)

    def without_checkpoint() -> Any:
        stream = spark.readStream.format("delta").load(bronze)
        try:
            q = stream.writeStream.format("delta").trigger(availableNow=True).start(str(root / "other"))
        except Exception as e:
            return f"{type(e).__name__}: {e}"
        q.stop()
        return None

    step("without_checkpoint", without_checkpoint)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--remote", required=True)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--refuse-jar-artifacts", action="store_true",
                    help="for the whole session, jars cannot be added as artifacts (a server that refuses them, and "
                         "has dvlake's jar itself): first a native DV read (faces_connect.native_without_artifacts), "
                         "reported under 'refused', then the streams")
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    import dvlake
    from tests.cluster.faces_connect import native_without_artifacts, refuse_jar_artifacts

    tried = refuse_jar_artifacts() if args.refuse_jar_artifacts else None
    spark = dvlake.configure_spark(SparkSession.builder.remote(args.remote)).getOrCreate()
    spark.addArtifacts(args.artifact, pyfile=True)
    refused: dict[str, Any] = {}
    if tried is not None:
        try:
            refused = native_without_artifacts(spark, Path(args.work_dir), tried)
        except Exception as e:  # reported, not raised: the streams still run, the test names what failed
            failed = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            refused = dict.fromkeys(("native_scan", "rows", "jar_artifacts_tried"), failed)
    results = run(spark, Path(args.work_dir))
    if tried is not None:
        results["refused"] = {**refused, "jar_artifacts_tried_by_the_end": {"ok": list(tried)}}
    spark.stop()
    Path(args.out).write_text(json.dumps(results))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
