"""The Spark-free layers import and work with PySpark unavailable (the layer contract itself is
checked by import-linter in ``make lint``; this proves the runtime side of it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_spark_free_layers_import_without_pyspark(testdata, tmp_path) -> None:
    table = testdata / "basic-dv-with-checkpoint"
    script = textwrap.dedent(f"""
        import sys
        sys.modules["pyspark"] = None  # any 'import pyspark…' now raises ImportError
        import dvlake, dvlake.dv.store, dvlake.storage, dvlake.log.snapshot, dvlake.log.predicates
        import dvlake.log.checkpoint, dvlake.txn.transaction, dvlake.uniform.convert, dvlake.uniform.compat
        from dvlake.dv.descriptor import DeletionVectorDescriptor
        from dvlake.dv.store import load_bitmap
        from dvlake.log.snapshot import Snapshot
        snap = Snapshot.load({str(table)!r})  # replay, checkpoint and DV decoding: all Spark-free
        dvs = [d for d in snap.files.column("deletionVector").to_pylist() if d and d.get("storageType")]
        assert snap.num_files > 0 and dvs
        for d in dvs:
            desc = DeletionVectorDescriptor.from_json(d)
            assert len(load_bitmap(desc, snap.table_root)) == desc.cardinality
        import dvlake.native_jar  # where the native scan's jar comes from: decided without Spark (dvlake doctor)
        choice = dvlake.native_jar.find_jar("4.1.0", build=False)
        assert choice.path is None and "pyspark installed here (none)" in choice.why, choice  # none to compile against
        assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules if sys.modules[m] is not None)
        print("spark-free ok")
    """)
    env = {**os.environ, "DVLAKE_JAR_CACHE": str(tmp_path / "empty-jar-cache")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "spark-free ok" in out.stdout
