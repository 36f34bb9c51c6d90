package io.sparkcomms.collectives.liveness;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.Optional;

/**
 * A process by pid and start time: the pair names one process even after its pid is reused, and
 * tells whether a peer's pid means the same process here (ranks in other PID namespaces, e.g.
 * containers, are not visible and are never judged).
 */
public record ProcessId(long pid, long startMillis) {
  /** This JVM's process (start time -1 if the platform does not report it). */
  public static ProcessId current() {
    ProcessHandle h = ProcessHandle.current();
    return new ProcessId(h.pid(), h.info().startInstant().map(Instant::toEpochMilli).orElse(-1L));
  }

  public byte[] encode() { return ByteBuffer.allocate(16).putLong(pid).putLong(startMillis).array(); }

  /** The inverse of {@link #encode()}; null for anything that is not an encoded ProcessId. */
  public static ProcessId decode(byte[] b) {
    if (b == null || b.length != 16) return null;
    ByteBuffer buf = ByteBuffer.wrap(b);
    return new ProcessId(buf.getLong(), buf.getLong());
  }

  /** Whether this process exists here, running, with the same start time: only then can it be watched. */
  public boolean visible() {
    if (startMillis < 0) return false;
    Optional<ProcessHandle> h = ProcessHandle.of(pid);
    return h.isPresent() && h.get().isAlive() && h.get().info().startInstant().map(Instant::toEpochMilli).orElse(-2L) == startMillis;
  }

  /**
   * For a process that was {@link #visible()}: whether it has exited since (its pid gone or reused, or
   * a zombie that its parent has not reaped yet). "Gone" only when this process can see itself at the
   * same moment: {@code ProcessHandle.of} also comes back empty when /proc cannot be read (for
   * instance with no file descriptor left), and a live peer must not be reported then.
   */
  public boolean gone() {
    Optional<ProcessHandle> h = ProcessHandle.of(pid);
    if (h.isEmpty() || !h.get().isAlive()) return ProcessHandle.of(ProcessHandle.current().pid()).isPresent();
    Optional<Instant> s = h.get().info().startInstant();
    if (s.isPresent() && s.get().toEpochMilli() != startMillis) return true;
    return zombie(pid);
  }

  /** Whether /proc says the process is a zombie (exited, not reaped); false where that cannot be read. */
  static boolean zombie(long pid) {
    try {
      String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      int close = stat.lastIndexOf(')');  // "pid (comm) state ...": comm may hold spaces and parentheses
      return close > 0 && close + 2 < stat.length() && (stat.charAt(close + 2) == 'Z' || stat.charAt(close + 2) == 'X');
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }
}
