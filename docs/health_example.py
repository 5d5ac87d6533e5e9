"""Builds the example table of the README's `dvlake health` section and draws docs/health.png.

12 day partitions x 3 appends (108,000 rows, 36 files), then six DELETEs of different shapes:
one user everywhere (0.1 %), 40 % of one day, 70 % of one file, 10 % of two days, a user range
everywhere (~2 %), 15 % of one day. Run: ``.venv/bin/python docs/health_example.py [/tmp/dir]``
(prints the `dvlake health` output for the README).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DELETES = [
    "user_id = 3",
    "day = '2024-06-02' AND user_id < 400",
    "day = '2024-06-05' AND id < 36000 AND user_id < 700",
    "day IN ('2024-06-07', '2024-06-08') AND user_id % 10 = 0",
    "user_id BETWEEN 500 AND 520",
    "day = '2024-06-11' AND user_id >= 850",
]


def build(path: str) -> None:
    from pyspark.sql import functions as F

    from dvlake import DeltaTable, write
    from dvlake.spark.session import local_session

    spark = local_session("health-example")
    for k in range(3):
        lo = k * 36_000
        df = spark.range(lo, lo + 36_000).select(
            "id", F.format_string("2024-06-%02d", (F.col("id") % 12 + 1).cast("int")).alias("day"),
            ((F.col("id") / 12).cast("long") % 1000).alias("user_id"), (F.col("id") * 0.5).alias("amount")).coalesce(1)
        if k == 0:
            write(df, path, partitionBy=["day"], properties={"delta.enableDeletionVectors": "true"})
        else:
            write(df, path, mode="append")
    table = DeltaTable.forPath(spark, path)
    for condition in DELETES:
        table.delete(condition)
    spark.stop()


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
    path = os.path.join(out, "daily_user_actions")
    if not os.path.exists(path):
        build(path)
    here = os.path.dirname(os.path.abspath(__file__))
    exe = os.path.join(os.path.dirname(sys.executable), "dvlake")
    env = {**os.environ, "COLUMNS": "118"}
    subprocess.run([exe, "health", path, "--top", "5", "--plot", os.path.join(here, "health.png")], check=False, env=env)


if __name__ == "__main__":
    main()
