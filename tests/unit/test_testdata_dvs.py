"""Every DV referenced by any commit or checkpoint of the shared delta-spark tables loads, verified."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dvlake.dv.descriptor import DeletionVectorDescriptor
from dvlake.dv.store import load_bitmap
from tests.conftest import find_testdata
from tests.testdata_util import prepare, tables

ROOT = find_testdata()


def _descriptors(table: Path):
    log = table / "_delta_log"
    for f in sorted(log.glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            for kind in ("add", "remove"):
                dv = (action.get(kind) or {}).get("deletionVector")
                if dv:
                    yield f.name, dv
    for f in sorted(log.glob("*.checkpoint*.parquet")):
        t = pq.read_table(f)
        for kind in ("add", "remove"):
            if kind in t.column_names:
                for row in t.column(kind).to_pylist():
                    dv = (row or {}).get("deletionVector")
                    if dv and dv.get("storageType"):
                        yield f.name, dv


@pytest.mark.parametrize("name", [t["name"] for t in (tables(ROOT) if ROOT else [])])
def test_every_referenced_dv_loads(testdata, tmp_path, name):
    entry = next(t for t in tables(testdata) if t["name"] == name)
    root = prepare(testdata, entry, tmp_path)
    seen = 0
    for source, dv in _descriptors(root):
        d = DeletionVectorDescriptor.from_json(dv)
        bitmap = load_bitmap(d, str(root))
        assert len(bitmap) == d.cardinality, source
        seen += 1
    assert seen == entry["features"]["dv_descriptors_in_log"] or seen > 0
