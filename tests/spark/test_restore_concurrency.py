"""The campaign's race with the real commands: RESTORE TO VERSION 0 paused just before its commit while a
Spark DELETE that adds DVs commits. RESTORE must fail with delta-spark's exception and change nothing."""

from __future__ import annotations

import pytest

import dvlake
import dvlake.commands.maintenance.restore as restore_module
from dvlake import DeltaTable
from dvlake.errors import DeltaConcurrentModificationException
from dvlake.log.snapshot import Snapshot
from tests.reliability.test_serializable import paused_commit


@pytest.mark.parametrize("condition", ["id = 5", "id = 1000 OR id = 5"])
def test_restore_paused_refused_after_spark_delete(spark, tmp_path, condition) -> None:  # noqa: ANN001
    root = str(tmp_path / "t")
    dvlake.write(spark.range(0, 10).coalesce(1), root, properties={"delta.enableDeletionVectors": "true"})
    dvlake.write(spark.range(1000, 1010).coalesce(1), root, mode="append")
    table = DeltaTable.forPath(spark, root)
    with paused_commit(restore_module, lambda: table.delete(condition)), \
            pytest.raises(DeltaConcurrentModificationException, match="DELETE"):
        table.restoreToVersion(0)
    assert Snapshot.load(root).version == 2  # the DELETE's commit, nothing after it
    deleted = {5, 1000} if "1000" in condition else {5}
    expected = sorted((set(range(10)) | set(range(1000, 1010))) - deleted)
    assert sorted(r.id for r in dvlake.read(spark, root).collect()) == expected
    assert any(a.deletion_vector is not None for a in Snapshot.load(root).add_files())  # the DELETE wrote DVs
