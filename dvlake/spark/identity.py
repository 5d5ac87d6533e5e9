"""Identity values for written rows, and the high-water marks a write reaches (``dvlake.log.identity`` has the rules).

Values are ``first + step * monotonically_increasing_id()``: unique within one write because the id is (partition
index << 33) + row index in the partition, and beyond the table's mark because ``first`` is one step past it. They
are not contiguous across partitions, which PROTOCOL.md allows; no shuffle or second pass over the data is needed,
so the write stays one job however many partitions it has. The new mark is read from the written files' statistics
(exact min/max for a BIGINT column), or, for a column outside the statistics, from the files themselves.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dvlake.log import identity
from dvlake.log.actions import AddFile
from dvlake.log.identity import Identity
from dvlake.log.schema import physical_name
from dvlake.storage.paths import absolute_file_location


def fill(df: DataFrame, missing: list[Identity]) -> DataFrame:
    """``df`` with the identity columns of ``missing`` (present as placeholders) set to fresh values, in place."""
    if not missing:
        return df
    by_name = {i.name.lower(): i for i in missing}
    row = F.monotonically_increasing_id()

    def value(c: str) -> Any:
        ident = by_name.get(c.lower())
        if ident is None:
            return F.col(f"`{c}`")
        return (F.lit(ident.first_value()).cast("long") + F.lit(ident.step).cast("long") * row).alias(c)

    return df.select(*[value(c) for c in df.columns])


def reached(adds: list[AddFile], identities: list[Identity], schema: dict[str, Any], mode: str,
            table_root: str, df: DataFrame) -> dict[str, int]:
    """{column: the furthest value written (max for a positive step, min for a negative one)} over ``adds``; a
    column with only NULLs written has no entry. ``df`` only lends its session for files without statistics."""
    fields = {f["name"]: f for f in schema["fields"]}
    out: dict[str, int] = {}
    for ident in identities:
        phys = physical_name(fields[ident.name], mode)
        forward = ident.step > 0
        values: list[int] = []
        unknown: list[AddFile] = []
        for add in adds:
            stats = json.loads(add.stats) if add.stats else {}
            bound = (stats.get("maxValues" if forward else "minValues") or {}).get(phys)
            if bound is not None:
                values.append(int(bound))
            elif stats.get("numRecords") is None or (stats.get("nullCount") or {}).get(phys) != stats.get("numRecords"):
                unknown.append(add)  # no statistics for the column: the file itself says
        if unknown:
            files = [absolute_file_location(table_root, a.path) for a in unknown]
            col = F.col(f"`{phys}`")
            got = df.sparkSession.read.parquet(*files).agg((F.max(col) if forward else F.min(col)).alias("v")).first()
            if got is not None and got["v"] is not None:
                values.append(int(got["v"]))
        if values:
            out[ident.name] = max(values) if forward else min(values)
    return out


def moved_schema(adds: list[AddFile], schema: dict[str, Any], mode: str, table_root: str,
                 df: DataFrame) -> dict[str, Any] | None:
    """The table's schema with the high-water marks this write moved, or None when none moves."""
    identities = identity.columns(schema)
    if not identities or not adds:
        return None
    return identity.with_high_water_marks(schema, reached(adds, identities, schema, mode, table_root, df))
