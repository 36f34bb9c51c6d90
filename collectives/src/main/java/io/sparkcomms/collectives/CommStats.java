package io.sparkcomms.collectives;

import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Counts, bytes and busy time of a communicator's calls per {@link Protocol}: what each call ran, as
 * the backend reported it. Thread-safe.
 */
public final class CommStats {
  private static final int N = Protocol.values().length;
  private final AtomicLongArray calls = new AtomicLongArray(N);
  private final AtomicLongArray bytes = new AtomicLongArray(N);
  private final AtomicLongArray nanos = new AtomicLongArray(N);

  public void record(Protocol p, long messageBytes, long elapsedNanos) {
    calls.incrementAndGet(p.ordinal());
    bytes.addAndGet(p.ordinal(), messageBytes);
    nanos.addAndGet(p.ordinal(), elapsedNanos);
  }

  public long calls(Protocol p) { return calls.get(p.ordinal()); }
  public long bytes(Protocol p) { return bytes.get(p.ordinal()); }
  public long nanos(Protocol p) { return nanos.get(p.ordinal()); }

  public long totalCalls() {
    long s = 0;
    for (int i = 0; i < N; i++) s += calls.get(i);
    return s;
  }

  /** Calls per protocol that ran at least once. */
  public Map<Protocol, Long> callsByProtocol() {
    Map<Protocol, Long> m = new EnumMap<>(Protocol.class);
    for (Protocol p : Protocol.values()) if (calls(p) > 0) m.put(p, calls(p));
    return m;
  }

  @Override public String toString() { return "CommStats" + callsByProtocol(); }
}
