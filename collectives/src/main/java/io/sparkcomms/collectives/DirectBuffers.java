package io.sparkcomms.collectives;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.Buffer;
import java.nio.ByteBuffer;

/**
 * The native address of a direct buffer, to tell whether two buffers share memory (two slices of one
 * allocation are different objects). Read as {@code java.nio.Buffer.address} through jdk.unsupported's
 * {@code sun.misc.Unsafe}, which needs no --add-opens; -1 where that is not available.
 */
final class DirectBuffers {
  private DirectBuffers() {}

  private static final Object UNSAFE;
  private static final Method GET_LONG;
  private static final long ADDRESS_OFFSET;

  static {
    Object u = null;
    Method g = null;
    long off = -1;
    try {
      Class<?> c = Class.forName("sun.misc.Unsafe");
      Field f = c.getDeclaredField("theUnsafe");
      f.setAccessible(true);
      u = f.get(null);
      off = (long) c.getMethod("objectFieldOffset", Field.class).invoke(u, Buffer.class.getDeclaredField("address"));
      g = c.getMethod("getLong", Object.class, long.class);
    } catch (ReflectiveOperationException | RuntimeException e) {
      u = null;
    }
    UNSAFE = u;
    GET_LONG = g;
    ADDRESS_OFFSET = off;
  }

  /** The address of element 0 of the direct buffer {@code b}; -1 where it cannot be read. */
  static long address(ByteBuffer b) {
    if (UNSAFE == null || !b.isDirect()) return -1;
    try {
      return (long) GET_LONG.invoke(UNSAFE, b, ADDRESS_OFFSET);
    } catch (ReflectiveOperationException | RuntimeException e) {
      return -1;
    }
  }
}
