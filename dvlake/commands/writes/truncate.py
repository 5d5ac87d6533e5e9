"""TRUNCATE TABLE: every row goes in one commit, the table (schema, properties, history) stays.

delta-spark's TRUNCATE TABLE (its ``TruncateDeltaTableCommand``) removes every live file in one transaction, recorded
as operation ``TRUNCATE``: unlike a directory wipe, time travel and the change feed still see the rows that were there.
A truncate of an empty table commits nothing. Reading the whole table is registered, so a concurrent append is a
conflict rather than a row that survives a truncate that reported success.
"""

from __future__ import annotations

from dvlake.log.actions import now_ms
from dvlake.log.snapshot import Snapshot
from dvlake.log.stats import num_records_of
from dvlake.storage.paths import normalize_table_root
from dvlake.txn.transaction import OptimisticTransaction


def truncate(path: str) -> int | None:
    """Remove every row of the table at ``path`` in one ``TRUNCATE`` commit.

    Returns:
        The committed version, or None when the table had no files (nothing to commit).
    """
    root = normalize_table_root(path)
    snapshot = Snapshot.load(root)
    files = snapshot.add_files()
    if not files:
        return None
    ts = now_ms()
    counts = [num_records_of(a.stats) for a in files]
    metrics: dict[str, int] = {"numRemovedFiles": len(files), "numRemovedBytes": sum(a.size for a in files)}
    if all(c is not None for c in counts):  # without stats on every file the count would be a guess: left out
        metrics["numDeletedRows"] = sum((c or 0) - (a.deletion_vector.cardinality if a.deletion_vector else 0)
                                        for c, a in zip(counts, files, strict=True))
    txn = OptimisticTransaction(root, snapshot)
    txn.read_whole_table()
    return txn.commit([a.remove(ts) for a in files], "TRUNCATE", {}, metrics)
