package io.dvlake.spark;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Arrays;
import java.util.List;
import java.util.PrimitiveIterator;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.parquet.column.page.PageReadStore;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.roaringbitmap.PeekableIntIterator;
import org.roaringbitmap.RoaringBitmap;

/**
 * Each batch's row indexes from the row group it was read from, instead of Spark's row-index column (which Spark
 * fills one boxed value at a time: most of the cost of a DV read).
 *
 * Spark's vectorized Parquet reader never lets a batch span two row groups: it loads a group, then returns batches of
 * {@code min(capacity, rows left in the group)} rows. So a batch's rows are the next rows of the group last loaded.
 * A group's rows are contiguous from its first row index ({@code PageReadStore.getRowIndexOffset}) unless the column
 * index skipped pages; then {@code PageReadStore.getRowIndexes} lists the rows read (relative to the group), the
 * same source Spark's own row-index column uses.
 *
 * Seeing each loaded group needs Spark internals: the private {@code rowReader} of {@code RecordReaderIterator}, the
 * protected {@code reader} of {@code SpecificParquetRecordReaderBase} (replaced by a proxy of its package-private
 * {@code ParquetRowGroupReader} interface that records each group), and the vectorized reader's private counters
 * (checked against ours after every batch). They were read with {@code javap} for the Spark minors in
 * {@link #SPARK_MINORS} only; on any other Spark, or when anything is not as expected (a field missing, row mode, a
 * reader of another class, rows already read), {@link #attach} says no and the format reads Spark's row-index column.
 * A mismatch found while reading (our row count against the reader's) fails the task: a wrong row index would be a
 * silently wrong answer.
 */
public final class RowGroups {
  /** The Spark minor versions whose reader internals were checked (javap) and tested with the differential tests. */
  static final List<String> SPARK_MINORS = Arrays.asList("4.0", "4.1", "4.2", "4.3");

  private static final String PARQUET = "org.apache.spark.sql.execution.datasources.parquet.";
  private static final Class<?> ITERATOR;
  private static final Class<?> VECTORIZED;
  private static final Class<?> GROUP_READER;
  private static final Field ROW_READER;
  private static final Field READER;
  private static final Field ROWS_RETURNED;
  private static final Field LOADED;
  private static final Field RETURNS_BATCHES;
  /** Why tracking is off in this JVM, or null when it is usable. */
  static final String UNAVAILABLE;

  // how files and row groups were read in this JVM: for tests (a fast path that is never taken would go unnoticed)
  static final AtomicLong FILES_TRACKED = new AtomicLong();
  static final AtomicLong FILES_FILLED = new AtomicLong();  // tracked, and the query's row-index column filled
  static final AtomicLong FILES_SPARK_COLUMN = new AtomicLong();
  static final AtomicLong FILES_WITHOUT_DV = new AtomicLong();
  static final AtomicLong GROUPS_WHOLE = new AtomicLong();
  static final AtomicLong GROUPS_PAGES_SKIPPED = new AtomicLong();

  static {
    Class<?> iterator = null, vectorized = null, groupReader = null;
    Field rowReader = null, reader = null, rowsReturned = null, loaded = null, returnsBatches = null;
    String why = null;
    String version;
    try {
      version = org.apache.spark.package$.MODULE$.SPARK_VERSION();
    } catch (LinkageError | RuntimeException e) {
      version = "unknown (" + e + ")";
    }
    String[] parts = version.split("\\.");
    String minor = parts.length >= 2 ? parts[0] + "." + parts[1] : version;
    if (!SPARK_MINORS.contains(minor)) {
      why = "Spark " + version + " is not one whose Parquet reader internals dvlake checked (" + SPARK_MINORS + ")";
    } else {
      try {
        iterator = Class.forName("org.apache.spark.sql.execution.datasources.RecordReaderIterator");
        vectorized = Class.forName(PARQUET + "VectorizedParquetRecordReader");
        Class<?> base = Class.forName(PARQUET + "SpecificParquetRecordReaderBase");
        groupReader = Class.forName(PARQUET + "SpecificParquetRecordReaderBase$ParquetRowGroupReader");
        rowReader = field(iterator, "rowReader", Class.forName("org.apache.hadoop.mapreduce.RecordReader"));
        reader = field(base, "reader", groupReader);
        rowsReturned = field(vectorized, "rowsReturned", long.class);
        loaded = field(vectorized, "totalCountLoadedSoFar", long.class);
        returnsBatches = field(vectorized, "returnColumnarBatch", boolean.class);
        Method next = groupReader.getMethod("readNextRowGroup");
        if (next.getReturnType() != PageReadStore.class || groupReader.getMethods().length != 2) {
          throw new NoSuchMethodException("ParquetRowGroupReader is not {readNextRowGroup, close}");
        }
      } catch (ReflectiveOperationException | RuntimeException e) {
        why = "Spark's Parquet reader is not as dvlake expects: " + e;
      }
    }
    ITERATOR = iterator;
    VECTORIZED = vectorized;
    GROUP_READER = groupReader;
    ROW_READER = rowReader;
    READER = reader;
    ROWS_RETURNED = rowsReturned;
    LOADED = loaded;
    RETURNS_BATCHES = returnsBatches;
    UNAVAILABLE = why;
  }

  private RowGroups() { }

  private static Field field(Class<?> owner, String name, Class<?> type) throws NoSuchFieldException {
    Field f = owner.getDeclaredField(name);
    if (f.getType() != type) throw new NoSuchFieldException(owner.getName() + "." + name + " is a " + f.getType());
    f.setAccessible(true);
    return f;
  }

  /** How this JVM's reads found row indexes so far (tests read it through Py4J). */
  public static String counts() {
    return "files_tracked=" + FILES_TRACKED.get() + " files_filled=" + FILES_FILLED.get()
        + " files_spark_column=" + FILES_SPARK_COLUMN.get()
        + " files_without_dv=" + FILES_WITHOUT_DV.get() + " groups_whole=" + GROUPS_WHOLE.get()
        + " groups_pages_skipped=" + GROUPS_PAGES_SKIPPED.get() + " unavailable=" + (UNAVAILABLE != null);
  }

  /** A tracker watching the reader behind {@code rows} (what Spark's Parquet format returned for one file), or null
   *  when that reader is not the vectorized reader, fresh and returning batches, exactly as checked. */
  static Tracker attach(Object rows) {
    if (UNAVAILABLE != null || rows == null || rows.getClass() != ITERATOR) return null;
    try {
      Object reader = ROW_READER.get(rows);
      if (reader == null || reader.getClass() != VECTORIZED || !RETURNS_BATCHES.getBoolean(reader)
          || ROWS_RETURNED.getLong(reader) != 0 || LOADED.getLong(reader) != 0) {
        return null;
      }
      Object groups = READER.get(reader);
      if (groups == null || !GROUP_READER.isInstance(groups)) return null;
      Tracker tracker = new Tracker(reader);
      READER.set(reader, Proxy.newProxyInstance(GROUP_READER.getClassLoader(), new Class<?>[] {GROUP_READER},
          tracker.recording(groups)));
      return tracker;
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null;  // nothing was replaced before the last step: the caller reads Spark's row-index column
    }
  }

  /** The row groups one file's reader loaded, and how far its batches got into the current one. */
  static final class Tracker {
    private final Object reader;
    private long groups;       // groups loaded so far
    private long groupStart;   // the current group's first row index in the file
    private long groupRows;    // rows the reader reads from the current group
    private long inGroup;      // of those, rows already returned in batches
    private long returned;     // rows returned in batches, all groups
    private PrimitiveIterator.OfLong skipped;  // the current group's rows (relative) when pages were skipped
    private long[] indexes = new long[0];
    private PeekableIntIterator deletedIt;  // keepRange's position in the bitmap of deletedBits
    private RoaringBitmap deletedBits;
    private long deletedFrom;               // the first row (low 32 bits) of the last batch deletedIt served

    private Tracker(Object reader) {
      this.reader = reader;
    }

    private InvocationHandler recording(Object groupsReader) {
      return (proxy, method, args) -> {
        Object result;
        try {
          result = method.getDeclaringClass() == Object.class ? method.invoke(groupsReader, args)
              : invokeInterface(method, groupsReader, args);
        } catch (InvocationTargetException e) {
          throw e.getCause();
        }
        if (method.getName().equals("readNextRowGroup") && result != null) loaded((PageReadStore) result);
        return result;
      };
    }

    private static Object invokeInterface(Method method, Object target, Object[] args) throws ReflectiveOperationException {
      method.setAccessible(true);  // a public method of a package-private interface
      return method.invoke(target, args);
    }

    private void loaded(PageReadStore pages) throws IOException {
      if (groups > 0 && inGroup != groupRows) {
        throw new IllegalStateException("dvlake row-group tracking: a row group was left after " + inGroup + " of "
            + groupRows + " rows");
      }
      if (!pages.getRowIndexOffset().isPresent()) throw new IOException("PageReadStore returned no row index offset.");
      groups++;
      groupStart = pages.getRowIndexOffset().get();
      groupRows = pages.getRowCount();
      inGroup = 0;
      skipped = pages.getRowIndexes().isPresent() ? pages.getRowIndexes().get() : null;
      (skipped == null ? GROUPS_WHOLE : GROUPS_PAGES_SKIPPED).incrementAndGet();
    }

    /** At the end of the file: the last group was read to its end, as every batch's count said. */
    void finish() {
      if (groups > 0 && inGroup != groupRows) {
        throw new IllegalStateException("dvlake row-group tracking: the file ended after " + inGroup + " of "
            + groupRows + " rows of its last row group");
      }
    }

    /** The next batch of {@code n} rows: the positions of its rows {@code deleted} does not hold, in {@code out}
     *  (length at least {@code n}); returns how many, {@code -1} when none of the batch is deleted (or {@code deleted}
     *  is null: a file without a DV). With an {@code index} vector, every row's index goes into it first. */
    int keep(int n, DeletionVectors.Deleted deleted, int[] out, WritableColumnVector index) {
      if (n <= 0) return -1;
      if (groups == 0 || inGroup + n > groupRows) {
        throw new IllegalStateException("dvlake row-group tracking: a batch of " + n + " rows past its row group ("
            + inGroup + " of " + groupRows + " rows read)");
      }
      long first = groupStart + inGroup;
      int kept;
      if (skipped == null) {
        if (index != null) for (int i = 0; i < n; i++) index.putLong(i, first + i);
        kept = deleted == null ? -1 : keepRange(first, n, deleted, out);
      } else {
        if (indexes.length < n) indexes = new long[n];
        for (int i = 0; i < n; i++) {
          if (!skipped.hasNext()) throw new IllegalStateException("dvlake row-group tracking: fewer row indexes than rows");
          indexes[i] = groupStart + skipped.nextLong();
        }
        if (index != null) for (int i = 0; i < n; i++) index.putLong(i, indexes[i]);
        if (deleted == null) {
          kept = -1;
        } else {
          kept = 0;
          for (int i = 0; i < n; i++) if (!deleted.contains(indexes[i])) out[kept++] = i;
          if (kept == n) kept = -1;
        }
      }
      inGroup += n;
      returned += n;
      long theirs;
      try {
        theirs = ROWS_RETURNED.getLong(reader);
      } catch (IllegalAccessException e) {
        throw new IllegalStateException(e);
      }
      if (theirs != returned) {
        throw new IllegalStateException("dvlake row-group tracking: the reader returned " + theirs + " rows, the "
            + "tracker counted " + returned);
      }
      return kept;
    }

    /** {@code keep} for the contiguous rows {@code [first, first + n)}: walks the deleted rows in the range only, with
     *  one bitmap iterator for the file's batches (they come in ascending row order) rather than a new one per batch. */
    private int keepRange(long first, int n, DeletionVectors.Deleted deleted, int[] out) {
      long last = first + n - 1;
      int key = (int) (first >>> 32);
      if (key != (int) (last >>> 32)) {  // a batch across a 2^32 boundary: row by row
        int kept = 0;
        for (int i = 0; i < n; i++) if (!deleted.contains(first + i)) out[kept++] = i;
        return kept == n ? -1 : kept;
      }
      RoaringBitmap bits = key < deleted.byKey.length ? deleted.byKey[key] : null;
      if (bits == null) return -1;
      long lo = first & 0xFFFFFFFFL;
      long hi = last & 0xFFFFFFFFL;
      if (deletedIt == null || deletedBits != bits || lo <= deletedFrom) {  // never backwards: a fresh iterator then
        deletedIt = bits.getIntIterator();
        deletedBits = bits;
      }
      deletedFrom = lo;
      PeekableIntIterator it = deletedIt;
      it.advanceIfNeeded((int) lo);
      if (!it.hasNext() || Integer.toUnsignedLong(it.peekNext()) > hi) return -1;
      int kept = 0;
      int next = 0;  // the first position not yet placed
      while (it.hasNext()) {
        long d = Integer.toUnsignedLong(it.peekNext());
        if (d > hi) break;
        it.next();
        int at = (int) (d - lo);
        while (next < at) out[kept++] = next++;
        next = at + 1;
      }
      while (next < n) out[kept++] = next++;
      return kept;
    }
  }
}
