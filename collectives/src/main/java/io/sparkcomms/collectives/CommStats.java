package io.sparkcomms.collectives;

import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/** Counts, bytes and busy time of a communicator's calls per algorithm. Thread-safe. */
public final class CommStats {
  private static final int N = Algorithm.values().length;
  private final AtomicLongArray calls = new AtomicLongArray(N);
  private final AtomicLongArray bytes = new AtomicLongArray(N);
  private final AtomicLongArray nanos = new AtomicLongArray(N);

  public void record(Algorithm a, long messageBytes, long elapsedNanos) {
    calls.incrementAndGet(a.ordinal());
    bytes.addAndGet(a.ordinal(), messageBytes);
    nanos.addAndGet(a.ordinal(), elapsedNanos);
  }

  public long calls(Algorithm a) { return calls.get(a.ordinal()); }
  public long bytes(Algorithm a) { return bytes.get(a.ordinal()); }
  public long nanos(Algorithm a) { return nanos.get(a.ordinal()); }

  public long totalCalls() {
    long s = 0;
    for (int i = 0; i < N; i++) s += calls.get(i);
    return s;
  }

  /** Calls per algorithm that was used at least once. */
  public Map<Algorithm, Long> callsByAlgorithm() {
    Map<Algorithm, Long> m = new EnumMap<>(Algorithm.class);
    for (Algorithm a : Algorithm.values()) if (calls(a) > 0) m.put(a, calls(a));
    return m;
  }

  @Override public String toString() { return "CommStats" + callsByAlgorithm(); }
}
