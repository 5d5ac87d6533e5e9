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

  public MappedColumnVector(ColumnVector base) {
    super(base.dataType());
    this.base = base;
  }

  /** Point this vector at another batch's column and mapping (null mapping: every row, in order). */
  void reset(ColumnVector base, int[] rows) {
    this.base = base;
    this.rows = rows;
  }

  private int at(int rowId) {
    return rows == null ? rowId : rows[rowId];
  }

  @Override public void close() { }  // the reader owns and closes its vectors
  @Override public boolean hasNull() { return base.hasNull(); }
  @Override public int numNulls() {
    if (rows == null) return base.numNulls();
    int n = 0;
    for (int r : rows) if (base.isNullAt(r)) n++;
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
