"""How UPDATE and MERGE fit an assigned value to its column's type (delta-spark's ``castIfNeeded``).

The rules, as delta-spark applies them to every SET / INSERT value and to ``*``:

- **Structs by name.** A struct value is matched to the column's struct field by field name (case-insensitive),
  at any depth, also inside arrays (element by element) and maps (keys and values). Every field of the value
  must exist in the column, or data would be lost (``DELTA_UPDATE_SCHEMA_MISMATCH_EXPRESSION``); without schema
  evolution the column may not have other fields either. With schema evolution a field the value lacks is
  NULL, or keeps the target row's value for ``UPDATE SET *`` (``original``).
- **A NULL struct stays NULL**, not a struct of NULLs (delta-spark 4.1+).
- **Atomic values follow** ``spark.sql.storeAssignmentPolicy``: ANSI (the default) casts as Spark's ANSI cast
  does: a cast it does not allow fails before any data is read, a value that does not fit fails the command
  (``DELTA_CAST_OVERFLOW_IN_TABLE_WRITE`` for numbers, ``CAST_INVALID_INPUT`` for text); STRICT allows only
  up-casts. LEGACY (wrap-around, NULL on bad input) is Spark's cast with ``spark.sql.ansi.enabled=false``;
  with ANSI on, PySpark cannot express that cast, so such a cast is refused rather than done another way.

The run-time failures are raised by ``raise_error`` in the tasks, framed so the driver re-raises them as
dvlake's typed errors (``dvlake.spark.task_errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    IntegralType,
    LongType,
    MapType,
    NullType,
    NumericType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
    YearMonthIntervalType,
)

from dvlake.config import BY_NAME_CONF as BY_NAME_CONF
from dvlake.config import FOLLOW_ANSI_CONF as FOLLOW_ANSI_CONF
from dvlake.errors import CastInvalidInputError, CastOverflowInTableWriteError, UnsafeAssignmentCastError
from dvlake.spark.task_errors import encode

POLICY_CONF = "spark.sql.storeAssignmentPolicy"
ANSI_CONF = "spark.sql.ansi.enabled"


@dataclass(frozen=True)
class Casting:
    """The cast rules one command applies (read from the session once)."""

    mode: str                      # "ansi" | "legacy" | "strict"
    session_ansi: bool             # spark.sql.ansi.enabled: what PySpark's plain cast does
    by_name: bool = True           # structs matched by field name (delta-spark's default)
    allow_missing: bool = False    # schema evolution: a struct value may lack fields of its column


def casting(spark: SparkSession, allow_missing: bool = False) -> Casting:
    def flag(key: str, default: str) -> bool:
        return str(spark.conf.get(key, default)).strip().lower() == "true"

    session_ansi = flag(ANSI_CONF, "true")
    if flag(FOLLOW_ANSI_CONF, "false"):
        mode = "ansi" if session_ansi else "legacy"
    else:
        mode = str(spark.conf.get(POLICY_CONF, "ANSI")).strip().lower()
    return Casting(mode, session_ansi, flag(BY_NAME_CONF, "true"), allow_missing)


def cast_if_needed(value: Column, src: DataType, dst: DataType, column: str, rules: Casting,
                   original: Column | None = None, original_type: DataType | None = None) -> Column:
    """``value`` (of type ``src``) as a value of ``dst`` for ``column``, by the rules above.

    ``original``: the target row's current value of the column (``UPDATE SET *`` with schema evolution), whose
    fields fill the struct fields the value lacks."""
    if isinstance(src, NullType):
        return value.cast(dst)
    if identical(src, dst):
        return value
    if rules.by_name:
        if isinstance(src, StructType) and isinstance(dst, StructType):
            return _struct_by_name(value, src, dst, rules, original, original_type)
        if (isinstance(src, ArrayType) and isinstance(dst, ArrayType) and isinstance(src.elementType, StructType)
                and isinstance(dst.elementType, StructType)):
            return F.transform(value, lambda e: cast_if_needed(e, src.elementType, dst.elementType, column, rules))
        if isinstance(src, MapType) and isinstance(dst, MapType) and _has_struct(src) and _has_struct(dst):
            out = value
            if not identical(src.keyType, dst.keyType):
                out = F.transform_keys(out, lambda k, _: cast_if_needed(k, src.keyType, dst.keyType, column, rules))
            if not identical(src.valueType, dst.valueType):
                out = F.transform_values(out, lambda _, v: cast_if_needed(v, src.valueType, dst.valueType, column,
                                                                           rules))
            return out
    return _cast(value, src, dst, column, rules)


def identical(a: DataType, b: DataType) -> bool:
    """Same type, field names spelled the same, nullability aside (no cast is needed)."""
    return _shape(a) == _shape(b)


def _shape(t: DataType) -> object:
    if isinstance(t, StructType):
        return ("struct", tuple((f.name, _shape(f.dataType)) for f in t.fields))
    if isinstance(t, ArrayType):
        return ("array", _shape(t.elementType))
    if isinstance(t, MapType):
        return ("map", _shape(t.keyType), _shape(t.valueType))
    return t.simpleString()


def _has_struct(t: DataType) -> bool:
    if isinstance(t, StructType):
        return True
    if isinstance(t, ArrayType):
        return _has_struct(t.elementType)
    if isinstance(t, MapType):
        return _has_struct(t.keyType) or _has_struct(t.valueType)
    return False


def _struct_by_name(value: Column, src: StructType, dst: StructType, rules: Casting, original: Column | None,
                    original_type: DataType | None) -> Column:
    by_lower = {f.name.lower(): f for f in src.fields}
    targets = {f.name.lower() for f in dst.fields}
    if any(f.name.lower() not in targets for f in src.fields) or (len(src.fields) != len(dst.fields)
                                                                   and not rules.allow_missing):
        raise UnsafeAssignmentCastError(
            f"Cannot cast {src.simpleString()} to {dst.simpleString()}. "
            "All nested columns must match (struct fields are matched by name; a field the table does not have "
            "needs schema evolution).")
    old = {f.name.lower(): f for f in original_type.fields} if isinstance(original_type, StructType) else {}
    parts = []
    for f in dst.fields:
        mine = old.get(f.name.lower())
        kept = original.getField(mine.name) if original is not None and mine is not None else None
        kept_type = mine.dataType if mine is not None else None
        s = by_lower.get(f.name.lower())
        if s is not None:
            v = cast_if_needed(value.getField(s.name), s.dataType, f.dataType, f.name, rules, kept, kept_type)
        elif kept is not None and kept_type is not None:
            v = cast_if_needed(kept, kept_type, f.dataType, f.name, rules, kept, kept_type)
        else:
            v = F.lit(None).cast(f.dataType)
        parts.append(v.alias(f.name))
    is_null = value.isNull()
    if original is not None and _keeps_target_fields(src, dst):
        is_null = is_null & original.isNull()
    return F.when(is_null, F.lit(None).cast(dst)).otherwise(F.struct(*parts))


def _keeps_target_fields(src: StructType, dst: StructType) -> bool:
    """Whether ``dst`` has fields ``src`` lacks, at any struct depth (their target values are kept)."""
    by_lower = {f.name.lower(): f for f in src.fields}
    for f in dst.fields:
        s = by_lower.get(f.name.lower())
        if s is None:
            return True
        if isinstance(s.dataType, StructType) and isinstance(f.dataType, StructType) and \
                _keeps_target_fields(s.dataType, f.dataType):
            return True
    return False


# --- atomic (and whole array / map) casts --------------------------------------------------------------


def _cast(value: Column, src: DataType, dst: DataType, column: str, rules: Casting) -> Column:
    shown = f"cannot assign a value of type {src.simpleString()} to column {column!r} of type {dst.simpleString()}"
    if rules.mode == "strict" or can_up_cast(src, dst):
        if not can_up_cast(src, dst):
            raise UnsafeAssignmentCastError(
                f"{shown}: spark.sql.storeAssignmentPolicy=STRICT allows only casts that "
                "cannot lose data or fail. Cast the value explicitly.", error_class="CANNOT_UP_CAST_DATATYPE")
        return value.cast(dst)
    if rules.mode == "legacy":
        if rules.session_ansi:
            raise UnsafeAssignmentCastError(
                f"{shown}: the LEGACY store-assignment cast (wrap-around, "
                "NULL on bad input) is only available with spark.sql.ansi.enabled=false. Cast the value explicitly, or "
                "use spark.sql.storeAssignmentPolicy=ANSI.", error_class="DVLAKE_LEGACY_STORE_ASSIGNMENT_UNSUPPORTED")
        return value.cast(dst)
    if not can_ansi_cast(src, dst):
        raise UnsafeAssignmentCastError(
            f"{shown}: Spark's ANSI cast does not convert "
            f"{src.simpleString()} to {dst.simpleString()}. Cast the value explicitly.",
            error_class="DATATYPE_MISMATCH.CAST_WITHOUT_SUGGESTION")
    return _ansi_cast(value, src, dst, _failure(src, dst, column))


def _ansi_cast(value: Column, src: DataType, dst: DataType, failure: str) -> Column:
    """Spark's ANSI cast whatever spark.sql.ansi.enabled says: ``try_cast`` (NULL where ANSI fails) and a task
    error where it gave NULL for a value that is not. ``try_cast`` NULLs a failing array element, map entry or
    struct field rather than the whole value, so those are cast one by one (``failure`` names the whole types)."""
    if identical(src, dst) or isinstance(src, NullType):
        return value.cast(dst)
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return F.transform(value, lambda e: _ansi_cast(e, src.elementType, dst.elementType, failure))
    if isinstance(src, MapType) and isinstance(dst, MapType):
        out = F.transform_keys(value, lambda k, _: _ansi_cast(k, src.keyType, dst.keyType, failure))
        return F.transform_values(out, lambda _, v: _ansi_cast(v, src.valueType, dst.valueType, failure))
    if isinstance(src, StructType) and isinstance(dst, StructType):  # by position (structs-by-name turned off)
        fields = [_ansi_cast(value.getField(a.name), a.dataType, b.dataType, failure).alias(b.name)
                  for a, b in zip(src.fields, dst.fields, strict=True)]
        return F.when(value.isNull(), F.lit(None).cast(dst)).otherwise(F.struct(*fields))
    attempt = value.try_cast(dst)
    return F.when(value.isNotNull() & attempt.isNull(), F.raise_error(F.lit(failure))).otherwise(attempt)


def _failure(src: DataType, dst: DataType, column: str) -> str:
    """The framed message a task raises when a value does not fit (typed again on the driver)."""
    s, d = src.simpleString().upper(), dst.simpleString().upper()
    if isinstance(src, StringType):
        return encode(CastInvalidInputError(
            f"The value of the type \"{s}\" cannot be cast to \"{d}\" because it is malformed, for column `{column}`. "
            "Correct the value as per the syntax, or use `try_cast` to tolerate malformed input and return NULL "
            "instead."))
    return encode(CastOverflowInTableWriteError(
        f"Failed to write a value of \"{s}\" type into the \"{d}\" type column `{column}` due to an overflow. Use "
        "`try_cast` on the input value to tolerate overflow and return NULL instead. If necessary, set "
        "spark.sql.storeAssignmentPolicy to \"LEGACY\" to bypass this error."))


_NUMERIC_ORDER = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType)
_DECIMAL_OF = {ByteType: (3, 0), ShortType: (5, 0), IntegerType: (10, 0), LongType: (20, 0)}


def _as_decimal(t: DataType) -> tuple[int, int] | None:
    if isinstance(t, DecimalType):
        return t.precision, t.scale
    return next((ps for k, ps in _DECIMAL_OF.items() if isinstance(t, k)), None)


def _rank(t: DataType) -> int:
    return next((i for i, k in enumerate(_NUMERIC_ORDER) if type(t) is k), -1)


def _parts_cast(src: DataType, dst: DataType, rule: Callable[[DataType, DataType], bool]) -> bool:
    """Spark's rule for containers, the same in ``canUpCast`` and ``canAnsiCast``: an array, map or struct (of as
    many fields, by position) casts to one of its kind where each of its parts does under ``rule``; any other pair
    of types left at this point does not cast."""
    if isinstance(src, ArrayType) and isinstance(dst, ArrayType):
        return rule(src.elementType, dst.elementType)
    if isinstance(src, MapType) and isinstance(dst, MapType):
        return rule(src.keyType, dst.keyType) and rule(src.valueType, dst.valueType)
    if isinstance(src, StructType) and isinstance(dst, StructType):
        return len(src.fields) == len(dst.fields) and all(
            rule(a.dataType, b.dataType) for a, b in zip(src.fields, dst.fields, strict=True))
    return False


def can_up_cast(src: DataType, dst: DataType) -> bool:
    """Spark's ``Cast.canUpCast``: casts that cannot lose data or fail (nullability aside)."""
    if isinstance(src, NullType) or identical(src, dst):
        return True
    if isinstance(src, NumericType) and isinstance(dst, DecimalType):
        ps = _as_decimal(src)
        return ps is not None and dst.precision - dst.scale >= ps[0] - ps[1] and dst.scale >= ps[1]
    if isinstance(src, DecimalType) and isinstance(dst, NumericType):
        ps = _as_decimal(dst)
        return ps is not None and src.precision - src.scale <= ps[0] - ps[1] and src.scale <= ps[1]
    if 0 <= _rank(src) < _rank(dst):
        return True
    dates = (DateType, TimestampType, TimestampNTZType)
    if isinstance(src, dates) and isinstance(dst, (TimestampType, TimestampNTZType)):
        return True
    if isinstance(dst, StringType) and isinstance(src, AtomicType) and not isinstance(src, BinaryType | StringType):
        return True
    if (isinstance(src, TimestampType) and isinstance(dst, LongType)) or (
            isinstance(src, LongType) and isinstance(dst, TimestampType)):
        return True
    return _parts_cast(src, dst, can_up_cast)


def can_ansi_cast(src: DataType, dst: DataType) -> bool:
    """Spark's ``Cast.canAnsiCast`` for the types a Delta table holds (nullability aside)."""
    if isinstance(src, NullType) or identical(src, dst) or isinstance(dst, StringType):
        return True
    if isinstance(src, StringType):
        return isinstance(dst, BinaryType | BooleanType | NumericType | DateType | TimestampType | TimestampNTZType
                          | DayTimeIntervalType | YearMonthIntervalType)
    intervals = (DayTimeIntervalType, YearMonthIntervalType)
    if isinstance(dst, BooleanType):
        return isinstance(src, NumericType)
    if isinstance(dst, TimestampType):
        return isinstance(src, DateType | TimestampNTZType | NumericType)
    if isinstance(dst, TimestampNTZType):
        return isinstance(src, DateType | TimestampType)
    if isinstance(dst, DateType):
        return isinstance(src, TimestampType | TimestampNTZType)
    if isinstance(dst, NumericType):
        if isinstance(src, intervals):
            return isinstance(dst, IntegralType | DecimalType)
        return isinstance(src, NumericType | BooleanType | TimestampType)
    if isinstance(dst, intervals):
        return type(src) is type(dst) or isinstance(src, IntegralType | DecimalType)
    return _parts_cast(src, dst, can_ansi_cast)
