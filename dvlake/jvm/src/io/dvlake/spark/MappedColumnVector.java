package io.dvlake.spark;

import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A column of a batch seen through a row mapping: row {@code i} of this vector is row {@code rows[i]} of the
 * reader's own vector. Every column of every batch dvlake returns is one of these (an identity mapping when the
 * batch lost no row), so Spark's generated code sees a single vector class at each call site.
 *
 * Only flat types are mapped: structs read their children by row id, which a mapping cannot intercept, so the
 * format returns rows instead of batches for schemas with structs.
 */
public final class MappedColumnVector extends ColumnVector {
  private ColumnVector base;
  private int[] rows;  // null: identity
  private int size;    // rows in use: rows[0..size) (the array is reused and longer than the batch's kept rows)

  public MappedColumnVector(ColumnVector base) {
    super(base.dataType());
    this.base = base;
  }

  /** Point this vector at another batch's column and mapping: row {@code i < size} is {@code rows[i]} of
   *  {@code base} (null mapping: every row, in order, and {@code size} is ignored). */
  void reset(ColumnVector base, int[] rows, int size) {
    this.base = base;
    this.rows = rows;
    this.size = size;
  }

  private int at(int rowId) {
    return rows == null ? rowId : rows[rowId];
  }

  @Override public void close() { }  // the reader owns and closes its vectors
  /** May say true when only dropped rows hold the nulls: a null check more, never one less. */
  @Override public boolean hasNull() { return base.hasNull(); }
  /** The nulls among the kept rows only (generated code may skip null checks when it is 0). */
  @Override public int numNulls() {
    if (rows == null) return base.numNulls();
    if (!base.hasNull()) return 0;
    int n = 0;
    for (int i = 0; i < size; i++) if (base.isNullAt(rows[i])) n++;
    return n;
  }
  @Override public boolean isNullAt(int rowId) { return base.isNullAt(at(rowId)); }
  @Override public boolean getBoolean(int rowId) { return base.getBoolean(at(rowId)); }
  @Override public byte getByte(int rowId) { return base.getByte(at(rowId)); }
  @Override public short getShort(int rowId) { return base.getShort(at(rowId)); }
  @Override public int getInt(int rowId) { return base.getInt(at(rowId)); }
  @Override public long getLong(int rowId) { return base.getLong(at(rowId)); }
  @Override public float getFloat(int rowId) { return base.getFloat(at(rowId)); }
  @Override public double getDouble(int rowId) { return base.getDouble(at(rowId)); }
  @Override public ColumnarArray getArray(int rowId) { return base.getArray(at(rowId)); }
  @Override public ColumnarMap getMap(int rowId) { return base.getMap(at(rowId)); }
  @Override public Decimal getDecimal(int rowId, int precision, int scale) {
    return base.getDecimal(at(rowId), precision, scale);
  }
  @Override public UTF8String getUTF8String(int rowId) { return base.getUTF8String(at(rowId)); }
  @Override public byte[] getBinary(int rowId) { return base.getBinary(at(rowId)); }
  @Override public ColumnVector getChild(int ordinal) {
    throw new UnsupportedOperationException("dvlake maps flat columns only; nested schemas are read as rows");
  }
}
