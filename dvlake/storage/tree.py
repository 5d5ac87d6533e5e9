"""Walking a table's directory tree for VACUUM, and deleting inside it without ever leaving it.

The walk streams entries (it never builds the whole listing), prunes the folders the caller calls
hidden (``_delta_log`` can be huge) and never follows or yields a symbolic link: a link inside a
table may point anywhere, and VACUUM must not delete (or even look) outside the table root.
``delete_inside`` re-checks, at the last moment, that the real location of what it deletes lies
under the real table root, so a bad path from any source (a log's ``..`` segment, an absolute
path, a link swapped in after listing) deletes nothing.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from dvlake.storage.base import Storage


@dataclass(frozen=True)
class TreeEntry:
    """A file or folder below the table root; ``relative`` is '/'-separated and not URL-encoded."""

    relative: str
    size: int
    mtime_ms: int
    is_dir: bool


def walk_tree(storage: Storage, root: str, hidden: Callable[[str], bool]) -> Iterator[TreeEntry]:
    """Every file and folder below ``root`` whose path has no hidden component; links are skipped."""
    if storage.is_local:
        yield from _walk_local(root, hidden)
        return
    base = root.rstrip("/") + "/"  # object stores: files only (their folders are just prefixes)
    for info in storage.walk(root):
        if not info.path.startswith(base):
            continue
        rel = info.path[len(base):]
        if any(hidden(part) for part in rel.split("/")):
            continue
        yield TreeEntry(rel, info.size, info.mtime_ms, False)


def _walk_local(root: str, hidden: Callable[[str], bool]) -> Iterator[TreeEntry]:
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel_dir) if rel_dir else root))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for e in entries:
            if hidden(e.name):
                continue
            try:
                if e.is_symlink():
                    continue  # never follow, never delete: a link may lead out of the table
                st = e.stat(follow_symlinks=False)
                rel = f"{rel_dir}/{e.name}" if rel_dir else e.name
                if e.is_dir(follow_symlinks=False):
                    yield TreeEntry(rel, 0, int(st.st_mtime * 1000), True)
                    stack.append(rel)
                elif e.is_file(follow_symlinks=False):
                    yield TreeEntry(rel, st.st_size, int(st.st_mtime * 1000), False)
            except FileNotFoundError:
                continue  # removed by someone else between listing and stat


def safe_relative(relative: str) -> str | None:
    """``relative`` normalized, or None when it is empty, absolute or climbs out with ``..``."""
    if not relative or relative.startswith("/") or "\\" in relative:
        return None
    norm = posixpath.normpath(relative)
    if norm in (".", "..") or norm.startswith(("../", "/")):
        return None
    return norm


class RootGuard:
    """Answers "is this relative path really inside the table root?" (links resolved, locally)."""

    def __init__(self, storage: Storage, root: str) -> None:
        self.storage = storage
        self.root = root.rstrip("/")
        self.real_root = os.path.realpath(self.root) if storage.is_local else self.root

    def location(self, relative: str) -> str | None:
        """The absolute location to delete for ``relative``, or None when it would leave the root."""
        rel = safe_relative(relative)
        if rel is None:
            return None
        location = f"{self.root}/{rel}"
        if not self.storage.is_local:
            return location
        if os.path.islink(location):
            return None
        parent = os.path.realpath(os.path.dirname(location))
        if parent != self.real_root and not parent.startswith(self.real_root + os.sep):
            return None
        return location


def delete_inside(guard: RootGuard, relative: str) -> bool:
    """Delete one file below the root; False when it was absent or lies outside the root."""
    location = guard.location(relative)
    if location is None:
        return False
    storage = guard.storage
    if storage.is_local:
        try:
            os.unlink(location)
            return True
        except FileNotFoundError:
            return False
        except IsADirectoryError:
            return False
    storage.delete(location)  # a listed candidate: counted as deleted (stores do not say whether it existed)
    return True


def delete_many_inside(guard: RootGuard, relatives: list[str]) -> int:
    """``delete_inside`` for many files: one batched request per thousand on object stores (S3 ``DeleteObjects``)
    instead of one request each; locally, file by file with the same checks. Returns how many were deleted."""
    if guard.storage.is_local:
        return sum(1 for rel in relatives if delete_inside(guard, rel))
    locations = [loc for loc in map(guard.location, relatives) if loc is not None]
    guard.storage.delete_many(locations)  # listed candidates: counted as deleted, as in delete_inside
    return len(locations)


def remove_empty_dir(guard: RootGuard, relative: str) -> bool:
    """Remove a folder below the root if it is empty (object stores have no folders to remove)."""
    location = guard.location(relative)
    if location is None or not guard.storage.is_local:
        return False
    try:
        os.rmdir(location)
        return True
    except OSError:
        return False  # not empty (e.g. hidden .crc files stay, as with delta-spark) or already gone
