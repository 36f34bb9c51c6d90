package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.host.HostCommunicator;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;

/**
 * Reflective access to a host communicator's shared segment, to corrupt it on purpose (the segment's
 * file is unlinked once mapped, so nothing outside the ranks can reach it — which is the point).
 */
final class Internals {
  private Internals() {}

  private static Object field(Object o, String name) {
    try {
      Field f = o.getClass().getDeclaredField(name);
      f.setAccessible(true);
      return f.get(o);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot read " + o.getClass().getSimpleName() + "." + name, e);
    }
  }

  /** The control region (header + control blocks) of {@code c}'s mapping. */
  static ByteBuffer ctrl(Communicator c) {
    return (ByteBuffer) field(field((HostCommunicator) c, "seg"), "ctrl");
  }

  /**
   * Waits (up to 30 s) until the background sweep of stale segment files that communicator creations
   * start in this JVM has finished; creation itself does not wait for it.
   */
  static void awaitSweep() {
    try {
      Method m = Class.forName("io.sparkcomms.collectives.host.StaleSweeper").getDeclaredMethod("awaitIdle", long.class);
      m.setAccessible(true);
      if (!(boolean) m.invoke(null, 30_000L)) throw new IllegalStateException("the stale-segment sweep did not finish within 30 s");
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Byte offset of the barrier slot where rank {@code from} signals rank {@code to}. */
  static int slot(int to, int from) {
    try {
      Method m = Class.forName("io.sparkcomms.collectives.host.ShmSegment").getDeclaredMethod("slot", int.class, int.class);
      m.setAccessible(true);
      return (int) m.invoke(null, to, from);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }
}
