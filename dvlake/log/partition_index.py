"""The live files' partition values as codes into their distinct tuples, computed over Arrow columns.

A table of a million files usually has far fewer partitions. Planning judges a partition filter once per distinct
tuple and maps the verdicts back to files through an integer array (``FileFacts.partition_codes``), so nothing is
built in Python per file of the whole table: only the distinct tuples and, later, the files that survive pruning.

Even over Arrow, coding a million files' partition values costs 0.3 s, which a command touching ten files would pay
again after every commit. So the codes of a replayed state (``PartitionCodes``, the values as the log writes them,
untyped) are kept with the state and moved forward by a replay onto it (``moved_forward``: the removed rows dropped,
the added files coded), and typed per distinct tuple when a plan asks (``partition_index``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RawTuple = tuple[str | None, ...]


@dataclass(frozen=True)
class PartitionCodes:
    """``codes[i]`` is file ``i``'s position in ``raw`` (partition value strings under ``keys``, None for null or
    missing). ``raw`` may hold tuples no file has any more (files removed since): ``partition_index`` drops them."""

    keys: tuple[str, ...]
    codes: np.ndarray
    raw: list[RawTuple]


@dataclass(frozen=True)
class PartitionIndex:
    """``codes[i]`` is file ``i``'s position in ``rows`` (the distinct partition tuples, typed)."""

    codes: np.ndarray
    rows: list[tuple[Any, ...]]

    def rows_of(self, indexes: np.ndarray) -> list[tuple[Any, ...]]:
        """The typed partition tuples of the files at ``indexes`` (a pruned plan's files)."""
        return [self.rows[c] for c in self.codes[indexes]]


def partition_codes(partition_values: pa.ChunkedArray | pa.Array, keys: tuple[str, ...]) -> PartitionCodes:
    """Codes and distinct raw tuples of a ``partitionValues`` map column under the physical ``keys`` (a key
    written twice in one map takes its last value, as ``dict`` would)."""
    n = len(partition_values)
    if n == 0:
        return PartitionCodes(keys, np.zeros(0, dtype=np.int64), [])
    codes = np.zeros(n, dtype=np.int64)
    raw: list[RawTuple] = [()]
    for position, key in enumerate(keys):
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
        indices = indices.to_numpy(zero_copy_only=False).astype(np.int64)
        if position == 0:  # the first key: the dictionary's codes are already compact
            codes, raw = indices, [(value,) for value in dictionary]
            continue
        combined = codes * len(dictionary) + indices
        distinct, codes = np.unique(combined, return_inverse=True)  # compact again, so codes never overflow
        codes = codes.astype(np.int64).reshape(-1)
        raw = [(*raw[int(d) // len(dictionary)], dictionary[int(d) % len(dictionary)]) for d in distinct]
    return PartitionCodes(keys, codes, raw)


def moved_forward(before: PartitionCodes, removed_rows: np.ndarray,
                  added_values: pa.ChunkedArray | pa.Array) -> PartitionCodes:
    """The codes of a file table made from ``before``'s table by dropping the rows ``removed_rows`` and appending
    files whose partition values are ``added_values`` (replay's kept-then-new order): work that grows with the
    change, not with the table."""
    kept = np.delete(before.codes, removed_rows) if len(removed_rows) else before.codes
    if not len(added_values):
        return PartitionCodes(before.keys, kept, before.raw)
    added = partition_codes(added_values, before.keys)
    raw = list(before.raw)
    position = {t: i for i, t in enumerate(raw)}
    remap = np.empty(len(added.raw), dtype=np.int64)
    for i, t in enumerate(added.raw):
        if t not in position:
            position[t] = len(raw)
            raw.append(t)
        remap[i] = position[t]
    return PartitionCodes(before.keys, np.concatenate([kept, remap[added.codes]]), raw)


def partition_index(codes: PartitionCodes, typed: Callable[[dict[str, str | None]], tuple[Any, ...]]) -> PartitionIndex:
    """The typed index of ``codes``: ``typed`` turns one file's values (a dict as ``dict(partitionValues)`` gives it:
    a missing key or a null map reads as None) into its typed tuple, once per distinct tuple a file still has."""
    used = np.bincount(codes.codes, minlength=len(codes.raw)) > 0
    if used.all():
        compact, raw = codes.codes, codes.raw
    else:
        renumber = np.cumsum(used) - 1
        compact, raw = renumber[codes.codes], [t for t, u in zip(codes.raw, used, strict=True) if u]
    return PartitionIndex(compact, [typed(dict(zip(codes.keys, row, strict=True))) for row in raw])
