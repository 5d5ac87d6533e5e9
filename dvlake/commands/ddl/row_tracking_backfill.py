"""Enabling row tracking on a table that has data: delta-spark's backfill, then the property.

The property ``delta.enableRowTracking=true`` promises that every live file has ``baseRowId`` and
``defaultRowCommitVersion``. An existing table's files have none, so enabling takes three steps,
each its own commit, as delta-spark does them:

1. the protocol gains ``rowTracking`` (and ``domainMetadata``): from here on every commit, by any
   writer, assigns ids to the files it adds, so the set of files without ids can only shrink;
2. backfill commits (``ROW TRACKING BACKFILL``) re-add the files that still lack ids, unchanged
   (``dataChange=false``, same DV), in batches of at most ``MAX_FILES_PER_COMMIT``; the transaction
   assigns their ids. A batch that loses a race to a commit that removed or replaced one of its
   files is simply planned again from the new version;
3. the metadata commit sets the property (``alter.set_properties``), which the transaction refuses
   if a file without ids is still live.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from dvlake.errors import DeltaConcurrentModificationException, RowTrackingError
from dvlake.log import row_tracking as rt
from dvlake.log.snapshot import Snapshot
from dvlake.txn.transaction import OptimisticTransaction

log = logging.getLogger(__name__)

#: delta-spark's ``rowTracking.backfill.maxNumFiles``: keeps one backfill commit well below 100 MB of JSON
MAX_FILES_PER_COMMIT = 22000
#: batches planned again after lost races before giving up (each lost race means another writer made progress)
MAX_ROUNDS = 100


def backfill(root: str, max_files_per_commit: int = MAX_FILES_PER_COMMIT) -> int | None:
    """Steps 1 and 2: support the feature, then give every live file ids; returns the last version committed."""
    from dvlake.commands.ddl.protocol import feature_protocol

    snapshot = Snapshot.load(root)
    last: int | None = None
    if not rt.is_supported(snapshot.protocol):
        protocol = feature_protocol(snapshot.protocol, rt.FEATURE)
        txn = OptimisticTransaction(snapshot.table_root, snapshot)
        txn.update_protocol(protocol)
        last = txn.commit([], "UPGRADE PROTOCOL", {"newProtocol": json.dumps(protocol.to_json())})
    batch = 0
    for _ in range(MAX_ROUNDS):
        snapshot = Snapshot.load(root)
        if rt.is_suspended(snapshot.metadata):
            raise RowTrackingError(
                f"cannot backfill row ids on {snapshot.table_root}: {rt.SUSPENDED_KEY} is true. Unset it first.",
                error_class="DVLAKE_ROW_TRACKING_SUSPENDED")
        lacking = [a for a in snapshot.add_files() if a.base_row_id is None or a.default_row_commit_version is None]
        if not lacking:
            return last
        files = [replace(a, data_change=False) for a in lacking[:max_files_per_commit]]
        txn = OptimisticTransaction(snapshot.table_root, snapshot)
        txn.read_files(files)  # a concurrent remove or DV replacement of one of them: plan the batch again
        txn.require_loose_dv_stats = False  # the files are re-committed exactly as they are
        try:
            last = txn.commit(files, rt.BACKFILL_OPERATION, {"batchId": batch})
        except DeltaConcurrentModificationException as exc:
            log.info("row tracking backfill batch %s on %s lost a race (%s); planning it again", batch, root, exc)
            continue
        batch += 1
    raise DeltaConcurrentModificationException(
        f"the row tracking backfill of {root} lost {MAX_ROUNDS} commit races in a row; nothing is broken (files that "
        "got ids keep them): run the ALTER TABLE again when the table is quieter")
