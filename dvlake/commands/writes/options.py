"""The DataFrameWriter options delta-spark users rely on, parsed once into a ``WriteOptions``.

``df.write.format("delta").option(...)`` hands over plain strings; delta-spark reads them
case-insensitively and falls back to session settings for some of them. Parsing here keeps that
rule in one place and the write command free of string handling. Session settings are passed
in as a lookup function, so this module needs no Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dvlake.config import AUTO_MERGE_CONF as AUTO_MERGE_CONF
from dvlake.config import REPLACE_WHERE_CHECK_CONF as REPLACE_WHERE_CHECK_CONF
from dvlake.config import USER_METADATA_CONF as USER_METADATA_CONF
from dvlake.errors import DeltaOptionError

#: Spark's own setting behind ``partitionOverwriteMode`` (the option wins). delta-spark's settings behind
#: ``mergeSchema``, ``userMetadata`` and replaceWhere's check (each option wins when both are set): ``dvlake.config``.
PARTITION_OVERWRITE_CONF = "spark.sql.sources.partitionOverwriteMode"

#: Session settings ``parse`` reads: a caller fetches exactly these (one round trip each over Connect).
SESSION_KEYS = (AUTO_MERGE_CONF, PARTITION_OVERWRITE_CONF, USER_METADATA_CONF, REPLACE_WHERE_CHECK_CONF)


@dataclass(frozen=True)
class WriteOptions:
    """What a Delta write should do beyond its save mode and partitioning."""

    merge_schema: bool = False
    overwrite_schema: bool = False
    replace_where: Any = None  # SQL text, or a Column (DataFrameWriterV2.overwrite)
    dynamic_partition_overwrite: bool = False
    user_metadata: str | None = None
    txn_app_id: str | None = None
    txn_version: int | None = None
    check_replace_where: bool = True
    #: ``dataChange=false``: the write only rearranges data (e.g. a hand-made compaction); streaming readers skip it.
    data_change: bool = True
    #: ``delta.*`` options: table properties, applied when the write creates (or replaces) the table.
    table_properties: dict[str, str] = field(default_factory=dict)
    #: A streaming sink's micro-batch: (output mode, query id, batch id); the commit is a STREAMING UPDATE.
    streaming: tuple[str, str, int] | None = None


def _bool(name: str, value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise DeltaOptionError(f"option {name} must be true or false; got {value!r}")


def parse(options: Mapping[str, Any], conf: Callable[[str], str | None] = lambda _key: None) -> WriteOptions:
    """``options`` as given to the writer (any key case); ``conf(key)`` looks up a session setting or None.

    Raises:
        DeltaOptionError: a malformed value, or options delta-spark refuses together (the error class says which).
    """
    lower = {str(k).lower(): v for k, v in options.items() if v is not None}

    def setting(option: str, conf_key: str) -> Any:
        return lower[option] if option in lower else conf(conf_key)

    merge = setting("mergeschema", AUTO_MERGE_CONF)
    overwrite_schema = _bool("overwriteSchema", lower["overwriteschema"]) if "overwriteschema" in lower else False
    mode_text = setting("partitionoverwritemode", PARTITION_OVERWRITE_CONF)
    mode = str(mode_text or "static").strip().lower()
    if mode not in ("static", "dynamic"):
        raise DeltaOptionError(f"partitionOverwriteMode must be STATIC or DYNAMIC; got {mode_text!r}",
                                    error_class="DELTA_ILLEGAL_OPTION")
    replace_where = lower.get("replacewhere")
    # delta-spark only honours the session setting's DYNAMIC when no replaceWhere is given; the option clashes
    dynamic = mode == "dynamic" and ("partitionoverwritemode" in lower or replace_where is None)
    if dynamic and replace_where is not None:
        raise DeltaOptionError("replaceWhere cannot be used with partitionOverwriteMode=dynamic: choose one",
                                    error_class="DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE")
    if dynamic and overwrite_schema:
        raise DeltaOptionError("overwriteSchema cannot be used with partitionOverwriteMode=dynamic",
                                    error_class="DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE")
    app_id, txn_version = lower.get("txnappid"), lower.get("txnversion")
    if (app_id is None) != (txn_version is None):
        raise DeltaOptionError("idempotent writes need both txnAppId and txnVersion; only one was given",
                                    error_class="DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS")
    version: int | None = None
    if txn_version is not None:
        try:
            version = int(str(txn_version))
        except ValueError:
            raise DeltaOptionError(f"txnVersion must be a whole number; got {txn_version!r}",
                                        error_class="DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS") from None
    user_metadata = setting("usermetadata", USER_METADATA_CONF)
    check = conf(REPLACE_WHERE_CHECK_CONF)
    props = {str(k): str(v) for k, v in options.items() if v is not None and str(k).lower().startswith("delta.")}
    return WriteOptions(
        merge_schema=_bool("mergeSchema", merge) if merge not in (None, "") else False,
        overwrite_schema=overwrite_schema,
        replace_where=replace_where if replace_where is None or not isinstance(replace_where, (int, float, bool))
        else str(replace_where),
        dynamic_partition_overwrite=dynamic,
        user_metadata=str(user_metadata) if user_metadata not in (None, "") else None,
        txn_app_id=str(app_id) if app_id is not None else None,
        txn_version=version,
        check_replace_where=_bool(REPLACE_WHERE_CHECK_CONF, check) if check not in (None, "") else True,
        table_properties=props,
        data_change=_bool("dataChange", lower["datachange"]) if "datachange" in lower else True,
    )
