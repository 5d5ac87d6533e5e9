"""Delta's RoaringBitmapArray serialization over CRoaring (pyroaring ``BitMap64``).

Portable format: little-endian magic 1681511377, then CRoaring's portable 64-bit layout
(u64 bucket count; per bucket u32 key + a portable 32-bit roaring bitmap), which is exactly
what ``BitMap64.serialize()`` produces. That is the only layout Delta's PROTOCOL.md allows in a
DV ("Deletion Vector Format"); magic 1681511376 is delta-spark's in-memory "native" layout, which
the protocol does not define, so it is refused here and by the native scan (jvm/) alike.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np
import pyroaring

from dvlake.errors import CorruptDeletionVectorError

MAGIC_PORTABLE = 1681511377
MAGIC_NATIVE = 1681511376
#: Same words as the native scan's refusal (jvm/.../DeletionVectors.java).
NATIVE_REFUSAL = ("magic 1681511376 is delta-spark's non-portable in-memory bitmap layout, which Delta's PROTOCOL.md "
                  "does not allow in a deletion vector (only 1681511377, the portable layout)")
_MAGIC_BYTES = struct.pack("<I", MAGIC_PORTABLE)


MAGIC_BYTES = _MAGIC_BYTES


def serialize_parts(bitmap: pyroaring.BitMap64) -> tuple[bytes, bytes]:
    """(magic, body) of an already optimized bitmap, for writers that stream the two pieces
    without paying a copy of a multi-megabyte body to prepend four bytes."""
    return _MAGIC_BYTES, bitmap.serialize()


def serialize(bitmap: pyroaring.BitMap64, optimize: bool = True) -> bytes:
    """Magic + portable bytes. ``optimize`` first picks run containers where they are smaller, as
    delta-spark's aggregator does for fresh DVs (pass False for a bitmap already optimized)."""
    if optimize:
        bitmap.run_optimize()
    return b"".join((_MAGIC_BYTES, bitmap.serialize()))


def deserialize(data: bytes, where: str = "deletion vector") -> pyroaring.BitMap64:
    """Parse a portable RoaringBitmapArray; CorruptDeletionVectorError otherwise."""
    if len(data) < 4:
        raise CorruptDeletionVectorError(f"{where}: {len(data)} bytes is too short for a bitmap (needs a 4-byte magic)")
    (magic,) = struct.unpack_from("<I", data)
    if magic == MAGIC_PORTABLE:
        try:
            bm = pyroaring.BitMap64.deserialize(memoryview(data)[4:])  # type: ignore[arg-type]  # no copy of the body
        except Exception as exc:  # noqa: BLE001 - CRoaring refuses malformed input with various errors
            raise CorruptDeletionVectorError(f"{where}: malformed portable roaring bitmap: {exc}") from exc
        if len(bm) and bm.max() >= 1 << 63:
            raise CorruptDeletionVectorError(f"{where}: a row index has the top bit set (above 2**63 - 1)")
        return bm
    if magic == MAGIC_NATIVE:
        raise CorruptDeletionVectorError(f"{where}: {NATIVE_REFUSAL}")
    raise CorruptDeletionVectorError(f"{where}: the bitmap does not start with the magic number {MAGIC_PORTABLE}")


def from_indexes(indexes: Iterable[int] | np.ndarray) -> pyroaring.BitMap64:
    """A bitmap of row indexes; numpy arrays take CRoaring's bulk path."""
    if isinstance(indexes, np.ndarray):
        arr = np.unique(indexes.astype(np.uint64, copy=False))
        return pyroaring.BitMap64(arr)
    return pyroaring.BitMap64(indexes)


def to_numpy(bitmap: pyroaring.BitMap64) -> np.ndarray:
    """All row indexes, ascending, as uint64."""
    return np.asarray(bitmap.to_array(), dtype=np.uint64)
