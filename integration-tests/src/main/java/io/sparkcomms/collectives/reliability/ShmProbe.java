package io.sparkcomms.collectives.reliability;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.BufferPoolMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/** What a process holds: /dev/shm entries, RSS, mappings, descriptors, threads. For the reliability tests. */
public final class ShmProbe {
  private ShmProbe() {}

  public static final Path SHM = Paths.get("/dev/shm");

  /** Names of the sparkcomms-* entries in /dev/shm (every user's, every program's). */
  public static Set<String> segments() { return segments(SHM); }

  /** Names of the sparkcomms-* entries in {@code dir}. */
  public static Set<String> segments(Path dir) {
    Set<String> out = new TreeSet<>();
    if (!Files.isDirectory(dir)) return out;
    try (Stream<Path> s = Files.list(dir)) {
      s.map(p -> p.getFileName().toString()).filter(n -> n.startsWith("sparkcomms-")).forEach(out::add);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  /**
   * The pid of the process that created a segment file (the first bytes written to it), or 0 when the
   * file has no creator record yet (or is gone).
   */
  public static long creatorPid(Path segment) {
    int off = creatorPidOffset();
    java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(8).order(java.nio.ByteOrder.nativeOrder());
    try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(segment, java.nio.file.StandardOpenOption.READ)) {
      while (b.hasRemaining() && ch.read(b, off + b.position()) > 0) {
        // read
      }
    } catch (IOException e) {
      return 0;
    }
    return b.hasRemaining() ? 0 : b.getLong(0);
  }

  /** Where a segment file records its creator's pid (then its start time, epoch ms): ShmSegment.CREATOR_PID. */
  public static int creatorPidOffset() {
    try {
      java.lang.reflect.Field f = Class.forName("io.sparkcomms.collectives.host.ShmSegment").getDeclaredField("CREATOR_PID");
      f.setAccessible(true);
      return f.getInt(null);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * A new directory of the caller's own for host segments, in /dev/shm (else the temp directory), mode
   * 0755: others may enter it but not write it, as the backend requires of a segment directory, so what
   * keeps another user out of a segment in it is the segment's own mode. Other programs' communicators
   * neither create segments in it nor sweep it: they use their own directory (/dev/shm by default).
   */
  public static Path newSegmentDirectory(String prefix) {
    Path base = Files.isDirectory(SHM) && Files.isWritable(SHM) ? SHM : Paths.get(System.getProperty("java.io.tmpdir"));
    try {
      Path d = Files.createTempDirectory(base, prefix);
      Files.setPosixFilePermissions(d, java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"));
      return d;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create a segment directory in " + base, e);
    }
  }

  /** A field of /proc/self/status in kB (VmRSS, VmHWM, Threads...), or -1. */
  public static long status(String field) {
    try {
      for (String l : Files.readAllLines(Paths.get("/proc/self/status"))) {
        if (l.startsWith(field + ":")) return Long.parseLong(l.substring(field.length() + 1).trim().split("\\s+")[0]);
      }
    } catch (IOException | RuntimeException e) {
      // not Linux
    }
    return -1;
  }

  public static long rssKb() { return status("VmRSS"); }

  /** Lines of /proc/self/maps that map a sparkcomms segment (each communicator maps 1 + ranks regions). */
  public static long segmentMappings() {
    try (Stream<String> s = Files.lines(Paths.get("/proc/self/maps"))) {
      return s.filter(l -> l.contains("/sparkcomms-")).count();
    } catch (IOException e) {
      return -1;
    }
  }

  public static long openFds() {
    try (Stream<Path> s = Files.list(Paths.get("/proc/self/fd"))) {
      return s.count();
    } catch (IOException e) {
      return -1;
    }
  }

  /** The JVM's "mapped" buffer pool: count of live MappedByteBuffers. */
  public static long mappedBuffers() {
    for (BufferPoolMXBean b : ManagementFactory.getPlatformMXBeans(BufferPoolMXBean.class)) {
      if (b.getName().equals("mapped")) return b.getCount();
    }
    return -1;
  }

  /** Live child processes of this JVM (descendants), e.g. rank workers that should be gone. */
  public static List<ProcessHandle> liveDescendants() {
    return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive).toList();
  }

  /** Sends a signal with kill(1) ("STOP", "CONT", "KILL"), or the shell's kill where there is no kill binary. */
  public static void signal(long pid, String sig) {
    try {
      Process p;
      try {
        p = new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).redirectErrorStream(true).start();
      } catch (IOException noKillBinary) {
        p = new ProcessBuilder("sh", "-c", "kill -" + sig + " " + pid).redirectErrorStream(true).start();
      }
      if (p.waitFor() != 0) throw new IllegalStateException("kill -" + sig + " " + pid + " failed: " + new String(p.getInputStream().readAllBytes()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** As {@link #signal}, ignoring failures (the process may be gone). */
  public static void signalQuietly(long pid, String sig) {
    try {
      signal(pid, sig);
    } catch (RuntimeException e) {
      // best effort
    }
  }

  /** Removes a directory tree, best effort. */
  public static void deleteTree(Path dir) {
    if (dir == null || !Files.exists(dir)) return;
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> {
        try {
          Files.deleteIfExists(p);
        } catch (NoSuchFileException ignored) {
          // raced with a rank deleting its own file
        } catch (IOException ignored) {
          // best effort
        }
      });
    } catch (IOException | UncheckedIOException ignored) {
      // best effort
    }
  }

  /** Test and runner classpath of this JVM, and the java binary, to start worker processes. */
  public static String javaBinary() { return Paths.get(System.getProperty("java.home"), "bin", "java").toString(); }
}
