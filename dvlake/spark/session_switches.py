"""Session settings that switch process-wide machinery of the layers below Spark, read when dvlake meets a session.

The snapshot cache (``log.snapshot_cache``) lives in the driver's (or Connect client's) process and is consulted by
every ``Snapshot.load``, most of which have no session at hand; so the session's choice is handed down whenever a
face meets the session (``faces.enabled``, ``DeltaTable``, ``dvlake.session``), one settings lookup each time.
"""

from __future__ import annotations

import logging
from typing import Any

from dvlake.config import SNAPSHOT_CACHE_CONF
from dvlake.log import snapshot_cache

log = logging.getLogger(__name__)


def apply_session_switches(spark: Any) -> None:
    """Hand ``spark``'s ``spark.dvlake.snapshotCache.enabled`` (unset: the default, on) to the snapshot cache."""
    if spark is None:
        return
    try:
        value = spark.conf.get(SNAPSHOT_CACHE_CONF, None)
    except Exception as exc:  # noqa: BLE001 - a stopped session or a server refusing the lookup: the last choice stays
        log.debug("the snapshot cache setting was not read: %s", exc)
        return
    snapshot_cache.set_session_choice(None if value is None else str(value))
