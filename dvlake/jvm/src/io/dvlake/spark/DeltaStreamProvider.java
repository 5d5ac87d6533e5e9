package io.dvlake.spark;

import org.apache.spark.sql.SQLContext;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.sources.StreamSourceProvider;
import org.apache.spark.sql.types.StructType;

import scala.Option;
import scala.Tuple2;
import scala.collection.immutable.Map;

/**
 * dvlake's Delta streaming source on classic sessions: a Spark (DSv1) stream source whose micro-batches are read by
 * the native DV scan. Planning stays in Python: the source calls the {@link StreamPlanner} the Python driver
 * registered (see {@link StreamPlanners}). The schema is always given by dvlake's readStream.
 */
public final class DeltaStreamProvider implements StreamSourceProvider {
  public static final String PLANNER_OPTION = "dvlake.stream.planner";
  public static final String SPEC_OPTION = "dvlake.stream.spec";
  static final String NAME = "delta";

  @Override
  public Tuple2<String, StructType> sourceSchema(SQLContext sqlContext, Option<StructType> schema, String providerName,
                                                 Map<String, String> parameters) {
    return new Tuple2<>(NAME, requireSchema(schema));
  }

  @Override
  public Source createSource(SQLContext sqlContext, String metadataPath, Option<StructType> schema,
                             String providerName, Map<String, String> parameters) {
    String key = parameters.get(PLANNER_OPTION).getOrElse(() -> null);
    String spec = parameters.get(SPEC_OPTION).getOrElse(() -> null);
    if (spec == null) {
      throw new IllegalArgumentException("DVLAKE_STREAM_PLANNER_MISSING: this stream's plan has no option '" + SPEC_OPTION
          + "'; it was not opened by dvlake's readStream (spark.readStream.format('delta') after "
          + "dvlake.configure_spark(spark), or dvlake.read_stream(spark, path))");
    }
    StreamPlanner planner = StreamPlanners.get(key).create(metadataPath, spec);
    return new DeltaStreamSource(planner, requireSchema(schema));
  }

  private static StructType requireSchema(Option<StructType> schema) {
    if (schema.isEmpty()) {
      throw new IllegalArgumentException("DVLAKE_STREAM_SCHEMA_MISSING: dvlake's Delta stream source is opened by "
          + "dvlake's readStream, which gives the table's schema; use spark.readStream.format('delta') after "
          + "dvlake.configure_spark(spark), or dvlake.read_stream(spark, path)");
    }
    return schema.get();
  }
}
