package io.sparkcomms.collectives.liveness;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Optional;

/**
 * A process by pid, start time and PID namespace: the pid and start time name one process even
 * after its pid is reused, and the namespace (the inode of /proc/self/ns/pid) tells whether a peer's
 * pid means the same process here at all (ranks in other PID namespaces, e.g. containers, are not
 * visible and are never judged). -1 stands for "unknown" in either field.
 */
public record ProcessId(long pid, long startMillis, long pidNamespace) {
  private static final long MY_NAMESPACE = readPidNamespace();

  /** A process whose PID namespace is not known (judged by pid and start time alone). */
  public ProcessId(long pid, long startMillis) { this(pid, startMillis, -1); }

  /** This JVM's process (start time -1 if the platform does not report it). */
  public static ProcessId current() {
    ProcessHandle h = ProcessHandle.current();
    return new ProcessId(h.pid(), h.info().startInstant().map(Instant::toEpochMilli).orElse(-1L), MY_NAMESPACE);
  }

  /** This process's PID namespace: the inode in the link /proc/self/ns/pid ("pid:[4026531836]"); -1 where unknown. */
  static long readPidNamespace() {
    try {
      String l = Files.readSymbolicLink(Path.of("/proc/self/ns/pid")).toString();
      return Long.parseLong(l.substring(l.indexOf('[') + 1, l.indexOf(']')));
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  public byte[] encode() { return ByteBuffer.allocate(24).putLong(pid).putLong(startMillis).putLong(pidNamespace).array(); }

  /** The inverse of {@link #encode()}; null for anything that is not an encoded ProcessId. */
  public static ProcessId decode(byte[] b) {
    if (b == null || b.length != 24) return null;
    ByteBuffer buf = ByteBuffer.wrap(b);
    return new ProcessId(buf.getLong(), buf.getLong(), buf.getLong());
  }

  /**
   * How far a start time recorded by another JVM may be from this JVM's view of the same process:
   * Linux start times are offsets from the boot time, which each JVM reads once (whole seconds), and
   * which moves when the wall clock is stepped.
   */
  public static final long START_TOLERANCE_MILLIS = 1000;

  /**
   * This process as this JVM sees it, if it runs here now (not a zombie) with a start time within
   * {@link #START_TOLERANCE_MILLIS} of ours; null otherwise (exited, unknown start time, or a process
   * of another PID namespace, whose pid means something else here). Its start time is this JVM's, so
   * {@link #gone()} can compare exactly from then on.
   */
  public ProcessId seenHere() {
    if (startMillis < 0) return null;
    if (inOtherNamespace()) return null;
    Optional<ProcessHandle> h = ProcessHandle.of(pid);
    if (h.isEmpty() || !h.get().isAlive()) return null;
    Optional<Instant> s = h.get().info().startInstant();
    if (s.isEmpty() || Math.abs(s.get().toEpochMilli() - startMillis) > START_TOLERANCE_MILLIS || zombie(pid)) return null;
    return new ProcessId(pid, s.get().toEpochMilli(), pidNamespace);
  }

  /** Whether both namespaces are known and differ: then this pid names another process here, or none. */
  private boolean inOtherNamespace() { return pidNamespace >= 0 && MY_NAMESPACE >= 0 && pidNamespace != MY_NAMESPACE; }

  /** Whether this process runs here now ({@link #seenHere()}): only then can it be watched. */
  public boolean visible() { return seenHere() != null; }

  /**
   * For a process {@link #seenHere()} returned: whether it has exited since (its pid gone or reused, or
   * a zombie that its parent has not reaped yet). "Gone" only when this process can see itself at the
   * same moment: {@code ProcessHandle.of} also comes back empty when /proc cannot be read (for
   * instance with no file descriptor left), and a live peer must not be reported then.
   */
  public boolean gone() { return gone(0); }

  /**
   * As {@link #gone()}, with start times that differ by at most {@code toleranceMillis} taken as the
   * same process: for a start time recorded by another JVM ({@link #START_TOLERANCE_MILLIS}). A start
   * time of -1 (unknown) is not compared. A process of another PID namespace is never gone (its pid
   * means nothing here).
   */
  public boolean gone(long toleranceMillis) {
    if (inOtherNamespace()) return false;
    Optional<ProcessHandle> h = ProcessHandle.of(pid);
    if (h.isEmpty() || !h.get().isAlive()) return ProcessHandle.of(ProcessHandle.current().pid()).isPresent();
    if (startMillis >= 0) {
      Optional<Instant> s = h.get().info().startInstant();
      if (s.isPresent() && Math.abs(s.get().toEpochMilli() - startMillis) > toleranceMillis) return true;
    }
    return zombie(pid);
  }

  /** Whether /proc says the process is a zombie (exited, not reaped); false where that cannot be read. */
  public static boolean zombie(long pid) {
    try {
      String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      int close = stat.lastIndexOf(')');  // "pid (comm) state ...": comm may hold spaces and parentheses
      return close > 0 && close + 2 < stat.length() && (stat.charAt(close + 2) == 'Z' || stat.charAt(close + 2) == 'X');
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }
}
