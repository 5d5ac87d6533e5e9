"""DeletionVectorDescriptor: where a DV lives and what it holds, as stored in add/remove actions."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import unquote, urlparse

from dvlake.dv import z85
from dvlake.errors import InvalidDescriptorError

STORAGE_TYPES = ("u", "p", "i")
UUID_CHARS = 20


_DV_FILE_NAME = re.compile(r"deletion_vector_[0-9a-fA-F-]{36}\.bin")


def dv_file_name(file_uuid: uuid.UUID) -> str:
    return f"deletion_vector_{file_uuid}.bin"


def is_dv_file_name(name: str) -> bool:
    """Whether a file name has the shape :func:`dv_file_name` gives (what VACUUM and health may treat as a DV file)."""
    return _DV_FILE_NAME.fullmatch(name) is not None


def dv_unique_id(storage_type: str, path_or_inline_dv: str, offset: int | None) -> str:
    """The one rule for a DV's unique id: ``storageType + pathOrInlineDv [+ '@' + offset]``.

    Log replay reconciles files by (path, this id), so every form of it (this scalar one, the JSON
    form in ``log.replay`` and the vectorized Arrow form in ``log.arrow``) must agree; a test proves
    the Arrow form equal to this one for every descriptor of the shared delta-spark tables.
    """
    base = storage_type + path_or_inline_dv
    return base if offset is None else f"{base}@{offset}"

def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _count(value: Any) -> int:
    """A non-negative integer field (JSON numbers only: a bool or a fraction is malformed)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    number = int(value)
    if number != value and not isinstance(value, str):
        raise ValueError(f"expected an integer, got {value!r}")
    if number < 0:
        raise ValueError(f"expected a non-negative number, got {number}")
    return number


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """storageType ``u`` (table-relative UUID path), ``p`` (absolute URI) or ``i`` (inline Z85)."""

    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    EMPTY: ClassVar[DeletionVectorDescriptor]

    def __post_init__(self) -> None:
        if self.storage_type not in STORAGE_TYPES:
            raise InvalidDescriptorError(
                f"unknown deletion vector storageType {self.storage_type!r}; expected one of {STORAGE_TYPES}")

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DeletionVectorDescriptor:
        """Parse and sanity-check a descriptor from the log (a hostile log gets a typed error, never a crash)."""
        if not isinstance(d, dict):
            raise InvalidDescriptorError(f"a deletion vector descriptor must be a JSON object; got {type(d).__name__}")
        try:
            offset = d.get("offset")
            out = cls(_text(d["storageType"]), _text(d["pathOrInlineDv"]), _count(d["sizeInBytes"]),
                      _count(d["cardinality"]), _count(offset) if offset is not None else None)
        except KeyError as exc:
            raise InvalidDescriptorError(f"deletion vector descriptor {d!r} lacks the field {exc}") from exc
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidDescriptorError(f"deletion vector descriptor {d!r} has a malformed field: {exc}") from exc
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline_dv}
        if self.offset is not None:
            out["offset"] = self.offset
        out["sizeInBytes"] = self.size_in_bytes
        out["cardinality"] = self.cardinality
        return out

    @property
    def unique_id(self) -> str:
        return dv_unique_id(self.storage_type, self.path_or_inline_dv, self.offset)

    @property
    def is_inline(self) -> bool:
        return self.storage_type == "i"

    @property
    def is_on_disk(self) -> bool:
        return self.storage_type in ("u", "p")

    def relative_path(self) -> str:
        """``<prefix>/deletion_vector_<uuid>.bin`` of a ``u`` DV."""
        if self.storage_type != "u":
            raise InvalidDescriptorError(f"only storageType 'u' DVs have a table-relative path (this is {self.storage_type!r})")
        s = self.path_or_inline_dv
        if len(s) < UUID_CHARS:
            raise InvalidDescriptorError(f"'u' deletion vector path {s!r} is shorter than a 20-character encoded UUID")
        prefix, token = s[: len(s) - UUID_CHARS], s[len(s) - UUID_CHARS:]
        name = dv_file_name(z85.decode_uuid(token))
        return f"{prefix}/{name}" if prefix else name

    def absolute_path(self, table_root: str) -> str:
        """The DV file's location, in the style of ``table_root`` (plain path or URI)."""
        if self.storage_type == "u":
            return table_root.rstrip("/") + "/" + self.relative_path()
        if self.storage_type == "p":
            try:
                parsed = urlparse(self.path_or_inline_dv)
            except ValueError as exc:
                raise InvalidDescriptorError(f"'p' deletion vector path {self.path_or_inline_dv!r} is not a URI: {exc}") from exc
            if parsed.scheme in ("", "file"):
                return unquote(parsed.path)
            return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
        raise InvalidDescriptorError("an inline deletion vector has no file")

    def inline_bitmap_bytes(self) -> bytes:
        if not self.is_inline:
            raise InvalidDescriptorError(f"storageType {self.storage_type!r} is not inline")
        data = z85.decode(self.path_or_inline_dv)
        if len(data) < self.size_in_bytes:
            raise InvalidDescriptorError(
                f"inline deletion vector decodes to {len(data)} bytes, fewer than sizeInBytes {self.size_in_bytes}")
        return data[: self.size_in_bytes]

    @classmethod
    def inline(cls, bitmap_bytes: bytes, cardinality: int) -> DeletionVectorDescriptor:
        return cls("i", z85.encode(bitmap_bytes), len(bitmap_bytes), cardinality)

    @classmethod
    def on_disk(cls, file_uuid: uuid.UUID, offset: int, size_in_bytes: int, cardinality: int,
                prefix: str = "") -> DeletionVectorDescriptor:
        return cls("u", prefix + z85.encode_uuid(file_uuid), size_in_bytes, cardinality, offset)


DeletionVectorDescriptor.EMPTY = DeletionVectorDescriptor("i", "", 0, 0)
