package io.dvlake.spark;

/**
 * Makes one {@link StreamPlanner} per query start from the stream's spec (JSON the Python readStream put in the plan);
 * implemented in Python, one per session, registered in {@link StreamPlanners}.
 */
public interface StreamPlannerFactory {
  StreamPlanner create(String metadataPath, String spec);
}
