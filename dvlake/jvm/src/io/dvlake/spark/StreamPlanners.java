package io.dvlake.spark;

import java.util.concurrent.ConcurrentHashMap;

/**
 * Where each Python SparkSession that opens a dvlake stream leaves its one planner factory for the sources Spark
 * creates when queries start: a streaming DataFrame carries the factory's key (option
 * {@value DeltaStreamProvider#PLANNER_OPTION}) and its own spec (option {@value DeltaStreamProvider#SPEC_OPTION}),
 * so the registry holds one entry per session, however many streams it opens.
 */
public final class StreamPlanners {
  private static final ConcurrentHashMap<String, StreamPlannerFactory> FACTORIES = new ConcurrentHashMap<>();

  private StreamPlanners() {}

  public static void register(String key, StreamPlannerFactory factory) {
    FACTORIES.put(key, factory);
  }

  /** How many factories are registered (one per session that opened a stream); the tests check it stays so. */
  public static int size() {
    return FACTORIES.size();
  }

  static StreamPlannerFactory get(String key) {
    StreamPlannerFactory factory = key == null ? null : FACTORIES.get(key);
    if (factory == null) {
      throw new IllegalStateException("DVLAKE_STREAM_PLANNER_MISSING: no dvlake stream planner is registered under '"
          + key + "' in this driver. A Delta stream read through dvlake's JVM source has to be created by dvlake's "
          + "readStream in this Python driver (spark.readStream.format('delta') after dvlake.configure_spark, or "
          + "dvlake.read_stream); it cannot be rebuilt from a plan made elsewhere.");
    }
    return factory;
  }
}
