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
