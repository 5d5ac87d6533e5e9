"""Write-path failures Spark would report deep in Hadoop, typed by dvlake and naming the path."""

from __future__ import annotations

import os

import pytest

import dvlake
from dvlake.errors import TableRootNotADirectoryError


@pytest.mark.parametrize("mode", ["append", "overwrite", "error"])
def test_append_under_a_regular_file(spark, tmp_path, mode) -> None:  # noqa: ANN001
    blocker = tmp_path / "plain.txt"
    blocker.write_text("x")
    with pytest.raises(TableRootNotADirectoryError, match=str(blocker)):
        dvlake.write(spark.range(3), str(blocker / "t"), mode=mode)
    assert blocker.read_text() == "x" and os.listdir(tmp_path) == ["plain.txt"]


def test_partition_value_too_long_for_a_folder_names_column_and_value(spark, tmp_path) -> None:  # noqa: ANN001
    from dvlake.errors import TableNotFoundError
    from dvlake.log.snapshot import Snapshot

    root = str(tmp_path / "t")
    value = "é" * 200  # 400 bytes, 1200 escaped: no file system takes it as one folder name
    df = spark.createDataFrame([(1, "ok"), (2, value)], "id long, part string")
    with pytest.raises(dvlake.errors.PartitionValueNotWritableError) as info:
        dvlake.write(df, root, mode="append", partitionBy=["part"])
    message = str(info.value)
    assert "'part'" in message and "é" * 20 in message and "200 characters" in message
    with pytest.raises(TableNotFoundError):
        Snapshot.load(root)  # nothing committed


def test_cast_invalid_input_keeps_sparks_class_and_leaves_the_table(spark, tmp_path) -> None:  # noqa: ANN001
    """A malformed cast in UPDATE's SET or an appended DataFrame is Spark's own CAST_INVALID_INPUT (as under
    delta-spark: the class a user catches, naming the value), raised before anything is committed."""
    from pyspark.errors import NumberFormatException

    from dvlake import DeltaTable
    from dvlake.log.snapshot import Snapshot

    root = str(tmp_path / "t")
    dvlake.write(spark.createDataFrame([(1, "x"), (2, "abc")], "id int, s string"), root)
    with pytest.raises(NumberFormatException) as info:
        DeltaTable.forPath(spark, root).update(condition="id = 2", set={"id": "cast(s as int)"})
    assert info.value.getCondition() == "CAST_INVALID_INPUT" and "'abc'" in str(info.value)
    bad = spark.createDataFrame([("zz", "q")], "id string, s string").selectExpr("cast(id as int) as id", "s")
    with pytest.raises(NumberFormatException, match="'zz'"):
        dvlake.write(bad, root, mode="append")
    assert Snapshot.load(root).version == 0
    assert sorted(tuple(r) for r in dvlake.read(spark, root).collect()) == [(1, "x"), (2, "abc")]
