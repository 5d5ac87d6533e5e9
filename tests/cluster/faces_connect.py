"""The delta-spark faces over Spark Connect, run in a subprocess (a Connect session switches PySpark's
functions to Connect mode for the whole process). Each step reports its result or its error, so a
failure names the step; ``test_faces_connect.py`` asserts on the JSON.
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
        for shape in SHAPES:
            expected = sorted((tuple(r) for r in spark.sql(shape.format(t="truth_t")).collect()), key=repr)
            got = sorted((tuple(r) for r in spark.sql(shape.format(t="faces_connect_shapes")).collect()), key=repr)
            if got != expected:
                wrong_with.append(shape)
        faces.disable(spark)
        try:
            for shape in SHAPES:
                expected = sorted((tuple(r) for r in spark.sql(shape.format(t="truth_t")).collect()), key=repr)
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
    return out


def native_without_artifacts(spark: Any, root: Path) -> dict[str, Any]:
    """A DV read when adding the jar as an artifact fails: the server's own jar (``--jars``) must be used."""
    import dvlake
    from dvlake import DeltaTable

    added: list[str] = []
    session_class = type(spark)
    original = session_class.addArtifacts

    def refuse(self: Any, *paths: str, **kwargs: Any) -> None:
        if any(str(p).endswith(".jar") for p in paths):
            added.append(" ".join(map(str, paths)))
            raise RuntimeError("this server refuses jar artifacts")
        original(self, *paths, **kwargs)

    session_class.addArtifacts = refuse
    path = str(root / "refused")
    try:
        dvlake.write(spark.range(0, 12), path, properties={"delta.enableDeletionVectors": "true"})
        DeltaTable.forPath(spark, path).delete("id % 3 = 0")
        df = dvlake.read(spark, path)
        return {"native_scan": {"ok": "DvlakeParquet" in plan_text(df)}, "rows": {"ok": _ids(df)},
                "jar_artifacts_tried": {"ok": added}}
    finally:
        session_class.addArtifacts = original


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--remote", required=True)
    ap.add_argument("--artifact", required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--refuse-jar-artifacts", action="store_true",
                    help="jars cannot be added as artifacts (a server that refuses them); only the native read is run")
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    import dvlake

    spark = dvlake.configure_spark(SparkSession.builder.remote(args.remote)).getOrCreate()
    spark.addArtifacts(args.artifact, pyfile=True)
    if args.refuse_jar_artifacts:
        results = native_without_artifacts(spark, Path(args.work_dir))
    else:
        results = run(spark, Path(args.work_dir))
    spark.stop()
    Path(args.out).write_text(json.dumps(results))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
