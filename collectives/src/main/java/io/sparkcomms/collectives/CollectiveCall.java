package io.sparkcomms.collectives;

/**
 * One collective as a backend receives it: the operation, its tensors, and the algorithm the selector
 * chose. {@code count} is the per-rank element count the ranks must agree on (allReduce/broadcast: the
 * tensor's count; allGather: the input count; reduceScatter: the output count; allToAll: the count per
 * peer; barrier: 0).
 */
public record CollectiveCall(Collective kind, Tensor in, Tensor out, ReduceOp op, int root,
                             DataType dtype, long count, Algorithm algorithm, long messageBytes) {
}
