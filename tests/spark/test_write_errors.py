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
