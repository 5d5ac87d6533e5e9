"""Spark's ``spark.hadoop.*`` object-store settings, handed to dvlake's own I/O on the driver (or Connect client).

Spark reaches S3, GCS and Azure through Hadoop connectors configured with ``spark.hadoop.fs.s3a.*``,
``fs.azure.account.key.*`` and the GCS connector's key file; dvlake reads and commits the log itself through obstore
(``storage.objectstore``), which reads the ``AWS_*``/``GOOGLE_*``/``AZURE_*`` environment. So that one set of settings
serves both, the first dvlake call on a session maps the Hadoop keys that have an obstore meaning
(``storage.objectstore.options_from_hadoop``). Executors run in other processes: they take the environment
(``spark.executorEnv.*``) only.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from dvlake.storage.objectstore import configure_from_hadoop

log = logging.getLogger(__name__)
_MARK = "_dvlake_object_stores"


def configure_object_stores(spark: Any) -> None:
    """Apply ``spark``'s ``spark.hadoop.*`` object-store settings to this process's stores, once per session."""
    if spark is None or getattr(spark, _MARK, False):
        return
    try:
        conf = dict(spark.conf.getAll)
    except Exception as exc:  # noqa: BLE001 - a stopped session or a server refusing the lookup: the environment stays
        log.debug("no Spark settings read for object stores: %s", exc)
        return
    hadoop = {k: str(v) for k, v in conf.items() if k.startswith("spark.hadoop.")}
    if hadoop:
        configure_from_hadoop(hadoop)
    with contextlib.suppress(AttributeError, TypeError):
        setattr(spark, _MARK, True)
