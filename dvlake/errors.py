"""The exceptions dvlake raises.

One small hierarchy, so callers can catch broadly (``DvlakeError``) or narrowly. Messages
name the offending file, feature or value and say what to do about it, in the manner of
delta-rs' help texts. The concurrency classes carry delta-spark's names so that code written
against delta-spark's Python API catches the same things.
"""

from __future__ import annotations


class DvlakeError(Exception):
    """Base class of every error dvlake raises on purpose."""


# --- deletion vectors ------------------------------------------------------------------------


class DeletionVectorError(DvlakeError):
    """A deletion vector cannot be encoded, decoded, located or used."""


class CorruptDeletionVectorError(DeletionVectorError):
    """Stored deletion-vector bytes fail a check (version, size, magic, CRC, cardinality).

    Never ignore it: reading past a corrupt DV would silently return deleted rows.
    """


class InvalidDescriptorError(DeletionVectorError):
    """A DeletionVectorDescriptor is malformed (unknown storage type, bad Z85, bad path)."""


class DeletionVectorNotFoundError(DeletionVectorError):
    """The file a deletion vector points to does not exist."""


# --- protocol, log and table state -----------------------------------------------------------


class DeltaProtocolError(DvlakeError):
    """The table's log or protocol is not something this client may read or write."""


class UnsupportedFeatureError(DeltaProtocolError):
    """The table needs a reader or writer feature dvlake does not implement (SQLSTATE 56038)."""


class CorruptLogError(DeltaProtocolError):
    """A commit, checkpoint or _last_checkpoint file cannot be parsed or is inconsistent."""


class DataFileNotFoundError(DvlakeError):
    """A data file the log lists is missing (deleted by hand, or a VACUUM with too short a retention)."""


class TableNotFoundError(DvlakeError):
    """No Delta table (no _delta_log with a commit) exists at the given path."""


class TableAlreadyExistsError(DvlakeError):
    """A create with mode 'error' found a table already there."""


class VersionNotFoundError(DvlakeError):
    """Time travel asked for a version or timestamp the log cannot reconstruct."""


class InvalidArgumentError(DvlakeError, ValueError):
    """A caller passed a value dvlake cannot act on (bad mode, unknown column, bad predicate)."""


class SchemaMismatchError(InvalidArgumentError):
    """Data written does not match the table schema."""


class DeletionVectorsNotAllowedError(DeltaProtocolError):
    """A commit tried to add a DV to a table where DVs are not enabled (DELTA_ADDING_DELETION_VECTORS_DISALLOWED)."""


# --- concurrency (delta-spark names) ------------------------------------------------------------


class DeltaConcurrentModificationException(DvlakeError):
    """Another writer committed something this transaction conflicts with.

    Re-run the operation: it will read the new table state. The message says what conflicted.
    """


class ConcurrentWriteException(DeltaConcurrentModificationException):
    """A concurrent transaction wrote data this transaction depends on."""


class ConcurrentAppendException(DeltaConcurrentModificationException):
    """Files were added by a concurrent commit to the data this transaction read."""


class ConcurrentDeleteReadException(DeltaConcurrentModificationException):
    """A concurrent commit removed (or replaced the DV of) a file this transaction read."""


class ConcurrentDeleteDeleteException(DeltaConcurrentModificationException):
    """A concurrent commit removed (or replaced the DV of) a file this transaction also removes."""


class MetadataChangedException(DeltaConcurrentModificationException):
    """A concurrent commit changed the table's metadata (schema, properties, partitioning)."""


class ProtocolChangedException(DeltaConcurrentModificationException):
    """A concurrent commit changed the table's protocol (versions or features)."""


class ConcurrentTransactionException(DeltaConcurrentModificationException):
    """A concurrent commit used the same application transaction id (``txn`` action)."""


# --- UPDATE and MERGE (delta-spark names; ``error_class`` as delta-spark reports it) ---------------


class DeltaInvariantViolationException(InvalidArgumentError):
    """A row written by a command breaks a table invariant (a NULL in a NOT NULL column); nothing was committed."""

    error_class = "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"


class UnresolvedAssignmentError(InvalidArgumentError):
    """An UPDATE/MERGE assignment names a column the table does not have, or the same column twice."""

    error_class = "DELTA_COLUMN_NOT_FOUND"


class UnsafeAssignmentCastError(SchemaMismatchError):
    """An assigned value cannot be stored in its column under Spark's ANSI store-assignment rules."""

    error_class = "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION"


class DeltaUnsupportedOperationException(DvlakeError):
    """The command cannot be carried out as asked (delta-spark's DeltaUnsupportedOperationException)."""

    error_class = "DELTA_UNSUPPORTED_OPERATION"


class MultipleSourceRowMatchingTargetRowError(DeltaUnsupportedOperationException):
    """MERGE found several source rows matching one target row: which one should win is ambiguous.

    Raised before anything is written. De-duplicate the source (e.g. keep the latest row per key)
    or tighten the ON condition so that each target row matches at most one source row.
    """

    error_class = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    sql_state = "21506"


class ChangeDataFeedNotSupportedError(UnsupportedFeatureError):
    """UPDATE/MERGE on a table with ``delta.enableChangeDataFeed=true``: dvlake cannot write change data yet."""

    error_class = "DVLAKE_CHANGE_DATA_FEED_NOT_SUPPORTED"
