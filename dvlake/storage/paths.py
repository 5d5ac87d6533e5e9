"""Path and URI helpers.

dvlake keeps a table root either as a plain absolute local path (``/data/t``) or as a URI with
a scheme (``s3://bucket/t``). ``file:`` URIs are turned into plain paths so that every layer
(and Spark) sees one spelling of a local table.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, unquote, urlparse

from dvlake.errors import InvalidArgumentError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")

#: URI schemes of the object stores dvlake commits to with their create-only write (``storage.objectstore``),
#: and the store each is.
OBJECT_STORE_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "abfs": "azure", "abfss": "azure", "az": "azure"}


def has_scheme(location: str) -> bool:
    """True for ``s3://…``, ``file:/…``; false for plain paths (a Windows drive is not a scheme)."""
    return bool(_SCHEME.match(location)) and not re.match(r"^[A-Za-z]:[\\/]", location)


def normalize_table_root(location: str | os.PathLike[str]) -> str:
    """Canonical table root: absolute local path without trailing slash, or a URI without one."""
    location = os.fspath(location)
    if has_scheme(location):
        parsed = urlparse(location)
        if parsed.scheme == "file":
            return os.path.abspath(unquote(parsed.path)).rstrip("/") or "/"
        return location.rstrip("/")
    return os.path.abspath(location).rstrip("/") or "/"


def join(root: str, *parts: str) -> str:
    """Join path segments with '/', whatever the root's style."""
    out = root.rstrip("/")
    for p in parts:
        out = out + "/" + p.strip("/")
    return out


def decode_relative_path(path: str) -> str:
    """Turn an ``add.path`` (URL-encoded, relative or absolute URI) into a filesystem location part."""
    if has_scheme(path):
        parsed = urlparse(path)
        if parsed.scheme == "file":
            return unquote(parsed.path)
        return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
    return unquote(path)


def absolute_file_location(table_root: str, add_path: str) -> str:
    """Where the data file named by ``add.path`` lives (relative paths are under the table root)."""
    decoded = decode_relative_path(add_path)
    if has_scheme(add_path) or decoded.startswith("/"):
        return decoded
    return join(table_root, decoded)


def encode_relative_path(relative: str) -> str:
    """URL-encode a relative file path the way Delta writes ``add.path`` (keeps '/', '=')."""
    return quote(relative, safe="/=")


def relativize(table_root: str, location: str) -> str:
    """The path of ``location`` relative to the table root (raises if it lies outside)."""
    root = table_root.rstrip("/") + "/"
    if not location.startswith(root):
        raise InvalidArgumentError(f"{location!r} is not inside the table root {table_root!r}")
    return location[len(root):]


def path_key(location: str) -> str:
    """One spelling for a file location, whether Spark's ``file:/…`` URI or dvlake's plain path."""
    if location.startswith("file:"):
        return unquote(urlparse(location).path)
    if "://" in location:
        parsed = urlparse(location)
        return f"{parsed.scheme}://{parsed.netloc}{unquote(parsed.path)}"
    return location
