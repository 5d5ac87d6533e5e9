package io.dvlake.spark;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.GZIPInputStream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A scan's file listing by reference (protocol 2): dvlake's Python side writes the listing once into a file that
 * every executor can open through Hadoop's FileSystem, and the plan carries only {@code location \t sha256 \t entries}
 * in the {@code dvlake.scan.listing} option. The plan's size then does not grow with the number of files with a DV.
 *
 * The file is gzip'd UTF-8: a header line {@code dvlake-scan-listing <PROTOCOL> <entries>}, then the inline
 * listing's lines sorted by path. Executors check the SHA-256 of the bytes they read against the reference before
 * they trust a single line, and cache the parsed listing by (location, digest): a rewritten, truncated or missing
 * file is a typed task error, never a file read without its DV.
 */
final class ScanListings {
  static final String MAGIC = "dvlake-scan-listing";
  /** Parsed listings by {@code location#sha256}; a few at a time (each can hold a large table's files). */
  private static final Map<String, HashMap<String, PlannedFile>> CACHE =
      new LinkedHashMap<String, HashMap<String, PlannedFile>>(8, 0.75f, true) {
        @Override protected boolean removeEldestEntry(Map.Entry<String, HashMap<String, PlannedFile>> e) {
          return size() > 4;
        }
      };

  private ScanListings() { }

  /** The reference option's three fields, checked on the driver so that a malformed one fails the query at once. */
  static final class Ref {
    final String location;
    final String sha256;
    final long entries;

    Ref(String location, String sha256, long entries) {
      this.location = location;
      this.sha256 = sha256;
      this.entries = entries;
    }

    static Ref parse(String option) {
      String[] p = option.split("\t", -1);
      if (p.length != 3 || !p[1].matches("[0-9a-f]{64}") || !p[2].matches("[0-9]+")) {
        throw new IllegalArgumentException("malformed " + DvlakeParquetFileFormat.LISTING_OPTION + ": " + option);
      }
      return new Ref(java.net.URLDecoder.decode(p[0], StandardCharsets.UTF_8), p[1], Long.parseLong(p[2]));
    }

    String key() { return location + "#" + sha256; }
  }

  static String error(String what) {
    return "[DVLAKE_TASK_ERROR ScanListingError]" + what + "[/DVLAKE_TASK_ERROR]";
  }

  /** The listing {@code ref} names, read and checked once per executor JVM (then from the cache). */
  static HashMap<String, PlannedFile> load(Ref ref, Configuration conf) {
    synchronized (CACHE) {
      HashMap<String, PlannedFile> hit = CACHE.get(ref.key());
      if (hit != null) return hit;
    }
    HashMap<String, PlannedFile> parsed = parse(ref, read(ref, conf));
    synchronized (CACHE) {
      CACHE.put(ref.key(), parsed);
    }
    return parsed;
  }

  private static byte[] read(Ref ref, Configuration conf) {
    Path path = new Path(ref.location);
    try {
      FileSystem fs = path.getFileSystem(conf);
      try (FSDataInputStream in = fs.open(path)) {
        return in.readAllBytes();
      }
    } catch (java.io.FileNotFoundException e) {
      throw new IllegalStateException(error("the scan's file listing " + ref.location + " does not exist (deleted "
          + "while the query ran?); run the query again so that dvlake writes it anew"), e);
    } catch (IOException e) {
      throw new IllegalStateException(error("the scan's file listing " + ref.location + " cannot be read: " + e), e);
    }
  }

  static HashMap<String, PlannedFile> parse(Ref ref, byte[] bytes) {
    String digest;
    try {
      digest = java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
    if (!digest.equals(ref.sha256)) {
      throw new IllegalStateException(error("the scan's file listing " + ref.location + " has SHA-256 " + digest
          + " but the plan expects " + ref.sha256 + ": it was changed after the query was planned; run the query again"));
    }
    String text;
    try (InputStream in = new GZIPInputStream(new ByteArrayInputStream(bytes))) {
      ByteArrayOutputStream out = new ByteArrayOutputStream(bytes.length * 4);
      in.transferTo(out);
      text = out.toString(StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new IllegalStateException(error("the scan's file listing " + ref.location + " is not gzip'd text: " + e), e);
    }
    int eol = text.indexOf('\n');
    String header = eol < 0 ? text : text.substring(0, eol);
    String expected = MAGIC + " " + DvlakeParquetFileFormat.PROTOCOL + " " + ref.entries;
    if (!header.equals(expected)) {
      throw new IllegalStateException(error("the scan's file listing " + ref.location + " starts with '" + header
          + "', expected '" + expected + "'"));
    }
    HashMap<String, PlannedFile> parsed = DvlakeParquetFileFormat.parseFiles(eol < 0 ? "" : text.substring(eol + 1));
    if (parsed.size() != ref.entries) {
      throw new IllegalStateException(error("the scan's file listing " + ref.location + " names " + parsed.size()
          + " files, its header " + ref.entries));
    }
    return parsed;
  }
}
