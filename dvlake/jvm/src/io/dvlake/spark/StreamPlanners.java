package io.dvlake.spark;

import java.util.concurrent.ConcurrentHashMap;

/**
 * Where a {@code readStream} made in Python leaves its planner factory for the source Spark creates when the query
 * starts: the streaming DataFrame carries only the key (option {@value DeltaStreamProvider#PLANNER_OPTION}).
 */
public final class StreamPlanners {
  private static final ConcurrentHashMap<String, StreamPlannerFactory> FACTORIES = new ConcurrentHashMap<>();

  private StreamPlanners() {}

  public static void register(String key, StreamPlannerFactory factory) {
    FACTORIES.put(key, factory);
  }

  public static void unregister(String key) {
    FACTORIES.remove(key);
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
