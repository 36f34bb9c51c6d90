package io.sparkcomms.collectives;

/** FNV-1a (64-bit): the digest the ranks compare of small arrays (per-rank counts, split lists, call descriptions). */
public final class Fnv {
  private Fnv() {}

  /** FNV-1a over the low {@code bytes} bytes of each value, lowest byte first. */
  public static long of(long[] values, int bytes) {
    long h = 0xcbf29ce484222325L;
    for (long v : values) {
      for (int b = 0; b < bytes; b++) {
        h ^= (v >>> (8 * b)) & 0xff;
        h *= 0x100000001b3L;
      }
    }
    return h;
  }

  /** FNV-1a over {@code bytes}. */
  public static long of(byte[] bytes) {
    long[] v = new long[bytes.length];
    for (int i = 0; i < bytes.length; i++) v[i] = bytes[i] & 0xff;
    return of(v, 1);
  }
}
