package io.sparkcomms.collectives;

import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * Counts, bytes and busy time of a communicator's calls per {@link Protocol} (what each call ran, as
 * the backend reported it) and per {@link Collective}. Time is the caller's wall time of synchronous
 * calls and of async host calls; async GPU calls, which are enqueued, add none. Thread-safe.
 */
public final class CommStats {
  private static final int N = Protocol.values().length;
  private static final int K = Collective.values().length;
  private final AtomicLongArray calls = new AtomicLongArray(N);
  private final AtomicLongArray bytes = new AtomicLongArray(N);
  private final AtomicLongArray nanos = new AtomicLongArray(N);
  private final AtomicLongArray kindCalls = new AtomicLongArray(K);
  private final AtomicLongArray kindBytes = new AtomicLongArray(K);
  private final AtomicLongArray kindNanos = new AtomicLongArray(K);

  /** One call of {@code kind} that ran {@code p}. */
  public void record(Collective kind, Protocol p, long messageBytes, long elapsedNanos) {
    calls.incrementAndGet(p.ordinal());
    bytes.addAndGet(p.ordinal(), messageBytes);
    nanos.addAndGet(p.ordinal(), elapsedNanos);
    kindCalls.incrementAndGet(kind.ordinal());
    kindBytes.addAndGet(kind.ordinal(), messageBytes);
    kindNanos.addAndGet(kind.ordinal(), elapsedNanos);
  }

  /** Calls of {@code kind}. */
  public long calls(Collective kind) { return kindCalls.get(kind.ordinal()); }
  /** Bytes of the calls of {@code kind} (each call's larger of input and output). */
  public long bytes(Collective kind) { return kindBytes.get(kind.ordinal()); }
  /** Time in the calls of {@code kind} (see the class comment). */
  public long nanos(Collective kind) { return kindNanos.get(kind.ordinal()); }

  /** Calls per collective made at least once. */
  public Map<Collective, Long> callsByCollective() {
    Map<Collective, Long> m = new EnumMap<>(Collective.class);
    for (Collective c : Collective.values()) if (calls(c) > 0) m.put(c, calls(c));
    return m;
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
