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


def test_every_codec_and_storage_error_crosses_the_executor_boundary(spark) -> None:
    task_errors.install()
    for cls in CODEC_AND_STORAGE:
        df = spark.range(1).mapInArrow(_raiser(cls), "id long")
        with pytest.raises(cls) as info:
            df.collect()
        assert type(info.value) is cls, cls
        assert str(info.value) == f"raised on an executor: {cls.__name__}"
        with pytest.raises(cls), translated():  # the command boundary gives the same
            df.count()


def test_a_broken_executor_import_says_what_to_fix() -> None:
    text = ("Job aborted\nTraceback (most recent call last):\n  File \"worker.py\", line 1\n"
            "ImportError: cannot import name 'scan_files' from 'dvlake.spark.dv_scan' (/old/site-packages/dvlake/x.py)")
    typed = typed_error(RuntimeError(text))
    assert isinstance(typed, errors.ExecutorEnvironmentError) and "scan_files" in str(typed)
    native = "Traceback (most recent call last):\nImportError: libarrow.so.1700: cannot open shared object file (pyarrow)"
    assert isinstance(typed_error(RuntimeError(native)), errors.ExecutorEnvironmentError)
    assert typed_error(RuntimeError("Traceback\nImportError: cannot import name 'x' from 'mylib'")) is None


def test_a_file_vanishing_between_planning_and_reading_is_typed() -> None:
    task_errors.remember_table("/data/tables/vanishing")
    text = "[PATH_NOT_FOUND] Path does not exist: file:/data/tables/vanishing/part-0001.parquet. SQLSTATE: 42K03"
    typed = typed_error(RuntimeError(text))
    assert isinstance(typed, errors.DataFileNotFoundError) and "part-0001.parquet" in str(typed)


def test_a_value_that_cannot_be_cast_is_typed_at_the_command(spark, tmp_path) -> None:
    import dvlake
    from dvlake import DeltaTable

    path = str(tmp_path / "t")
    dvlake.write(spark.range(10), path, properties={"delta.enableDeletionVectors": "true"})
    before = sorted(r.id for r in dvlake.read(spark, path).collect())
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "true")
    try:
        with pytest.raises(errors.CastInvalidInputError) as info:
            DeltaTable.forPath(spark, path).update("id = 3", {"id": "CAST('abc' AS BIGINT)"})
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)
    assert info.value.error_class == "CAST_INVALID_INPUT" and "'abc'" in str(info.value)
    assert sorted(r.id for r in dvlake.read(spark, path).collect()) == before


def test_a_table_path_under_a_regular_file_is_refused(spark, tmp_path) -> None:
    import dvlake

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for mode in ("append", "overwrite", "error"):
        with pytest.raises(errors.InvalidArgumentError, match="is a file, not a folder"):
            dvlake.write(spark.range(3), str(blocker / "table"), mode=mode)
