package io.sparkcomms.collectives.plan;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;

/**
 * One collective as a backend receives it, after the shared checks ({@link CallPlanner}).
 *
 * @param count        the per-rank element count the ranks must agree on, which is also the count
 *                     argument of the C ABI's entry point: allReduce / broadcast the input count;
 *                     allGather the input count; reduceScatter the output count; allToAll the count per
 *                     peer; reduce and gather the input count; scatter the output count; allGatherV and
 *                     reduceScatterV the sum of the per-rank counts; allToAllV and barrier 0
 * @param request      the normalized {@link Algorithm} request (never a value this call cannot take)
 * @param messageBytes the larger of the input and output bytes (statistics)
 * @param splits       allToAllV's count and offset tensors; null for every other collective
 * @param counts       allGatherV's and reduceScatterV's per-rank counts; null for every other collective
 * @param problem      non-null when this rank's arguments are invalid: the backend makes every rank
 *                     fail the call where it can (the host backend tells its peers), then raises
 *                     {@link IllegalArgumentException} with this text; the other fields may then be
 *                     placeholders
 */
public record PlannedCall(Collective kind, Tensor in, Tensor out, ReduceOp op, int root, DataType dtype, long count,
                          Algorithm request, long messageBytes, Splits splits, PerRankCounts counts, String problem) {
  /** The same call on other tensors (a backend staging host tensors through device memory). */
  public PlannedCall on(Tensor in, Tensor out, Splits splits) {
    return new PlannedCall(kind, in, out, op, root, dtype, count, request, messageBytes, splits, counts, problem);
  }

  /** The same call with a local argument problem: its tensors are then unused, and every rank fails the call. */
  public PlannedCall withProblem(String why) {
    return new PlannedCall(kind, in, out, op, root, dtype, count, request, messageBytes, splits, counts, why);
  }
}
