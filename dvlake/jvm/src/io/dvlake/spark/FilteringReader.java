package io.dvlake.spark;

import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.util.SerializableConfiguration;

import scala.Function1;
import scala.collection.AbstractIterator;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/** The per-file reader: Spark's Parquet reader, minus the rows the file's deletion vector marks deleted. */
final class FilteringReader extends AbstractFunction1<PartitionedFile, Iterator<InternalRow>> implements Serializable {
  private static final long serialVersionUID = 1L;
  private final Function1<PartitionedFile, Iterator<InternalRow>> parent;
  /** The same reader without the row-index column (null when the query asked for that column itself). */
  private final Function1<PartitionedFile, Iterator<InternalRow>> plain;
  /** The inline listing ({@code String}, or null), the Hadoop conf DV files are opened with
   *  ({@code SerializableConfiguration}) and the reference to a listing file ({@code String}, see
   *  {@link ScanListings.Ref}; or null): only classes any class loader that reads the broadcast knows. */
  private final Broadcast<Object[]> files;
  /** A random id made with the broadcast: the key of its parsed listing. Not the broadcast's id: Spark numbers
   *  broadcasts from 0 again in every SparkContext, while this class (and so {@link #PARSED}) outlives a context in a
   *  JVM that starts another (local mode, notebooks, a driver's class path): an id reused by the next context would
   *  find the last context's listing, and its DVs, for the same file paths. */
  private final String listingId;
  /** Parsed listings by {@link #listingId}, shared by the tasks of one executor JVM (a few scans at a time). */
  private static final java.util.Map<String, HashMap<String, PlannedFile>> PARSED =
      java.util.Collections.synchronizedMap(new java.util.LinkedHashMap<String, HashMap<String, PlannedFile>>(
          16, 0.75f, true) {
        @Override protected boolean removeEldestEntry(java.util.Map.Entry<String, HashMap<String, PlannedFile>> e) {
          return size() > 8;
        }
      });
  private final StructType required;
  private final StructType partitions;
  private final int indexAt;
  private final boolean dropIndex;
  private final boolean tracked;
  private final int fillAt;
  private final long dvCacheBytes;
  /** The read's partition columns filled from the listing (null: none, or Spark's own). */
  private final ListedPartitions listed;

  /** {@code indexAt}: where the row-index column is among {@code parent}'s columns; {@code dropIndex}: the format
   *  added it (the query did not ask for {@code _metadata.row_index}), so it is not returned. {@code tracked}: files
   *  with a DV are read by {@code plain} with their row groups tracked ({@link RowGroups#attach}), and {@code parent}
   *  is null; otherwise by {@code parent} (Spark's row-index column). A file without a DV is read by {@code plain}, no
   *  row index needed (or by {@code parent} when the query asked for the row index: {@code plain} is null then).
   *  {@code fillAt} (or -1): the query asked for the row index, at that position of its columns, and every file is read
   *  by {@code plain} (without that column) with its row groups tracked, the column filled from them. */
  FilteringReader(Function1<PartitionedFile, Iterator<InternalRow>> parent,
                  Function1<PartitionedFile, Iterator<InternalRow>> plain, Broadcast<Object[]> files, String listingId,
                  StructType required, StructType partitions, int indexAt, boolean dropIndex, boolean tracked,
                  int fillAt, long dvCacheBytes, ListedPartitions listed) {
    this.parent = parent;
    this.plain = plain;
    this.files = files;
    this.listingId = listingId;
    this.required = required;
    this.partitions = partitions;
    this.indexAt = indexAt;
    this.dropIndex = dropIndex;
    this.tracked = tracked;
    this.fillAt = fillAt;
    this.dvCacheBytes = dvCacheBytes;
    this.listed = listed;
  }

  @Override public Iterator<InternalRow> apply(PartitionedFile given) {
    PartitionedFile file = given;
    String key = DvlakeParquetFileFormat.keyOf(file.toPath().toUri());
    Object[] shared = files.value();
    HashMap<String, PlannedFile> planned = shared[2] != null
        ? ScanListings.load(ScanListings.Ref.parse((String) shared[2]), ((SerializableConfiguration) shared[1]).value())
        : PARSED.computeIfAbsent(listingId, id -> DvlakeParquetFileFormat.parseFiles((String) shared[0]));
    if (!planned.containsKey(key)) {
      throw new IllegalStateException("[DVLAKE_TASK_ERROR DeltaProtocolError]" + key + " was not planned by dvlake "
          + "(no entry in its file listing); refusing to read it without its deletion "
          + "vector[/DVLAKE_TASK_ERROR]");
    }
    PlannedFile entry = planned.get(key);
    DeletionVectors.FileDv dv = entry.dv;
    int[] order = null;
    if (listed != null) {
      file = listed.withValues(file, key, entry);
      order = listed.order;
    }
    DeletionVectors.Deleted deleted;
    try {
      deleted = dv == null ? null : DeletionVectors.load(dv, ((SerializableConfiguration) shared[1]).value(), dvCacheBytes);
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage() + " (data file " + key + ")", e);
    }
    Filtered filtered;
    if (plain != null && deleted == null && fillAt < 0) {
      RowGroups.FILES_WITHOUT_DV.incrementAndGet();
      filtered = new Filtered(plain.apply(file), null, null, -1, false, -1, required, partitions, order);
    } else if (tracked) {
      Iterator<?> rows = plain.apply(file);
      RowGroups.Tracker tracker = RowGroups.attach(rows);
      if (tracker == null) {
        if (rows instanceof AutoCloseable) close((AutoCloseable) rows);
        // the driver found the reader as checked (it built no reader with the row-index column): an executor whose
        // Spark differs cannot fall back, and a guessed row index would be a wrong row
        throw new IllegalStateException("dvlake's native scan cannot track the row groups of " + key + " on this "
            + "executor (" + (RowGroups.UNAVAILABLE != null ? RowGroups.UNAVAILABLE : "Spark's reader is not the "
            + "vectorized batch reader it checked") + "); run the driver and executors on the same Spark, or set "
            + "spark.dvlake.scan.native=false");
      }
      (fillAt >= 0 ? RowGroups.FILES_FILLED : RowGroups.FILES_TRACKED).incrementAndGet();
      filtered = new Filtered(rows, deleted, tracker, -1, false, fillAt, required, partitions, order);
    } else {
      if (deleted != null) RowGroups.FILES_SPARK_COLUMN.incrementAndGet();
      filtered = new Filtered(parent.apply(file), deleted, null, indexAt, dropIndex, -1, required, partitions,
          order);
    }
    @SuppressWarnings("unchecked")  // batches travel as InternalRow (erased), Spark's own convention for columnar scans
    Iterator<InternalRow> out = (Iterator<InternalRow>) (Iterator<?>) filtered;
    return out;
  }

  private static void close(AutoCloseable rows) {
    try {
      rows.close();
    } catch (Exception e) {
      throw new IllegalStateException("closing a Parquet reader dvlake did not use", e);
    }
  }

  /** Batches keep their vectors (seen through a row mapping); rows are projected without the index column when the
   *  format added it. Row indexes come from {@code tracker} when there is one, else from the column at
   *  {@code indexAt}; no DV ({@code deleted} null): every row is kept. */
  private static final class Filtered extends AbstractIterator<Object> {
    private final Iterator<?> in;
    private final DeletionVectors.Deleted deleted;
    private final int indexAt;
    private final boolean dropIndex;
    private final StructType required;
    private final StructType partitions;
    private final RowGroups.Tracker tracker;
    private final int fillAt;
    /** For each returned column, the reader's column it is (null: in the reader's order); see {@link ListedPartitions}. */
    private final int[] order;
    private WritableColumnVector filled;  // the row-index column the format fills (fillAt >= 0), reused batch to batch
    private int filledCapacity;
    private MappedColumnVector[] vectors;
    private ColumnarBatch out;
    private UnsafeProjection projection;
    private int[] scratch;  // the kept rows' positions when rows come from the tracker (reused: one batch at a time)
    private Object pending;

    Filtered(Iterator<?> in, DeletionVectors.Deleted deleted, RowGroups.Tracker tracker, int indexAt,
             boolean dropIndex, int fillAt, StructType required, StructType partitions, int[] order) {
      this.order = order;
      this.in = in;
      this.deleted = deleted;
      this.tracker = tracker;
      this.fillAt = fillAt;
      this.indexAt = indexAt;
      this.dropIndex = dropIndex;
      this.required = required;
      this.partitions = partitions;
    }

    @Override public boolean hasNext() {
      while (pending == null && in.hasNext()) {
        Object next = in.next();
        pending = next instanceof ColumnarBatch ? filterBatch((ColumnarBatch) next) : filterRow((InternalRow) next);
      }
      if (pending == null && tracker != null) tracker.finish();
      return pending != null;
    }

    @Override public Object next() {
      if (!hasNext()) throw new java.util.NoSuchElementException();
      Object result = pending;  // a ColumnarBatch when the scan reads batches
      pending = null;
      return result;
    }

    private Object filterBatch(ColumnarBatch batch) {
      int n = batch.numRows();
      int width = batch.numCols() - (dropIndex ? 1 : 0) + (fillAt >= 0 ? 1 : 0);
      if (fillAt >= 0 && (filled == null || filledCapacity < n)) {
        if (filled != null) filled.close();
        filledCapacity = Math.max(n, 4096);
        filled = new OnHeapColumnVector(filledCapacity, DataTypes.LongType);
      }
      if (vectors == null) {
        vectors = new MappedColumnVector[width];
        for (int c = 0; c < width; c++) vectors[c] = new MappedColumnVector(column(batch, c));
        out = new ColumnarBatch(vectors);
      }
      int[] rows = null;
      int kept = n;
      if (tracker != null && (deleted != null || filled != null)) {
        if (scratch == null || scratch.length < n) scratch = new int[n];
        kept = tracker.keep(n, deleted, scratch, filled);
        if (kept == 0) return null;
        if (kept < 0) kept = n; else rows = scratch;
      } else if (deleted != null && n > 0) {
        ColumnVector index = batch.column(indexAt);
        if (anyDeleted(index, n)) {
          rows = new int[n];
          kept = 0;
          for (int i = 0; i < n; i++) {
            if (index.isNullAt(i)) throw new IllegalStateException("the Parquet reader gave no row index");
            if (!deleted.contains(index.getLong(i))) rows[kept++] = i;
          }
          if (kept == 0) return null;
        }
      }
      for (int c = 0; c < width; c++) vectors[c].reset(column(batch, c), rows, kept);
      out.setNumRows(kept);
      return out;
    }

    private ColumnVector column(ColumnarBatch batch, int returned) {
      int c = order == null ? returned : order[returned];
      if (fillAt >= 0) return c == fillAt ? filled : batch.column(c > fillAt ? c - 1 : c);
      return batch.column(dropIndex && c >= indexAt ? c + 1 : c);
    }

    private boolean anyDeleted(ColumnVector index, int n) {
      long first = index.getLong(0);
      long last = index.getLong(n - 1);
      if (last - first == n - 1 && (first >>> 32) == (last >>> 32)) {
        int key = (int) (first >>> 32);
        if (key >= deleted.byKey.length || deleted.byKey[key] == null) return false;
        return deleted.byKey[key].rangeCardinality(first & 0xFFFFFFFFL, (last & 0xFFFFFFFFL) + 1) > 0;
      }
      return true;
    }

    private Object filterRow(InternalRow row) {
      if (tracker != null) throw new IllegalStateException("dvlake row-group tracking got a row, not a batch");
      if (deleted != null) {
        if (row.isNullAt(indexAt)) throw new IllegalStateException("the Parquet reader gave no row index");
        if (deleted.contains(row.getLong(indexAt))) return null;
      }
      // the query reads the row index itself and its columns are in the reader's order: Spark's row, as Spark gave it
      if (!dropIndex && order == null) return row;
      if (projection == null) {
        List<Expression> refs = new ArrayList<>();
        for (int c = 0; c < required.length(); c++) refs.add(new BoundReference(c, required.fields()[c].dataType(), true));
        int skip = dropIndex ? 1 : 0;  // the row-index column the format added sits between the two
        for (int c = 0; c < partitions.length(); c++) {
          refs.add(new BoundReference(required.length() + skip + c, partitions.fields()[c].dataType(), true));
        }
        if (order != null) {
          List<Expression> ordered = new ArrayList<>();
          for (int at : order) ordered.add(refs.get(at));
          refs = ordered;
        }
        projection = UnsafeProjection.create(CollectionConverters.asScala(refs).toSeq());
      }
      return projection.apply(row);
    }
  }
}
