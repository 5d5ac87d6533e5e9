package io.dvlake.spark;

import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.FileFormat$;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.SerializableConfiguration;

import scala.Function1;
import scala.Option;
import scala.collection.Iterator;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Spark's Parquet format with deletion vectors applied inside the reader: rows a file's DV marks deleted never
 * leave the scan. dvlake's Python planning chooses the files and hands each file's DV descriptor over in the
 * {@code dvlake.scan.files} option (one line per planned file), or, for large reads, in a file the
 * {@code dvlake.scan.listing} option names by location and digest ({@link ScanListings}); a file the listing does not
 * name fails the task, so a planning mistake cannot silently return deleted rows.
 *
 * Row indexes come from the row group each batch was read from ({@link RowGroups}) where Spark's reader is as
 * checked; otherwise from Spark's own row-index column (the one behind {@code _metadata.row_index}), requested from
 * the reader as one more nullable long column and dropped from what the format returns. When the query itself selects
 * {@code _metadata.row_index} (DML's scans), Spark asks the format for that column: the format fills it from the
 * tracked row groups, for files with and without a DV, or, where it cannot track them, has Spark's reader fill it.
 * Files without a DV read by a query that does not ask for the row index are read without any.
 */
public class DvlakeParquetFileFormat extends ParquetFileFormat {
  public static final String SHORT_NAME = "dvlake_parquet";
  public static final String FILES_OPTION = "dvlake.scan.files";
  /** The version of the listing's text protocol that dvlake's Python side writes into {@link #PROTOCOL_OPTION};
   *  dvlake/native_jar.py's SCAN_PROTOCOL names the same number (a Spark-free test keeps the two equal). */
  public static final int PROTOCOL = 3;
  public static final String PROTOCOL_OPTION = "dvlake.scan.protocol";
  /** Protocol 2: instead of {@link #FILES_OPTION}, a reference to the listing written into a file
   *  ({@code location \t sha256 \t entries}, see {@link ScanListings}): the plan stays small however many files. */
  public static final String LISTING_OPTION = "dvlake.scan.listing";
  /** Protocol 3: the read's partition columns (URL-quoted names, comma-separated), which are also columns of the
   *  read's schema. Their values come from each file's listing line (the Delta log's {@code partitionValues}), not
   *  from the Parquet file nor its path, so every planned file of a partitioned table is one relation. */
  public static final String PARTITIONS_OPTION = "dvlake.scan.partitionColumns";

  @Override public String shortName() { return SHORT_NAME; }

  @Override public String toString() { return "DvlakeParquet"; }

  @Override public boolean equals(Object other) { return other instanceof DvlakeParquetFileFormat; }

  @Override public int hashCode() { return DvlakeParquetFileFormat.class.hashCode(); }

  /** Batches only for flat schemas: a struct column's children are read by row id, which no mapping can shift. */
  @Override public boolean supportBatch(SparkSession session, StructType schema) {
    return super.supportBatch(session, schema) && flat(schema);
  }

  @Override public Option<Seq<String>> vectorTypes(StructType requiredSchema, StructType partitionSchema, SQLConf conf) {
    List<String> names = new ArrayList<>();
    for (int i = 0; i < requiredSchema.length() + partitionSchema.length(); i++) names.add(MappedColumnVector.class.getName());
    return Option.apply(CollectionConverters.asScala(names).toSeq());
  }

  /** A read option as given, or lower-cased (Spark's case-insensitive option maps keep either), or null. */
  private static String option(Map<String, String> options, String key) {
    return options.get(key).getOrElse(() -> options.get(key.toLowerCase()).getOrElse(() -> null));
  }

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession session, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
      Seq<Filter> filters, Map<String, String> options, Configuration hadoopConf) {
    String[] partitionNames = partitionNames(option(options, PARTITIONS_OPTION));
    if (partitionNames.length > 0 && partitionSchema.length() > 0) {
      throw new IllegalArgumentException("the " + SHORT_NAME + " format takes partition values from dvlake's listing "
          + "(" + PARTITIONS_OPTION + "), but Spark also found partition columns " + partitionSchema.simpleString());
    }
    ListedPartitions listed = ListedPartitions.of(partitionNames, dataSchema, requiredSchema);
    if (listed != null) {
      // the partition columns leave the Parquet read: Spark's reader appends the listed values as constant columns
      // (its partition-value path), and the reader below puts them back where the query's schema has them
      dataSchema = listed.strip(dataSchema);
      requiredSchema = listed.strip(requiredSchema);
      partitionSchema = listed.used;
      // a filter on a partition column must not reach Parquet: there the column is absent (all null), so its row
      // groups would be dropped. Spark applies every filter again above the scan, so dropping one loses no row
      filters = listed.withoutPartitionFilters(filters);
    }
    // the query's own _metadata.row_index already asks the reader for Spark's row-index column: use that one (a
    // second column of the same name would collide); otherwise add it, nullable as Spark's own plan does
    String indexName = ParquetFileFormat.ROW_INDEX_TEMPORARY_COLUMN_NAME();
    int asked = java.util.Arrays.asList(requiredSchema.fieldNames()).indexOf(indexName);
    boolean dropIndex = asked < 0;
    int indexAt = dropIndex ? requiredSchema.length() : asked;
    StructType withIndex = dropIndex ? requiredSchema.add(new StructField(indexName, DataTypes.LongType, true,
        org.apache.spark.sql.types.Metadata.empty())) : requiredSchema;
    String listing = option(options, FILES_OPTION);
    String reference = option(options, LISTING_OPTION);
    if ((listing == null) == (reference == null)) {
      throw new IllegalArgumentException("the " + SHORT_NAME + " format reads only files dvlake planned: exactly one "
          + "of the options " + FILES_OPTION + " and " + LISTING_OPTION + " must be set (read Delta tables with "
          + "dvlake.read or format(\"delta\"))");
    }
    String protocol = option(options, PROTOCOL_OPTION);
    if (!String.valueOf(PROTOCOL).equals(protocol)) {
      throw new IllegalArgumentException("DVLAKE_NATIVE_SCAN_PROTOCOL_MISMATCH: dvlake's Python side wrote scan "
          + "listing protocol " + protocol + " but this jar reads protocol " + PROTOCOL + ": the jar on the class path "
          + "is not the one built for this dvlake (restart the session so dvlake loads the jar it builds, or set "
          + "spark.dvlake.scan.native=false)");
    }
    // a malformed listing (or reference) fails here, on the driver; a referenced listing is read by the executors
    if (reference != null) ScanListings.Ref.parse(reference);
    if (listing != null) parseFiles(listing);
    // Spark copies every read option into hadoopConf (newHadoopConfWithOptions), and the reader functions keep that
    // conf: without this the listing would ride in every task's binary, not only in the broadcast below
    Configuration conf = withoutListing(hadoopConf);
    // whether Spark's reader returns batches: the scan decided (FileSourceScanExec.supportsColumnar: supportBatch, and
    // also whole-stage codegen on and at most spark.sql.codegen.maxFields columns) and says so in the options
    String returning = options.get(FileFormat$.MODULE$.OPTION_RETURNING_BATCH()).getOrElse(() -> null);
    boolean batches = "true".equalsIgnoreCase(returning);
    // files read in batches find their row indexes from the row groups (RowGroups) through `plain`; Spark's reader
    // with its row-index column (`parent`) is built only for rows instead of batches, or a Spark whose reader internals
    // were not checked. Each reader built is one more broadcast of the Hadoop conf per query
    boolean tracked = batches && RowGroups.UNAVAILABLE == null;
    // the query's own _metadata.row_index (DML's scans) read in batches: the format fills that column itself from the
    // tracked row groups, for every file, instead of Spark's reader filling it one boxed value at a time
    int fillAt = tracked && !dropIndex ? asked : -1;
    Function1<PartitionedFile, Iterator<InternalRow>> parent = tracked ? null : super.buildReaderWithPartitionValues(
        session, dataSchema, partitionSchema, withIndex, filters, options, conf);
    // the same reader without the row-index column: for files without a DV, and for row-group tracking. A conf of
    // its own: Spark writes the requested schema into the conf it is given, and a local broadcast keeps the object
    StructType withoutIndex = fillAt >= 0 ? without(requiredSchema, fillAt) : requiredSchema;
    Function1<PartitionedFile, Iterator<InternalRow>> plain = !dropIndex && fillAt < 0 ? null
        : super.buildReaderWithPartitionValues(session, dataSchema, partitionSchema, withoutIndex, filters, options,
            withoutListing(hadoopConf));
    // the listing (it grows with the number of files read) and the Hadoop conf the DV files are opened with (~100 KB
    // serialized) travel once per executor in one broadcast, as Spark's own reader ships its conf, not in the closure
    // every task deserializes. Text and Spark's own conf wrapper: classes any class loader that reads it knows
    Object[] shared = {listing, new SerializableConfiguration(conf), reference};
    Broadcast<Object[]> files = session.sparkContext().broadcast(shared,
        scala.reflect.ClassTag$.MODULE$.apply(Object[].class));
    return new FilteringReader(parent, plain, files, java.util.UUID.randomUUID().toString(), requiredSchema,
        partitionSchema, indexAt, dropIndex, tracked, fillAt, dvCacheBytes(session), listed);
  }

  /** {@code schema} without its field at {@code at}. */
  static StructType without(StructType schema, int at) {
    List<StructField> kept = new ArrayList<>(Arrays.asList(schema.fields()));
    kept.remove(at);
    return new StructType(kept.toArray(new StructField[0]));
  }

  /** {@link DeletionVectors#CACHE_BYTES_SETTING} of the session (a byte string such as {@code 64m}), or the default. */
  static long dvCacheBytes(SparkSession session) {
    String value = session.conf().get(DeletionVectors.CACHE_BYTES_SETTING, null);
    if (value == null || value.trim().isEmpty()) return DeletionVectors.DEFAULT_CACHE_BYTES;
    try {
      return Math.max(0L, org.apache.spark.network.util.JavaUtils.byteStringAsBytes(value.trim()));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(DeletionVectors.CACHE_BYTES_SETTING + " must be a size in bytes (e.g. 128m), "
          + "not '" + value + "'", e);
    }
  }

  /** A copy of {@code hadoopConf} without the listing (under its own spelling and Spark's lower-cased one). */
  static Configuration withoutListing(Configuration hadoopConf) {
    Configuration conf = new Configuration(hadoopConf);
    conf.unset(FILES_OPTION);
    conf.unset(FILES_OPTION.toLowerCase());
    conf.unset(LISTING_OPTION);
    conf.unset(LISTING_OPTION.toLowerCase());
    return conf;
  }

  static boolean flat(StructType schema) {
    for (StructField f : schema.fields()) if (!flat(f.dataType())) return false;
    return true;
  }

  private static boolean flat(DataType t) {
    if (t instanceof StructType) return false;
    if (t instanceof ArrayType) return flat(((ArrayType) t).elementType());
    if (t instanceof MapType) return flat(((MapType) t).keyType()) && flat(((MapType) t).valueType());
    return !(t instanceof org.apache.spark.sql.types.VariantType)
        && !(t instanceof org.apache.spark.sql.types.CalendarIntervalType);
  }

  /** {@code path \t kind \t where \t offset \t size \t cardinality \t partitions} per line; kind {@code -} (no DV),
   *  {@code f} (DV file, where = its location), {@code i} (inline, where = base64 bitmap bytes); paths and locations
   *  URL-encoded; partitions as {@link PlannedFile} reads them (empty for an unpartitioned table). */
  static HashMap<String, PlannedFile> parseFiles(String listing) {
    HashMap<String, PlannedFile> out = new HashMap<>();
    for (String line : listing.split("\n")) {
      if (line.isEmpty()) continue;
      String[] p = line.split("\t", -1);
      if (p.length != 7) throw new IllegalArgumentException("malformed " + FILES_OPTION + " line: " + line);
      String path = decode(p[0]);
      DeletionVectors.FileDv dv;
      switch (p[1]) {
        case "-": dv = null; break;
        case "f": dv = new DeletionVectors.FileDv(decode(p[2]), null, Long.parseLong(p[3]), Integer.parseInt(p[4]),
            Long.parseLong(p[5])); break;
        case "i": dv = new DeletionVectors.FileDv(null, p[2], 0, Integer.parseInt(p[4]), Long.parseLong(p[5])); break;
        default: throw new IllegalArgumentException("unknown DV kind in " + FILES_OPTION + ": " + p[1]);
      }
      out.put(path, new PlannedFile(dv, p[6]));
    }
    return out;
  }

  /** The {@link #PARTITIONS_OPTION} value as names (none when absent or empty). */
  static String[] partitionNames(String option) {
    if (option == null || option.isEmpty()) return new String[0];
    String[] names = option.split(",", -1);
    for (int i = 0; i < names.length; i++) names[i] = decode(names[i]);
    return names;
  }

  private static String decode(String s) {
    return URLDecoder.decode(s, StandardCharsets.UTF_8);
  }

  /** The key a planned file is listed under: its decoded path, with the scheme and authority unless it is local. */
  static String keyOf(URI uri) {
    String scheme = uri.getScheme();
    if (scheme == null || scheme.equals("file")) return uri.getPath();
    return scheme + "://" + (uri.getAuthority() == null ? "" : uri.getAuthority()) + uri.getPath();
  }
}
