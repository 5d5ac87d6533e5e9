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
