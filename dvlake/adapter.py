"""``dvlake.session(spark)``: delta-spark's reader, writer, ``table`` and ``sql`` faces without patching PySpark.

``dvlake.configure_spark`` wraps PySpark's own classes so unchanged delta-spark code runs. Some users do not
want a library to replace methods of PySpark process-wide (other libraries patch the same classes, or a
platform forbids it). This adapter gives the same behaviour through explicit objects: each call goes to the
same functions the hooks call (``faces.read_delta``, ``faces.write_delta``, ...), and everything that is not
Delta goes to the session's own reader, writer, ``table`` and ``sql``. Classic sessions and Spark Connect alike.

Example:
    >>> ds = dvlake.session(spark)
    >>> ds.read.format("delta").option("versionAsOf", 2).load("/data/events")
    >>> ds.write(df).format("delta").mode("append").partitionBy("day").save("/data/events")
    >>> ds.sql("DELETE FROM delta.`/data/events` WHERE id = 7")
"""

from __future__ import annotations

from typing import Any

from dvlake import faces
from dvlake.compat import pyspark_hooks as hooks
from dvlake.spark.session_switches import apply_session_switches
from dvlake.sql import sql as dvlake_sql


def _is_delta(fmt: str | None) -> bool:
    return fmt is not None and fmt.strip().lower() == "delta"


class DeltaSession:
    """A Spark session's Delta faces as explicit calls (see the module docstring)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        apply_session_switches(spark)  # the snapshot cache's session setting

    @property
    def read(self) -> DeltaReader:
        """A reader: ``format("delta")`` loads through ``dvlake.read``; other formats through ``spark.read``."""
        return DeltaReader(self.spark)

    def write(self, df: Any) -> DeltaWriter:
        """A writer for ``df``: ``format("delta")`` commits through dvlake; other formats through ``df.write``."""
        return DeltaWriter(df)

    def table(self, name: str) -> Any:
        """A registered Delta table read with its DVs applied; any other name is Spark's ``spark.table``."""
        with hooks.inside_dvlake():
            frame = faces.table_delta(self.spark, name, {})
            return frame if frame is not None else self.spark.table(name)

    def sql(self, statement: str, args: Any = None, **kwargs: Any) -> Any:
        """``dvlake.sql``: Delta statements run by dvlake, every other statement by Spark unchanged."""
        return dvlake_sql(self.spark, statement, args, **kwargs)


class DeltaReader:
    """``DataFrameReader``'s chain (``format``, ``option(s)``, ``schema``, ``load``, ``table``)."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._format: str | None = None
        self._schema: Any = None
        self._options: dict[str, Any] = {}

    def format(self, source: str) -> DeltaReader:  # noqa: A003 - PySpark's name
        self._format = source
        return self

    def schema(self, schema: Any) -> DeltaReader:
        self._schema = schema
        return self

    def option(self, key: str, value: Any) -> DeltaReader:
        self._options[str(key)] = value
        return self

    def options(self, **options: Any) -> DeltaReader:
        self._options.update({str(k): v for k, v in options.items()})
        return self

    def load(self, path: str | None = None) -> Any:
        """Read ``path``: a Delta table (``format("delta")``) with its DVs applied, else Spark's reader."""
        with hooks.inside_dvlake():
            if _is_delta(self._format):
                return faces.read_delta(self._spark, path, dict(self._options), self._schema)
            return self._spark_reader().load(path)

    def table(self, name: str) -> Any:
        """A registered Delta table read with these options, else Spark's ``read.table``."""
        with hooks.inside_dvlake():
            frame = faces.table_delta(self._spark, name, dict(self._options))
            return frame if frame is not None else self._spark_reader().table(name)

    def _spark_reader(self) -> Any:
        reader = self._spark.read
        if self._format is not None:
            reader = reader.format(self._format)
        if self._schema is not None:
            reader = reader.schema(self._schema)
        return reader.options(**self._options) if self._options else reader


class DeltaWriter:
    """``DataFrameWriter``'s chain (``format``, ``mode``, ``option(s)``, ``partitionBy``, ``save``, ``saveAsTable``,
    ``insertInto``)."""

    def __init__(self, df: Any) -> None:
        self._df = df
        self._format: str | None = None
        self._mode: str | None = None
        self._options: dict[str, Any] = {}
        self._partition_by: list[str] = []

    def format(self, source: str) -> DeltaWriter:  # noqa: A003 - PySpark's name
        self._format = source
        return self

    def mode(self, save_mode: str) -> DeltaWriter:
        self._mode = save_mode
        return self

    def option(self, key: str, value: Any) -> DeltaWriter:
        self._options[str(key)] = value
        return self

    def options(self, **options: Any) -> DeltaWriter:
        self._options.update({str(k): v for k, v in options.items()})
        return self

    def partitionBy(self, *cols: str) -> DeltaWriter:  # noqa: N802 - PySpark's name
        self._partition_by = [c for group in cols for c in ([group] if isinstance(group, str) else group)]
        return self

    def save(self, path: str | None = None) -> None:
        """Commit the rows to the Delta table at ``path`` (``format("delta")``), else Spark's ``save``."""
        with hooks.inside_dvlake():
            if _is_delta(self._format):
                opts = dict(self._options)
                faces.write_delta(self._df, path or opts.pop("path", None), self._mode or "error",
                                  list(self._partition_by), opts)
                return
            self._spark_writer().save(path)

    def saveAsTable(self, name: str) -> None:  # noqa: N802 - PySpark's name
        """Write and register a Delta table called ``name`` (``format("delta")``), else Spark's ``saveAsTable``."""
        with hooks.inside_dvlake():
            if _is_delta(self._format):
                faces.save_as_delta_table(self._df, name, self._mode or "error", list(self._partition_by),
                                          dict(self._options))
                return
            self._spark_writer().saveAsTable(name)

    def insertInto(self, name: str, overwrite: bool | None = None) -> None:  # noqa: N802 - PySpark's name
        """Insert by position into the registered Delta table ``name``, else Spark's ``insertInto``."""
        with hooks.inside_dvlake():
            if not faces.insert_into_delta(self._df, name, overwrite, self._mode, dict(self._options)):
                self._spark_writer().insertInto(name, overwrite)

    def _spark_writer(self) -> Any:
        writer = self._df.write
        if self._format is not None:
            writer = writer.format(self._format)
        if self._mode is not None:
            writer = writer.mode(self._mode)
        if self._partition_by:
            writer = writer.partitionBy(*self._partition_by)
        return writer.options(**self._options) if self._options else writer


def session(spark: Any) -> DeltaSession:
    """delta-spark's faces for ``spark`` as explicit objects, with no PySpark method replaced."""
    return DeltaSession(spark)
