"""One sentence per maintenance command, from the metrics it returns (``--json`` prints the metrics themselves).

The sentences say what changed in the units a user thinks in (files, deleted rows, bytes) and,
when nothing changed, why, so an empty result is never mistaken for a failure.
"""

from __future__ import annotations

from typing import Any

from dvlake.display import human_bytes


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``count(1, "file")`` -> '1 file', ``count(3, "file")`` -> '3 files' (thousands separated)."""
    return f"{n:,} {noun if n == 1 else (plural or noun + 's')}"


def optimize_line(metrics: dict[str, Any], *, purge: bool = False, where: str | None = None) -> str:
    """OPTIMIZE / REORG … APPLY (PURGE): '3 files → 1, 510 deleted rows dropped in 1 partition (1.2 MB → 0.9 MB)'."""
    removed = int(metrics.get("numFilesRemoved") or 0)
    added = int(metrics.get("numFilesAdded") or 0)
    scope = f" matching {where}" if where else ""
    if removed == 0:
        considered = int(metrics.get("totalConsideredFiles") or 0)
        if purge:
            return f"nothing to purge: none of the {count(considered, 'file')}{scope} has a deletion vector"
        return (f"nothing to compact: none of the {count(considered, 'file')}{scope} is small enough or has enough "
                "deleted rows to be rewritten (a partition's lone file is kept; `dvlake purge` rewrites it)")
    dv_stats = metrics.get("deletionVectorStats") or {}
    dropped = int(dv_stats.get("numDeletionVectorRowsRemoved") or 0)
    partitions = int(metrics.get("partitionsOptimized") or 0)
    before = int((metrics.get("filesRemoved") or {}).get("totalSize") or 0)
    after = int((metrics.get("filesAdded") or {}).get("totalSize") or 0)
    where_text = f" in {count(partitions, 'partition')}" if partitions else ""
    return (f"{count(removed, 'file')} → {added:,}, {count(dropped, 'deleted row')} dropped{where_text} "
            f"({human_bytes(before)} → {human_bytes(after)})")


def restore_line(row: dict[str, Any], target: str) -> str:
    """RESTORE: 'restored to version 3: 2 files restored, 5 removed; now 8 files (1.2 MB)'."""
    restored = int(row.get("num_restored_files") or 0)
    removed = int(row.get("num_removed_files") or 0)
    files = int(row.get("num_of_files_after_restore") or 0)
    size = int(row.get("table_size_after_restore") or 0)
    if restored == 0 and removed == 0:
        return f"restored to {target}: the table already had those files; now {count(files, 'file')} ({human_bytes(size)})"
    return (f"restored to {target}: {count(restored, 'file')} restored, {removed:,} removed; "
            f"now {count(files, 'file')} ({human_bytes(size)})")


def vacuum_line(result: Any, now_ms: int) -> str:
    """VACUUM (``result`` is ``dvlake.commands.vacuum.VacuumResult``), dry run or real; the retention shown is the
    one VACUUM applied (``now_ms`` minus its horizon), which is the table's when a RETAIN was ignored."""
    n = int(result.num_files_to_delete)
    size = human_bytes(int(result.size_to_delete))
    hours = max(now_ms - int(result.delete_before_ms), 0) / 3_600_000
    keep = f"{hours:,.0f} hours" if hours >= 1 else f"{hours * 60:,.0f} minutes"
    what = count(n, "file or folder", "files and folders")
    if result.dry_run:
        if n == 0:
            return (f"nothing to delete: no file the table no longer references is older than the retention ({keep}); "
                    "the table keeps such files for time travel until then")
        return f"{what} ({size}) would be deleted: no longer referenced and older than the retention ({keep})"
    deleted = int(result.num_deleted)
    if deleted == 0:
        return f"nothing deleted: no file the table no longer references is older than the retention ({keep})"
    return (f"deleted {count(deleted, 'file or folder', 'files and folders')} ({size}) no longer referenced and "
            f"older than the retention ({keep})")
