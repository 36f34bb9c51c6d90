package io.sparkcomms.collectives;

import java.time.Duration;

/** A collective started with an {@code ...Async} call. */
public interface Work {
  /** Whether the collective finished (successfully or not). Never blocks. */
  boolean isCompleted();

  /** Waits until the collective finishes; rethrows its failure. Bounded by the communicator's timeout. */
  void waitFor();

  /**
   * Waits at most {@code timeout}. Returns false if it has not finished by then (the collective keeps
   * running); rethrows its failure.
   */
  boolean waitFor(Duration timeout);

  /** A Work that is already complete (a call that finished before it returned). */
  static Work completed() { return Done.INSTANCE; }
}

/** {@link Work#completed()}. */
enum Done implements Work {
  INSTANCE;

  @Override public boolean isCompleted() { return true; }
  @Override public void waitFor() {}
  @Override public boolean waitFor(Duration timeout) { return true; }
}
