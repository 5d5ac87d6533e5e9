package io.dvlake.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A read's partition columns whose values come from dvlake's listing (protocol 3,
 * {@link DvlakeParquetFileFormat#PARTITIONS_OPTION}): they are columns of the read's schema, so Spark sees one
 * relation with the table's columns (and its own {@code _metadata}) however many partitions the files span.
 *
 * The format reads such a query as Spark's Parquet reader with these columns as its partition columns (constant per
 * file, filled by Spark's reader from the values handed in with each file) and the rest as data; the reader's output
 * ({@code stripped required columns, then used partition columns}) is put back in the query's order by {@link #order}.
 */
final class ListedPartitions implements Serializable {
  private static final long serialVersionUID = 1L;
  /** Every partition column of the read, in the listing's order (the order of each line's values). */
  final String[] names;
  /** The partition columns the query reads (with their types from the read's schema), in the listing's order. */
  final StructType used;
  /** For each of {@link #used}: its position among {@link #names} (where its value is in a listing line). */
  final int[] ordinals;
  /** For each column the query asked for: the column of the reader's output it is (null: the same order). */
  final int[] order;

  private ListedPartitions(String[] names, StructType used, int[] ordinals, int[] order) {
    this.names = names;
    this.used = used;
    this.ordinals = ordinals;
    this.order = order;
  }

  /** The partition columns of a read, or null when it has none. */
  static ListedPartitions of(String[] names, StructType dataSchema, StructType requiredSchema) {
    if (names.length == 0) return null;
    List<String> all = Arrays.asList(names);
    for (String name : names) {
      if (!Arrays.asList(dataSchema.fieldNames()).contains(name)) {
        throw new IllegalArgumentException("partition column " + name + " named by "
            + DvlakeParquetFileFormat.PARTITIONS_OPTION + " is not in the read's schema " + dataSchema.simpleString());
      }
    }
    List<StructField> used = new ArrayList<>();
    List<Integer> ordinals = new ArrayList<>();
    for (String name : names) {
      int at = Arrays.asList(requiredSchema.fieldNames()).indexOf(name);
      if (at >= 0) {
        used.add(requiredSchema.fields()[at]);
        ordinals.add(all.indexOf(name));
      }
    }
    int kept = requiredSchema.length() - used.size();
    int[] order = new int[requiredSchema.length()];
    int data = 0;
    boolean identity = true;
    for (int c = 0; c < requiredSchema.length(); c++) {
      String name = requiredSchema.fields()[c].name();
      int part = indexOf(used, name);
      order[c] = part >= 0 ? kept + part : data++;
      identity &= order[c] == c;
    }
    int[] ords = new int[ordinals.size()];
    for (int i = 0; i < ords.length; i++) ords[i] = ordinals.get(i);
    return new ListedPartitions(names, new StructType(used.toArray(new StructField[0])), ords, identity ? null : order);
  }

  private static int indexOf(List<StructField> fields, String name) {
    for (int i = 0; i < fields.size(); i++) if (fields.get(i).name().equals(name)) return i;
    return -1;
  }

  /** {@code schema} without the partition columns. */
  StructType strip(StructType schema) {
    List<String> all = Arrays.asList(names);
    List<StructField> kept = new ArrayList<>();
    for (StructField f : schema.fields()) if (!all.contains(f.name())) kept.add(f);
    return new StructType(kept.toArray(new StructField[0]));
  }

  /** {@code filters} without those that mention a partition column (any reference containing its name, in any case:
   *  dropping one too many only leaves it to Spark's own Filter above the scan). */
  Seq<Filter> withoutPartitionFilters(Seq<Filter> filters) {
    List<Filter> kept = new ArrayList<>();
    for (Filter f : CollectionConverters.asJava(filters)) if (!mentionsPartition(f)) kept.add(f);
    return CollectionConverters.asScala(kept).toSeq();
  }

  private boolean mentionsPartition(Filter filter) {
    for (String reference : filter.references()) {
      String ref = reference.toLowerCase(Locale.ROOT);
      for (String name : names) if (ref.contains(name.toLowerCase(Locale.ROOT))) return true;
    }
    return false;
  }

  /** {@code file} with the listed values of the used partition columns as its partition values (Spark's reader
   *  appends them to every row or batch it reads from the file). */
  PartitionedFile withValues(PartitionedFile file, String key, PlannedFile planned) {
    InternalRow values = planned.values(key, names.length, ordinals, used);
    return new PartitionedFile(values, file.filePath(), file.start(), file.length(), file.locations(),
        file.modificationTime(), file.fileSize(), file.otherConstantMetadataColumnValues());
  }
}
