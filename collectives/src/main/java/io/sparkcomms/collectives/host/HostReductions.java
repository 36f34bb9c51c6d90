package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.plan.PlannedCall;
import java.nio.ByteBuffer;

/**
 * The host backend's element-wise reduction and argument-aliasing check for composed communicators
 * (the cross-node leg of {@link io.sparkcomms.collectives.hier.HierarchicalCommunicator}): the same
 * accumulation and rank order as the shared-memory collectives.
 */
public final class HostReductions {
  private final HostReducer reducer = new HostReducer();

  /** Reduces {@code count} elements of every source (each from its position, native order) into {@code dst} (from its position). */
  public void reduce(DataType dt, ReduceOp op, ByteBuffer[] srcs, int count, ByteBuffer dst) {
    int[] offs = new int[srcs.length];
    for (int i = 0; i < srcs.length; i++) offs[i] = srcs[i].position();
    reducer.reduce(dt, op, srcs, offs, count, dst, dst.position());
  }

  /** Why the call's tensors overlap in a way the host collectives refuse, or null. */
  public static String aliasingProblem(PlannedCall plan, int rank) { return HostAliasing.problem(plan, rank); }
}
