"""dvlake errors raised inside Spark tasks reach the caller as the same class, with their message."""

from __future__ import annotations

import pytest

from dvlake import errors
from dvlake.errors import DvlakeError
from dvlake.spark import task_errors
from dvlake.spark.task_errors import encode, on_executor, translated, typed_error

ALL = sorted((c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, DvlakeError)),
             key=lambda c: c.__name__)
#: what the codec and the storage layer raise on executors
CODEC_AND_STORAGE = [errors.DeletionVectorError, errors.CorruptDeletionVectorError, errors.InvalidDescriptorError,
                     errors.DeletionVectorNotFoundError, errors.DataFileNotFoundError, errors.NotARegularFileError,
                     errors.PathOutsideTableRootError, errors.CorruptLogError, errors.CorruptDataFileError,
                     errors.DataFileSchemaMismatchError]


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_marker_round_trip(cls: type[DvlakeError]) -> None:
    original = cls(f"{cls.__name__} at /t/x.bin:\nsecond line")
    wrapped = RuntimeError(f"Job aborted ... Traceback ...\ndvlake.errors.{cls.__name__}: {encode(original)}\n\tat …")
    typed = typed_error(wrapped)
    assert type(typed) is cls and str(typed) == str(original)  # classes that prefix [ERROR_CLASS] do so once


def test_an_error_class_other_than_the_types_default_survives_the_marker() -> None:
    original = errors.DeletionVectorIntegrityError("dv.bin: size mismatch", error_class="DELTA_DELETION_VECTOR_SIZE_MISMATCH")
    typed = typed_error(RuntimeError(f"Job aborted ... {encode(original)} ..."))
    assert type(typed) is errors.DeletionVectorIntegrityError
    assert typed.getCondition() == "DELTA_DELETION_VECTOR_SIZE_MISMATCH"
    assert str(typed) == str(original) == "[DELTA_DELETION_VECTOR_SIZE_MISMATCH] dv.bin: size mismatch"


def test_other_errors_are_left_alone() -> None:
    assert typed_error(RuntimeError("something else")) is None
    with pytest.raises(RuntimeError), translated():
        raise RuntimeError("something else")


def _raiser(cls: type[DvlakeError]):  # noqa: ANN202 - a mapInArrow function
    def run(batches):  # noqa: ANN001, ANN202
        for _ in batches:
            raise cls(f"raised on an executor: {cls.__name__}")
        yield from ()

    return on_executor(run)


#: one class per shape of marker through a real Spark task: no error class, an error class kept out of the message,
#: one shown as ``[CLASS] message`` (DeltaErrorClassMixin). Each further class takes the same trip; that the marker
#: each one's ``on_executor`` raises decodes to it is checked without Spark below.
CROSSING_SHAPES = [errors.CorruptDeletionVectorError, errors.DataFileNotFoundError, errors.CorruptDataFileError]


def test_every_codec_and_storage_error_survives_the_executor_wrapper() -> None:
    """What ``on_executor`` raises for each class (rebuilt with the marker), inside Spark's wrapping text, is typed
    back to the same class and message: the per-class part of the trip, with no Spark job per class."""
    for cls in CODEC_AND_STORAGE:
        with pytest.raises(DvlakeError) as info:
            list(_raiser(cls)(iter([None])))
        wrapped = RuntimeError(f"Job aborted due to stage failure: PythonException: Traceback ...\n"
                               f"{type(info.value).__module__}.{type(info.value).__name__}: {info.value}\n\tat ...")
        typed = typed_error(wrapped)
        assert type(typed) is cls, cls
        assert str(typed) == str(cls(f"raised on an executor: {cls.__name__}"))


@pytest.mark.parametrize("cls", CROSSING_SHAPES, ids=lambda c: c.__name__)
def test_codec_and_storage_errors_cross_the_executor_boundary(spark, cls: type[DvlakeError]) -> None:
    task_errors.install()
    df = spark.range(1).mapInArrow(_raiser(cls), "id long")
    with pytest.raises(cls) as info:
        df.collect()
    assert type(info.value) is cls, cls
    assert str(info.value) == str(cls(f"raised on an executor: {cls.__name__}"))  # [ERROR_CLASS] once, if shown
    with pytest.raises(cls), translated():  # the command boundary gives the same
        df.count()


# --- failures Spark reports in its own words, typed by the driver --------------------------------


def test_executor_import_error_that_is_not_module_not_found() -> None:
    """The module is installed on the executors but does not load (another version, a broken native library)."""
    text = ("Job aborted due to stage failure: org.apache.spark.api.python.PythonException: Traceback (most recent "
            "call last):\n  File \"/w/worker.py\", line 1\nImportError: cannot import name 'RecordBatch' from "
            "'pyarrow' (/opt/py/lib/pyarrow/__init__.py)\n")
    typed = typed_error(RuntimeError(text))
    assert type(typed) is errors.ExecutorEnvironmentError
    assert "cannot import name 'RecordBatch' from 'pyarrow'" in str(typed)


def test_import_error_of_an_unrelated_module_is_left_alone() -> None:
    text = "Traceback (most recent call last):\nImportError: cannot import name 'x' from 'users_own_lib'\n"
    assert typed_error(RuntimeError(text)) is None


def test_module_not_found_keeps_its_own_message() -> None:
    text = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'pyroaring'\n"
    typed = typed_error(RuntimeError(text))
    assert type(typed) is errors.ExecutorEnvironmentError and "No module named 'pyroaring'" in str(typed)


def test_path_not_found_names_the_vanished_file(tmp_path) -> None:  # noqa: ANN001
    root = str(tmp_path / "vanish")
    task_errors.remember_table(root)
    text = f"[PATH_NOT_FOUND] Path does not exist: file:{root}/part-0001.parquet. SQLSTATE: 42K03"
    typed = typed_error(RuntimeError(text))
    assert type(typed) is errors.DataFileNotFoundError
    assert f"file:{root}/part-0001.parquet" in str(typed)
    assert typed_error(RuntimeError("[PATH_NOT_FOUND] Path does not exist: file:/elsewhere/x.csv")) is None


def test_creating_a_table_under_a_regular_file_names_it(tmp_path) -> None:  # noqa: ANN001
    from dvlake.commands.writes.write import create_table
    from dvlake.storage.local import check_creatable_root

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    for root in (blocker, blocker / "t", blocker / "deeper" / "t"):
        with pytest.raises(errors.TableRootNotADirectoryError, match=str(blocker)):
            create_table(str(root), schema)
    assert blocker.read_text() == "not a folder"
    check_creatable_root(str(tmp_path / "new" / "t"))  # a path that does not exist yet is fine
    assert create_table(str(tmp_path / "ok"), schema) == 0


def test_partition_folder_refused_names_column_and_unescaped_value() -> None:
    text = ("[TASK_WRITE_FAILED] Task failed while writing rows to file:/t/_dvlake_staging/ab12.\nCaused by: "
            "java.io.IOException: Mkdirs failed to create file:/t/_dvlake_staging/ab12/_temporary/0/_temporary/"
            "attempt_2026_0001_m_000000_0/region=eu/city=a%2Fb%3D" + "x" * 300 + " (exists=false, cwd=file:/w)")
    typed = typed_error(RuntimeError(text))
    assert type(typed) is errors.PartitionValueNotWritableError
    assert "'city'" in str(typed) and "'a/b=xxx" in str(typed) and "(304 characters)" in str(typed)
