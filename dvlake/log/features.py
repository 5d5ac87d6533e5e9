"""Table features: what a table's protocol demands, and whether dvlake can meet it.

A reader must implement every name in ``readerFeatures`` and a writer every name in
``writerFeatures``; an unknown name means refuse, never guess (PROTOCOL.md, digest §1). Legacy
protocols (writer < 7) imply their features by version number.
"""

from __future__ import annotations

from collections.abc import Iterable

from dvlake.errors import DeltaProtocolError, UnsupportedFeatureError, UnsupportedTableFeaturesError
from dvlake.log.actions import Metadata, Protocol

DELETION_VECTORS = "deletionVectors"
COLUMN_MAPPING = "columnMapping"
ROW_TRACKING = "rowTracking"
TYPE_WIDENING = "typeWidening"
TYPE_WIDENING_PREVIEW = "typeWidening-preview"

#: Reader features dvlake's scan implements.
SUPPORTED_READER_FEATURES = frozenset({
    DELETION_VECTORS, COLUMN_MAPPING, "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck",
    # files older than a widening hold the narrow type: Spark's Parquet reader converts them to the table's type
    # (log/type_widening.py lists the changes; both read paths read through it)
    TYPE_WIDENING, TYPE_WIDENING_PREVIEW,
})

#: Writer features dvlake honours when it commits. CHECK constraints, invariants and generated columns are enforced on
#: every written row; identity columns get values above their high-water mark, moved in the same commit (log/identity.py).
SUPPORTED_WRITER_FEATURES = frozenset({
    "appendOnly", "invariants", DELETION_VECTORS, COLUMN_MAPPING, "timestampNtz", "changeDataFeed",
    "domainMetadata", "vacuumProtocolCheck", "checkConstraints", "generatedColumns", "identityColumns",
    # defaults are applied where SQL omits a column or says DEFAULT (log/defaults.py, sqlfront)
    "allowColumnDefaults",
    # log cleanup never removes versions below delta.requireCheckpointProtectionBeforeVersion piecemeal
    # (log/cleanup.py), which is all checkpointProtection asks of a writer; DROP FEATURE adds it
    "checkpointProtection",
    # its rules (column mapping, no DVs, numRecords stats, allowed types) are checked on every commit (uniform/compat.py)
    "icebergCompatV2",
    # V2's rules with deletion vectors allowed and row tracking required; Delta's row ids become Iceberg v3's row
    # lineage (materialized columns written with Iceberg's reserved field ids, spark/row_tracking.py)
    "icebergCompatV3",
    # ids assigned above the high-water mark on every commit and preserved by rewrites (log/row_tracking.py)
    ROW_TRACKING,
    # the clustering columns live in the delta.clustering domain, which every commit carries over (log/clustering.py);
    # writers owe nothing else: clustering happens in OPTIMIZE
    "clustering",
    # writes cast rows to the table's (wide) types; ALTER COLUMN TYPE applies only the widenings of
    # log/type_widening.py and records them in delta.typeChanges
    TYPE_WIDENING, TYPE_WIDENING_PREVIEW,
})

#: Features another feature needs in the same protocol (delta-spark's requiredFeatures).
REQUIRED_WRITER_FEATURES = {ROW_TRACKING: frozenset({"domainMetadata"}), "clustering": frozenset({"domainMetadata"}),
                            "icebergCompatV3": frozenset({COLUMN_MAPPING, ROW_TRACKING, "domainMetadata"})}

#: Features a legacy writer version implies (delta-spark's LEGACY table features).
LEGACY_WRITER_FEATURES = {
    2: {"appendOnly", "invariants"},
    3: {"appendOnly", "invariants", "checkConstraints"},
    4: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"},
    5: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", COLUMN_MAPPING},
    6: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", COLUMN_MAPPING,
        "identityColumns"},
}
LEGACY_READER_FEATURES = {1: set(), 2: {COLUMN_MAPPING}}

HELP = ("Upgrade dvlake, or read the table with an engine that implements the feature.")


def reader_features(protocol: Protocol) -> set[str]:
    """Every reader feature the protocol demands, legacy versions expanded."""
    if protocol.min_reader_version >= 3:
        return set(protocol.reader_features or ())
    return set(LEGACY_READER_FEATURES.get(protocol.min_reader_version, set()))


def writer_features(protocol: Protocol) -> set[str]:
    """Every writer feature the protocol demands, legacy versions expanded."""
    if protocol.min_writer_version >= 7:
        return set(protocol.writer_features or ())
    out: set[str] = set()
    for v in range(2, protocol.min_writer_version + 1):
        out |= LEGACY_WRITER_FEATURES.get(v, set())
    return out


def validate_protocol(protocol: Protocol) -> None:
    """Reject protocols that are illegal on their face (digest §1)."""
    if protocol.min_reader_version >= 3 and protocol.min_writer_version < 7:
        raise DeltaProtocolError(
            f"invalid protocol: reader version {protocol.min_reader_version} needs writer version 7, "
            f"found {protocol.min_writer_version}")
    if protocol.min_reader_version >= 3 and protocol.min_writer_version >= 7:
        only_reader = set(protocol.reader_features or ()) - set(protocol.writer_features or ())
        if only_reader:
            raise DeltaProtocolError(
                f"invalid protocol: features {sorted(only_reader)} are in readerFeatures but not in writerFeatures")


def check_can_read(protocol: Protocol, table: str = "") -> None:
    """Raise UnsupportedFeatureError if dvlake cannot read a table with this protocol."""
    if protocol.min_reader_version > 3:
        raise UnsupportedFeatureError(
            f"table {table} needs reader version {protocol.min_reader_version}; dvlake reads up to 3. {HELP}")
    missing = reader_features(protocol) - SUPPORTED_READER_FEATURES
    if missing:
        raise UnsupportedTableFeaturesError(
            f"table {table} needs reader feature(s) {sorted(missing)} "
            f"that dvlake does not implement (it implements {sorted(SUPPORTED_READER_FEATURES)}). {HELP}")


#: delta-spark's class for a table this client cannot write (SQLSTATE 56038).
FOR_WRITE = "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"


def check_can_write(protocol: Protocol, metadata: Metadata | None = None, table: str = "") -> None:
    """Raise UnsupportedFeatureError if dvlake cannot write this table safely."""
    check_can_read(protocol, table)
    if protocol.min_writer_version > 7:
        raise UnsupportedFeatureError(
            f"table {table} needs writer version {protocol.min_writer_version}; dvlake writes up to 7. {HELP}")
    missing = writer_features(protocol) - SUPPORTED_WRITER_FEATURES
    if missing:
        raise UnsupportedTableFeaturesError(
            f"table {table} needs writer feature(s) {sorted(missing)} "
            f"that dvlake does not implement. {HELP}", error_class=FOR_WRITE)
    # CHECK constraints, invariants, generated and identity columns are all enforced by the commands that write rows
    # (dvlake.spark.constraints, dvlake.log.generated, dvlake.log.identity); the schema rule here is what no command
    # may commit at all.
    if metadata is not None:
        check_schema_types(metadata, table)


def check_schema_types(metadata: Metadata, table: str = "") -> None:
    """Refuse a schema with geospatial columns: dvlake has none of delta-spark's geospatial support."""
    from dvlake.log.schema import spatial_columns

    try:
        schema = metadata.schema
    except ValueError:  # an unreadable schema string is reported by the code that needs the schema, with its context
        return
    spatial = spatial_columns(schema)
    if spatial:
        raise UnsupportedFeatureError(
            f"table {table or '(new)'}: column(s) {', '.join(spatial)} have a geospatial type (GEOMETRY/GEOGRAPHY); "
            "dvlake implements none of delta-spark's geospatial support (its statistics, the table feature). "
            "Store the values as WKB in a BINARY column, or use delta-spark for this table.")


def dvs_supported(protocol: Protocol) -> bool:
    """The protocol allows deletion vectors (reader 3 / writer 7 with the feature on both lists)."""
    return (protocol.min_reader_version >= 3 and protocol.min_writer_version >= 7
            and DELETION_VECTORS in (protocol.reader_features or ())
            and DELETION_VECTORS in (protocol.writer_features or ()))


def dvs_enabled(protocol: Protocol, metadata: Metadata) -> bool:
    """Writers may create DVs: the feature is supported and ``delta.enableDeletionVectors`` is true."""
    return dvs_supported(protocol) and metadata.configuration.get("delta.enableDeletionVectors", "false").lower() == "true"


def with_features(protocol: Protocol, reader: Iterable[str] = (), writer: Iterable[str] = ()) -> Protocol:
    """Upgrade a protocol to table features (3, 7) adding the given features.

    The legacy features the old versions implied become explicit writer features, as delta-spark
    does (e.g. (1,2) + deletionVectors → writer {appendOnly, invariants, deletionVectors}).
    """
    add_reader, add_writer = set(reader), set(writer) | set(reader)
    for name in list(add_writer):
        add_writer |= REQUIRED_WRITER_FEATURES.get(name, frozenset())
    if add_reader <= reader_features(protocol) and add_writer <= writer_features(protocol):
        return protocol
    new_reader = reader_features(protocol) | add_reader
    new_writer = writer_features(protocol) | add_writer | new_reader
    if new_reader:
        return Protocol(3, 7, tuple(sorted(new_reader)), tuple(sorted(new_writer)))
    return Protocol(max(protocol.min_reader_version, 1), 7, None, tuple(sorted(new_writer)))


def _legacy_writer_features_for_new_table(configuration: dict[str, str], generated_columns: bool,
                                          identity_columns: bool) -> set[str]:
    """The legacy writer features a new table's properties and column definitions ask for."""
    writer: set[str] = set()
    if configuration.get("delta.enableChangeDataFeed", "").lower() == "true":
        writer.add("changeDataFeed")
    if configuration.get("delta.appendOnly", "").lower() == "true":
        writer.add("appendOnly")
    if any(k.lower().startswith("delta.constraints.") for k in configuration):  # CHECK constraints given at creation
        writer.add("checkConstraints")
    if generated_columns:  # CREATE TABLE with a column GENERATED ALWAYS AS (expr)
        writer.add("generatedColumns")
    if identity_columns:  # CREATE TABLE with a column GENERATED … AS IDENTITY
        writer.add("identityColumns")
    return writer


def protocol_for_new_table(configuration: dict[str, str], column_mapping: bool = False,
                           schema_string: str = "", generated_columns: bool = False,
                           identity_columns: bool = False) -> Protocol:
    """The protocol delta-spark would give a new table with these properties and schema.

    ``generated_columns``: the table is created with generated columns (a column definition, not metadata a
    DataFrame happened to carry: without the feature the expression is an inert annotation, as in delta-spark)."""
    reader: set[str] = set()
    writer: set[str] = set()
    if '"timestamp_ntz"' in schema_string:
        reader.add("timestampNtz")
    if configuration.get("delta.enableDeletionVectors", "").lower() == "true":
        reader.add(DELETION_VECTORS)
    if column_mapping:
        reader.add(COLUMN_MAPPING)
    if configuration.get("delta.enableTypeWidening", "").lower() == "true":
        reader.add(TYPE_WIDENING)
    writer |= _legacy_writer_features_for_new_table(configuration, generated_columns, identity_columns)
    if configuration.get("delta.enableIcebergCompatV2", "").lower() == "true":
        writer.add("icebergCompatV2")
    if configuration.get("delta.enableIcebergCompatV3", "").lower() == "true":
        writer |= {"icebergCompatV3", *REQUIRED_WRITER_FEATURES["icebergCompatV3"]}
    if configuration.get("delta.enableRowTracking", "").lower() == "true":
        writer |= {ROW_TRACKING, *REQUIRED_WRITER_FEATURES[ROW_TRACKING]}
    if not reader and not writer:
        return Protocol(1, 2)
    if not reader and "identityColumns" in writer and writer <= LEGACY_WRITER_FEATURES[6]:
        return Protocol(1, 6)  # identity columns are a legacy feature of writer version 6, as delta-spark gives them
    if not reader and writer & {"changeDataFeed", "generatedColumns"} and \
            writer <= {"changeDataFeed", "generatedColumns", "appendOnly", "checkConstraints"}:
        return Protocol(1, 4)  # legacy features only: delta-spark keeps the legacy versions that imply them
    if not reader and "checkConstraints" in writer and writer <= {"appendOnly", "checkConstraints"}:
        return Protocol(1, 3)
    if not reader:
        return Protocol(1, 7, None, tuple(sorted(writer | {"appendOnly", "invariants"})))
    return Protocol(3, 7, tuple(sorted(reader)), tuple(sorted(reader | writer)))
