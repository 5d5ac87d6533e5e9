"""The Delta streaming sink: each micro-batch is one dvlake commit that says which batch it was.

``writeStream.format("delta")`` runs as Spark's ``foreachBatch`` with ``write_batch`` below. Exactly
once comes from the ``txn`` action, as in delta-spark's ``DeltaSink``: every commit carries
``txn(appId = the query's id, version = the batch id)``, and a batch whose id the table already
records for that query is skipped. Spark replays a batch after a crash between the table commit
and its own commit log entry; the replay then writes nothing. The query id is the one Spark keeps
in the checkpoint, so it is the same after a restart from that checkpoint.

A skipped batch still runs its plan, into Spark's ``noop`` sink: a stateful query (an aggregation in
complete mode, ``dropDuplicates``, a stream-stream join) commits the new version of its state stores
only when the batch's plan executes, and Spark 4 fails a batch whose ``foreachBatch`` function returned
without committing them ("Not all StateStores committed"). Running the plan keeps the state in step
with the table (the state after batch N is the one the committed batch N was computed from), at the
cost of computing the replayed batch once more.

Output modes: ``append`` appends the batch, ``complete`` replaces the table's rows with it (one
commit, the old files removed); ``update`` is refused, as delta-spark refuses it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame

from dvlake.commands.writes import write as write_cmd
from dvlake.commands.writes.options import WriteOptions
from dvlake.errors import DvlakeError, InvalidArgumentError, UnsupportedOutputModeError
from dvlake.spark.task_errors import encode

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
    """How a micro-batch learns its query's id; picklable, because Spark Connect pickles the ``foreachBatch`` function
    (with everything it refers to) and runs it in a Python process on the server.

    The id comes from ``<checkpoint>/metadata`` (``{"id": ...}``), which Spark writes when the query starts, before
    its first batch, and keeps across restarts: the same id delta-spark's sink uses as the ``txn`` app id. That works
    wherever the batch runs. Without a known checkpoint (a classic session whose checkpoint Spark named itself under
    ``spark.sql.streaming.checkpointLocation``), the batch runs in the process that called ``start()``, and waits for
    ``start()`` to hand the id over through a process-local table keyed by ``token``.
    """

    def __init__(self, checkpoint: str | None = None, remote: bool = False) -> None:
        import uuid

        self.checkpoint = checkpoint
        self.remote = remote  # Spark Connect: batches run in another process, only the checkpoint can tell
        self.token = uuid.uuid4().hex
        self._value: str | None = None  # read once per process that runs batches

    def set(self, value: str) -> None:
        """``start()`` returned ``value`` as the query's id (in the process that called it)."""
        with _started_lock:
            _started[self.token] = value
            _started_lock.notify_all()

    def get(self) -> str:
        """The query's id.

        Raises:
            InvalidArgumentError: neither the checkpoint nor ``start()`` told it in time.
        """
        if self._value is not None:
            return self._value
        if self.checkpoint:
            self._value = checkpoint_query_id(self.checkpoint)
            if self._value is not None:
                return self._value
        if self.remote:
            raise InvalidArgumentError(
                f"the Delta sink could not read its streaming query's id from {self.checkpoint}/metadata, which Spark "
                "writes when the query starts; over Spark Connect the micro-batches run on the server and learn the id "
                "only there: give option('checkpointLocation', <a folder the server's Python can read>)")
        with _started_lock:
            if not _started_lock.wait_for(lambda: self.token in _started, QUERY_ID_WAIT_SECONDS):
                where = f"its checkpoint {self.checkpoint}/metadata" if self.checkpoint else "no checkpoint location"
                raise InvalidArgumentError(
                    f"the Delta sink could not learn its streaming query's id ({where} could not be read, and "
                    "writeStream.start() did not return in this process); give the query "
                    "option('checkpointLocation', <a folder>)")
            return _started[self.token]

    def __call__(self) -> str:
        return self.get()


#: query ids ``start()`` handed over, by ``QueryId.token`` (one per started query in this process; a few bytes each)
_started: dict[str, str] = {}
_started_lock = threading.Condition()


def checkpoint_location(options: dict[str, Any], session_conf: Callable[[str], Any], query_name: str | None) -> str | None:
    """Where Spark keeps the query's checkpoint, when it can be known before ``start()``: the ``checkpointLocation``
    option, else ``<spark.sql.streaming.checkpointLocation>/<queryName>`` (Spark's own rule); None otherwise
    (Spark then names the folder with a random UUID)."""
    given = next((str(v) for k, v in options.items() if str(k).lower() == "checkpointlocation" and v), None)
    if given:
        return given
    root = session_conf("spark.sql.streaming.checkpointLocation")
    if root and query_name:
        return str(root).rstrip("/") + "/" + query_name
    return None


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
        try:
            qid = query_id()
            opts = dataclasses.replace(options, txn_app_id=qid, txn_version=int(batch_id),
                                       streaming=(output_mode, qid, int(batch_id)))
            mode = "overwrite" if output_mode == "Complete" else "append"
            version = write_cmd.write(batch, path, mode, list(partition_by) or None, None,
                                      session_defaults=session_defaults, options=opts)
            if version is None:  # append/overwrite return None only for a batch id the table already records
                replay_plan(batch)
            if on_commit is not None:
                on_commit(batch)
        except DvlakeError as exc:
            # Spark fails the query with the batch function's traceback as text (STREAM_FAILED); the marker lets
            # awaitTermination() raise the dvlake class again, with its Delta error class (task_errors.install)
            if "[DVLAKE_TASK_ERROR " in str(exc):
                raise
            raise DvlakeError(encode(exc)) from exc

    return write_batch


def replay_plan(batch: DataFrame) -> None:
    """Execute a replayed batch's plan without writing it anywhere, so its stateful operators commit their state
    stores for this batch id as Spark expects (see the module docstring)."""
    batch.write.format("noop").mode("overwrite").save()


def committed_batch(snapshot: Any, query_id: str) -> int | None:
    """The last batch id the query committed to the table (None before its first), from the ``txn`` actions."""
    txn = snapshot.txns.get(query_id)
    return None if txn is None else int(txn.version)
