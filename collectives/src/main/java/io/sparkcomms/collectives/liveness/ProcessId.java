package io.sparkcomms.collectives.liveness;

import java.nio.ByteBuffer;
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

  /** The inverse of {@link #encode()}; null for anything else (an older peer sent nothing). */
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

  /** For a process that was {@link #visible()}: whether it has exited since (its pid gone, or reused). */
  public boolean gone() {
    Optional<ProcessHandle> h = ProcessHandle.of(pid);
    if (h.isEmpty() || !h.get().isAlive()) return true;
    Optional<Instant> s = h.get().info().startInstant();
    return s.isPresent() && s.get().toEpochMilli() != startMillis;
  }
}
