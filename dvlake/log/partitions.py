"""Partition values: Delta's string encoding in ``partitionValues`` to typed Python values and back.

PROTOCOL.md "Partition Value Serialization": dates as ``YYYY-MM-DD``, timestamps as
``YYYY-MM-DD HH:MM:SS[.ffffff]`` (UTC) or ISO-8601 with ``Z``, booleans ``true``/``false``,
numbers in plain text, an empty string or null meaning null.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from dvlake.errors import CorruptLogError


def parse_partition_value(text: str | None, delta_type: Any) -> Any:
    """One partition value string to the Python value of its Delta type (None for null)."""
    if text is None or text == "":
        return None
    t = delta_type if isinstance(delta_type, str) else delta_type.get("type")
    try:
        if t in ("byte", "short", "integer", "long"):
            return int(text)
        if t in ("float", "double"):
            return float(text)
        if t == "boolean":
            return text.lower() == "true"
        if t == "string":
            return text
        if t == "date":
            return dt.date.fromisoformat(text[:10])
        if t == "timestamp":
            return _parse_timestamp(text).replace(tzinfo=dt.timezone.utc) if _parse_timestamp(text).tzinfo is None \
                else _parse_timestamp(text).astimezone(dt.timezone.utc)
        if t == "timestamp_ntz":
            return _parse_timestamp(text).replace(tzinfo=None)
        if t.startswith("decimal"):
            return decimal.Decimal(text)
        if t == "binary":
            return text.encode("utf-8")
    except (ValueError, decimal.InvalidOperation) as exc:
        raise CorruptLogError(f"partition value {text!r} is not a valid {t}: {exc}") from exc
    raise CorruptLogError(f"partition columns of type {t} are not supported")


def _parse_timestamp(text: str) -> dt.datetime:
    s = text.strip().replace("T", " ")
    if s.endswith("Z"):
        return dt.datetime.fromisoformat(s[:-1]).replace(tzinfo=dt.timezone.utc)
    return dt.datetime.fromisoformat(s)


def format_partition_value(value: Any) -> str | None:
    """A typed value to Delta's partition value string."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(sep=" ", timespec="microseconds" if value.microsecond else "seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)
