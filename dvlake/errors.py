"""The exceptions dvlake raises.

One small hierarchy, so callers can catch broadly (``DvlakeError``) or narrowly. Messages
name the offending file, feature or value and say what to do about it, in the manner of
delta-rs' help texts. The concurrency classes carry delta-spark's names so that code written
against delta-spark's Python API catches the same things.
"""

from __future__ import annotations

import os
import re
import warnings
from typing import Any, ClassVar

#: The SQLSTATE of each error class dvlake raises, as delta-spark's ``delta-error-classes.json`` and Spark's
#: ``error-conditions.json`` give it (a sub-class such as ``UNRESOLVED_COLUMN.WITH_SUGGESTION`` has its parent's).
#: dvlake's own ``DVLAKE_…`` classes name conditions neither project has; the few a statement can meet carry
#: the standard "feature not supported" state.
SQL_STATES: dict[str, str] = {
    "AMBIGUOUS_REFERENCE": "42704", "CANNOT_MERGE_SCHEMAS": "42KD9", "CANNOT_UP_CAST_DATATYPE": "42846",
    "CAST_INVALID_INPUT": "22018", "DATATYPE_MISMATCH": "42K09", "DELTA_ADDING_DELETION_VECTORS_DISALLOWED": "0A000",
    "DELTA_AGGREGATION_NOT_SUPPORTED": "42903", "DELTA_CANNOT_RESOLVE_COLUMN": "42703",
    "DELTA_CANNOT_REPLACE_MISSING_TABLE": "42P01", "DELTA_CANNOT_RESTORE_TABLE_VERSION": "22003",
    "DELTA_CANNOT_VACUUM_LITE": "55000",
    "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE": "22003", "DELTA_CDC_READ_NULL_RANGE_BOUNDARY": "22004",
    "DELTA_CDC_START_VERSION_AFTER_LATEST": "22003", "DELTA_COLUMN_NOT_FOUND": "42703",
    "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA": "42703", "DELTA_UNSUPPORTED_ALTER_TABLE_CHANGE_COL_OP": "0AKDC",
    "NOT_SUPPORTED_COMMAND_FOR_V2_TABLE": "46110",
    "DELTA_CONCURRENT_APPEND": "2D521", "DELTA_CONCURRENT_DELETE_DELETE": "2D521",
    "DELTA_CONCURRENT_DELETE_READ": "2D521", "DELTA_CONCURRENT_TRANSACTION": "2D521",
    "DELTA_CONCURRENT_WRITE": "2D521", "DELTA_CONFLICT_SET_COLUMN": "42701",
    "DELTA_CONVERT_NON_PARQUET_TABLE": "0AKDC", "DELTA_ADD_CONSTRAINTS": "0A000",
    "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE": "0AKDE",
    "DELTA_CONSTRAINT_ALREADY_EXISTS": "42710", "DELTA_CONSTRAINT_DOES_NOT_EXIST": "42704",
    "DELTA_NEW_CHECK_CONSTRAINT_VIOLATION": "23512", "DELTA_NON_BOOLEAN_CHECK_CONSTRAINT": "42621",
    "DELTA_NON_DETERMINISTIC_EXPRESSION_IN_CHECK_CONSTRAINT": "42621", "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES": "23001",
    "DELTA_UNRECOGNIZED_INVARIANT": "56038", "DELTA_DATA_CHANGE_FALSE": "0AKDE", "DELTA_EMPTY_DIRECTORY": "42K03",
    "DELTA_FAILED_CAST_PARTITION_VALUE": "22018", "DELTA_FAILED_SCAN_WITH_HISTORICAL_VERSION": "KD002",
    "DELTA_FAILED_TO_MERGE_FIELDS": "22005",
    "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION": "55000",
    "DELTA_FEATURE_DROP_CHECKPOINT_FAILED": "22KD0", "DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL": "40000",
    "DELTA_FEATURE_DROP_DEPENDENT_FEATURE": "55000", "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY": "42000",
    "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT": "55000", "DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST": "22KD0",
    "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED": "42000", "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE": "0AKDC",
    "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE": "0AKDC", "DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD": "22KD0",
    "DELTA_ICEBERG_COMPAT_VIOLATION": "KD00E", "DELTA_ILLEGAL_OPTION": "42616", "DELTA_INVALID_CDC_RANGE": "22003",
    "DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS": "42616", "DELTA_MERGE_MISSING_WHEN": "42601",
    "DELTA_MERGE_UNRESOLVED_EXPRESSION": "42601", "DELTA_METADATA_CHANGED": "2D521",
    "DELTA_METADATA_MISMATCH": "42KDG", "DELTA_MISSING_CHANGE_DATA": "KD002", "DELTA_MISSING_DELTA_TABLE": "42P01",
    "DELTA_MISSING_PROVIDER_FOR_CONVERT": "0AKDC", "DELTA_MODE_NOT_SUPPORTED": "0AKDC",
    "DELTA_MULTIPLE_CDC_BOUNDARY": "42614", "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE": "21506",
    "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED": "0AKDC", "DELTA_NON_PARTITION_COLUMN_REFERENCE": "42P10",
    "DELTA_NOT_NULL_CONSTRAINT_VIOLATED": "23502", "DELTA_NO_START_FOR_CDC_READ": "42601",
    "DELTA_ONEOF_IN_TIMETRAVEL": "42601", "DELTA_OVERWRITE_SCHEMA_WITH_DYNAMIC_PARTITION_OVERWRITE": "42613",
    "DELTA_PARTITION_COLUMN_NOT_FOUND": "42703", "DELTA_PATH_EXISTS": "42K04", "DELTA_PROTOCOL_CHANGED": "2D521",
    "DELTA_REPLACE_WHERE_MISMATCH": "44000", "DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE": "42613",
    "DELTA_SCHEMA_CHANGED_WITH_VERSION": "KD007", "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS": "KD007",
    "DELTA_SOURCE_IGNORE_DELETE": "0A000", "DELTA_SOURCE_TABLE_IGNORE_CHANGES": "0A000",
    "DELTA_STARTING_VERSION_AND_TIMESTAMP_BOTH_SET": "42613", "DELTA_TABLE_ALREADY_EXISTS": "42P07",
    "DELTA_TIMESTAMP_GREATER_THAN_COMMIT": "42816", "DELTA_TIMESTAMP_INVALID": "42816",
    "DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME": "KD009", "DELTA_UNEXPECTED_PARTIAL_SCAN": "KD00A",
    "DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME": "KD009", "DELTA_UNIVERSAL_FORMAT_VIOLATION": "KD00E",
    "DELTA_UNSUPPORTED_FEATURES_FOR_READ": "56038",
    "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE": "56038", "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG": "56038",
    "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT": "0AKDC", "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS": "0A000",
    "DELTA_UNSUPPORTED_NESTED_FIELD_IN_OPERATION": "0AKDC", "DELTA_UNSUPPORTED_OUTPUT_MODE": "0AKDC",
    "DELTA_UNSUPPORTED_SCHEMA_DURING_READ": "0AKDC", "DELTA_UNSUPPORTED_SOURCE": "0AKDD",
    "DELTA_UNSUPPORTED_SUBQUERY": "0AKDC",
    "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION": "0AKDC",
    "DELTA_UNSUPPORTED_TIME_TRAVEL_MULTIPLE_FORMATS": "42613", "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION": "42846",
    "DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE": "22003", "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT": "22003",
    "DELTA_VERSION_NOT_FOUND": "22003", "DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED": "0A000",
    "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST": "42703", "DELTA_ZORDERING_ON_PARTITION_COLUMN": "42P10",
    "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE": "55019", "FIELD_NOT_FOUND": "42704",
    "INSERT_COLUMN_ARITY_MISMATCH": "21S01", "INVALID_NON_DETERMINISTIC_EXPRESSIONS": "42K0E",
    "INVALID_SCHEMA_OR_RELATION_NAME": "42602",
    "INVALID_WHERE_CONDITION": "42903", "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION": "42613",
    "NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION": "42613",
    "NON_LAST_NOT_MATCHED_BY_TARGET_CLAUSE_OMIT_CONDITION": "42613", "PARSE_SYNTAX_ERROR": "42601",
    "RESERVED_CDC_COLUMNS_ON_WRITE": "42939", "TABLE_OR_VIEW_ALREADY_EXISTS": "42P07", "UNRESOLVED_COLUMN": "42703",
    "UNSUPPORTED_EXPR_FOR_OPERATOR": "42K0E", "UNSUPPORTED_SUBQUERY_EXPRESSION_CATEGORY": "0A000",
    "MERGE_WITHOUT_WHEN": "42601",
    "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED": "42808", "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED": "42808",
    "DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP": "42611", "DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE": "428H2",
    "DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED": "42601", "DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION": "42613",
    "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED": "0AKDE", "INVALID_DEFAULT_VALUE": "42623",
    "WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED": "0AKDC",
    "DVLAKE_LEGACY_STORE_ASSIGNMENT_UNSUPPORTED": "0A000", "DVLAKE_UNSUPPORTED_DELTA_STATEMENT": "0A000",
}


def with_error_class(message: str, error_class: str | None) -> str:
    """The text users see of an error of class ``error_class``: ``[ERROR_CLASS] message``, as delta-spark's messages
    read. The one place that format is written: raise sites pass the class (``error_class=`` or their type's
    default), never a prefix in the message. A message that already starts with it (one rebuilt from an executor's
    error text) gets it once."""
    if not error_class or message.startswith(f"[{error_class}]"):
        return message
    return f"[{error_class}] {message}"


def sql_state_of(error_class: str | None) -> str | None:
    """The SQLSTATE of ``error_class`` (a sub-class's parent's when it has none of its own), None when unknown."""
    if not error_class:
        return None
    return SQL_STATES.get(error_class) or SQL_STATES.get(error_class.split(".")[0])


class DvlakeError(Exception):
    """Base class of every error dvlake raises on purpose.

    ``error_class`` is delta-spark's error class for the same condition (for example
    ``DELTA_CONCURRENT_APPEND``) where one exists, so code that branches on delta-spark's
    classes can branch on dvlake's errors the same way; None where delta-spark has none.
    ``sql_state`` is that class's SQLSTATE. The methods ``getCondition``, ``getErrorClass``,
    ``getSqlState``, ``getMessageParameters``, ``getMessage`` and ``getQueryContext`` answer as PySpark's
    own exceptions do, so ``except`` blocks written for PySpark 4 read dvlake's errors unchanged.
    """

    error_class: str | None = None
    sql_state: str | None = None
    #: Whether the message shows the error class (``[ERROR_CLASS] message``, see ``with_error_class``); the types
    #: with ``DeltaErrorClassMixin`` do. A type decides it for all its raise sites.
    shows_error_class: ClassVar[bool] = False

    def __init__(self, *args: object, error_class: str | None = None) -> None:
        if error_class is not None:
            self.error_class = error_class
        if self.shows_error_class and len(args) == 1 and isinstance(args[0], str):
            args = (with_error_class(args[0], self.error_class),)
        super().__init__(*args)
        self._settle_sql_state()

    def _settle_sql_state(self) -> None:
        """The SQLSTATE of the class this instance carries (it may differ from its Python class's default)."""
        state = sql_state_of(self.error_class)
        if state is not None:
            self.sql_state = state

    # --- PySpark's PySparkException API ------------------------------------------------------------------

    def getCondition(self) -> str | None:  # noqa: N802 - PySpark's name
        """The error class (PySpark 4 calls it the error condition)."""
        return self.error_class

    def getErrorClass(self) -> str | None:  # noqa: N802 - PySpark's name
        """The error class; deprecated in PySpark 4.0 in favour of ``getCondition``, and warned about as there."""
        warnings.warn("Deprecated in 4.0.0, use getCondition instead.", FutureWarning, stacklevel=2)
        return self.getCondition()

    def getSqlState(self) -> str | None:  # noqa: N802 - PySpark's name
        """The SQLSTATE of the error class, None where it has none."""
        return self.sql_state

    def getMessageParameters(self) -> dict[str, str]:  # noqa: N802 - PySpark's name
        """dvlake's messages are written out whole, so there are no separate parameters."""
        return {}

    def getMessage(self) -> str:  # noqa: N802 - PySpark's name
        """The message with its ``[ERROR_CLASS]`` prefix, as PySpark's ``getMessage``."""
        return with_error_class(str(self), self.error_class)

    def getQueryContext(self) -> list[Any]:  # noqa: N802 - PySpark's name
        """No query context: the message names the statement and position where one applies."""
        return []


class DeltaErrorClassMixin:
    """Makes a type's messages show its error class (``[DELTA_…] message``), the way delta-spark's messages read;
    ``error_class`` may also be given as the second positional argument."""

    error_class: str | None
    shows_error_class: ClassVar[bool] = True

    def __init__(self, message: str, error_class: str | None = None) -> None:
        super().__init__(message, error_class=error_class)  # type: ignore[call-arg]


# --- deletion vectors ------------------------------------------------------------------------


class DeletionVectorError(DvlakeError):
    """A deletion vector cannot be encoded, decoded, located or used."""


class CorruptDeletionVectorError(DeletionVectorError):
    """Stored deletion-vector bytes fail a check (version, size, magic, CRC, cardinality).

    Never ignore it: reading past a corrupt DV would silently return deleted rows.
    """


class DeletionVectorIntegrityError(DeltaErrorClassMixin, CorruptDeletionVectorError):
    """A deletion vector fails one of delta-spark's named checks; ``error_class`` says which
    (DELTA_DELETION_VECTOR_SIZE_MISMATCH, …_CHECKSUM_MISMATCH, …_CARDINALITY_MISMATCH, …_INVALID_ROW_INDEX)."""

    error_class = "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH"


class InvalidDescriptorError(DeletionVectorError):
    """A DeletionVectorDescriptor is malformed (unknown storage type, bad Z85, bad path)."""


class DeletionVectorNotFoundError(DeletionVectorError):
    """The file a deletion vector points to does not exist."""


# --- protocol, log and table state -----------------------------------------------------------


class DeltaProtocolError(DvlakeError):
    """The table's log or protocol is not something this client may read or write."""


class ScanListingError(DeltaProtocolError):
    """The native scan's file listing, written to a file for a large read, is missing, changed or malformed.

    Executors check its SHA-256 against the plan before they use it: without it they cannot know each file's
    deletion vector, so the query fails instead of reading files without their DVs. Running it again writes the
    listing anew.
    """


class UnsupportedFeatureError(DeltaProtocolError):
    """The table needs a reader or writer feature dvlake does not implement (SQLSTATE 56038)."""

    error_class = "DELTA_UNSUPPORTED_FEATURES_FOR_READ"


class UnsupportedTableFeaturesError(DeltaErrorClassMixin, UnsupportedFeatureError):
    """The table lists reader (or, with ``error_class`` DELTA_UNSUPPORTED_FEATURES_FOR_WRITE, writer) features or
    rules dvlake does not implement; the message names them."""

    error_class = "DELTA_UNSUPPORTED_FEATURES_FOR_READ"


class CorruptLogError(DeltaProtocolError):
    """A commit, checkpoint or _last_checkpoint file cannot be parsed or is inconsistent."""


class StorageError(DvlakeError):
    """The storage under a table cannot do what an operation needs."""


class TableRootNotADirectoryError(DeltaErrorClassMixin, StorageError):
    """The table root (or a folder above it) is an existing regular file, so no table can be created there."""

    error_class = "DVLAKE_TABLE_ROOT_NOT_A_DIRECTORY"


class CommitPrimitiveUnavailableError(StorageError):
    """The storage cannot create a commit file atomically-if-absent, so a concurrent writer could be lost.

    Object stores need a conditional PUT (put-if-absent) for safe Delta commits; without one,
    dvlake refuses to commit unless the caller declares that only one writer exists.
    """


class ObjectStoreConfigurationError(StorageError):
    """The object store of a table root cannot be reached with the settings given (no account, bad endpoint)."""


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


class TimestampGreaterThanCommitError(DeltaErrorClassMixin, VersionNotFoundError):
    """Time travel to a timestamp after the table's latest commit."""

    error_class = "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"


class InvalidArgumentError(DvlakeError, ValueError):
    """A caller passed a value dvlake cannot act on (bad mode, unknown column, bad predicate)."""


class PartitionValueNotWritableError(DeltaErrorClassMixin, InvalidArgumentError):
    """A partition value cannot become the folder name Spark writes it as (too long, or refused by the file system)."""

    error_class = "DVLAKE_PARTITION_VALUE_NOT_WRITABLE"


class ColumnNotFoundError(InvalidArgumentError):
    """A column named by the caller is not in the table schema."""

    error_class = "DELTA_COLUMN_NOT_FOUND"


class UnsupportedEnvironmentError(DvlakeError):
    """The Spark version or the Python environment cannot run dvlake (the message says what to install)."""


class ExecutorEnvironmentError(DeltaErrorClassMixin, UnsupportedEnvironmentError):
    """Spark's Python workers cannot import dvlake or one of its dependencies.

    The driver found them, the executors did not: the worker interpreter is not the one dvlake is
    installed in (PYSPARK_PYTHON unset or wrong), or dvlake is not deployed to the cluster's nodes.
    The message says how to ship it.
    """

    error_class = "DVLAKE_EXECUTOR_ENVIRONMENT"


class NativeEngineScanError(UnsupportedEnvironmentError):
    """The session runs an engine (Comet, Gluten, RAPIDS, ...) that may replace Spark's Parquet scans with its own.

    Such an engine does not know deletion vectors: a scan it replaced would return deleted rows with no error.
    dvlake refuses to read files with a DV in that session; the message names the engine and the setting that
    switches its scans off.
    """

    error_class = "DVLAKE_SCAN_REPLACED_BY_NATIVE_ENGINE"


class SchemaMismatchError(InvalidArgumentError):
    """Data written does not match the table schema."""


class PartitionColumnNotFoundError(DeltaErrorClassMixin, SchemaMismatchError):
    """Data written to a partitioned table lacks one of its partition columns."""

    error_class = "DELTA_PARTITION_COLUMN_NOT_FOUND"


class DeletionVectorsNotAllowedError(DeltaErrorClassMixin, DeltaProtocolError):
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

# --- table lifecycle: VACUUM, RESTORE, GENERATE, protocol changes (delta-spark error classes) ---


class VacuumRetentionError(DeltaErrorClassMixin, InvalidArgumentError):
    """VACUUM was asked for a retention that is negative or shorter than the table's (DELTA_VACUUM_RETENTION_PERIOD_*)."""

    error_class = "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"


class VacuumLiteError(DeltaErrorClassMixin, InvalidArgumentError):
    """VACUUM LITE cannot see every remove since the last VACUUM in the log (DELTA_CANNOT_VACUUM_LITE)."""

    error_class = "DELTA_CANNOT_VACUUM_LITE"


class RestoreError(DeltaErrorClassMixin, InvalidArgumentError):
    """RESTORE was given a version/timestamp it cannot restore to."""

    error_class = "DELTA_CANNOT_RESTORE_TABLE_VERSION"


class RestoreMissingFilesError(DeltaErrorClassMixin, DataFileNotFoundError):
    """Files (data or deletion vector) the restored version needs are gone, usually after a VACUUM."""

    error_class = "DELTA_CANNOT_RESTORE_MISSING_FILES"


class UnsupportedWithDeletionVectorsError(DeltaErrorClassMixin, DeltaProtocolError):
    """A command that cannot express deleted rows met a table version with live DVs (SQLSTATE 0A000)."""

    error_class = "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS"


class TablePropertyValidationError(DeltaErrorClassMixin, InvalidArgumentError):
    """A combination of table properties delta-spark refuses (DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED.*)."""

    error_class = "DELTA_VIOLATE_TABLE_PROPERTY_VALIDATION_FAILED"


class UnsupportedModeError(DeltaErrorClassMixin, InvalidArgumentError):
    """An unknown GENERATE mode (DELTA_MODE_NOT_SUPPORTED)."""

    error_class = "DELTA_MODE_NOT_SUPPORTED"


class ProtocolFeatureError(DeltaErrorClassMixin, UnsupportedFeatureError):
    """A protocol change names a feature that is unknown or that dvlake cannot honour."""

    error_class = "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"


class TimeTravelBeyondRetentionError(DeltaErrorClassMixin, VersionNotFoundError):
    """The version asked for is older than delta.deletedFileRetentionDuration: VACUUM may have removed its files."""

    error_class = "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION"

# --- OPTIMIZE / REORG / Z-order (delta-spark error classes) -------------------------------------


class NonPartitionColumnReferenceError(DeltaErrorClassMixin, InvalidArgumentError):
    """OPTIMIZE/REORG ``WHERE`` may only name partition columns (files are chosen, not rows)."""

    error_class = "DELTA_NON_PARTITION_COLUMN_REFERENCE"


class ZOrderingOnPartitionColumnError(DeltaErrorClassMixin, InvalidArgumentError):
    """Z-ordering by a partition column is meaningless: every file holds one value of it."""

    error_class = "DELTA_ZORDERING_ON_PARTITION_COLUMN"


class ZOrderingColumnDoesNotExistError(DeltaErrorClassMixin, InvalidArgumentError):
    """A Z-order column is not a column of the table."""

    error_class = "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST"


# --- UPDATE and MERGE (delta-spark names; ``error_class`` as delta-spark reports it) ---------------


class DeltaInvariantViolationException(DeltaErrorClassMixin, InvalidArgumentError):
    """A row written by a command breaks a table invariant (a NULL in a NOT NULL column); nothing was committed."""

    error_class = "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"


class CheckConstraintViolationError(DeltaInvariantViolationException):
    """A row written by a command breaks a CHECK constraint or column invariant of the table (delta-spark's
    DeltaInvariantViolationException, SQLSTATE 23001); the message names the constraint, its expression and the
    row's values of the columns it reads. Nothing was committed."""

    error_class = "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"


class UnrecognizedInvariantError(DeltaErrorClassMixin, DeltaProtocolError):
    """A column invariant in the table's schema is not one dvlake (or delta-spark) can enforce."""

    error_class = "DELTA_UNRECOGNIZED_INVARIANT"


class UnsupportedSubqueryError(DeltaErrorClassMixin, InvalidArgumentError):
    """A DELETE, UPDATE or MERGE condition holds a subquery, which delta-spark refuses (SQLSTATE 0AKDC)."""

    error_class = "DELTA_UNSUPPORTED_SUBQUERY"


class UnresolvedAssignmentError(DeltaErrorClassMixin, InvalidArgumentError):
    """An UPDATE/MERGE assignment names a column the table does not have (Spark's UNRESOLVED_COLUMN, as
    delta-spark reports it; FIELD_NOT_FOUND for a nested field), or the same column twice
    (DELTA_CONFLICT_SET_COLUMN)."""

    error_class = "UNRESOLVED_COLUMN.WITH_SUGGESTION"


class DeltaAnalysisException(DeltaErrorClassMixin, InvalidArgumentError):
    """A statement or call delta-spark's analysis refuses for its shape (``error_class`` says which, e.g.
    DELTA_MERGE_MISSING_WHEN for a MERGE without a WHEN clause, DELTA_ONEOF_IN_TIMETRAVEL,
    DELTA_INVALID_PROTOCOL_VERSION)."""

    error_class = "DELTA_MERGE_MISSING_WHEN"


class IdentityColumnError(DeltaErrorClassMixin, InvalidArgumentError):
    """An identity column (``GENERATED … AS IDENTITY``) defined or written against delta-spark's rules: an explicit
    value for a GENERATED ALWAYS column, an UPDATE of one, a step of 0, a type other than BIGINT, a partition
    column (``error_class`` says which)."""

    error_class = "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"


class UnsafeAssignmentCastError(DeltaErrorClassMixin, SchemaMismatchError):
    """An assigned value cannot be stored in its column under Spark's ANSI store-assignment rules."""

    error_class = "DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION"


class CastOverflowInTableWriteError(DeltaErrorClassMixin, InvalidArgumentError):
    """A value assigned by UPDATE or MERGE does not fit its numeric column under the ANSI store-assignment policy
    (delta-spark's ``DeltaArithmeticException``); nothing was committed."""

    error_class = "DELTA_CAST_OVERFLOW_IN_TABLE_WRITE"


class CastInvalidInputError(DeltaErrorClassMixin, InvalidArgumentError):
    """A text value assigned by UPDATE or MERGE is not a valid value of its column's type (Spark's ANSI cast);
    nothing was committed."""

    error_class = "CAST_INVALID_INPUT"


class NestedFieldUpdateError(DeltaErrorClassMixin, InvalidArgumentError):
    """A SET names a field inside a column that is not a struct (a map, an array): only struct fields can be
    assigned one by one."""

    error_class = "DELTA_UNSUPPORTED_FIELD_UPDATE_NON_STRUCT"


class MergeUnresolvedExpressionError(DeltaErrorClassMixin, InvalidArgumentError):
    """A MERGE expression names a column its clause cannot see (delta-spark: insert clauses see only the source,
    NOT MATCHED BY SOURCE clauses only the target, SET/INSERT column lists only the target). The message names the
    expression, the clause and the columns that clause can use."""

    error_class = "DELTA_MERGE_UNRESOLVED_EXPRESSION"


class AmbiguousReferenceError(DeltaErrorClassMixin, InvalidArgumentError):
    """An unqualified name in a MERGE expression is a column of both the target and the source (Spark's class)."""

    error_class = "AMBIGUOUS_REFERENCE"


class NonLastClauseOmitConditionError(DeltaErrorClassMixin, InvalidArgumentError):
    """Of several MERGE clauses of one kind, one other than the last has no condition: the later ones could never
    run. ``error_class`` names the kind (``NON_LAST_MATCHED_…``, ``NON_LAST_NOT_MATCHED_BY_TARGET_…``,
    ``NON_LAST_NOT_MATCHED_BY_SOURCE_CLAUSE_OMIT_CONDITION``)."""

    error_class = "NON_LAST_MATCHED_CLAUSE_OMIT_CONDITION"


class AggregationNotSupportedError(DeltaErrorClassMixin, InvalidArgumentError):
    """An aggregate or window function in a MERGE condition or assigned value: there is no group or window of rows to
    evaluate it over. delta-spark's class for an aggregate in a condition; Spark's UNSUPPORTED_EXPR_FOR_OPERATOR
    (which delta-spark lets through) for a window function anywhere and an aggregate in a SET or INSERT value."""

    error_class = "DELTA_AGGREGATION_NOT_SUPPORTED"


class NonDeterministicConditionError(DeltaErrorClassMixin, InvalidArgumentError):
    """A MERGE condition holds a non-deterministic function (delta-spark's class); DELETE and UPDATE conditions
    raise it with Spark's ``INVALID_NON_DETERMINISTIC_EXPRESSIONS``, the class delta-spark lets through there.
    A row could be matched, or deleted, differently on every evaluation."""

    error_class = "DELTA_NON_DETERMINISTIC_FUNCTION_NOT_SUPPORTED"


class InvalidNonDeterministicExpressionsError(NonDeterministicConditionError):
    """A DELETE or UPDATE condition holds a non-deterministic function: Spark's class, as delta-spark reports it."""

    error_class = "INVALID_NON_DETERMINISTIC_EXPRESSIONS"


class DeltaUnsupportedOperationException(DvlakeError):
    """The command cannot be carried out as asked (delta-spark's DeltaUnsupportedOperationException)."""

    error_class = "DELTA_UNSUPPORTED_OPERATION"


class MultipleSourceRowMatchingTargetRowError(DeltaErrorClassMixin, DeltaUnsupportedOperationException):
    """MERGE found several source rows matching one target row: which one should win is ambiguous.

    Raised before anything is written. De-duplicate the source (e.g. keep the latest row per key)
    or tighten the ON condition so that each target row matches at most one source row.
    """

    error_class = "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"


class NondeterministicMergeSourceError(DvlakeError, NotImplementedError):
    """MERGE with ``spark.databricks.delta.merge.failIfSourceChanged=true`` and ``materializeSource=none`` over a
    source that is not deterministic: re-reading it could give other rows. delta-spark raises a plain
    UnsupportedOperationException (no error class) with the same words; ``NotImplementedError`` is Python's nearest."""


class ChangeDataFeedNotSupportedError(UnsupportedFeatureError):
    """No longer raised: UPDATE/MERGE now write change data on change-feed tables (kept so imports keep working)."""

    error_class = "DVLAKE_CHANGE_DATA_FEED_NOT_SUPPORTED"


# --- reliability: hostile paths, executor failures (issue 8) -----------------------------------
# ``error_class`` names the condition the way delta-spark's error classes do, so a caller can
# branch on one stable string; dvlake-only conditions use a ``DVLAKE_`` prefix.


class PathOutsideTableRootError(DeltaErrorClassMixin, DeltaProtocolError):
    """A data or DV path of the log resolves outside the table root while confinement is on.

    ``..`` segments, absolute paths, a ``u`` DV prefix with separators, or a symlink that leaves
    the root. Tables that really reference outside files (shallow clones) need confinement off:
    session ``spark.dvlake.confineToTableRoot=false`` or table property ``dvlake.confineToTableRoot=false``.
    """

    error_class = "DVLAKE_PATH_OUTSIDE_TABLE_ROOT"


class NotARegularFileError(DeltaErrorClassMixin, DvlakeError):
    """A data or DV path names a FIFO, device, socket or directory: never opened (it could block forever)."""

    error_class = "DVLAKE_NOT_A_REGULAR_FILE"


class DataFileSchemaMismatchError(DeltaErrorClassMixin, DvlakeError):
    """A data file's Parquet schema disagrees with the table schema in the log (a column's type differs)."""

    error_class = "DVLAKE_DATA_FILE_SCHEMA_MISMATCH"


class CorruptDataFileError(DeltaErrorClassMixin, DvlakeError):
    """A data file the log lists is not readable Parquet (truncated, overwritten, not Parquet at all)."""

    error_class = "DVLAKE_CORRUPT_DATA_FILE"

# --- ALTER TABLE … DROP FEATURE (delta-spark's DeltaTableFeatureException and its error classes) ---------


class DeltaTableFeatureException(DeltaErrorClassMixin, DeltaProtocolError):
    """A table feature cannot be dropped (yet); ``error_class`` says why, as delta-spark's DELTA_FEATURE_DROP_*.

    Two of them are steps rather than failures: DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD (the
    feature is gone from the current version; re-run after the retention period) and
    DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST (versions that still use it are not old enough to
    be truncated yet).
    """

    error_class = "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"

# --- DataFrameWriter options and catalog names (the delta-spark-style faces, dvlake.faces) -----------------


class DeltaOptionError(DeltaErrorClassMixin, InvalidArgumentError):
    """A DataFrameReader/Writer option (or combination) delta-spark refuses; ``error_class`` names which, e.g.
    DELTA_REPLACE_WHERE_WITH_DYNAMIC_PARTITION_OVERWRITE or DELTA_INVALID_IDEMPOTENT_WRITES_OPTIONS."""

    error_class = "DELTA_ILLEGAL_OPTION"


class ReplaceWhereMismatchError(DeltaErrorClassMixin, InvalidArgumentError):
    """``replaceWhere`` data has a row the condition does not accept; nothing was committed."""

    error_class = "DELTA_REPLACE_WHERE_MISMATCH"


class NotADeltaTableNameError(DeltaErrorClassMixin, TableNotFoundError):
    """A catalog name that is not a Delta table with a location; use ``delta.`<path>``` instead."""

    error_class = "DELTA_MISSING_DELTA_TABLE"


class InvalidTableNameError(DeltaErrorClassMixin, InvalidArgumentError):
    """A name Spark's catalog refuses for a table (a part that is not letters, digits and ``_``), refused by every
    create-by-name path *before* anything is written: a managed table's folder is derived from the name, so ``../x``
    or ``.`` would otherwise place a Delta table outside its database (or make the warehouse itself one)."""

    error_class = "INVALID_SCHEMA_OR_RELATION_NAME"



class CannotReplaceMissingTableError(DeltaErrorClassMixin, TableNotFoundError):
    """``DeltaTable.replace()`` (REPLACE TABLE) of a name or location with no Delta table: replacing is only for a
    table that exists, so a typo never silently creates a new one (``createOrReplace`` creates)."""

    error_class = "DELTA_CANNOT_REPLACE_MISSING_TABLE"


# --- SQL front end and CONVERT TO DELTA (issue 14) ------------------------------------------------


class DeltaSqlError(DeltaErrorClassMixin, InvalidArgumentError):
    """A Delta SQL statement dvlake recognised but cannot run as written.

    The message names the statement and the position (line and column, 1-based) of the part dvlake
    cannot run, so the user is never left with Spark's TABLE_OR_VIEW_NOT_FOUND for ``delta.`<path>```.
    """

    error_class = "DVLAKE_UNSUPPORTED_DELTA_STATEMENT"

    def __init__(self, message: str, error_class: str | None = None, *, statement: str | None = None,
                 line: int | None = None, column: int | None = None) -> None:
        self.statement = statement
        self.line = line
        self.column = column
        super().__init__(message, error_class)


class DeltaSqlParseError(DeltaSqlError):
    """A Delta SQL statement that does not parse (Spark's error class for syntax errors)."""

    error_class = "PARSE_SYNTAX_ERROR"


class ConvertToDeltaError(DeltaErrorClassMixin, InvalidArgumentError):
    """CONVERT TO DELTA refused the directory; ``error_class`` says why, with delta-spark's (or Spark's) name:
    DELTA_EMPTY_DIRECTORY, DELTA_UNEXPECTED_NUM_PARTITION_COLUMNS_FROM_FILE_NAME,
    DELTA_UNEXPECTED_PARTITION_COLUMN_FROM_FILE_NAME, DELTA_FAILED_CAST_PARTITION_VALUE,
    FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER, CANNOT_MERGE_SCHEMAS, DELTA_CONVERT_NON_PARQUET_TABLE."""

    error_class = "DELTA_CONVERSION_FAILED"



# --- Change Data Feed (delta-spark's CDCReader errors) -------------------------------------------


class MissingChangeDataError(DeltaErrorClassMixin, InvalidArgumentError):
    """The change feed was off at a version of the requested range, so no change data exists for it."""

    error_class = "DELTA_MISSING_CHANGE_DATA"


class CdfIncompatibleSchemaChangeError(DeltaErrorClassMixin, InvalidArgumentError):
    """A batch change-feed read spans a column renamed or dropped under column mapping: its files would come back
    under the end version's names (delta-spark refuses the range too)."""

    error_class = "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"


class InvalidCdcRangeError(DeltaErrorClassMixin, InvalidArgumentError):
    """The requested version range is not a range (end before start, or a negative bound)."""

    error_class = "DELTA_INVALID_CDC_RANGE"


class CdcStartVersionAfterLatestError(DeltaErrorClassMixin, VersionNotFoundError):
    """``startingVersion`` is after the table's latest version (or a starting timestamp after its latest commit)."""

    error_class = "DELTA_CDC_START_VERSION_AFTER_LATEST"


class NoStartForCdcReadError(DeltaErrorClassMixin, InvalidArgumentError):
    """A change-feed read needs ``startingVersion`` or ``startingTimestamp``."""

    error_class = "DELTA_NO_START_FOR_CDC_READ"


class MultipleCdcBoundaryError(DeltaErrorClassMixin, InvalidArgumentError):
    """Both a version and a timestamp were given for the same end of the range."""

    error_class = "DELTA_MULTIPLE_CDC_BOUNDARY"


class ChangeDataFileNotFoundError(DeltaErrorClassMixin, DataFileNotFoundError):
    """A data or change data file the range needs is gone (VACUUM removed it after its retention period)."""

    error_class = "DELTA_CHANGE_DATA_FILE_NOT_FOUND"


class ReservedCdcColumnsOnWriteError(DeltaErrorClassMixin, InvalidArgumentError):
    """Data written to a change-feed table must not carry the feed's own columns (``_change_type`` …)."""

    error_class = "RESERVED_CDC_COLUMNS_ON_WRITE"


# --- UniForm (Iceberg metadata over Delta tables) ------------------------------------------------


class IcebergCompatViolationError(DeltaErrorClassMixin, InvalidArgumentError):
    """A table property or feature IcebergCompatV2/V3 requires is missing or conflicting (SQLSTATE KD00E)."""

    error_class = "DELTA_ICEBERG_COMPAT_VIOLATION"


class UniversalFormatViolationError(DeltaErrorClassMixin, InvalidArgumentError):
    """``delta.universalFormat.enabledFormats`` names iceberg without the IcebergCompat it needs (SQLSTATE KD00E)."""

    error_class = "DELTA_UNIVERSAL_FORMAT_VIOLATION"


class UniformConversionError(DvlakeError):
    """The Delta table (or this version of it) cannot be published as Iceberg metadata by dvlake yet."""


# --- Structured Streaming (delta-spark's DeltaSource / DeltaSink errors) --------------------------


class DeltaSourceIgnoreChangesError(DeltaErrorClassMixin, DvlakeError):
    """A streaming source met a commit that rewrote data (UPDATE, MERGE, a DELETE with deletion vectors):
    re-emitting the rewritten files would duplicate rows, so the query stops unless an option says what to do."""

    error_class = "DELTA_SOURCE_TABLE_IGNORE_CHANGES"


class DeltaSourceIgnoreDeleteError(DeltaErrorClassMixin, DvlakeError):
    """A streaming source met a commit that only removed data files (a whole-file DELETE, an overwrite)."""

    error_class = "DELTA_SOURCE_IGNORE_DELETE"


class StreamingSchemaChangedError(DeltaErrorClassMixin, DvlakeError):
    """The source table's schema changed at a version the stream reads; restart the query to take the new schema."""

    error_class = "DELTA_SCHEMA_CHANGED_WITH_VERSION"


class StreamingSchemaChangedWithStartingOptionsError(StreamingSchemaChangedError):
    """As ``StreamingSchemaChangedError``, for a query given ``startingVersion``/``startingTimestamp``: the schema at a
    version it reads cannot be read with the stream's schema; starting at or after that version avoids it."""

    error_class = "DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS"


class StreamingIncompatibleSchemaChangeError(DeltaErrorClassMixin, DvlakeError):
    """A column was renamed or dropped (column mapping), or the partitioning changed, between a version the stream
    reads and the schema it reads with: old files would come back under new names or without columns. delta-spark
    asks for a ``schemaTrackingLocation`` here; dvlake has none, so a new query must start after the change."""

    error_class = "DELTA_STREAMING_INCOMPATIBLE_SCHEMA_CHANGE_USE_SCHEMA_LOG"


class DifferentTableReadByStreamError(DeltaErrorClassMixin, DvlakeError):
    """The checkpoint's offsets belong to another table (another table id) than the one at the path."""

    error_class = "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE"


class UnsupportedOutputModeError(DeltaErrorClassMixin, InvalidArgumentError):
    """The Delta sink writes ``append`` and ``complete`` output only."""

    error_class = "DELTA_UNSUPPORTED_OUTPUT_MODE"


# --- what messages show: Spark's text without dvlake's internals --------------------------------------------
# A message is for the person who wrote the query. Spark appends its logical plan to analysis errors and PySpark
# may append the Java stack; on a table dvlake reads, that plan is dvlake's own (an anti join on ``__dvlake_…``
# columns, ``getbit(…)``), which says nothing about the user's mistake and buries it in kilobytes of text.
# ``user_text`` keeps the message and drops those parts unless debugging is on (``--debug``, DVLAKE_DEBUG=1,
# or the session setting ``spark.dvlake.debug=true``).

#: Prefix of the names dvlake gives its internal columns; a message showing one shows dvlake's plan.
INTERNAL_NAME_PREFIX = "__dvlake_"

_debug: list[bool] = []
_JVM_STACK = re.compile(r"\n+JVM stacktrace:\n.*\Z", re.S)
#: Spark's plan annotation: ";" then a new line opening a plan tree: an operator ("Filter …", "'Project …") whose
#: children follow as "+- " / ":- " lines, or a lone unresolved operator ("'UnresolvedRelation …").
_PLAN = re.compile(r";[ \t]*\n(?=(?:'?[A-Z][A-Za-z]*\b[^\n]*\n(?:[ :|]*[+:]- )|'[A-Z][A-Za-z]*\b[^\n]*(?:\n|\Z))).*\Z",
                   re.S)
_INTERNAL_NAME = re.compile(r",?\s*`?" + re.escape(INTERNAL_NAME_PREFIX) + r"[\w.#]*`?")


def set_debug(on: bool) -> None:
    """Show Spark's full error text (plans, Java stacks) in this process from now on (``dvlake --debug``)."""
    _debug[:] = [on]


def reset_debug() -> None:
    """Back to the environment's choice (DVLAKE_DEBUG): the CLI's ``--debug`` lasts one command."""
    _debug.clear()


def debug_enabled() -> bool:
    """Whether full error text is wanted: ``set_debug(True)`` or DVLAKE_DEBUG=1."""
    if _debug:
        return _debug[0]
    return os.environ.get("DVLAKE_DEBUG", "") not in ("", "0")


def user_text(message: str) -> str:
    """``message`` without Spark's plan annotation, PySpark's "JVM stacktrace:" section and dvlake's internal
    column names (as in a "Did you mean" list); unchanged when ``debug_enabled()``."""
    if debug_enabled():
        return message
    text = _JVM_STACK.sub("", message)
    text = _PLAN.sub("", text)
    if INTERNAL_NAME_PREFIX in text:
        text = _INTERNAL_NAME.sub("", text).replace("[, ", "[").replace("[,", "[")
    return text.rstrip()


class UnsupportedDmlTargetError(DeltaErrorClassMixin, InvalidArgumentError):
    """DELETE, UPDATE or MERGE on a temporary view that is not a plain scan of one Delta table (a filter, renamed or
    computed columns, a column the table lacks): changing the table through it would not mean what the view shows.
    ``error_class`` says which (delta-spark's classes for the same refusals)."""

    error_class = "DELTA_UNSUPPORTED_SOURCE"


class InvalidArgumentTypeError(DvlakeError, TypeError):
    """An argument of the Python API has the wrong type (``merge(1, …)``, ``set={"a": 1}``): a ``TypeError``, as
    delta-spark's Python API raises for the same call."""


# --- row tracking (delta-spark's DELTA_ROW_ID_* / row tracking error classes) ------------------------


class RowTrackingError(DeltaErrorClassMixin, DeltaProtocolError):
    """Row ids or row commit versions cannot be assigned, preserved or enabled as the protocol requires;
    ``error_class`` says which rule (e.g. DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS)."""

    error_class = "DVLAKE_ROW_TRACKING_ILLEGAL_STATE"


# --- liquid clustering (delta-spark's DELTA_CLUSTER* classes) -----------------------------------------


class ClusteringError(DeltaErrorClassMixin, InvalidArgumentError):
    """CLUSTER BY, ALTER TABLE … CLUSTER BY or OPTIMIZE on a clustered table asks for something delta-spark refuses
    (clustering columns without stats or of a type data skipping cannot use, CLUSTER BY beside PARTITIONED BY, ZORDER
    BY or a WHERE on a clustered table); ``error_class`` says which."""

    error_class = "DELTA_CLUSTER_BY_INVALID_NUM_COLUMNS"
