"""One sentence per maintenance command, from the metrics it returns (``--json`` prints the metrics themselves).

The sentences say what changed in the units a user thinks in (files, deleted rows, bytes) and,
when nothing changed, why, so an empty result is never mistaken for a failure.
"""

from __future__ import annotations

import re
from typing import Any

from dvlake.display import count, human_bytes


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
    """VACUUM (``result`` is ``dvlake.commands.maintenance.vacuum.VacuumResult``), dry run or real; the retention shown is the
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


# --- dvlake sql: the same sentences for the statements that change a table --------------------------

#: The statements ``dvlake sql`` summarises in a sentence (the others print their result rows).
SUMMARISED = frozenset({"DELETE", "UPDATE", "MERGE", "INSERT", "OPTIMIZE", "REORG", "VACUUM", "RESTORE"})


def statement_kind(statement: str) -> str | None:
    """The statement's first keyword when it is one of ``SUMMARISED`` (comments skipped), else None."""
    from dvlake.errors import DeltaSqlError
    from dvlake.sqlfront.parse import tokenize

    try:
        tokens = tokenize(statement.strip().rstrip(";"))
    except DeltaSqlError:
        return None
    if not tokens:
        return None
    word = tokens[0].text.upper()
    return word if word in SUMMARISED else None


def _clause(statement: str, pattern: str) -> str | None:
    found = re.search(pattern, statement, flags=re.IGNORECASE | re.DOTALL)
    return " ".join(found.group(1).split()) if found else None


def is_dry_run(statement: str) -> bool:
    """Whether a VACUUM statement says DRY RUN."""
    return re.search(r"\bDRY\s+RUN\b", statement, flags=re.IGNORECASE) is not None


def dml_line(kind: str, row: dict[str, Any]) -> str | None:
    """DELETE / UPDATE / MERGE / INSERT from their ``num_*_rows`` columns: '3 rows deleted'; None without them."""
    if "num_affected_rows" not in row:
        return None
    n = int(row.get("num_affected_rows") or 0)
    if kind == "MERGE":
        parts = [f"{int(row.get(f'num_{what}_rows') or 0):,} {what}" for what in ("updated", "deleted", "inserted")
                 if f"num_{what}_rows" in row]
        return f"{count(n, 'row')} changed by the MERGE" + (f": {', '.join(parts)}" if parts else "")
    verb = {"DELETE": "deleted", "UPDATE": "updated", "INSERT": "inserted"}[kind]
    return f"{count(n, 'row')} {verb}"


def sql_line(statement: str, kind: str, columns: list[str], rows: list[dict[str, Any]]) -> str | None:
    """One sentence for a ``SUMMARISED`` statement's result (the rows as plain dicts); None when the result does
    not have the shape the sentence needs (then the rows are printed as they are)."""
    if kind in ("DELETE", "UPDATE", "MERGE", "INSERT"):
        return dml_line(kind, rows[0]) if len(rows) == 1 else None
    if kind in ("OPTIMIZE", "REORG"):
        if len(rows) != 1 or not isinstance(rows[0].get("metrics"), dict):
            return None
        where = _clause(statement, r"\bWHERE\b(.*?)(?:\bZORDER\s+BY\b|\bAPPLY\b|;|$)")
        return optimize_line(rows[0]["metrics"], purge=kind == "REORG", where=where)
    if kind == "RESTORE":
        if len(rows) != 1 or "num_restored_files" not in rows[0]:
            return None
        target = _clause(statement, r"\b((?:VERSION|TIMESTAMP)\s+AS\s+OF\s+.+?)\s*;?\s*$")
        shown = re.sub(r"^(VERSION|TIMESTAMP)\s+AS\s+OF\s+", lambda m: m.group(1).lower() + " ", target or "",
                       flags=re.IGNORECASE)
        return restore_line(rows[0], shown or "the earlier version")
    if kind == "VACUUM" and columns == ["path"]:
        if is_dry_run(statement):
            if not rows:
                return ("nothing to delete: no file the table no longer references is older than the retention; "
                        "the table keeps such files for time travel until then")
            return f"{count(len(rows), 'file or folder', 'files and folders')} would be deleted (listed above)"
        return (f"VACUUM of {rows[0]['path']} done: files it no longer references, older than the retention, are deleted"
                if len(rows) == 1 else None)
    return None
