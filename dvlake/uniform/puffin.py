"""Puffin files holding Iceberg ``deletion-vector-v1`` blobs copied from Delta deletion vectors.

A Delta DV record (``u32 BE size | magic D1 D3 39 64 + portable roaring | u32 BE CRC-32``) is
byte for byte Iceberg's deletion-vector-v1 blob, so a blob here is the Delta record with no
re-encoding: the bitmap bytes come from ``dv.store`` (read and CRC-checked there) and the length
and CRC are put back around them. Each file is ``PFA1``, the blobs, then the footer
``PFA1 | JSON | u32 LE payload size | flags (0) | PFA1`` (Puffin spec).

One Puffin file per conversion step holds the DVs that step publishes. Readers that read a whole
Puffin file and apply every blob in it by its ``referenced-data-file`` (pyiceberg 0.12) would
apply a stale blob if a file still in use held one, so the converter retires a Puffin file as a
whole as soon as any of its blobs goes stale (``convert.py``).
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass

from dvlake._version import __version__
from dvlake.errors import UniformConversionError

MAGIC = b"PFA1"
DV_BLOB_TYPE = "deletion-vector-v1"
#: Iceberg's reserved field id of ``_pos`` (MetadataColumns.ROW_POSITION), the field a DV is computed for.
ROW_POSITION_FIELD_ID = 2147483545


@dataclass(frozen=True)
class Blob:
    """Where one DV blob landed in a Puffin file (what the delete manifest entry points at)."""

    referenced_data_file: str
    offset: int
    length: int
    cardinality: int


def dv_blob(bitmap_bytes: bytes) -> bytes:
    """The deletion-vector-v1 blob of a Delta DV's bitmap bytes (magic included): length, bytes, CRC-32."""
    return struct.pack(">I", len(bitmap_bytes)) + bitmap_bytes + struct.pack(">I", zlib.crc32(bitmap_bytes) & 0xFFFFFFFF)


class PuffinBuilder:
    """Collects DV blobs in memory and renders one Puffin file."""

    def __init__(self) -> None:
        self._parts: list[bytes] = [MAGIC]
        self._pos = len(MAGIC)
        self._meta: list[dict[str, object]] = []
        self.blobs: list[Blob] = []

    def add_dv(self, referenced_data_file: str, bitmap_bytes: bytes, cardinality: int) -> Blob:
        return self._append(referenced_data_file, dv_blob(bitmap_bytes), cardinality)

    def _append(self, referenced_data_file: str, blob: bytes, cardinality: int) -> Blob:
        out = Blob(referenced_data_file, self._pos, len(blob), cardinality)
        self._parts.append(blob)
        self._pos += len(blob)
        self._meta.append({
            "type": DV_BLOB_TYPE, "fields": [ROW_POSITION_FIELD_ID], "snapshot-id": -1, "sequence-number": -1,
            "offset": out.offset, "length": out.length,
            "properties": {"referenced-data-file": referenced_data_file, "cardinality": str(cardinality)}})
        self.blobs.append(out)
        return out

    def add_blob(self, referenced_data_file: str, blob: bytes, cardinality: int, source: str) -> Blob:
        """Copy a whole deletion-vector-v1 blob of an earlier Puffin file (length and CRC checked, not re-encoded)."""
        size = struct.unpack(">I", blob[:4])[0] if len(blob) >= 8 else -1
        if size != len(blob) - 8 or struct.unpack(">I", blob[-4:])[0] != zlib.crc32(blob[4:-4]) & 0xFFFFFFFF:
            raise UniformConversionError(f"{source}: the deletion vector blob for {referenced_data_file} fails its length or "
                             "CRC-32 check; regenerate the Iceberg metadata with `dvlake uniform sync --full`")
        return self._append(referenced_data_file, blob, cardinality)

    def render(self) -> bytes:
        payload = json.dumps({"blobs": self._meta, "properties": {"created-by": f"dvlake {__version__}"}},
                             separators=(",", ":")).encode("utf-8")
        footer = MAGIC + payload + struct.pack("<i", len(payload)) + b"\x00\x00\x00\x00" + MAGIC
        return b"".join([*self._parts, footer])
