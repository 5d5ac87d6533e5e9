"""The Delta streaming sink: each micro-batch is one dvlake commit that says which batch it was.

``writeStream.format("delta")`` runs as Spark's ``foreachBatch`` with ``write_batch`` below. Exactly
once comes from the ``txn`` action, as in delta-spark's ``DeltaSink``: every commit carries
``txn(appId = the query's id, version = the batch id)``, and a batch whose id the table already
records for that query is skipped. Spark replays a batch after a crash between the table commit
and its own commit log entry; the replay then writes nothing. The query id is the one Spark keeps
in the checkpoint, so it is the same after a restart from that checkpoint.

Output modes: ``append`` appends the batch, ``complete`` replaces the table's rows with it (one
commit, the old files removed); ``update`` is refused, as delta-spark refuses it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame

from dvlake.commands import write as write_cmd
from dvlake.commands.write_options import WriteOptions
from dvlake.errors import InvalidArgumentError, UnsupportedOutputModeError

#: How long a micro-batch waits for ``start()`` to hand over the query id (the first batch may begin first).
QUERY_ID_WAIT_SECONDS = 300.0


def check_output_mode(mode: str | None) -> str:
    """The sink's output mode, ``Append`` or ``Complete`` (delta-spark's spelling in the commit)."""
    key = (mode or "append").strip().lower()
    if key == "append":
        return "Append"
    if key == "complete":
        return "Complete"
    raise UnsupportedOutputModeError(f"the Delta sink does not support the {mode!r} output mode: use append or complete")


class QueryId:
    """The running query's id: from the checkpoint's ``metadata`` file when the checkpoint location is known
    (Spark writes it before the first batch), else set once ``start()`` returns (batches wait for it).

    A query restarted from its checkpoint keeps its id, which is what makes a replayed batch recognisable.
    The checkpoint route also works where the batch function runs in another process (Spark Connect).
    """

    def __init__(self, checkpoint: str | None = None) -> None:
        self._value: str | None = None
        self._ready = threading.Event()
        self._checkpoint = checkpoint

    def set(self, value: str) -> None:
        self._value = value
        self._ready.set()

    def get(self) -> str:
        if self._value is None and self._checkpoint:
            self._value = checkpoint_query_id(self._checkpoint)
        if self._value is None and (not self._ready.wait(QUERY_ID_WAIT_SECONDS) or self._value is None):
            raise InvalidArgumentError("the Delta sink did not learn its streaming query's id; it is set when "
                                       "writeStream.start() returns in the process that called it")
        assert self._value is not None
        return self._value


def checkpoint_query_id(checkpoint: str) -> str | None:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (``{"id": ...}``), or None when it cannot be read."""
    import json

    from dvlake.storage.base import storage_for
    from dvlake.storage.paths import normalize_table_root

    try:
        root = normalize_table_root(checkpoint)
        text = storage_for(root).read_bytes(root.rstrip("/") + "/metadata").decode("utf-8")
        value = json.loads(text.splitlines()[0]).get("id")
    except Exception:  # noqa: BLE001 - not readable from here: the caller falls back to start()'s answer
        return None
    return str(value) if value else None


def batch_writer(path: str, output_mode: str, partition_by: Sequence[str], options: WriteOptions,
                 session_defaults: dict[str, str], query_id: Callable[[], str],
                 on_commit: Callable[[DataFrame], None] | None = None) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function of a Delta sink at ``path`` (``output_mode`` from ``check_output_mode``)."""

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        qid = query_id()
        opts = dataclasses.replace(options, txn_app_id=qid, txn_version=int(batch_id),
                                   streaming=(output_mode, qid, int(batch_id)))
        mode = "overwrite" if output_mode == "Complete" else "append"
        write_cmd.write(batch, path, mode, list(partition_by) or None, None, session_defaults=session_defaults,
                        options=opts)
        if on_commit is not None:
            on_commit(batch)

    return write_batch


def committed_batch(snapshot: Any, query_id: str) -> int | None:
    """The last batch id the query committed to the table (None before its first), from the ``txn`` actions."""
    txn = snapshot.txns.get(query_id)
    return None if txn is None else int(txn.version)
