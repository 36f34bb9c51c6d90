package io.sparkcomms.collectives.observe;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;

/**
 * One collective call as the hooks see it before it runs.
 *
 * @param rank         the communicator's rank
 * @param size         the communicator's rank count
 * @param backend      the communicator's backend, "host" or "gpu"
 * @param seq          the call's number in this communicator, from 1, in the order the calls were made
 *                     (every rank numbers its calls the same way as long as the ranks make the same
 *                     calls); calls refused before they start (closed communicator, a second caller
 *                     thread) take no number
 * @param collective   which collective
 * @param dtype        the element type
 * @param count        the per-rank count the ranks agree on (allReduce and broadcast the input count,
 *                     allGather the input count, reduceScatter the output count, allToAll the count per
 *                     peer, allToAllV the input count, barrier 0); 0 for a call whose arguments were
 *                     rejected before its shape was known
 * @param messageBytes the larger of the input and output bytes
 * @param async        whether the call was made with an {@code ...Async} method
 */
public record CallInfo(int rank, int size, String backend, long seq, Collective collective, DataType dtype, long count,
                       long messageBytes, boolean async) {
  /** The collective's method name, e.g. "allReduce". */
  public String name() { return collective.apiName(); }
}
