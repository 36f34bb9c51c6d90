package io.sparkcomms.collectives;

import java.time.Duration;
import java.util.Objects;

/**
 * Options of individual calls (torchcomms' per-call timeout and hints), applied through
 * {@link Communicator#withOptions}: {@code comm.withOptions(CallOptions.timeout(Duration.ofSeconds(5)))
 * .allReduce(t, ReduceOp.SUM)}. Unset fields keep the communicator's {@link CommOptions}.
 *
 * <ul>
 *   <li>{@link #timeout(Duration)}: every wait of the call for a peer, instead of
 *       {@link CommOptions#timeout()}, shorter or longer (a point-to-point channel built by the call
 *       too). The ranks need not agree on it; a rank that gives up first aborts the communicator as
 *       any timeout does.</li>
 *   <li>{@link #algorithm(Algorithm)}: the protocol of allReduce, allGather, reduceScatter,
 *       allToAll and broadcast, as {@link CommOptions#algorithm()} forces it for all calls; ranks must
 *       agree on it (a difference fails the call on every rank). The other calls have one algorithm
 *       each and ignore it.</li>
 * </ul>
 */
public final class CallOptions {
  private static final CallOptions NONE = new CallOptions(null, null);

  private final Duration timeout;
  private final Algorithm algorithm;

  private CallOptions(Duration timeout, Algorithm algorithm) {
    this.timeout = timeout;
    this.algorithm = algorithm;
  }

  /** No option set: the communicator's. */
  public static CallOptions none() { return NONE; }

  /** Only a timeout (positive, at most 10^7 s). */
  public static CallOptions timeout(Duration timeout) { return NONE.withTimeout(timeout); }

  /** Only an algorithm. */
  public static CallOptions algorithm(Algorithm algorithm) { return NONE.withAlgorithm(algorithm); }

  public CallOptions withTimeout(Duration t) {
    Objects.requireNonNull(t, "timeout");
    if (t.isNegative() || t.isZero() || t.compareTo(Duration.ofSeconds(10_000_000)) > 0) {
      throw new IllegalArgumentException("call timeout " + t + " outside (0, 10^7 s]");
    }
    return new CallOptions(t, algorithm);
  }

  public CallOptions withAlgorithm(Algorithm a) { return new CallOptions(timeout, Objects.requireNonNull(a, "algorithm")); }

  /** The call's timeout, or null (the communicator's). */
  public Duration timeout() { return timeout; }

  /** The call's algorithm, or null (the communicator's). */
  public Algorithm algorithm() { return algorithm; }

  /** This call's timeout: its own, else {@code commTimeout}. */
  Duration timeoutOr(Duration commTimeout) { return timeout != null ? timeout : commTimeout; }

  @Override public String toString() { return "CallOptions[timeout=" + timeout + ", algorithm=" + algorithm + "]"; }
}
