"""Partition values: Delta's string encoding in ``partitionValues`` to typed Python values.

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
        if t == "timestamp":  # UTC unless the text says otherwise
            ts = _parse_timestamp(text)
            return ts.replace(tzinfo=dt.UTC) if ts.tzinfo is None else ts.astimezone(dt.UTC)
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
        return dt.datetime.fromisoformat(s[:-1]).replace(tzinfo=dt.UTC)
    return dt.datetime.fromisoformat(s)
