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


# --- reliability: hostile paths, executor failures (issue 8) -----------------------------------
# ``error_class`` names the condition the way delta-spark's error classes do, so a caller can
# branch on one stable string; dvlake-only conditions use a ``DVLAKE_`` prefix.


class PathOutsideTableRootError(DeltaProtocolError):
    """A data or DV path of the log resolves outside the table root while confinement is on.

    ``..`` segments, absolute paths, a ``u`` DV prefix with separators, or a symlink that leaves
    the root. Tables that really reference outside files (shallow clones) need confinement off:
    session ``spark.dvlake.confineToTableRoot=false`` or table property ``dvlake.confineToTableRoot=false``.
    """

    error_class = "DVLAKE_PATH_OUTSIDE_TABLE_ROOT"


class NotARegularFileError(DvlakeError):
    """A data or DV path names a FIFO, device, socket or directory: never opened (it could block forever)."""

    error_class = "DVLAKE_NOT_A_REGULAR_FILE"


class DataFileSchemaMismatchError(DvlakeError):
    """A data file's Parquet schema disagrees with the table schema in the log (a column's type differs)."""

    error_class = "DVLAKE_DATA_FILE_SCHEMA_MISMATCH"


class CorruptDataFileError(DvlakeError):
    """A data file the log lists is not readable Parquet (truncated, overwritten, not Parquet at all)."""

    error_class = "DVLAKE_CORRUPT_DATA_FILE"


class ExecutorEnvironmentError(DvlakeError):
    """Spark's Python workers cannot import dvlake or one of its dependencies.

    The driver found them, the executors did not: the worker interpreter is not the one dvlake is
    installed in (PYSPARK_PYTHON unset or wrong), or dvlake is not deployed to the cluster's nodes.
    """

    error_class = "DVLAKE_EXECUTOR_ENVIRONMENT"
