package io.sparkcomms.collectives.observe;

import java.util.ArrayList;
import java.util.List;

/**
 * A bounded ring of a communicator's last calls ({@link CallRecord}), oldest overwritten first.
 * A call is recorded when it starts (in progress) and its slot is rewritten when it ends, unless
 * newer calls have taken the slot meanwhile. Thread-safe: calls end on the async thread while the
 * caller starts others or reads a snapshot. Cost per call: two short locked writes.
 */
public final class FlightRecorder {
  private final CallRecord[] ring;
  private long recorded;  // guarded by this: calls recorded so far; the next goes to slot recorded % length

  /** A ring of the last {@code capacity} calls; 0 records nothing. */
  public FlightRecorder(int capacity) {
    if (capacity < 0) throw new IllegalArgumentException("capacity must be >= 0, got " + capacity);
    ring = new CallRecord[capacity];
  }

  /** How many calls the ring holds at most. */
  public int capacity() { return ring.length; }

  /** Records a call that starts; returns its slot (-1 when the ring holds nothing). */
  synchronized int add(CallRecord r) {
    if (ring.length == 0) return -1;
    int slot = (int) (recorded % ring.length);
    ring[slot] = r;
    recorded++;
    return slot;
  }

  /** Rewrites {@code slot} with the ended call {@code r}, if the slot still holds that call. */
  synchronized void update(int slot, CallRecord r) {
    if (slot >= 0 && ring[slot] != null && ring[slot].seq() == r.seq()) ring[slot] = r;
  }

  /** The calls held, oldest first; an immutable copy. */
  public synchronized List<CallRecord> snapshot() {
    int n = (int) Math.min(recorded, ring.length);
    List<CallRecord> out = new ArrayList<>(n);
    for (long i = recorded - n; i < recorded; i++) out.add(ring[(int) (i % ring.length)]);
    return List.copyOf(out);
  }

  /**
   * The record as text: a header naming the rank, the size and the backend, then one line per call
   * ({@link CallRecord#line()}), oldest first, the call numbered {@code markSeq} marked with "&gt;".
   */
  public String dump(int rank, int size, String backend, long markSeq) {
    List<CallRecord> calls;
    long total;
    synchronized (this) {
      calls = snapshot();
      total = recorded;
    }
    StringBuilder sb = new StringBuilder();
    sb.append("flight record of rank ").append(rank).append(" of ").append(size).append(" (").append(backend)
        .append(" backend): last ").append(calls.size()).append(" of ").append(total)
        .append(" calls, oldest first; '>' marks the call that failed");
    for (CallRecord c : calls) sb.append('\n').append(c.seq() == markSeq ? "> " : "  ").append(c.line());
    return sb.toString();
  }
}
