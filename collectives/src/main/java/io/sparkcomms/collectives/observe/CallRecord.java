package io.sparkcomms.collectives.observe;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.Protocol;
import java.time.Instant;
import java.util.Locale;

/**
 * One call in a communicator's flight record ({@link io.sparkcomms.collectives.Communicator#flightRecord()}).
 *
 * @param seq           the call's number in its communicator ({@link CallInfo#seq()})
 * @param collective    which collective
 * @param dtype         the element type
 * @param count         the per-rank count ({@link CallInfo#count()})
 * @param bytes         the larger of the input and output bytes
 * @param async         whether it was an {@code ...Async} call
 * @param protocol      the protocol that ran; null while in progress and when it failed before the
 *                      backend chose one
 * @param startMillis   wall-clock start, milliseconds since the epoch
 * @param durationNanos as {@link CallResult#durationNanos()}; -1 while in progress
 * @param state         in progress, ok or failed
 * @param failure       the exception's class and message when failed, else null
 */
public record CallRecord(long seq, Collective collective, DataType dtype, long count, long bytes, boolean async,
                         Protocol protocol, long startMillis, long durationNanos, State state, String failure) {
  /** Where a recorded call stands. */
  public enum State { IN_PROGRESS, OK, FAILED }

  /** "ok", "in progress", or the exception's class and message. */
  public String outcome() {
    return switch (state) {
      case OK -> "ok";
      case IN_PROGRESS -> "in progress";
      case FAILED -> failure;
    };
  }

  /**
   * The call on one line: {@code #12 allReduce FLOAT32 count=1024 bytes=4096 sync FLAT
   * start=2026-12-02T10:15:03.120Z 0.153 ms ok}; the outcome is "ok", "in progress" or
   * "failed: " and the exception's class and message; the protocol "-" when unknown; a barrier has
   * no dtype, count or bytes.
   */
  public String line() {
    String time = state == State.IN_PROGRESS ? "" : String.format(Locale.ROOT, " %.3f ms", durationNanos / 1e6);
    String shape = collective == Collective.BARRIER ? "" : (dtype == null ? "" : " " + dtype) + " count=" + count + " bytes=" + bytes;
    return "#" + seq + " " + collective.apiName() + shape + (async ? " async " : " sync ") + (protocol == null ? "-" : protocol.name())
        + " start=" + Instant.ofEpochMilli(startMillis) + time + " " + (state == State.FAILED ? "failed: " : "") + outcome();
  }

  /** The exception as a record shows it: its class name and message, on one line. */
  static String describe(Throwable t) {
    String m = t.getMessage();
    return t.getClass().getName() + (m == null ? "" : ": " + m.replace('\n', ' ').replace('\r', ' '));
  }

  CallRecord finished(Protocol p, long nanos, Throwable t) {
    return new CallRecord(seq, collective, dtype, count, bytes, async, p, startMillis, nanos,
        t == null ? State.OK : State.FAILED, t == null ? null : describe(t));
  }
}
