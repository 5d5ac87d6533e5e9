"""The live files' partition values as codes into their distinct tuples, computed over Arrow columns.

A table of a million files usually has far fewer partitions. Planning judges a partition filter once per distinct
tuple and maps the verdicts back to files through an integer array (``FileFacts.partition_codes``), so nothing is
built in Python per file of the whole table: only the distinct tuples and, later, the files that survive pruning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class PartitionIndex:
    """``codes[i]`` is file ``i``'s position in ``rows`` (the distinct partition tuples, typed)."""

    codes: np.ndarray
    rows: list[tuple[Any, ...]]

    def rows_of(self, indexes: np.ndarray) -> list[tuple[Any, ...]]:
        """The typed partition tuples of the files at ``indexes`` (a pruned plan's files)."""
        return [self.rows[c] for c in self.codes[indexes]]


def partition_index(partition_values: pa.ChunkedArray | pa.Array, keys: list[str],
                    typed: Callable[[dict[str, str | None]], tuple[Any, ...]]) -> PartitionIndex:
    """Codes and distinct tuples of a ``partitionValues`` map column under the physical ``keys``.

    ``typed`` turns one file's values (a dict as ``dict(partitionValues)`` gives it: a missing key or a null map
    reads as None) into its typed tuple; it runs once per distinct tuple of strings. A key written twice in one
    map takes its last value, as ``dict`` would."""
    n = len(partition_values)
    if n == 0:
        return PartitionIndex(np.zeros(0, dtype=np.int64), [])
    codes = np.zeros(n, dtype=np.int64)
    raw: list[tuple[str | None, ...]] = [()]
    for key in keys:
        values = pc.map_lookup(partition_values, key, "last")
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        encoded = values.dictionary_encode(null_encoding="encode")
        dictionary = encoded.dictionary.to_pylist()
        if encoded.null_count:  # an all-null column has no dictionary entry yet for null
            dictionary.append(None)
            indices = encoded.indices.fill_null(len(dictionary) - 1)
        else:
            indices = encoded.indices
        combined = codes * len(dictionary) + indices.to_numpy(zero_copy_only=False).astype(np.int64)
        distinct, codes = np.unique(combined, return_inverse=True)  # compact again, so codes never overflow
        codes = codes.astype(np.int64).reshape(-1)
        raw = [(*raw[int(d) // len(dictionary)], dictionary[int(d) % len(dictionary)]) for d in distinct]
    return PartitionIndex(codes, [typed(dict(zip(keys, row, strict=True))) for row in raw])
