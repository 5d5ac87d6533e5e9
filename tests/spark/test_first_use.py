"""A pip user's first session on the installed PySpark (any 4 minor: ``make test-minors`` runs this on 4.0-4.2).

The child (``first_use_child.py``) has no packaged jar and an empty jar cache, as ``pip install <checkout>`` leaves
a user: its first read must compile the native scan for this Spark, and every command must give exact rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from dvlake import native_jar
from tests.conftest import REPO_ROOT


@pytest.mark.slow
@pytest.mark.skipif(native_jar.javac() is None, reason="no JDK's javac here: the first use cannot compile the jar")
def test_first_session_compiles_the_native_scan_and_every_command_is_exact(tmp_path: Path) -> None:
    cache = tmp_path / "jar-cache"
    env = {**os.environ, native_jar.CACHE_ENV: str(cache), "PYTHONPATH": os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH"), str(REPO_ROOT)) if p)}
    done = subprocess.run([sys.executable, "-m", "tests.spark.first_use_child", str(tmp_path)], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    lines = [line[2:] for line in done.stdout.splitlines() if line.startswith("@ ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-4000:]
    seen = json.loads(lines[-1])
    assert seen["spark"] == pyspark.__version__
    minor = native_jar.minor_of(pyspark.__version__)
    assert seen["cache"] == [f"dvlake-scan-spark{minor}-{native_jar.sources_digest()[:16]}.jar"]
    assert "compiled the native scan for Spark" in done.stderr  # the one line a user sees, once
    assert seen["plan_names_native"], "the read did not go through the native scan"
    assert seen["delete_wrote_dv"]
    ids = [i for i in range(200) if i % 7]
    assert seen["after_delete"] == ids
    final = {i: (-1 if i % 5 == 0 else i % 10) for i in ids}
    final.update(dict.fromkeys(range(190, 210), 100))
    expected = sorted([i, k] for i, k in final.items())
    assert seen["final"] == expected
    assert seen["streamed"] == expected
    assert [list(r) for r in seen["delta_rs"]] == expected
    assert seen["by_name"] == [i for i in range(50) if i % 3]
