"""The exceptions dvlake raises.

One small hierarchy, so callers can catch broadly (``DvlakeError``) or narrowly. Messages
name the offending file, feature or value and say what to do about it, in the manner of
delta-rs' help texts. The concurrency classes carry delta-spark's names so that code written
against delta-spark's Python API catches the same things.
"""

from __future__ import annotations


class DvlakeError(Exception):
    """Base class of every error dvlake raises on purpose.

    ``error_class`` is delta-spark's error class for the same condition (for example
    ``DELTA_CONCURRENT_APPEND``) where one exists, so code that branches on delta-spark's
    classes can branch on dvlake's errors the same way; None where delta-spark has none.
    """

    error_class: str | None = None

    def __init__(self, *args: object, error_class: str | None = None) -> None:
        super().__init__(*args)
        if error_class is not None:
            self.error_class = error_class


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

    error_class = "DELTA_UNSUPPORTED_FEATURES_FOR_READ"


class CorruptLogError(DeltaProtocolError):
    """A commit, checkpoint or _last_checkpoint file cannot be parsed or is inconsistent."""


class StorageError(DvlakeError):
    """The storage under a table cannot do what an operation needs."""


class CommitPrimitiveUnavailableError(StorageError):
    """The storage cannot create a commit file atomically-if-absent, so a concurrent writer could be lost.

    Object stores need a conditional PUT (put-if-absent) for safe Delta commits; without one,
    dvlake refuses to commit unless the caller declares that only one writer exists.
    """


class DataFileNotFoundError(DvlakeError):
    """A data file the log lists is missing (deleted by hand, or a VACUUM with too short a retention)."""

    error_class = "DELTA_FILE_NOT_FOUND_DETAILED"


class TableNotFoundError(DvlakeError):
    """No Delta table (no _delta_log with a commit) exists at the given path."""

    error_class = "DELTA_MISSING_DELTA_TABLE"


class TableAlreadyExistsError(DvlakeError):
    """A create with mode 'error' found a table already there."""

    error_class = "DELTA_PATH_EXISTS"


class VersionNotFoundError(DvlakeError):
    """Time travel asked for a version or timestamp the log cannot reconstruct."""

    error_class = "DELTA_VERSION_NOT_FOUND"


class InvalidArgumentError(DvlakeError, ValueError):
    """A caller passed a value dvlake cannot act on (bad mode, unknown column, bad predicate)."""


class ColumnNotFoundError(InvalidArgumentError):
    """A column named by the caller is not in the table schema."""

    error_class = "DELTA_COLUMN_NOT_FOUND"


class UnsupportedEnvironmentError(DvlakeError):
    """The Spark version or the Python environment cannot run dvlake (the message says what to install)."""


class ExecutorEnvironmentError(UnsupportedEnvironmentError):
    """A Spark executor cannot run dvlake's Python (dvlake not shipped to it); the message says how to ship it."""


class SchemaMismatchError(InvalidArgumentError):
    """Data written does not match the table schema."""


class DeletionVectorsNotAllowedError(DeltaProtocolError):
    """A commit tried to add a DV to a table where DVs are not enabled (DELTA_ADDING_DELETION_VECTORS_DISALLOWED)."""

    error_class = "DELTA_ADDING_DELETION_VECTORS_DISALLOWED"


# --- concurrency (delta-spark names) ------------------------------------------------------------


class DeltaConcurrentModificationException(DvlakeError):
    """Another writer committed something this transaction conflicts with.

    Re-run the operation: it will read the new table state. The message says what conflicted.
    """


class ConcurrentWriteException(DeltaConcurrentModificationException):
    """A concurrent transaction wrote data this transaction depends on."""

    error_class = "DELTA_CONCURRENT_WRITE"


class ConcurrentAppendException(DeltaConcurrentModificationException):
    """Files were added by a concurrent commit to the data this transaction read."""

    error_class = "DELTA_CONCURRENT_APPEND"


class ConcurrentDeleteReadException(DeltaConcurrentModificationException):
    """A concurrent commit removed (or replaced the DV of) a file this transaction read."""

    error_class = "DELTA_CONCURRENT_DELETE_READ"


class ConcurrentDeleteDeleteException(DeltaConcurrentModificationException):
    """A concurrent commit removed (or replaced the DV of) a file this transaction also removes."""

    error_class = "DELTA_CONCURRENT_DELETE_DELETE"


class MetadataChangedException(DeltaConcurrentModificationException):
    """A concurrent commit changed the table's metadata (schema, properties, partitioning)."""

    error_class = "DELTA_METADATA_CHANGED"


class ProtocolChangedException(DeltaConcurrentModificationException):
    """A concurrent commit changed the table's protocol (versions or features)."""

    error_class = "DELTA_PROTOCOL_CHANGED"


class ConcurrentTransactionException(DeltaConcurrentModificationException):
    """A concurrent commit used the same application transaction id (``txn`` action)."""

    error_class = "DELTA_CONCURRENT_TRANSACTION"
