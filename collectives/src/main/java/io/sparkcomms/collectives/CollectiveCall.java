package io.sparkcomms.collectives;

/**
 * One collective as a backend receives it: the operation, its tensors, and the algorithm the selector
 * chose. {@code count} is the per-rank element count the ranks must agree on (allReduce/broadcast: the
 * tensor's count; allGather: the input count; reduceScatter: the output count; allToAll: the count per
 * peer; allToAllV and barrier: 0). {@code splits} carries allToAllV's count and offset tensors (null
 * for every other collective).
 */
public record CollectiveCall(Collective kind, Tensor in, Tensor out, ReduceOp op, int root,
                             DataType dtype, long count, Algorithm algorithm, long messageBytes, Splits splits) {
  public CollectiveCall(Collective kind, Tensor in, Tensor out, ReduceOp op, int root,
                        DataType dtype, long count, Algorithm algorithm, long messageBytes) {
    this(kind, in, out, op, root, dtype, count, algorithm, messageBytes, null);
  }
}
