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
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.roaringbitmap.RoaringBitmap;

/**
 * Reading and checking deletion vectors (Delta PROTOCOL "Deletion Vector Format"), with a bounded cache per JVM.
 *
 * A DV on disk is {@code u32 BE size | bitmap bytes | u32 BE CRC-32(bitmap bytes)} at its offset; the bitmap
 * bytes are the magic {@code 1681511377} (little-endian) and the portable 64-bit Roaring layout
 * ({@code u64 LE buckets}, then per bucket {@code u32 LE key} and a portable 32-bit Roaring bitmap). Every
 * check that fails names the DV and the check, framed so that dvlake's Python side raises its own
 * {@code CorruptDeletionVectorError}.
 */
final class DeletionVectors {
  static final int MAGIC = 1681511377;
  /** delta-spark's in-memory "native" RoaringBitmapArray layout: PROTOCOL.md defines only {@link #MAGIC} for DVs, so
   *  both read paths refuse it with the same words (dvlake/dv/roaring.py). */
  static final int LEGACY_NATIVE_MAGIC = 1681511376;
  static final String LEGACY_NATIVE_REFUSAL = "magic 1681511376 is delta-spark's non-portable in-memory bitmap layout,"
      + " which Delta's PROTOCOL.md does not allow in a deletion vector (only 1681511377, the portable layout)";
  private static final int MAX_CACHED = 512;
  private static final Map<String, Deleted> CACHE = new LinkedHashMap<String, Deleted>(64, 0.75f, true) {
    @Override protected boolean removeEldestEntry(Map.Entry<String, Deleted> eldest) {
      return size() > MAX_CACHED;
    }
  };

  private DeletionVectors() { }

  /** The deleted row indexes of one file, by the high 32 bits of the row index. */
  static final class Deleted {
    final RoaringBitmap[] byKey;
    final long cardinality;

    Deleted(RoaringBitmap[] byKey) {
      this.byKey = byKey;
      long n = 0;
      for (RoaringBitmap b : byKey) if (b != null) n += b.getLongCardinality();
      this.cardinality = n;
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

  static Deleted load(FileDv dv, Configuration conf) throws IOException {
    String key = dv.cacheKey();
    synchronized (CACHE) {
      Deleted hit = CACHE.get(key);
      if (hit != null) return hit;
    }
    byte[] bitmap = dv.inline != null ? Base64.getDecoder().decode(dv.inline) : readFramed(dv, conf);
    Deleted deleted = decode(bitmap, dv.describe());
    if (deleted.cardinality != dv.cardinality) {
      throw new IOException(corrupt("deletion vector " + dv.describe() + ": its bitmap holds " + deleted.cardinality
          + " rows but the log says " + dv.cardinality + " (DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH)"));
    }
    synchronized (CACHE) {
      CACHE.put(key, deleted);
    }
    return deleted;
  }

  private static byte[] readFramed(FileDv dv, Configuration conf) throws IOException {
    Path path = new Path(dv.location);
    FileSystem fs = path.getFileSystem(conf);
    long length;
    try {
      requireRegularLocalFile(path);
      length = fs.getFileStatus(path).getLen();
    } catch (java.io.FileNotFoundException e) {
      throw new IOException("[DVLAKE_TASK_ERROR DeletionVectorNotFoundError]the deletion vector file " + dv.location
          + " does not exist (deleted by hand or by a VACUUM with a short retention)[/DVLAKE_TASK_ERROR]", e);
    }
    if (dv.size < 0 || dv.offset < 0 || dv.offset + 8L + dv.size > length) {  // checked before anything is allocated
      throw new IOException(corrupt("deletion vector " + dv.describe() + ": sizeInBytes " + dv.size + " at offset "
          + dv.offset + " does not fit in the file's " + length + " bytes"));
    }
    byte[] frame = new byte[dv.size + 8];
    try (FSDataInputStream in = fs.open(path)) {
      byte[] version = new byte[1];
      in.readFully(0, version);
      if (version[0] != 1) {
        throw new IOException(corrupt("deletion vector file " + dv.location + " starts with version byte "
            + (version[0] & 0xFF) + ", expected 1"));
      }
      in.readFully(dv.offset, frame);
    } catch (java.io.FileNotFoundException e) {
      throw new IOException("[DVLAKE_TASK_ERROR DeletionVectorNotFoundError]the deletion vector file " + dv.location
          + " does not exist (deleted by hand or by a VACUUM with a short retention)[/DVLAKE_TASK_ERROR]", e);
    } catch (java.io.EOFException e) {
      throw new IOException(corrupt("deletion vector " + dv.describe() + ": the file ends before the DV does"), e);
    }
    ByteBuffer buf = ByteBuffer.wrap(frame);
    int size = buf.getInt(0);
    if (size != dv.size) {
      throw new IOException(corrupt("deletion vector " + dv.describe() + ": the stored size is " + size
          + " bytes but the log says " + dv.size + " (DELTA_DELETION_VECTOR_SIZE_MISMATCH)"));
    }
    CRC32 crc = new CRC32();
    crc.update(frame, 4, size);
    int stored = buf.getInt(4 + size);
    if ((int) crc.getValue() != stored) {
      throw new IOException(corrupt("deletion vector " + dv.describe() + ": checksum mismatch (CRC-32)"
          + " (DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH)"));
    }
    byte[] bitmap = new byte[size];
    System.arraycopy(frame, 4, bitmap, 0, size);
    return bitmap;
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

    String cacheKey() {
      return inline != null ? "i:" + inline : location + "@" + offset + "+" + size;
    }

    String describe() {
      return inline != null ? "(inline, " + size + " bytes)" : location + " at offset " + offset;
    }
  }
}
