package io.sparkcomms.collectives.objects;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Bytes packed into INT64 words, little-endian within each word, the last word zero-padded: the
 * collectives have no byte type, and a word array moves the same bytes on every backend.
 */
final class Words {
  private Words() {}

  /** Words that hold {@code bytes} bytes. */
  static int of(long bytes) { return Math.toIntExact((bytes + 7) >>> 3); }

  /** {@code src} packed into a new array of {@code words} words (at least {@link #of} its length). */
  static long[] pack(byte[] src, int words) {
    long[] dst = new long[words];
    int full = src.length >>> 3;
    ByteBuffer.wrap(src, 0, full << 3).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(dst, 0, full);
    long tail = 0;
    for (int i = src.length - 1; i >= full << 3; i--) tail = (tail << 8) | (src[i] & 0xFF);
    if (full < words) dst[full] = tail;
    return dst;
  }

  /** The {@code len} bytes packed into {@code src} from word {@code offset} on. */
  static byte[] unpack(long[] src, int offset, int len) {
    byte[] dst = new byte[len];
    int full = len >>> 3;
    ByteBuffer.wrap(dst).order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().put(src, offset, full);
    long tail = full < of(len) ? src[offset + full] : 0;
    for (int i = full << 3; i < len; i++, tail >>>= 8) dst[i] = (byte) tail;
    return dst;
  }
}
