"""Z85 (ZeroMQ RFC 32), as Delta uses it for inline DVs and the UUIDs of DV file names.

Hand-written: the codec is ~40 lines, fixed by the spec, and no maintained PyPI package offers
Delta's padding rule (zero-pad to a multiple of 4; the real length comes from ``sizeInBytes``).
"""

from __future__ import annotations

import uuid

from dvlake.errors import InvalidDescriptorError

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_DECODE = {c: i for i, c in enumerate(ALPHABET)}
_POW = (85**4, 85**3, 85**2, 85, 1)


def encode(data: bytes) -> str:
    """Encode bytes, zero-padded to a multiple of 4 (5 characters per 4 bytes)."""
    pad = (-len(data)) % 4
    if pad:
        data = data + b"\x00" * pad
    out = []
    for i in range(0, len(data), 4):
        v = int.from_bytes(data[i:i + 4], "big")
        out.append(ALPHABET[v // 52200625] + ALPHABET[v // 614125 % 85] + ALPHABET[v // 7225 % 85]
                   + ALPHABET[v // 85 % 85] + ALPHABET[v % 85])
    return "".join(out)


def decode(text: str) -> bytes:
    """Decode to the padded bytes; the caller truncates to the real length."""
    if len(text) % 5:
        raise InvalidDescriptorError(f"Z85 text must have a length that is a multiple of 5; got {len(text)} characters")
    out = bytearray()
    for i in range(0, len(text), 5):
        v = 0
        for j, ch in enumerate(text[i:i + 5]):
            d = _DECODE.get(ch)
            if d is None:
                raise InvalidDescriptorError(f"invalid Z85 character {ch!r} at position {i + j}")
            v += d * _POW[j]
        if v > 0xFFFFFFFF:
            raise InvalidDescriptorError(f"Z85 group {text[i:i + 5]!r} at position {i} is worth {v}, above 2**32-1")
        out += v.to_bytes(4, "big")
    return bytes(out)


def encode_uuid(u: uuid.UUID) -> str:
    """A UUID as Delta's 20-character token (RFC 4122 byte order, like Java's msb‖lsb)."""
    return encode(u.bytes)


def decode_uuid(text: str) -> uuid.UUID:
    if len(text) != 20:
        raise InvalidDescriptorError(f"an encoded UUID has 20 Z85 characters; got {len(text)}: {text!r}")
    return uuid.UUID(bytes=decode(text))
