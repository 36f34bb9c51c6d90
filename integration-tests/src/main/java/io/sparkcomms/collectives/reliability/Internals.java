package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * Reflective access to the host backend's internals: a communicator's shared segment, to corrupt it on
 * purpose (the segment's file is unlinked once mapped, so nothing outside the ranks can reach it — which
 * is the point); the sweep of stale segment files; creation with the segments in a directory of the
 * test's own.
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

  /**
   * {@link HostCommunicator#create(Rendezvous, CommOptions)} with the segment in {@code dir} instead of the
   * default directory (/dev/shm): the package-private overload. What it raises is raised as is.
   */
  static HostCommunicator createHost(Rendezvous rv, CommOptions o, Path dir) {
    Method m;
    try {
      m = HostCommunicator.class.getDeclaredMethod("create", Rendezvous.class, CommOptions.class, Path.class);
      m.setAccessible(true);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
    try {
      return (HostCommunicator) m.invoke(null, rv, o, dir);
    } catch (InvocationTargetException e) {
      if (e.getCause() instanceof RuntimeException r) throw r;
      if (e.getCause() instanceof Error err) throw err;
      throw new IllegalStateException(e.getCause());
    } catch (IllegalAccessException e) {
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
