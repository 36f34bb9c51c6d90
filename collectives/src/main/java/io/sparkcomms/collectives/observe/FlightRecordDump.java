package io.sparkcomms.collectives.observe;

/**
 * A rank's flight record as text ({@link FlightRecorder#dump}), attached as a suppressed exception to
 * a {@link io.sparkcomms.collectives.CommTimeoutException}, {@link io.sparkcomms.collectives.CommMismatchException}
 * or {@link io.sparkcomms.collectives.CommAbortedException}: whatever prints the failure with its
 * suppressed exceptions (a Spark task's failure reason does) then shows what this rank was doing.
 * Carries no stack trace; never thrown by itself.
 */
public final class FlightRecordDump extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** A dump whose message is {@code text}. */
  public FlightRecordDump(String text) {
    super(text, null, false, false);
  }
}
