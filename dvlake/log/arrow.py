"""Arrow types of file actions, shared by replay, checkpoints and the snapshot's file index.

A snapshot holds its files as one Arrow table with the ``add`` struct's fields as columns,
never one Python object per file, so a million-file table stays cheap to load and scan-plan.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa

STRING_MAP = pa.map_(pa.string(), pa.string())

DV_TYPE = pa.struct([
    ("storageType", pa.string()),
    ("pathOrInlineDv", pa.string()),
    ("offset", pa.int32()),
    ("sizeInBytes", pa.int32()),
    ("cardinality", pa.int64()),
    ("maxRowIndex", pa.int64()),  # always null: delta-spark's checkpoint schema has it, JSON never does
])

ADD_TYPE = pa.struct([
    ("path", pa.string()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("modificationTime", pa.int64()),
    ("dataChange", pa.bool_()),
    ("stats", pa.string()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
    ("clusteringProvider", pa.string()),
])

REMOVE_TYPE = pa.struct([
    ("path", pa.string()),
    ("deletionTimestamp", pa.int64()),
    ("dataChange", pa.bool_()),
    ("extendedFileMetadata", pa.bool_()),
    ("partitionValues", STRING_MAP),
    ("size", pa.int64()),
    ("stats", pa.string()),
    ("tags", STRING_MAP),
    ("deletionVector", DV_TYPE),
    ("baseRowId", pa.int64()),
    ("defaultRowCommitVersion", pa.int64()),
])

ADD_SCHEMA = pa.schema(list(ADD_TYPE))
REMOVE_SCHEMA = pa.schema(list(REMOVE_TYPE))


def conform(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """Reshape an array read from any writer's checkpoint to ``target``.

    Fields are matched by name; missing ones become null and extra ones (``stats_parsed``,
    ``partitionValues_parsed``...) are dropped, so checkpoints from other engines replay the same.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks else pa.array([], type=array.type)
    if array.type.equals(target):
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        children = []
        for f in target:
            if f.name in names:
                children.append(conform(array.field(f.name), f.type))
            else:
                children.append(pa.nulls(len(array), type=f.type))
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    return array.cast(target)


def rows_to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Action dicts (as in the JSON) to a table of ``schema``; unknown keys are dropped."""
    names = schema.names
    columns = {n: [r.get(n) for r in rows] for n in names}
    for n in names:  # pyarrow aborts the process (not an exception) on a map entry with a null key
        if pa.types.is_map(schema.field(n).type):
            for value in columns[n]:
                if value is not None and not (isinstance(value, dict) and all(isinstance(k, str) for k in value)):
                    raise TypeError(f"the action field {n!r} must be a JSON object with string keys")
    return pa.table({n: pa.array(columns[n], type=schema.field(n).type) for n in names}, schema=schema)


def struct_to_table(array: pa.Array, schema: pa.Schema) -> pa.Table:
    """A conformed struct array (non-null rows) to a flat table."""
    return pa.Table.from_struct_array(array) if len(array) else schema.empty_table()


def dv_unique_ids(dv: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The DV unique id of every row (null where there is no DV), vectorized.

    Same rule as ``dvlake.dv.descriptor.dv_unique_id`` (storageType + pathOrInlineDv [+ '@' + offset]);
    ``tests/unit/test_dv_unique_id.py`` proves the two equal on every descriptor of the shared tables.
    """
    import pyarrow.compute as pc

    if isinstance(dv, pa.ChunkedArray):
        dv = dv.combine_chunks() if dv.num_chunks else pa.array([], type=DV_TYPE)
    st, p, off = dv.field("storageType"), dv.field("pathOrInlineDv"), dv.field("offset")
    base = pc.binary_join_element_wise(st, p, "")
    with_offset = pc.binary_join_element_wise(base, pc.cast(off, pa.string()), "@")
    out = pc.if_else(pc.is_null(off), base, with_offset)
    # a null struct, or a struct whose fields are all null (checkpoints), means "no DV"
    return pc.if_else(pc.or_(pc.is_null(dv), pc.is_null(st)), pa.scalar(None, pa.string()), out)


#: up to this many rows, ``take_rows`` slices instead of calling Arrow's take
_SLICED_TAKE_MAX = 4096


def take_rows(data: pa.Table | pa.ChunkedArray | pa.Array, indexes: Any) -> pa.Table | pa.ChunkedArray | pa.Array:
    """The rows of ``data`` at ``indexes``, in that order.

    Arrow's take on a chunked column first concatenates its chunks (0.1 s for 10 rows of a million-file table); a
    plan that kept a few files takes them as one-row zero-copy slices instead, in time that grows with the rows.
    A plain array's take costs the rows alone."""
    rows = np.asarray(indexes, dtype=np.int64)
    if len(rows) > _SLICED_TAKE_MAX or isinstance(data, pa.Array):
        return data.take(pa.array(rows, pa.int64()))
    if isinstance(data, pa.Table):
        return pa.concat_tables([data.slice(int(i), 1) for i in rows]) if len(rows) else data.slice(0, 0)
    return pa.chunked_array([c for i in rows for c in data.slice(int(i), 1).chunks], data.type)


_OFFSET_TYPES = {pa.string(): np.int32, pa.binary(): np.int32, pa.large_string(): np.int64, pa.large_binary(): np.int64}


def any_value_contains(values: pa.Array | pa.ChunkedArray, byte: bytes) -> bool:
    """Whether any string of ``values`` contains ``byte`` (one byte, e.g. ``b"%"``).

    Replay asks this of every live path before each incremental update (does any path need URL-decoding?), and
    Arrow's ``match_substring`` visits a million paths one by one (0.3 s). The bytes of a string array's values
    lie in one range of its data buffer, so one regex search over that range answers it (no copy). Bytes of
    null slots in the range can only make it answer True, which callers treat as "take the general path"."""
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    for chunk in chunks:
        if not len(chunk):
            continue
        offset_type = _OFFSET_TYPES.get(chunk.type)
        if offset_type is None:  # string views and other layouts: Arrow's kernel
            import pyarrow.compute as pc

            if pc.any(pc.match_substring(chunk.cast(pa.string()), byte.decode())).as_py():
                return True
            continue
        _, offsets_buffer, data_buffer = chunk.buffers()
        if data_buffer is None:
            continue
        offsets = np.frombuffer(offsets_buffer, dtype=offset_type, count=chunk.offset + len(chunk) + 1)
        start, end = int(offsets[chunk.offset]), int(offsets[chunk.offset + len(chunk)])
        if re.search(re.escape(byte), memoryview(data_buffer)[start:end]):  # no copy of the buffer
            return True
    return False
