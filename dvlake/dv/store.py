"""DV files: version byte 1, then per DV ``u32 BE size | bitmap | u32 BE CRC-32``.

Reads fetch only the byte range of one DV and check everything that can be checked (file
present, version, offset in range, size field, CRC, magic, cardinality): a DV read wrong would
silently resurrect deleted rows, so every mismatch is a typed error naming file, offset,
expected and found. The writer packs many DVs into one file, as delta-spark does.
"""

from __future__ import annotations

import random
import string
import struct
import uuid
import zlib
from typing import IO

import pyroaring

from dvlake.dv import roaring
from dvlake.dv.descriptor import DeletionVectorDescriptor, dv_file_name
from dvlake.errors import (
    CorruptDeletionVectorError,
    DeletionVectorIntegrityError,
    DeletionVectorNotFoundError,
    InvalidArgumentError,
)
from dvlake.storage.base import RandomAccessFile, Storage, storage_for
from dvlake.storage.confine import check_local_files, dv_file_location

FORMAT_VERSION = 1
MAX_FILE_SIZE = 1536 * 1024 * 1024  # offsets are int32 in the protocol


def read_bitmap_bytes(storage: Storage, path: str, descriptor: DeletionVectorDescriptor) -> bytes:
    """The verified bitmap bytes (magic included) of one on-disk DV at ``path`` (a storage location).

    The storage opens only regular files (a FIFO would block forever), reads are bounded by the
    file's size, and no error message quotes bytes of the file (it may not be a DV file at all).
    """
    offset = descriptor.offset if descriptor.offset is not None else 1
    size = descriptor.size_in_bytes
    where = f"deletion vector file {path} at offset {offset}"
    try:
        f = storage.open_input(path)
    except FileNotFoundError as exc:
        raise DeletionVectorNotFoundError(
            f"deletion vector file {path} does not exist (referenced at offset {offset}); the table is missing a file "
            "its log needs") from exc
    except NotADirectoryError as exc:
        raise DeletionVectorNotFoundError(f"deletion vector file {path} does not exist (a parent is not a folder)") from exc
    except OSError as exc:
        if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
            raise DeletionVectorNotFoundError(f"deletion vector file {path} does not exist: {exc}") from exc
        raise
    try:  # one open, three positioned reads: size, version byte, the record
        total = f.seek(0, 2)
        f.seek(0)
        head = f.read(1)
        if head != bytes([FORMAT_VERSION]):
            raise CorruptDeletionVectorError(
                f"deletion vector file {path}: the first byte is not the format version 1 "
                f"({'the file is empty' if not head else 'this is not a DV file, or it is damaged'})")
        if size < 0 or offset < 1 or offset + 4 + size + 4 > total:
            if size >= 0 and offset >= 1 and offset + 4 <= total:
                # as delta-spark, which reads the size field first: a log whose sizeInBytes disagrees with it is a
                # size mismatch, whether or not the larger record would still fit (which DV is read first must not matter)
                f.seek(offset)
                _require_stored_size(f.read(4), size, where)
            raise CorruptDeletionVectorError(
                f"{where}: a DV of {size} bytes needs bytes {offset}..{offset + 8 + size} but the file has {total}")
        f.seek(offset)
        record = f.read(size + 8)
    finally:
        f.close()
    _require_stored_size(record, size, where)
    data = record[4:4 + size]
    (stored_crc,) = struct.unpack_from(">I", record, 4 + size)
    crc = zlib.crc32(data) & 0xFFFFFFFF
    if crc != stored_crc:
        raise DeletionVectorIntegrityError(f"{where}: checksum mismatch: the stored CRC-32 does not match the DV bytes",
                                           error_class="DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH")
    return data


def _require_stored_size(record: bytes, size: int, where: str) -> None:
    """The size field a DV record starts with must be the descriptor's ``sizeInBytes`` (delta-spark's named check)."""
    (stored,) = struct.unpack_from(">I", record, 0)
    if stored != size:
        raise DeletionVectorIntegrityError(
            f"{where}: size mismatch: the size field in the file differs from the descriptor's sizeInBytes {size}",
            error_class="DELTA_DELETION_VECTOR_SIZE_MISMATCH")


def _missing_dv(location: str) -> DeletionVectorNotFoundError:
    return DeletionVectorNotFoundError(
        f"deletion vector file {location} does not exist; the table is missing a file its log needs")


def dv_bytes(descriptor: DeletionVectorDescriptor, table_root: str, storage: Storage | None = None, *,
             confine: bool = True) -> tuple[bytes | None, str]:
    """The verified serialized bitmap of a DV (None for an empty inline DV) and how errors name it.

    For an on-disk DV the bytes are read, bounded and checksummed by ``read_bitmap_bytes``; callers
    that keep decoded DVs compare these bytes to decide whether a kept copy is still current.
    """
    if descriptor.is_inline:
        where = f"inline deletion vector {descriptor.path_or_inline_dv[:40]!r}"
        return (descriptor.inline_bitmap_bytes() if descriptor.size_in_bytes else None), where
    location = dv_file_location(table_root, descriptor.storage_type, descriptor.path_or_inline_dv,
                                descriptor.absolute_path(table_root), confine)
    storage = storage or storage_for(table_root)
    if confine and storage.is_local:
        check_local_files(table_root, [location], True, _missing_dv)
    where = f"deletion vector file {location} at offset {descriptor.offset}"
    return read_bitmap_bytes(storage, location, descriptor), where


def bitmap_from_bytes(descriptor: DeletionVectorDescriptor, raw: bytes | None, where: str) -> pyroaring.BitMap64:
    """Deserialize ``dv_bytes``' result, verified against the descriptor's cardinality."""
    bitmap = roaring.deserialize(raw, where) if raw is not None else pyroaring.BitMap64()
    if len(bitmap) != descriptor.cardinality:
        raise DeletionVectorIntegrityError(
            f"{where}: cardinality mismatch: descriptor says {descriptor.cardinality} rows, bitmap holds {len(bitmap)}",
            error_class="DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH")
    return bitmap


def load_bitmap(descriptor: DeletionVectorDescriptor, table_root: str, storage: Storage | None = None, *,
                confine: bool = True) -> pyroaring.BitMap64:
    """The rows a DV marks deleted, verified against the descriptor's cardinality.

    ``storage`` defaults to the table root's (``storage_for``), which is what executors use.
    ``confine`` (the table's confinement setting, see ``storage/confine.py``): the DV file must
    resolve inside ``table_root``; a symlink leaving it is refused too.
    """
    raw, where = dv_bytes(descriptor, table_root, storage, confine=confine)
    return bitmap_from_bytes(descriptor, raw, where)


def has_format_version(f: RandomAccessFile) -> bool:
    """Whether an open DV file starts with the format version byte (health checks it without reading DVs)."""
    f.seek(0)
    return f.read(1) == bytes([FORMAT_VERSION])


def stored_size(f: RandomAccessFile, offset: int, size: int, total: int) -> int | None:
    """The size field of the DV record at ``offset`` of an open DV file of ``total`` bytes, when a record of
    ``size`` bytes fits there (None otherwise): a health check of the descriptors, 4 bytes read per DV."""
    if offset < 1 or offset + 4 + size + 4 > total:
        return None
    f.seek(offset)
    head = f.read(4)
    return struct.unpack(">I", head)[0] if len(head) == 4 else None


class DeletionVectorWriter:
    """Appends DVs to DV files under a table root, opening a new file when one reaches the target size."""

    def __init__(self, table_root: str, storage: Storage | None = None, *, target_file_size: int = 2 * 1024 * 1024,
                 random_prefix_length: int = 0) -> None:
        if not 0 < target_file_size < MAX_FILE_SIZE:
            raise InvalidArgumentError(f"DV target file size must be in (0, 1.5 GiB); got {target_file_size}")
        self.table_root = table_root.rstrip("/")
        self._storage = storage or storage_for(self.table_root)
        self.target_file_size = target_file_size
        self.random_prefix_length = random_prefix_length
        self._stream: IO[bytes] | None = None
        self._uuid: uuid.UUID | None = None
        self._prefix = ""
        self._pos = 0
        self.files_written: list[str] = []
        self.bytes_written = 0

    def add(self, bitmap: pyroaring.BitMap64) -> DeletionVectorDescriptor:
        """Write one DV; returns its ``u`` descriptor (with an explicit offset)."""
        bitmap.run_optimize()
        magic, body = roaring.serialize_parts(bitmap)  # streamed without concatenating (DVs can be MBs)
        size = len(magic) + len(body)
        crc = zlib.crc32(body, zlib.crc32(magic)) & 0xFFFFFFFF
        record_len = 4 + size + 4
        if self._stream is not None and self._pos + record_len > self.target_file_size:
            self.close()
        if self._stream is None:
            self._open()
        assert self._stream is not None and self._uuid is not None
        offset = self._pos
        self._stream.write(struct.pack(">I", size) + magic)
        self._stream.write(body)
        self._stream.write(struct.pack(">I", crc))
        self._pos += record_len
        self.bytes_written += record_len
        return DeletionVectorDescriptor.on_disk(self._uuid, offset, size, len(bitmap), self._prefix)

    def _open(self) -> None:
        self._uuid = uuid.uuid4()
        self._prefix = "".join(random.choices(string.ascii_letters + string.digits, k=self.random_prefix_length))
        rel = f"{self._prefix}/{dv_file_name(self._uuid)}" if self._prefix else dv_file_name(self._uuid)
        path = f"{self.table_root}/{rel}"
        self._stream = self._storage.open_output(path)
        self._stream.write(bytes([FORMAT_VERSION]))
        self._pos = 1
        self.bytes_written += 1
        self.files_written.append(path)

    def close(self) -> None:
        """Finish the current file; a failure here must fail the command (the DVs are not durable)."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()

    def __enter__(self) -> DeletionVectorWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
