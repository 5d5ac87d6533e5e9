"""Helpers for the delta-spark-written tables in ../shared/testdata: manifest, preparation, fingerprints."""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import json
import math
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

PREFIX = "test%dv%prefix-"


def manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "MANIFEST.json").read_text())


def tables(root: Path) -> list[dict[str, Any]]:
    return manifest(root)["tables"]


def prepare(root: Path, entry: dict[str, Any], scratch: Path) -> Path:
    """A readable location for the table: in place, or a scratch copy fixed as the README says."""
    src = root / entry["path"]
    special = entry.get("special_handling") or {}
    if not special:
        return src
    dst = scratch / entry["name"]
    if dst.exists():
        return dst
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    if "dv_file_name_prefix" in special:
        prefix = special["dv_file_name_prefix"]
        for p in list(dst.rglob(f"{prefix}deletion_vector_*.bin")):
            p.rename(p.with_name(p.name[len(prefix):]))
    if "template" in special:
        t = special["template"]
        log = dst / t["file"]
        folder = str(dst.resolve()) + "/folder&with%25special%20char"
        log.write_text(log.read_text().replace(t["placeholder"], folder))
    return dst


# --- the row fingerprint of ../shared/testdata/README.md (our own implementation of its rules) ---

def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def render(value: Any, dtype: Any) -> Any:
    if value is None:
        return None
    if isinstance(dtype, dict):
        kind = dtype["type"]
        if kind == "struct":
            get = value.asDict() if hasattr(value, "asDict") else value
            return {f["name"]: render(get.get(f["name"]), f["type"]) for f in dtype["fields"]}
        if kind == "array":
            return [render(v, dtype["elementType"]) for v in value]
        if kind == "map":
            items = value.items() if isinstance(value, dict) else value
            pairs = [[render(k, dtype["keyType"]), render(v, dtype["valueType"])] for k, v in items]
            return sorted(pairs, key=lambda kv: _canonical(kv[0]))
        raise TypeError(dtype)
    if dtype in ("byte", "short", "integer", "long"):
        return int(value)
    if dtype == "boolean":
        return bool(value)
    if dtype in ("float", "double"):
        x = float(value)
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return x
    if dtype.startswith("decimal("):
        scale = int(dtype[:-1].split(",")[1])
        return format(decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-scale)), "f")
    if dtype == "string":
        return str(value)
    if dtype == "binary":
        return bytes(value).hex()
    if dtype == "date":
        return value.isoformat()
    if dtype == "timestamp":
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    if dtype == "timestamp_ntz":
        return value.replace(tzinfo=None).isoformat(timespec="microseconds")
    raise TypeError(dtype)


def fingerprint(rows: Iterable[dict[str, Any]], schema: dict[str, Any]) -> str:
    lines = sorted(_canonical({f["name"]: render(r.get(f["name"]), f["type"]) for f in schema["fields"]}) for r in rows)
    return hashlib.sha256("".join(line + "\n" for line in lines).encode("utf-8")).hexdigest()


def manifest_schema(entry: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": [{"name": c["name"], "type": c["type"]} for c in entry["columns"]]}
