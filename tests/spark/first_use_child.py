"""A pip user's first session, in a process of its own: ``python -m tests.spark.first_use_child WORK``.

No packaged jar (as ``pip install <checkout>`` without ``make jar``) and an empty per-user jar cache
(``DVLAKE_JAR_CACHE``, set by the parent): a session set up as the README says (``configure_spark``) must compile the
native scan for the installed PySpark on first use, read a DV table through it (the plan names the format), and give
exact rows for DELETE, UPDATE, MERGE, a Delta-to-Delta stream and a catalog table's DELETE by name, and delta-rs must
read what it wrote. Prints one ``@ JSON`` line with what it saw.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from dvlake import native_jar


def main(work: Path) -> None:
    native_jar.PACKAGED_DIR = work / "no-packaged-jars"  # nothing packaged: the jar must come from the first use
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import dvlake
    from dvlake import DeltaTable

    spark = dvlake.configure_spark(SparkSession.builder.master("local[2]").appName("first-use")
                                   .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                                   .config("spark.sql.warehouse.dir", str(work / "warehouse"))).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    root, out, chk = str(work / "t"), str(work / "copy"), str(work / "chk")
    (spark.range(0, 200).selectExpr("id", "id % 10 AS k").repartition(4).write.format("delta")
     .option("delta.enableDeletionVectors", "true").save(root))
    table = DeltaTable.forPath(spark, root)
    table.delete("id % 7 = 0")
    df = spark.read.format("delta").load(root)
    plan = df._jdf.queryExecution().executedPlan().toString()  # the test looks at the physical plan's scan
    after_delete = sorted(r.id for r in df.collect())
    table.update("id % 5 = 0", {"k": F.lit(-1)})
    source = spark.range(190, 210).selectExpr("id", "100 AS k")
    (table.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdate(set={"k": "s.k"})
     .whenNotMatchedInsertAll().execute())
    final = sorted((r.id, r.k) for r in spark.read.format("delta").load(root).collect())
    query = (spark.readStream.format("delta").load(root).writeStream.format("delta").option("checkpointLocation", chk)
             .trigger(availableNow=True).start(out))
    query.awaitTermination()
    streamed = sorted((r.id, r.k) for r in spark.read.format("delta").load(out).collect())
    spark.sql("CREATE TABLE events (id BIGINT, k INT) USING delta TBLPROPERTIES ('delta.enableDeletionVectors' = true)")
    spark.range(0, 50).selectExpr("id", "CAST(id % 3 AS INT) AS k").write.format("delta").mode("append").saveAsTable("events")
    spark.sql("DELETE FROM events WHERE k = 0")
    by_name = sorted(r.id for r in spark.table("events").collect())
    from tests.peers import read_with_deltalake  # an independent reader of what this Spark wrote

    peer = read_with_deltalake(root).to_pydict()
    log = [json.loads(line) for line in (work / "t" / "_delta_log" / "00000000000000000001.json").read_text().splitlines()]
    print("@", json.dumps({
        "spark": spark.version, "plan_names_native": "DvlakeParquet" in plan,
        "delete_wrote_dv": any((a.get("add") or {}).get("deletionVector") for a in log),
        "after_delete": after_delete, "final": final, "streamed": streamed, "by_name": by_name,
        "delta_rs": sorted(zip(peer["id"], peer["k"], strict=True)),
        "cache": sorted(p.name for p in native_jar.cache_dir().glob("*.jar")),
    }), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
