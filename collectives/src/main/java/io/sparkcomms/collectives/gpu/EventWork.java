package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.time.Duration;
import org.bytedeco.javacpp.Pointer;

/**
 * Work on a device event: completion is the event's; waiting polls it within a bound. The outcome
 * (a device-side timeout or abort, an allToAllV size verdict) is recorded once, when the event is
 * first seen complete, by the {@link Completion} the communicator gives, and is raised by this Work's
 * {@link #isCompleted()} / {@link #waitFor()}, never by another call's housekeeping.
 */
final class EventWork implements Work {
  /** What completing a call means for its communicator; returns the call's failure, or null. */
  @FunctionalInterface
  interface Completion {
    RuntimeException complete(EventWork w);
  }

  private final Pointer event;
  private final String what;
  private final Duration bound;
  private final Completion completion;
  private boolean done;               // guarded by this
  private RuntimeException failure;   // guarded by this

  /** {@code bound}: how long {@link #waitFor()} and {@link #settle()} wait at most. */
  EventWork(Pointer event, String what, Duration bound, Completion completion) {
    this.event = event;
    this.what = what;
    this.bound = bound;
    this.completion = completion;
  }

  /** Whether the work completed (recording its outcome the first time); never throws its failure. */
  synchronized boolean poll() {
    if (done) return true;
    int[] d = new int[1];
    int st = SparkCommsNative.sc_event_query(event, d);
    if (st != SparkCommsNative.SC_OK) {
      failure = new CommException(what + ": sc_event_query failed: " + SparkCommsNative.sc_last_error());
      d[0] = 1;
    }
    if (d[0] == 1) {
      done = true;
      SparkCommsNative.sc_event_destroy(event);
      RuntimeException e;
      try {
        e = completion.complete(this);
      } catch (RuntimeException x) {
        e = x;
      }
      if (failure == null) failure = e;
    }
    return done;
  }

  /** Ends a Work that will not be seen complete (its communicator is gone): fails it with {@code why}. */
  synchronized void abandon(String why) {
    if (done) return;
    done = true;
    SparkCommsNative.sc_event_destroy(event);
    failure = new CommException(what + ": " + why);
  }

  /** Blocks (bounded) until completed; the failure stays recorded for waitFor. */
  void settle() {
    long deadline = System.nanoTime() + bound.toNanos();
    while (!poll() && System.nanoTime() < deadline) Thread.onSpinWait();
  }

  @Override public boolean isCompleted() {
    boolean d = poll();
    RuntimeException f;
    synchronized (this) {
      f = failure;
    }
    if (d && f != null) throw f;
    return d;
  }

  @Override public void waitFor() {
    if (!waitFor(bound)) throw new CommException(what + " did not complete within " + bound);
  }

  @Override public boolean waitFor(Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!isCompleted()) {
      if (System.nanoTime() > deadline) return false;
      Thread.onSpinWait();
    }
    return true;
  }
}
