package io.dvlake.spark;

/** Makes one {@link StreamPlanner} per query start (implemented in Python, registered in {@link StreamPlanners}). */
public interface StreamPlannerFactory {
  StreamPlanner create(String metadataPath);
}
