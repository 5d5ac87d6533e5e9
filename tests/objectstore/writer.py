"""One writer process of tests/objectstore: blind appends through dvlake's own transaction, as a command commits.

``python -m tests.objectstore.writer ROOT WRITER COMMITS`` prints one JSON line: the versions this writer won
and how many versions it rebased over (each lost race is a rebase: the winners' actions checked by Delta's conflict rules, then
the next version tried). ``--pause-at VERSION --pause-when before|after --marker FILE`` stops around the
conditional write of that version (writes ``FILE``, then sleeps) so a test can kill it there.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from dvlake.log.actions import AddFile, Txn
from dvlake.log.snapshot import Snapshot
from dvlake.storage.objectstore import CreateOnlyLogStore
from dvlake.txn.transaction import OptimisticTransaction


def data_file(writer: str, i: int) -> AddFile:
    stats = {"numRecords": 10, "minValues": {"id": i * 10}, "maxValues": {"id": i * 10 + 9}, "nullCount": {"id": 0}}
    return AddFile(path=f"{writer}-{i:03d}.parquet", partition_values={}, size=100, modification_time=1,
                   stats=json.dumps(stats))


def pause_around_commit(version: int, when: str, marker: str) -> None:
    """Wrap the commit primitive: write ``marker`` and sleep before or after the PUT of commit ``version``."""
    original = CreateOnlyLogStore.put_if_absent
    name = f"{version:020d}.json"

    def paused(self: CreateOnlyLogStore, path: str, data: bytes) -> None:
        if path.endswith(name) and when == "before":
            open(marker, "w").close()
            time.sleep(600)
        original(self, path, data)
        if path.endswith(name) and when == "after":
            open(marker, "w").close()
            time.sleep(600)

    CreateOnlyLogStore.put_if_absent = paused  # type: ignore[method-assign]


def main(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("writer")
    parser.add_argument("commits", type=int)
    parser.add_argument("--pause-at", type=int)
    parser.add_argument("--pause-when", choices=["before", "after"])
    parser.add_argument("--marker")
    parser.add_argument("--start-at", type=float, default=0.0, help="epoch seconds: all writers start together")
    args = parser.parse_args(argv)
    if args.pause_at is not None:
        pause_around_commit(args.pause_at, args.pause_when, args.marker)
    won, lost = [], 0
    time.sleep(max(0.0, args.start_at - time.time()))
    for i in range(args.commits):
        txn = OptimisticTransaction(args.root, Snapshot.load(args.root))
        version = txn.commit([Txn(args.writer, i), data_file(args.writer, i)], "WRITE", {"mode": "Append"})
        lost += version - txn.read_version - 1  # versions other writers took while this one tried
        won.append(version)
    return {"writer": args.writer, "versions": won, "rebased_over": lost}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
