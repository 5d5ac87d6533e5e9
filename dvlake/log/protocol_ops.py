"""Combining protocols without ever losing a feature (RESTORE, upgradeTableProtocol), and removing one (DROP FEATURE).

delta-spark's ``Protocol.merge``: the higher versions win and the feature sets are united; once
either side uses table features (reader 3 / writer 7) the legacy features the versions implied
become explicit, so nothing a table relied on is dropped. Removing a feature is the one way down:
``drop_feature_protocol`` takes it out and normalizes, as delta-spark's ``removeFeature`` + ``normalized``.
"""

from __future__ import annotations

from dvlake.log.actions import Protocol
from dvlake.log.features import reader_features, writer_features


def merge_protocols(a: Protocol, b: Protocol) -> Protocol:
    """The smallest protocol that allows everything ``a`` and ``b`` allow (never a downgrade of either)."""
    reader = max(a.min_reader_version, b.min_reader_version)
    writer = max(a.min_writer_version, b.min_writer_version)
    if writer < 7 and reader < 3:
        return Protocol(reader, writer)
    readers = reader_features(a) | reader_features(b)
    writers = writer_features(a) | writer_features(b) | readers
    if reader >= 3:
        return Protocol(reader, max(writer, 7), tuple(sorted(readers)), tuple(sorted(writers)))
    return Protocol(reader, max(writer, 7), None, tuple(sorted(writers)))


# --- removing a feature (DROP FEATURE) ----------------------------------------------------------

#: (min reader, min writer) version of each legacy feature; other features need (3, 7) when they are
#: reader-writer features and (1, 7) when they are writer-only (delta-spark's TableFeature versions).
LEGACY_FEATURE_VERSIONS = {
    "appendOnly": (1, 2), "invariants": (1, 2), "checkConstraints": (1, 3), "changeDataFeed": (1, 4),
    "generatedColumns": (1, 4), "columnMapping": (2, 5), "identityColumns": (1, 6),
}


def _min_versions(name: str, reader_writer: bool) -> tuple[int, int]:
    if name in LEGACY_FEATURE_VERSIONS:
        return LEGACY_FEATURE_VERSIONS[name]
    return (3, 7) if reader_writer else (1, 7)


def normalize_protocol(protocol: Protocol) -> Protocol:
    """delta-spark's ``Protocol.normalized``: the legacy form when the versions alone imply exactly these features.

    A table-features protocol whose features are all legacy ones implied by some (reader, writer)
    pair becomes that pair, e.g. (3, 7, [], [appendOnly, invariants]) → (1, 2). Otherwise the
    writer version stays 7 and the reader version is the lowest the remaining features allow: 1
    when no reader feature is left (so readers that predate table features can read the table),
    2 for column mapping alone, else 3 with the reader features listed.
    """
    if protocol.min_writer_version < 7:
        return protocol
    readers = reader_features(protocol)
    writers = writer_features(protocol) | readers
    versions = [_min_versions(f, f in readers) for f in writers]
    min_reader = max([1, *(r for r, _ in versions)])
    min_writer = max([1, *(w for _, w in versions)])
    if min_writer < 7:
        legacy = Protocol(min_reader, min_writer)
        if reader_features(legacy) | writer_features(legacy) == writers:
            return legacy
    if min_reader >= 3:
        return Protocol(3, 7, tuple(sorted(readers)), tuple(sorted(writers)))
    return Protocol(min_reader, 7, None, tuple(sorted(writers)))


def drop_feature_protocol(protocol: Protocol, name: str, add_writer: tuple[str, ...] = ()) -> Protocol:
    """``protocol`` without the feature ``name`` (plus the writer features ``add_writer``), normalized.

    The protocol is first made explicit (denormalized: the features legacy versions imply are
    listed) so that a legacy feature can be removed too; DROP FEATURE's fast path passes
    ``add_writer=("checkpointProtection",)``.
    """
    readers = reader_features(protocol) - {name}
    writers = (writer_features(protocol) | reader_features(protocol) | set(add_writer)) - {name}
    explicit = Protocol(3, 7, tuple(sorted(readers)), tuple(sorted(writers)))
    return normalize_protocol(explicit)
