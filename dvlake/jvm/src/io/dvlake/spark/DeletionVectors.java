package io.dvlake.spark;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.CRC32;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.roaringbitmap.RoaringBitmap;

/**
 * Reading and checking deletion vectors (Delta PROTOCOL "Deletion Vector Format"), with a cache per JVM bounded by
 * the decoded bitmaps' size ({@link #CACHE_BYTES_SETTING}).
 *
 * A DV on disk is {@code u32 BE size | bitmap bytes | u32 BE CRC-32(bitmap bytes)} at its offset; the bitmap
 * bytes are the magic {@code 1681511377} (little-endian) and the portable 64-bit Roaring layout
 * ({@code u64 LE buckets}, then per bucket {@code u32 LE key} and a portable 32-bit Roaring bitmap). Every
 * check that fails names the DV and the check, framed so that dvlake's Python side raises its own
 * {@code CorruptDeletionVectorError}.
 */
public final class DeletionVectors {
  static final int MAGIC = 1681511377;
  /** delta-spark's in-memory "native" RoaringBitmapArray layout: PROTOCOL.md defines only {@link #MAGIC} for DVs, so
   *  both read paths refuse it with the same words (dvlake/dv/roaring.py). */
  static final int LEGACY_NATIVE_MAGIC = 1681511376;
  static final String LEGACY_NATIVE_REFUSAL = "magic 1681511376 is delta-spark's non-portable in-memory bitmap layout,"
      + " which Delta's PROTOCOL.md does not allow in a deletion vector (only 1681511377, the portable layout)";
  /** The cache's bound when the session does not set {@link #CACHE_BYTES_SETTING}. */
  static final long DEFAULT_CACHE_BYTES = 128L << 20;
  /** The session setting that bounds the cache (bytes of decoded bitmaps per JVM; 0 or less: no caching). */
  public static final String CACHE_BYTES_SETTING = "spark.dvlake.scan.dvCacheBytes";
  /** Decoded DVs by the key {@link #load} makes, least recently used first; {@link #cachedBytes}: their weights. */
  private static final LinkedHashMap<String, Deleted> CACHE = new LinkedHashMap<>(64, 0.75f, true);
  private static long cachedBytes;

  private DeletionVectors() { }

  /** The deleted row indexes of one file, by the high 32 bits of the row index. */
  static final class Deleted {
    final RoaringBitmap[] byKey;
    final long cardinality;
    /** What it holds in memory (the bitmaps' own estimate, plus the bucket array): its weight in the cache. */
    final long bytes;

    Deleted(RoaringBitmap[] byKey) {
      this.byKey = byKey;
      long n = 0;
      long size = 16L + 8L * byKey.length;
      for (RoaringBitmap b : byKey) {
        if (b == null) continue;
        n += b.getLongCardinality();
        size += b.getLongSizeInBytes();
      }
      this.cardinality = n;
      this.bytes = size;
    }

    boolean contains(long row) {
      int key = (int) (row >>> 32);
      RoaringBitmap b = key < byKey.length ? byKey[key] : null;
      return b != null && b.contains((int) row);
    }
  }

  static String corrupt(String what) {
    return "[DVLAKE_TASK_ERROR CorruptDeletionVectorError]" + what + "[/DVLAKE_TASK_ERROR]";
  }

  /** A failed check delta-spark names (its error class travels in the marker, as dvlake's Python side sends it). */
  static String integrity(String errorClass, String what) {
    return "[DVLAKE_TASK_ERROR DeletionVectorIntegrityError " + errorClass + "]" + what + "[/DVLAKE_TASK_ERROR]";
  }

  /** The deleted rows of {@code dv}, checked, from the cache when the same bytes (read and CRC-checked now) were
   *  decoded before in this JVM; {@code maxCacheBytes} bounds the cache by the decoded bitmaps' size. */
  static Deleted load(FileDv dv, Configuration conf, long maxCacheBytes) throws IOException {
    if (dv.inline != null) {
      String key = "i:" + dv.cardinality + ":" + dv.inline;  // the bytes themselves: nothing can change under the key
      Deleted hit = cached(key);
      return hit != null ? hit : remember(key, checked(dv, Base64.getDecoder().decode(dv.inline)), maxCacheBytes);
    }
    Path path = new Path(dv.location);
    FileSystem fs = path.getFileSystem(conf);
    FileStatus status;
    try {
      requireRegularLocalFile(path);
      status = fs.getFileStatus(path);
    } catch (java.io.FileNotFoundException e) {
      throw notFound(dv, e);
    }
    // The DV's bytes are read and their CRC-32 checked on every use, as the pure-Python path does: a file's length and
    // modification time can stay the same while its bytes change (a rewrite in place within the clock's resolution,
    // or with its time set back), so only the decoding is cached, keyed by the whole descriptor and a SHA-256 of the
    // bytes just verified, never answered for bytes it was not made from.
    byte[] bitmap = readFramed(dv, fs, path, status.getLen());
    String key = dv.location + "@" + dv.offset + "+" + dv.size + "#" + dv.cardinality + "/" + sha256(bitmap);
    Deleted hit = cached(key);
    return hit != null ? hit : remember(key, checked(dv, bitmap), maxCacheBytes);
  }

  private static String sha256(byte[] bytes) {
    try {
      return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("every Java platform has SHA-256", e);
    }
  }

  private static Deleted checked(FileDv dv, byte[] bitmap) throws IOException {
    Deleted deleted = decode(bitmap, dv.describe());
    if (deleted.cardinality != dv.cardinality) {
      throw new IOException(integrity("DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH", "deletion vector " + dv.describe()
          + ": its bitmap holds " + deleted.cardinality + " rows but the log says " + dv.cardinality));
    }
    return deleted;
  }

  private static synchronized Deleted cached(String key) {
    return CACHE.get(key);
  }

  /** Caches {@code deleted} (unless it alone is over the bound), then drops the least recently used entries until the
   *  cache is within {@code maxBytes}. */
  private static synchronized Deleted remember(String key, Deleted deleted, long maxBytes) {
    long weight = deleted.bytes + 2L * key.length();
    if (weight <= maxBytes) {
      Deleted old = CACHE.put(key, deleted);
      if (old != null) cachedBytes -= old.bytes + 2L * key.length();
      cachedBytes += weight;
    }
    java.util.Iterator<Map.Entry<String, Deleted>> eldest = CACHE.entrySet().iterator();
    while (cachedBytes > maxBytes && eldest.hasNext()) {
      Map.Entry<String, Deleted> e = eldest.next();
      cachedBytes -= e.getValue().bytes + 2L * e.getKey().length();
      eldest.remove();
    }
    return deleted;
  }

  /** {@code entries=N bytes=B}: what this JVM's DV cache holds (tests read it through Py4J). */
  public static synchronized String cacheStats() {
    return "entries=" + CACHE.size() + " bytes=" + cachedBytes;
  }

  private static IOException notFound(FileDv dv, java.io.FileNotFoundException e) {
    return new IOException("[DVLAKE_TASK_ERROR DeletionVectorNotFoundError]the deletion vector file " + dv.location
        + " does not exist (deleted by hand or by a VACUUM with a short retention)[/DVLAKE_TASK_ERROR]", e);
  }

  private static byte[] readFramed(FileDv dv, FileSystem fs, Path path, long length) throws IOException {
    byte[] frame;
    try (FSDataInputStream in = fs.open(path)) {
      byte[] version = new byte[1];
      in.readFully(0, version);
      if (version[0] != 1) {
        throw new IOException(corrupt("deletion vector file " + dv.location + " starts with version byte "
            + (version[0] & 0xFF) + ", expected 1"));
      }
      if (dv.size < 0 || dv.offset < 1 || dv.offset + 8L + dv.size > length) {  // checked before anything is allocated
        if (dv.size >= 0 && dv.offset >= 1 && dv.offset + 4L <= length) {
          // as delta-spark, which reads the size field first: a log whose sizeInBytes disagrees with it is a size
          // mismatch, whether or not the larger record would still fit (which DV is read first must not matter)
          byte[] field = new byte[4];
          in.readFully(dv.offset, field);
          requireStoredSize(dv, ByteBuffer.wrap(field).getInt());
        }
        throw new IOException(corrupt("deletion vector " + dv.describe() + ": sizeInBytes " + dv.size + " at offset "
            + dv.offset + " does not fit in the file's " + length + " bytes"));
      }
      frame = new byte[dv.size + 8];
      in.readFully(dv.offset, frame);
    } catch (java.io.FileNotFoundException e) {
      throw notFound(dv, e);
    } catch (java.io.EOFException e) {
      throw new IOException(corrupt("deletion vector " + dv.describe() + ": the file ends before the DV does"), e);
    }
    ByteBuffer buf = ByteBuffer.wrap(frame);
    requireStoredSize(dv, buf.getInt(0));
    int size = dv.size;
    CRC32 crc = new CRC32();
    crc.update(frame, 4, size);
    int stored = buf.getInt(4 + size);
    if ((int) crc.getValue() != stored) {
      throw new IOException(integrity("DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH", "deletion vector " + dv.describe()
          + ": checksum mismatch (CRC-32)"));
    }
    byte[] bitmap = new byte[size];
    System.arraycopy(frame, 4, bitmap, 0, size);
    return bitmap;
  }

  private static void requireStoredSize(FileDv dv, int stored) throws IOException {
    if (stored != dv.size) {
      throw new IOException(integrity("DELTA_DELETION_VECTOR_SIZE_MISMATCH", "deletion vector " + dv.describe()
          + ": the stored size is " + stored + " bytes but the log says " + dv.size));
    }
  }

  /** A local DV location must be a regular file: a FIFO or device named by a hostile log would block or never end. */
  private static void requireRegularLocalFile(Path path) throws IOException {
    java.net.URI uri = path.toUri();
    if (uri.getScheme() != null && !uri.getScheme().equals("file")) return;  // object stores hold only objects
    java.nio.file.Path local = java.nio.file.Paths.get(uri.getPath());
    if (!java.nio.file.Files.exists(local)) throw new java.io.FileNotFoundException(uri.getPath());
    if (!java.nio.file.Files.isRegularFile(local)) {
      throw new IOException("[DVLAKE_TASK_ERROR NotARegularFileError]DVLAKE_NOT_A_REGULAR_FILE: deletion vector file "
          + uri.getPath() + " is not a regular file; dvlake opens only regular files[/DVLAKE_TASK_ERROR]");
    }
  }

  static Deleted decode(byte[] bitmap, String what) throws IOException {
    try {
      DataInputStream in = new DataInputStream(new ByteArrayInputStream(bitmap));
      int magic = Integer.reverseBytes(in.readInt());
      if (magic == LEGACY_NATIVE_MAGIC) {
        throw new IOException(corrupt("deletion vector " + what + ": " + LEGACY_NATIVE_REFUSAL));
      }
      if (magic != MAGIC) {
        throw new IOException(corrupt("deletion vector " + what + ": magic " + magic + ", expected " + MAGIC
            + " (the portable RoaringBitmapArray format)"));
      }
      long buckets = Long.reverseBytes(in.readLong());
      if (buckets < 0 || buckets > bitmap.length) {
        throw new IOException(corrupt("deletion vector " + what + ": " + buckets + " buckets cannot fit in "
            + bitmap.length + " bytes"));
      }
      RoaringBitmap[] byKey = new RoaringBitmap[0];
      long previous = -1;
      for (long i = 0; i < buckets; i++) {
        long key = Integer.toUnsignedLong(Integer.reverseBytes(in.readInt()));
        if (key <= previous || key > Integer.MAX_VALUE - 1) {
          throw new IOException(corrupt("deletion vector " + what + ": bucket keys are not ascending"));
        }
        previous = key;
        RoaringBitmap b = new RoaringBitmap();
        b.deserialize(in);
        if (key >= byKey.length) byKey = java.util.Arrays.copyOf(byKey, (int) key + 1);
        byKey[(int) key] = b;
      }
      if (in.available() != 0) {
        throw new IOException(corrupt("deletion vector " + what + ": " + in.available() + " bytes after the bitmap"));
      }
      return new Deleted(byKey);
    } catch (IOException e) {
      if (e.getMessage() != null && e.getMessage().contains("[DVLAKE_TASK_ERROR")) throw e;
      throw new IOException(corrupt("deletion vector " + what + " is not a valid bitmap: " + e), e);
    } catch (RuntimeException e) {
      throw new IOException(corrupt("deletion vector " + what + " is not a valid bitmap: " + e), e);
    }
  }

  /** One planned file's DV, as dvlake's planning described it. */
  static final class FileDv implements java.io.Serializable {
    final String location;   // absolute DV file (on-disk DVs)
    final String inline;     // base64 bitmap bytes (inline DVs)
    final long offset;
    final int size;
    final long cardinality;

    FileDv(String location, String inline, long offset, int size, long cardinality) {
      this.location = location;
      this.inline = inline;
      this.offset = offset;
      this.size = size;
      this.cardinality = cardinality;
    }

    String describe() {
      return inline != null ? "(inline, " + size + " bytes)" : location + " at offset " + offset;
    }
  }
}
