"""Combining protocols without ever losing a feature: RESTORE and upgradeTableProtocol use it.

delta-spark's ``Protocol.merge``: the higher versions win and the feature sets are united; once
either side uses table features (reader 3 / writer 7) the legacy features the versions implied
become explicit, so nothing a table relied on is dropped.
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
