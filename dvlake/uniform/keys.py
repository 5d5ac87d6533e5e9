"""A manifest's key sidecar: the paths its live entries name, so a conversion need not read the manifest to find them.

A conversion step has to know every live data file and DV of the previous Iceberg snapshot (to check
the commit against it and to find the few manifests a commit touches), but it rewrites only those few.
Reading every manifest for that costs a new process a read of the whole table's Avro metadata (10,000
entries with their stats and bounds) before it can convert a 3-file DELETE. So each manifest dvlake
writes gets a sidecar ``<manifest>.keys`` beside it, written in the same step before the manifest list
and the metadata JSON that publish it: the data file paths (data manifests) or the referenced data
files (delete manifests) of its entries, in entry order, and for data manifests each entry's
``first_row_id`` and data sequence number (V3 row lineage compares them with a re-added file's).

A sidecar belongs to exactly one manifest, never to a snapshot: manifests are immutable and their
names unique (the step's random tag), so a snapshot reusing a manifest reuses its sidecar, and a crash
before the metadata JSON leaves both unpublished (VACUUM removes them as it removes the manifest). It
is only trusted when it names the manifest's path, length, content and live entry count as the
manifest list records them and decompresses and parses whole; anything else (missing, torn,
corrupt, written for another manifest) makes the reader read that one manifest, as it always did.

A sidecar is a hint, never the truth: a well-formed one could still list other paths than its manifest
(a stray write, a restore of another table's ``metadata/``), and its keys decide which manifests a
conversion keeps unread. So the manifest itself carries a digest of its live entries' keys in its Avro
header (``KEYS_DIGEST``, written with the manifest; Iceberg readers ignore unknown header keys), and a
sidecar's keys are used only when they hash to it: a check that reads the manifest's header, not its
entries. A manifest without the digest (written before it existed) is read whole. A sidecar that is not a
regular file (a directory, a FIFO) is treated as missing and replaced.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Any

from dvlake.uniform import avro

SUFFIX = ".keys"
_FORMAT = 1
#: The manifest's Avro header key holding :func:`digest` of its live entries' keys.
KEYS_DIGEST = "dvlake.keys-sha256"


def sidecar_path(manifest_path: str) -> str:
    """``…/00007-<tag>-m2.avro`` -> ``…/00007-<tag>-m2.keys`` (a storage path, as ``manifest_path`` is)."""
    stem = manifest_path[:-len(".avro")] if manifest_path.endswith(".avro") else manifest_path
    return stem + SUFFIX


def live_count(record: dict[str, Any]) -> int:
    """How many live (ADDED or EXISTING) entries the manifest list says the manifest has."""
    return int(record["added_files_count"]) + int(record["existing_files_count"])


def digest(keys: list[str]) -> str:
    """SHA-256 of the keys in entry order (what binds a sidecar to the manifest whose header holds it)."""
    return hashlib.sha256(json.dumps(keys, separators=(",", ":")).encode("utf-8")).hexdigest()


def entry_keys(entries: list[dict[str, Any]], content: int) -> list[str]:
    """The keys of a manifest's live entries: data file paths (data manifests) or referenced data files (deletes)."""
    field = "file_path" if content == avro.MANIFEST_CONTENT_DATA else "referenced_data_file"
    return [e["data_file"][field] for e in entries if e["status"] != avro.STATUS_DELETED]


def encode(record: dict[str, Any], keys: list[str], lineage: list[tuple[int | None, int]] | None) -> bytes:
    body = {"format": _FORMAT, "manifest": record["manifest_path"], "length": record["manifest_length"],
            "content": record["content"], "keys": keys, "lineage": None if lineage is None else [list(p) for p in lineage]}
    return zlib.compress(json.dumps(body, separators=(",", ":")).encode("utf-8"), 1)


def decode(raw: bytes, record: dict[str, Any]) -> tuple[list[str], list[tuple[int | None, int]] | None] | None:
    """(keys, lineage) when ``raw`` is the intact sidecar of the manifest ``record`` describes, else None."""
    try:
        body = json.loads(zlib.decompress(raw))
    except (zlib.error, ValueError):
        return None
    if not isinstance(body, dict) or body.get("format") != _FORMAT:
        return None
    if (body.get("manifest") != record["manifest_path"] or body.get("length") != record["manifest_length"]
            or body.get("content") != record["content"]):
        return None
    keys, lineage = body.get("keys"), body.get("lineage")
    if not isinstance(keys, list) or len(keys) != live_count(record) or not all(isinstance(k, str) for k in keys):
        return None
    if record["content"] != avro.MANIFEST_CONTENT_DATA:
        return (keys, None) if lineage is None else None
    if not isinstance(lineage, list) or len(lineage) != len(keys):
        return None
    pairs: list[tuple[int | None, int]] = []
    for p in lineage:
        if (not isinstance(p, list) or len(p) != 2 or not (p[0] is None or type(p[0]) is int)
                or type(p[1]) is not int):
            return None
        pairs.append((p[0], p[1]))
    return keys, pairs
