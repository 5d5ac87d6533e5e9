package io.dvlake.spark;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.util.Base64;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One file of the listing: its deletion vector (or null) and its partition values as dvlake's Python side typed them
 * from the Delta log's {@code partitionValues} (protocol 3). The values are never read from directory names: under
 * column mapping the directories are random prefixes, and a value guessed from a path would be a wrong answer.
 *
 * The listing's partition field holds one value per partition column, comma-separated, each {@code -} (null) or
 * {@code =} and its URL-quoted canonical text. Python already applied Delta's serialization rules
 * ({@code dvlake/log/partitions.py}), so the text here is the typed value in one unambiguous spelling: integers and
 * booleans as text, floats in Java's spelling ({@code NaN}, {@code Infinity}), dates as ISO days, timestamps (with and
 * without a time zone) as microseconds since the epoch, decimals as plain text, binary as base64. No second copy of
 * Delta's rules lives here, so the two paths cannot disagree.
 */
final class PlannedFile {
  final DeletionVectors.FileDv dv;
  /** The listing's partition field as written (parsed per use: a task reads a few files of a large listing). */
  final String partitions;

  PlannedFile(DeletionVectors.FileDv dv, String partitions) {
    this.dv = dv;
    this.partitions = partitions;
  }

  /** The values at {@code ordinals} of the listing's partition columns, typed by {@code schema}'s fields (in order). */
  InternalRow values(String path, int count, int[] ordinals, StructType schema) {
    String[] texts = partitions.isEmpty() ? new String[0] : partitions.split(",", -1);
    if (texts.length != count) {
      throw new IllegalStateException(ScanListings.error("the scan's listing gives " + texts.length + " partition "
          + "values for " + path + " but the read has " + count + " partition columns"));
    }
    Object[] row = new Object[ordinals.length];
    for (int i = 0; i < ordinals.length; i++) {
      String text = texts[ordinals[i]];
      if (text.equals("-")) continue;
      if (!text.startsWith("=")) {
        throw new IllegalStateException(ScanListings.error("malformed partition value '" + text + "' for " + path));
      }
      String value = URLDecoder.decode(text.substring(1), StandardCharsets.UTF_8);
      try {
        row[i] = convert(value, schema.fields()[i].dataType());
      } catch (RuntimeException e) {
        throw new IllegalStateException(ScanListings.error("partition value '" + value + "' of column "
            + schema.fields()[i].name() + " of " + path + " is not a valid " + schema.fields()[i].dataType()
            .simpleString() + ": " + e.getMessage()), e);
      }
    }
    return new GenericInternalRow(row);
  }

  /** A canonical text (see the class comment) as Spark's internal value of {@code type}. */
  static Object convert(String text, DataType type) {
    if (type instanceof StringType) return UTF8String.fromString(text);
    if (type instanceof IntegerType) return Integer.parseInt(text);
    if (type instanceof LongType) return Long.parseLong(text);
    if (type instanceof ShortType) return Short.parseShort(text);
    if (type instanceof ByteType) return Byte.parseByte(text);
    if (type instanceof BooleanType) {
      if (!text.equals("true") && !text.equals("false")) throw new IllegalArgumentException("not true or false");
      return text.equals("true");
    }
    if (type instanceof DoubleType) return Double.parseDouble(text);
    if (type instanceof FloatType) return Float.parseFloat(text);
    if (type instanceof DateType) return Math.toIntExact(LocalDate.parse(text).toEpochDay());
    if (type instanceof TimestampType || type instanceof TimestampNTZType) return Long.parseLong(text);
    if (type instanceof DecimalType) {
      DecimalType d = (DecimalType) type;
      BigDecimal exact = new BigDecimal(text).setScale(d.scale(), RoundingMode.HALF_UP);
      if (exact.precision() > d.precision()) throw new ArithmeticException("more digits than the column's precision");
      return Decimal.apply(exact, d.precision(), d.scale());
    }
    if (type instanceof BinaryType) return Base64.getDecoder().decode(text);
    throw new IllegalArgumentException("partition columns of type " + type.simpleString() + " are not supported");
  }
}
