package io.dvlake.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.execution.streaming.Offset;
import org.apache.spark.sql.execution.streaming.Source;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One running query's Delta source (see {@link DeltaStreamProvider}). Offsets are the planner's JSON; a batch is
 * the planner's batch Dataset over the native scan, handed to Spark as a streaming plan: its own plan with the file
 * relations marked streaming where it is only scans (as Spark's file stream source returns its batches), else a
 * plan over its rows. Spark lines the batch's columns up by position with the source's schema, so their types are
 * checked against it first: a mismatch fails the query instead of misreading rows.
 */
final class DeltaStreamSource implements Source, SupportsTriggerAvailableNow {
  private final StreamPlanner planner;
  private final StructType schema;

  DeltaStreamSource(StreamPlanner planner, StructType schema) {
    this.planner = planner;
    this.schema = schema;
  }

  @Override public StructType schema() { return schema; }

  @Override public Option<Offset> getOffset() {
    throw new UnsupportedOperationException("dvlake's Delta source has admission control: latestOffset(start, limit)");
  }

  @Override public org.apache.spark.sql.connector.read.streaming.Offset initialOffset() {
    return new JsonOffset(planner.initialOffset());
  }

  @Override public org.apache.spark.sql.connector.read.streaming.Offset deserializeOffset(String json) {
    return new JsonOffset(json);
  }

  @Override public ReadLimit getDefaultReadLimit() {
    String limit = planner.defaultLimit();
    if (limit.startsWith("files:")) {
      return ReadLimit.maxFiles(Integer.parseInt(limit.substring(6)));
    }
    if (limit.startsWith("bytes:")) {
      return ReadLimit.maxBytes(Long.parseLong(limit.substring(6)));
    }
    return ReadLimit.allAvailable();
  }

  @Override public org.apache.spark.sql.connector.read.streaming.Offset latestOffset(
      org.apache.spark.sql.connector.read.streaming.Offset start, ReadLimit limit) {
    String end = planner.latestOffset(start == null ? null : start.json(), limit instanceof ReadAllAvailable);
    return end == null ? null : new JsonOffset(end);
  }

  @Override public void prepareForTriggerAvailableNow() { planner.prepareForTriggerAvailableNow(); }

  @Override public Dataset<Row> getBatch(Option<Offset> start, Offset end) {
    Object made = planner.batch(start.isDefined() ? start.get().json() : null, end.json());
    if (!(made instanceof org.apache.spark.sql.classic.Dataset)) {
      throw new IllegalStateException("dvlake's stream planner returned " + made + ", not a classic Dataset");
    }
    @SuppressWarnings("unchecked")
    org.apache.spark.sql.classic.Dataset<Row> batch = (org.apache.spark.sql.classic.Dataset<Row>) made;
    StructType got = batch.schema();
    if (!DataType.equalsIgnoreNullability(got, schema)) {
      throw new IllegalStateException("DVLAKE_STREAM_BATCH_SCHEMA: the micro-batch read " + got.simpleString()
          + " but the stream's schema is " + schema.simpleString() + "; nothing was emitted");
    }
    LogicalPlan plan = batch.queryExecution().analyzed();
    if (fileScansOnly(plan)) {
      // the batch read's own plan with its file relations marked streaming, as Spark's file stream source returns
      // its batches: the micro-batch runs the same columnar scan as a batch read
      return org.apache.spark.sql.classic.Dataset.ofRows(batch.sparkSession(), streaming(plan));
    }
    // any other shape (the change feed's joins and Python stages, an empty batch): its rows as a streaming plan
    return batch.sparkSession().internalCreateDataFrame(batch.queryExecution().toRdd(), schema, true);
  }

  /** Only projections, filters and unions over file relations: a plan that stays valid when its leaves stream. */
  static boolean fileScansOnly(LogicalPlan plan) {
    if (plan instanceof LogicalRelation relation) {
      return relation.relation() instanceof HadoopFsRelation;
    }
    if (!(plan instanceof Project || plan instanceof Filter || plan instanceof Union)) {
      return false;
    }
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      if (!fileScansOnly(child)) {
        return false;
      }
    }
    return true;
  }

  /** {@code plan} with every file relation marked streaming (see {@link #fileScansOnly}). */
  static LogicalPlan streaming(LogicalPlan plan) {
    if (plan instanceof LogicalRelation r) {
      return r.copy(r.relation(), r.output(), r.catalogTable(), true, r.stream());
    }
    List<LogicalPlan> children = new ArrayList<>();
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      children.add(streaming(child));
    }
    return (LogicalPlan) plan.withNewChildren(CollectionConverters.asScala(children).toSeq());
  }

  @Override public void commit(Offset end) {}

  @Override public void stop() { planner.stop(); }

  @Override public String toString() { return "DeltaSource[dvlake]"; }

  /** An offset as the planner's JSON text (equality is the text's, as Spark's own offsets). */
  static final class JsonOffset extends Offset {
    private final String json;

    JsonOffset(String json) { this.json = json; }

    @Override public String json() { return json; }
  }
}
