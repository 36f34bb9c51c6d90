package io.sparkcomms.collectives.algo;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.plan.CallPlanner;
import io.sparkcomms.collectives.plan.PlannedCall;

/**
 * The host backend's policy: the protocol of a planned call, from its normalized request
 * ({@link CallPlanner#normalize}), collective, message bytes, rank count, dtype, op and the options,
 * with the host defaults of {@link Thresholds}. Pure and deterministic: every rank given the same
 * arguments picks the same. (The GPU backend's policy is the native library's {@code sc_plan}.)
 *
 * <p>Rules, in order:
 * <ol>
 *   <li>barrier, broadcast, allToAllV and any call on one rank: FLAT (direct access).</li>
 *   <li>A normalized request other than AUTO runs as requested (LP, FLAT, TREE; the host has no
 *       vendor library, so the planner never lets VENDOR through).</li>
 *   <li>AUTO: LP when low precision is enabled for the collective, the message is at least
 *       {@code lpMinBytes} and the dtype and op can take it ({@link CallPlanner#lowPrecisionEligible});
 *       else allReduce runs FLAT up to {@code flatMaxBytes} and TREE above; the other collectives
 *       FLAT.</li>
 * </ol>
 */
public final class AlgorithmSelector {
  private AlgorithmSelector() {}

  /** The protocol of {@code c} on {@code ranks} ranks. */
  public static Protocol choose(PlannedCall c, int ranks, CommOptions o) {
    return choose(c.kind(), c.messageBytes(), ranks, c.dtype(), c.op(), c.request(), o);
  }

  public static Protocol choose(Collective c, long bytes, int ranks, DataType dtype, ReduceOp op, Algorithm request,
                                CommOptions o) {
    if (c == Collective.BARRIER || c == Collective.BROADCAST || c == Collective.ALL_TO_ALL_V || ranks == 1) {
      return Protocol.FLAT;
    }
    switch (request) {
      case LP: return Protocol.LP;
      case FLAT: return Protocol.FLAT;
      case TREE: return c == Collective.ALL_REDUCE ? Protocol.TREE : Protocol.FLAT;
      case VENDOR: throw new IllegalStateException("the host backend has no vendor library");
      default: break;
    }
    if (o.lowPrecisionEnabled(c) && bytes >= Thresholds.lpMinBytes(o) && CallPlanner.lowPrecisionEligible(c, dtype, op)) {
      return Protocol.LP;
    }
    if (c == Collective.ALL_REDUCE) return bytes <= Thresholds.flatMaxBytes(o) ? Protocol.FLAT : Protocol.TREE;
    return Protocol.FLAT;
  }
}
