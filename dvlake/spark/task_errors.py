"""dvlake errors raised in Spark tasks reach the caller as the same dvlake exception class.

Spark wraps whatever a Python task raises into a ``PythonException`` (classic: often a raw
``Py4JJavaError`` of "Job aborted"; Spark Connect: its own exception classes) whose text holds
the worker's traceback. So ``except CorruptDeletionVectorError`` would never fire for a corrupt
DV found on an executor. The bridge has two halves:

* on executors, ``on_executor`` wraps a ``mapInArrow`` function: a ``DvlakeError`` leaves the
  task with its class name and message framed by a marker in the exception text;
* on the driver, ``typed_error`` finds the marker in any exception's text (causes and stack
  included) and rebuilds the dvlake exception. ``translated()`` applies it at the command
  boundaries; ``install()`` hooks PySpark's exception conversion (classic and Connect) so the
  same happens for actions a user runs on a DataFrame dvlake returned.

It also recognises executors that cannot import dvlake's dependencies (a worker interpreter
other than the driver's) and says what to fix, instead of a 60-line worker traceback.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from dvlake import errors
from dvlake.errors import (
    CorruptDataFileError,
    DataFileNotFoundError,
    DataFileSchemaMismatchError,
    DvlakeError,
    ExecutorEnvironmentError,
    PartitionValueNotWritableError,
)
from dvlake.spark import error_logs
from dvlake.spark.executors import HOW_TO_SHIP, missing_module_error

_OPEN = "[DVLAKE_TASK_ERROR "
_CLOSE = "[/DVLAKE_TASK_ERROR]"
#: the Python class name, then the instance's error class where it has one (it may differ from its type's default)
_MARKED = re.compile(r"\[DVLAKE_TASK_ERROR (\w+)(?: ([\w.]+))?\](.*?)\[/DVLAKE_TASK_ERROR\]", re.S)
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
#: Modules dvlake's executor code needs; a worker lacking one runs the wrong interpreter.
EXECUTOR_MODULES = ("dvlake", "pyarrow", "pyroaring", "numpy", "pandas", "orjson")

#: "ImportError: <message>" that is not a ModuleNotFoundError (that one has its own line, above):
#: the module exists but fails to load (an incompatible version, a missing shared library)
_IMPORT_ERROR = re.compile(r"(?<!\w)ImportError: ([^\n]+)")


def _names_executor_module(message: str) -> bool:
    """Whether an ImportError message is about a module dvlake's executor code needs."""
    return any(re.search(rf"(?<![\w.]){re.escape(m)}\b", message) for m in EXECUTOR_MODULES)


#: a dvlake write's task could not create the folder of a partition value (``<col>=<escaped value>``)
_PARTITION_MKDIRS = re.compile(r"Mkdirs failed to create \S*/_dvlake_staging/\S*?/attempt_[^/\s]*/(\S*=\S*)")
MAX_SHOWN_VALUE = 80


def _partition_value_error(folders: str) -> PartitionValueNotWritableError:
    """Name the column and value whose folder the file system refused (the longest ``col=value`` segment)."""
    segments = [seg for seg in folders.rstrip("/").split("/") if "=" in seg]
    column, _, escaped = max(segments, key=len).partition("=")
    value = unquote(escaped)
    shown = value if len(value) <= MAX_SHOWN_VALUE else f"{value[:MAX_SHOWN_VALUE]}... ({len(value)} characters)"
    return PartitionValueNotWritableError(
        f"the value {shown!r} of partition column {unquote(column)!r} cannot be "
        f"written: Spark stores each partition value as a folder name ({len(escaped.encode())} bytes escaped here) "
        "and the file system refused to create it (most limit a name to 255 bytes). Nothing was committed. "
        "Shorten or hash the value, or partition by another column.")


MapInArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def framed(class_name: str) -> tuple[str, str]:
    """The text before and after a message a Spark expression raises (``raise_error``) so that the driver
    rebuilds it as the dvlake error ``class_name`` (a class of ``dvlake.errors``)."""
    return f"{_OPEN}{class_name}]", _CLOSE


def encode(exc: DvlakeError) -> str:
    """The message a task raises: class name, error class and message between markers."""
    error_class = f" {exc.error_class}" if exc.error_class else ""
    return f"{_OPEN}{type(exc).__name__}{error_class}]{exc}{_CLOSE}"


def on_executor(fn: MapInArrowFn) -> MapInArrowFn:
    """Wrap a ``mapInArrow`` function so its dvlake errors survive the trip to the driver."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            yield from fn(batches)
        except DvlakeError as exc:
            if _OPEN in str(exc):
                raise
            try:
                marked = type(exc)(encode(exc), error_class=exc.error_class)
            except TypeError:  # a subclass with another constructor: keep the name in the marker
                marked = DvlakeError(encode(exc))
            raise marked from exc

    return run


def exception_text(exc: BaseException) -> str:
    """Everything an exception says: message, Java stack and causes (PySpark keeps them apart)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            parts.append(str(current))
        except Exception:  # noqa: BLE001 - a Py4J error whose gateway is gone cannot print itself
            parts.append(repr(current))
        for attr in ("_desc", "_stackTrace"):
            value = getattr(current, attr, None)
            if isinstance(value, str):
                parts.append(value)
        current = current.__cause__ or current.__context__
    return "\n".join(parts)


_roots_lock = threading.Lock()
_table_roots: list[str] = []


def remember_table(root: str) -> None:
    """Note a table this process reads, so a file error naming one of its files can be typed."""
    with _roots_lock:
        if root not in _table_roots:
            _table_roots.append(root)
            del _table_roots[:-1000]


def _mentions_table(text: str) -> bool:
    with _roots_lock:
        return any(root in text for root in _table_roots)


def typed_error(exc: BaseException) -> DvlakeError | None:
    """The dvlake error ``exc`` carries (from a task), or None when it is not one of ours."""
    if isinstance(exc, DvlakeError):
        return exc
    text = exception_text(exc)
    m = _MARKED.search(text)
    if m:
        cls = getattr(errors, m.group(1), None)
        error_class, message = m.group(2), m.group(3).strip()
        if isinstance(cls, type) and issubclass(cls, DvlakeError):
            try:
                return cls(message, error_class=error_class)
            except TypeError:
                return DvlakeError(f"{m.group(1)}: {message}")
        return DvlakeError(f"{m.group(1)}: {message}")
    missing = _NO_MODULE.search(text)
    if missing and missing.group(1).split(".")[0] in EXECUTOR_MODULES and "Traceback" in text:
        return missing_module_error(missing.group(1))
    broken = _IMPORT_ERROR.search(text)
    if broken and "Traceback" in text and _names_executor_module(broken.group(1)):
        return ExecutorEnvironmentError(
            f"Spark's Python workers failed to import dvlake's dependencies: "
            f"ImportError: {broken.group(1).strip()[:300]}. The module is there but does not load on the executors "
            f"(a version that differs from the driver's, or a broken native library); install the driver's versions "
            f"in the executors' Python (the driver uses {sys.executable}) or set PYSPARK_PYTHON to it: {HOW_TO_SHIP}")
    folder = _PARTITION_MKDIRS.search(text)
    if folder:
        return _partition_value_error(folder.group(1))
    if _mentions_table(text):
        if re.search(r"PARQUET_COLUMN_DATA_TYPE_MISMATCH|SchemaColumnConvertNotSupportedException"
                     r"|Parquet column cannot be converted", text):
            detail = re.search(r"(Data type mismatches when reading Parquet column[^\n]*|"
                               r"Parquet column cannot be converted in file [^\n]*)", text)
            return DataFileSchemaMismatchError(
                "a data file's Parquet schema does not match the table schema in the "
                f"Delta log: {detail.group(1) if detail else _first_line(text)}. The file was written by another "
                "schema or replaced; restore it, or time travel to a version before it")
        if re.search(r"FAILED_READ_FILE\.FILE_NOT_EXIST|java\.io\.FileNotFoundException|PATH_NOT_FOUND", text):
            path = re.search(r"(?:File|file) (\S+) does not exist|FileNotFoundException: (\S+)"
                             r"|Path does not exist: (\S+)", text)
            where = next((g for g in path.groups() if g), "a data file") if path else "a data file"
            return DataFileNotFoundError(
                f"data file {where} listed in the Delta log does not exist (it vanished while the query ran); restore "
                "it, or time travel to a version that does not reference it")
        if re.search(r"FAILED_READ_FILE|CANNOT_READ_FILE_FOOTER|is not a Parquet file|ParquetDecodingException", text):
            path = re.search(r"(?:reading file|read footer for file:?|file) (\S+\.parquet)", text)
            return CorruptDataFileError(
                f"the data file {path.group(1) if path else '(see the cause)'} listed in the "
                "Delta log is not readable Parquet (truncated or overwritten); restore it, or time travel to a version "
                "that does not reference it")
    return None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:500] if text.strip() else ""


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise a Spark exception carrying a dvlake error as that dvlake error (command boundaries)."""
    try:
        yield
    except DvlakeError:
        raise
    except Exception as exc:
        typed = typed_error(exc)
        if typed is None:
            raise
        raise typed from exc


def install() -> None:
    """Make PySpark raise dvlake's typed errors for actions on any DataFrame (idempotent, cheap).

    PySpark converts every JVM error through one function (``convert_exception``, looked up at
    call time; Spark Connect has its own); the hook returns the dvlake error instead when the
    text carries one, and leaves every other conversion as it was.
    """
    error_logs.install()
    if "pyspark.errors.exceptions.captured" not in sys.modules:
        try:
            import pyspark.errors.exceptions.captured  # noqa: F401 - the classic hook point
        except ImportError:
            pass
    for name in ("pyspark.errors.exceptions.captured", "pyspark.errors.exceptions.connect",
                 "pyspark.sql.connect.client.core"):
        module = sys.modules.get(name)
        convert = getattr(module, "convert_exception", None) if module is not None else None
        if convert is not None and not getattr(convert, "_dvlake_typed", False):
            module.convert_exception = _wrap(convert)  # type: ignore[union-attr]


def _wrap(convert: Callable[..., Any]) -> Callable[..., Any]:
    def convert_typed(*args: Any, **kwargs: Any) -> Any:
        converted = convert(*args, **kwargs)
        try:
            typed = typed_error(converted)
        except Exception:  # noqa: BLE001 - never make an error worse while translating it
            typed = None
        return typed if typed is not None else error_logs.tidy(converted)

    convert_typed._dvlake_typed = True  # type: ignore[attr-defined]
    return convert_typed


# PySpark's error records of dvlake's own probes are dropped from the first dvlake module that can raise one
# (every command and the scan import this module), not only after the first read installs the hooks above.
error_logs.install()
