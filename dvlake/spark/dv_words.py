"""Decoded deletion vectors as the bit words the scan's anti join tests rows against.

A DV becomes one build row per 4,096-row block that holds a deletion: the block number and its 64
bit words (``block_words``). Where that decoding runs decides a fixed cost of every query:

- **Small DVs are decoded on the driver** and shipped in the plan as a local relation. Spark then
  broadcasts them without running a job: no Python worker start, no extra stage before the scan.
  "Small" is bounded three ways so the driver's memory stays bounded whatever the table holds:
  the serialized DV (``DRIVER_DECODE_MAX_BYTES``), its rows (``DRIVER_DECODE_MAX_ROWS``, checked
  by the codec against the bitmap before anything is expanded) and the words of all DVs a scan
  decodes on the driver (``DRIVER_WORDS_BUDGET``).
- **Larger DVs are decoded on executors** (``mapInArrow`` over their descriptors), as before.
- Decoded words are **kept per (table, DV)** in a byte-bounded LRU (``DRIVER_CACHE_BYTES``), so the
  same query run again on the same snapshot does not decode again. A hit is confirmed against the
  DV's bytes as stored now (read and checksummed by the codec, then hashed): a DV file replaced in
  place is decoded again, never served stale.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.roaring import to_numpy
from dvlake.dv.store import bitmap_from_bytes, dv_bytes

#: Rows per block of the DV lookup table (one build row per block holding a deletion).
BLOCK_BITS = 12
WORDS_PER_BLOCK = (1 << BLOCK_BITS) // 64
#: Bits of ``row_index >> BLOCK_BITS`` in the one-long key: row indexes below 2**32.
KEY_BLOCK_BITS = 32 - BLOCK_BITS
#: Estimated bytes of one build row (64 words + key + Spark's row and hash-table overhead).
BLOCK_ROW_BYTES = WORDS_PER_BLOCK * 8 + 96

#: A DV is decoded on the driver only if its serialized form is at most this large ...
DRIVER_DECODE_MAX_BYTES = 1 << 20
#: ... and it deletes at most this many rows (the codec checks the bitmap against it before expanding) ...
DRIVER_DECODE_MAX_ROWS = 1 << 20
#: ... and the estimated words of all DVs one scan decodes on the driver stay within this.
DRIVER_WORDS_BUDGET = 16 << 20
#: Decoded words kept on the driver between queries (least recently used dropped first).
DRIVER_CACHE_BYTES = 64 << 20

BLOCK_KEY_COL = "__dvlake_block_key"
KEY_COL = "__dvlake_file_key"
BLOCK_COL = "__dvlake_block"
WORDS_COL = "__dvlake_words"


def block_words(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted deleted row indexes → (block numbers, (blocks × WORDS_PER_BLOCK) uint64 bit words)."""
    if rows.size == 0:
        return np.zeros(0, np.uint64), np.zeros((0, WORDS_PER_BLOCK), np.uint64)
    word_index = rows >> np.uint64(6)
    bits = np.left_shift(np.uint64(1), rows & np.uint64(63))
    starts = np.concatenate(([0], np.flatnonzero(word_index[1:] != word_index[:-1]) + 1))
    words = np.bitwise_or.reduceat(bits, starts)
    word_index = word_index[starts]
    block = word_index >> np.uint64(BLOCK_BITS - 6)
    new_block = np.concatenate(([True], block[1:] != block[:-1]))
    out = np.zeros((int(new_block.sum()), WORDS_PER_BLOCK), np.uint64)
    out[np.cumsum(new_block) - 1, (word_index & np.uint64(WORDS_PER_BLOCK - 1)).astype(np.int64)] = words
    return block[new_block], out


def estimated_words_bytes(dv: DeletionVectorDescriptor | None, num_records: int | None) -> int:
    """Upper bound of the build-side bytes of one file's DV (one row per block with a deletion)."""
    if dv is None:
        return 0
    blocks = dv.cardinality
    if num_records is not None:
        blocks = min(blocks, (num_records + (1 << BLOCK_BITS) - 1) >> BLOCK_BITS)
    return blocks * BLOCK_ROW_BYTES


def words_batch(key: int, blocks: np.ndarray, words: np.ndarray, one_long: bool) -> pa.RecordBatch:
    """The build rows of one file: ``(block key, words)`` with the one-long key, else ``(file key, block, words)``."""
    flat = pa.array(words.reshape(-1).view(np.int64))
    offsets = pa.array(np.arange(0, len(flat) + 1, WORDS_PER_BLOCK, dtype=np.int32))
    words_arr = pa.ListArray.from_arrays(offsets, flat)
    if one_long:
        keys = (np.uint64(key) << np.uint64(KEY_BLOCK_BITS)) | blocks
        return pa.RecordBatch.from_arrays([pa.array(keys.view(np.int64)), words_arr], names=[BLOCK_KEY_COL, WORDS_COL])
    return pa.RecordBatch.from_arrays(
        [pa.array(np.full(blocks.size, key, np.int64)), pa.array(blocks.view(np.int64)), words_arr],
        names=[KEY_COL, BLOCK_COL, WORDS_COL])


def words_schema(one_long: bool) -> pa.Schema:
    """The Arrow schema of ``words_batch`` output."""
    words = pa.field(WORDS_COL, pa.list_(pa.int64()))
    if one_long:
        return pa.schema([pa.field(BLOCK_KEY_COL, pa.int64()), words])
    return pa.schema([pa.field(KEY_COL, pa.int64()), pa.field(BLOCK_COL, pa.int64()), words])


@dataclass(frozen=True)
class KeyedDv:
    """One file's DV to decode, with the key the scan finds the file's rows by."""

    key: int
    dv: DeletionVectorDescriptor
    num_records: int | None


def split_for_driver(dvs: Sequence[KeyedDv]) -> tuple[list[KeyedDv], list[KeyedDv]]:
    """(decoded on the driver, decoded on executors), by the bounds in the module docstring."""
    local: list[KeyedDv] = []
    remote: list[KeyedDv] = []
    budget = DRIVER_WORDS_BUDGET
    for item in dvs:
        cost = estimated_words_bytes(item.dv, item.num_records)
        if item.dv.size_in_bytes <= DRIVER_DECODE_MAX_BYTES and item.dv.cardinality <= DRIVER_DECODE_MAX_ROWS \
                and cost <= budget:
            local.append(item)
            budget -= cost
        else:
            remote.append(item)
    return local, remote


class _WordsCache:
    """Byte-bounded LRU of decoded words: (table root, DV id) → (digest of the DV's bytes, blocks, words)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[str, str], tuple[bytes, np.ndarray, np.ndarray]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: tuple[str, str], digest: bytes) -> tuple[np.ndarray, np.ndarray] | None:
        with self._lock:
            item = self._items.get(key)
            if item is None or item[0] != digest:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return item[1], item[2]

    def put(self, key: tuple[str, str], digest: bytes, blocks: np.ndarray, words: np.ndarray) -> None:
        size = blocks.nbytes + words.nbytes
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1].nbytes + old[2].nbytes
            self._items[key] = (digest, blocks, words)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, b, w) = self._items.popitem(last=False)
                self._bytes -= b.nbytes + w.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0


#: The driver's cache of decoded words (module state of the driver process; executors never read it).
CACHE = _WordsCache(DRIVER_CACHE_BYTES)


def decode_on_driver(item: KeyedDv, table_root: str, confine: bool) -> tuple[np.ndarray, np.ndarray]:
    """(blocks, words) of one small DV, from the cache when its stored bytes are unchanged."""
    dv = item.dv
    raw, where = dv_bytes(dv, table_root, confine=confine)
    digest = hashlib.blake2b(raw or b"", digest_size=16).digest()
    key = (table_root, dv.unique_id)
    hit = CACHE.get(key, digest)
    if hit is not None:
        return hit
    bitmap = bitmap_from_bytes(dv, raw, where)
    blocks, words = block_words(to_numpy(bitmap))
    CACHE.put(key, digest, blocks, words)
    return blocks, words


def driver_words_table(items: Sequence[KeyedDv], table_root: str, one_long: bool, confine: bool) -> pa.Table:
    """The build rows of ``items`` decoded on the driver, as one Arrow table."""
    batches = []
    for item in items:
        blocks, words = decode_on_driver(item, table_root, confine)
        if blocks.size:
            batches.append(words_batch(item.key, blocks, words, one_long))
    return pa.Table.from_batches(batches, schema=words_schema(one_long))

