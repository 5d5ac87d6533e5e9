package io.dvlake.spark;

/**
 * The planning half of dvlake's Delta streaming source, implemented in Python (dvlake/spark/stream_jvm.py) and
 * called back through Py4J: which log positions a micro-batch covers, and the batch frame over them. Offsets cross
 * as the JSON text the checkpoint's offset log holds; a null start means the query has not read anything yet.
 */
public interface StreamPlanner {
  /** The position a new query starts from (the checkpoint has no committed batch). */
  String initialOffset();

  /** The source's own rate limit: "files:N", "bytes:N" or "all". */
  String defaultLimit();

  /** The end of the next micro-batch after {@code startJson}; {@code allAvailable} when the trigger lifts the limits. */
  String latestOffset(String startJson, boolean allAvailable);

  /** Trigger.AvailableNow: the stream stops at the table version that is the latest now. */
  void prepareForTriggerAvailableNow();

  /** The micro-batch {@code (start, end]} as a batch Dataset (the native DV scan); the source marks it streaming. */
  Object batch(String startJson, String endJson);

  /** The query stopped. */
  void stop();
}
