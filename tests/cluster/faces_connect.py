"""The delta-spark faces over Spark Connect, run in a subprocess (a Connect session switches PySpark's
functions to Connect mode for the whole process). Each step reports its result or its error, so a
failure names the step; ``test_faces_connect.py`` asserts on the JSON. The last step reads a stream on this
artifacts-only server, which must fail clearly (``test_stream_connect.py`` asserts on it): one client per server.
The jar-artifacts refusal (``refuse_jar_artifacts``, ``native_without_artifacts``) runs in ``stream_connect.py``'s
client, on the server that has dvlake's jar.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cluster.scenarios import plan_text


def _ids(df: Any) -> list[int]:
    return sorted(int(r[0]) for r in df.collect())


def run(spark: Any, root: Path) -> dict[str, Any]:
    import dvlake
    from dvlake import DeltaTable

    out: dict[str, Any] = {}
    path = str(root / "t")

    def step(name: str, fn: Callable[[], Any]) -> None:
        try:
            out[name] = {"ok": fn()}
        except Exception as e:  # reported, not raised: the test says which step failed and why
            out[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}

    def write_and_read() -> Any:
        spark.range(0, 10).write.format("delta").option("delta.enableDeletionVectors", "true").save(path)
        spark.range(10, 12).write.format("delta").mode("append").option("userMetadata", "m").save(path)
        DeltaTable.forPath(spark, path).delete("id % 3 = 0")
        return _ids(spark.read.format("delta").load(path))

    step("write_and_read", write_and_read)
    step("version_as_of", lambda: _ids(spark.read.format("delta").option("versionAsOf", 0).load(path)))
    step("same_plan", lambda: plan_text(spark.read.format("delta").load(path)) == plan_text(dvlake.read(spark, path)))
    # the jar reached the Connect session (addArtifacts) and the read went through it: a silent fallback to the
    # pure-Python path would still give the right rows, so the plan must name the native scan
    step("native_scan", lambda: "DvlakeParquet" in plan_text(spark.read.format("delta").load(path)))
    step("user_metadata", lambda: DeltaTable.forPath(spark, path).history().orderBy("version").collect()[1].userMetadata)

    def sql_delete() -> Any:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 1")
        return _ids(spark.read.load(path, format="delta"))

    step("sql_delete", sql_delete)
    step("sql_plain", lambda: spark.sql("SELECT 1 AS one").collect()[0][0])

    def parquet_untouched() -> Any:
        target = str(root / "pq")
        spark.range(3).write.format("parquet").save(target)
        return [spark.read.format("parquet").load(target).count(), (Path(target) / "_delta_log").exists()]

    step("parquet_untouched", parquet_untouched)

    def save_as_table() -> Any:
        spark.range(4).write.format("delta").option("path", str(root / "named")).saveAsTable("faces_connect_t")
        return [_ids(DeltaTable.forName(spark, "faces_connect_t").toDF()), _ids(spark.table("faces_connect_t"))]

    step("save_as_table", save_as_table)

    def catalog_shapes() -> Any:
        """The catalog issue's query shapes over Spark Connect: with the faces every one answers as the table's true
        rows do; without them each answers the same or fails, never with the registration's own row."""
        from dvlake import faces
        from tests.spark.test_catalog_answers import SHAPES

        spark.range(40).selectExpr("id", "id % 5 AS grp").write.format("delta") \
            .option("delta.enableDeletionVectors", "true").saveAsTable("faces_connect_shapes")
        DeltaTable.forName(spark, "faces_connect_shapes").delete("id % 3 = 0")
        spark.range(0, 60, 7).createOrReplaceTempView("other")
        dvlake.read(spark, DeltaTable.forName(spark, "faces_connect_shapes").path).createOrReplaceTempView("truth_t")
        wrong_with, wrong_without, errors_without = [], [], 0
        # the true rows of each shape, from the view over dvlake.read (a DataFrame the faces do not touch): computed
        # once, the answer both runs over the name must give
        truth = {shape: sorted((tuple(r) for r in spark.sql(shape.format(t="truth_t")).collect()), key=repr)
                 for shape in SHAPES}
        for shape in SHAPES:
            got = sorted((tuple(r) for r in spark.sql(shape.format(t="faces_connect_shapes")).collect()), key=repr)
            if got != truth[shape]:
                wrong_with.append(shape)
        faces.disable(spark)
        try:
            for shape in SHAPES:
                expected = truth[shape]
                try:
                    got = sorted((tuple(r) for r in spark.sql(shape.format(t="faces_connect_shapes")).collect()),
                                 key=repr)
                except Exception:  # an error is an acceptable answer without dvlake; a wrong row is not
                    errors_without += 1
                    continue
                if got != expected:
                    wrong_without.append(shape)
        finally:
            dvlake.configure_spark(spark)
        return {"shapes": len(SHAPES), "wrong_with": wrong_with, "wrong_without": wrong_without,
                "errors_without": errors_without}

    step("catalog_shapes", catalog_shapes)

    def stream_source_without_dvlake() -> Any:
        """A DV table read as a stream on this server, whose Python workers have only the shipped zip: Spark starts
        the streaming source's worker without the session's artifacts, so it must fail with dvlake's clear error
        (``test_stream_connect.py``). Last: a failed query is left behind."""
        from tests.cluster.stream_connect import run as stream_run

        return stream_run(spark, root / "stream-artifacts-only", source_only_run=True)["source_only"]

    step("stream_source_without_dvlake", stream_source_without_dvlake)
    return out


def refuse_jar_artifacts() -> list[str]:
    """From now on in this process, adding a jar as a Connect artifact fails, as on a server that refuses them; other
    artifacts (the dvlake zip) still go. Returns the list each refused attempt is recorded in."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    tried: list[str] = []
    original = ConnectSession.addArtifacts

    def refuse(self: Any, *paths: str, **kwargs: Any) -> None:
        if any(str(p).endswith(".jar") for p in paths):
            tried.append(" ".join(map(str, paths)))
            raise RuntimeError("this server refuses jar artifacts")
        original(self, *paths, **kwargs)

    ConnectSession.addArtifacts = refuse  # type: ignore[method-assign]
    return tried


def native_without_artifacts(spark: Any, root: Path, tried: list[str]) -> dict[str, Any]:
    """A DV read when adding the jar as an artifact fails (``refuse_jar_artifacts`` installed before the session
    started): the server's own jar (``--jars``) must be used, and no jar artifact tried."""
    import dvlake
    from dvlake import DeltaTable

    path = str(root / "refused")
    dvlake.write(spark.range(0, 12), path, properties={"delta.enableDeletionVectors": "true"})
    DeltaTable.forPath(spark, path).delete("id % 3 = 0")
    df = dvlake.read(spark, path)
    return {"native_scan": {"ok": "DvlakeParquet" in plan_text(df)}, "rows": {"ok": _ids(df)},
            "jar_artifacts_tried": {"ok": list(tried)}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--remote", required=True)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    import dvlake

    spark = dvlake.configure_spark(SparkSession.builder.remote(args.remote)).getOrCreate()
    spark.addArtifacts(args.artifact, pyfile=True)
    results = run(spark, Path(args.work_dir))
    spark.stop()
    Path(args.out).write_text(json.dumps(results))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
