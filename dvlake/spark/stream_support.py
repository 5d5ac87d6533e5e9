"""Whether this PySpark can run dvlake's streaming source, asked before the source module is imported.

The source (``stream_source.py``) is a Python streaming data source with admission control: rate
limits (``ReadLimit``, ``ReadMaxFiles``, ``ReadMaxBytes``), ``latestOffset(start, limit)`` and
``SupportsTriggerAvailableNow``. PySpark added that API in 4.2; dvlake's batch paths run on any 4.x.
On an older PySpark the source module cannot even be imported, and a raw ``ImportError`` from inside
dvlake would not say what to do, so ``readStream`` asks here first.
"""

from __future__ import annotations

import importlib
from typing import Any

from dvlake.errors import UnsupportedFeatureError

#: The first PySpark whose Python streaming data sources have admission control.
MIN_PYSPARK_FOR_STREAMS = "4.2"
_NEEDED = ("ReadLimit", "ReadAllAvailable", "ReadMaxFiles", "ReadMaxBytes", "SupportsTriggerAvailableNow")


def missing_streaming_api() -> list[str]:
    """The parts of PySpark's streaming data source API the Delta source needs that this PySpark lacks."""
    try:
        admission = importlib.import_module("pyspark.sql.streaming.datasource")
        base = importlib.import_module("pyspark.sql.datasource")
    except ImportError as exc:
        return [f"pyspark.sql.streaming.datasource ({exc})"]
    missing = [name for name in _NEEDED if not hasattr(admission, name)]
    reader = getattr(base, "DataSourceStreamReader", None)
    if reader is None or not hasattr(reader, "getDefaultReadLimit"):
        missing.append("DataSourceStreamReader.getDefaultReadLimit / latestOffset(start, limit)")
    return missing


def require_streaming_api() -> None:
    """Raise a clear error when the installed PySpark cannot run the Delta streaming source.

    Raises:
        UnsupportedFeatureError: PySpark older than 4.2 (names what is missing and the installed version).
    """
    missing = missing_streaming_api()
    if missing:
        import pyspark

        raise UnsupportedFeatureError(
            f"readStream.format('delta') needs PySpark {MIN_PYSPARK_FOR_STREAMS} or newer: its Python streaming data "
            f"source API with admission control (rate limits, Trigger.AvailableNow) is what dvlake's Delta source is "
            f"built on, and the installed PySpark {pyspark.__version__} lacks {', '.join(missing)}. Upgrade with "
            f"pip install 'pyspark>={MIN_PYSPARK_FOR_STREAMS}' (the Delta sink, writeStream, has no such need)")


def open_delta_stream(spark: Any, path: str, options: dict[str, Any]) -> Any:
    """``readStream`` of the Delta table at ``path`` (``stream_source.open_stream``), after the PySpark check."""
    require_streaming_api()
    from dvlake.spark.stream_source import open_stream

    return open_stream(spark, path, options)
