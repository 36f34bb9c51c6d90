package io.sparkcomms.collectives.math;

/**
 * Numbered points in a {@link DenseMath}'s queue of work, for timing its phases: on a device an event
 * recorded on the math's stream (so a point is passed when the work queued before it has run), on
 * the host the clock when {@link #mark} is called. Points are reused: marking one again moves it.
 */
public interface Timeline extends AutoCloseable {
  /** Sets point {@code i} at the end of the work queued so far. */
  void mark(int i);

  /** Milliseconds from point {@code from} to point {@code to} (waits until {@code to} is passed). */
  double millis(int from, int to);

  @Override void close();
}
