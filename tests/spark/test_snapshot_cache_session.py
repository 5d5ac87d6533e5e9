"""``spark.dvlake.snapshotCache.enabled``: the session setting reaches the process's snapshot cache when dvlake meets
the session (``DeltaTable.forPath``, ``dvlake.session``); unset, the cache is on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import dvlake
from dvlake.api import DeltaTable
from dvlake.config import SNAPSHOT_CACHE_CONF
from dvlake.log import snapshot_cache
from tests.unit.test_snapshot_cache import _table


def test_the_session_setting_turns_the_cache_off_and_back_on(spark: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DVLAKE_SNAPSHOT_CACHE", raising=False)
    root = _table(tmp_path / "t")
    try:
        spark.conf.unset(SNAPSHOT_CACHE_CONF)
        DeltaTable.forPath(spark, root)
        assert snapshot_cache.enabled() is True and snapshot_cache.SHARED.cached_files() >= 3
        spark.conf.set(SNAPSHOT_CACHE_CONF, "false")
        DeltaTable.forPath(spark, root)
        assert snapshot_cache.enabled() is False and snapshot_cache.SHARED.cached_files() == 0
        spark.conf.set(SNAPSHOT_CACHE_CONF, "true")
        dvlake.session(spark)
        assert snapshot_cache.enabled() is True
    finally:
        spark.conf.unset(SNAPSHOT_CACHE_CONF)
        snapshot_cache.set_session_choice(None)
