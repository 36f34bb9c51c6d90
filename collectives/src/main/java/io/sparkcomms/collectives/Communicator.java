package io.sparkcomms.collectives;

/**
 * A group of {@link #size()} ranks on one node that run collectives together (torchcomms-like).
 *
 * <p>Every rank must make the same calls in the same order with matching arguments; a mismatch the
 * backend can see is reported on every rank as {@link CommMismatchException}. Every wait for a peer is
 * bounded by {@link CommOptions#timeout()}; a peer that fails or vanishes aborts the communicator and
 * the others raise {@link CommAbortedException} or {@link CommTimeoutException}.
 *
 * <p>Calls are ordered: an {@code ...Async} call runs after all earlier calls of this communicator, and
 * a synchronous call waits for earlier async ones first. Out-of-place forms take {@code in} and
 * {@code out}; in-place forms pass the same tensor twice (or use the one-tensor overloads).
 */
public interface Communicator extends AutoCloseable {
  int rank();

  int size();

  /** "host" or "gpu". */
  String backendName();

  CommOptions options();

  /** Element-wise reduction of {@code in} over all ranks into {@code out} (same dtype and count). */
  void allReduce(Tensor in, Tensor out, ReduceOp op);

  default void allReduce(Tensor inout, ReduceOp op) { allReduce(inout, inout, op); }

  Work allReduceAsync(Tensor in, Tensor out, ReduceOp op);

  /** Concatenation of every rank's {@code in} (count c) into {@code out} (count size*c), rank order. */
  void allGather(Tensor in, Tensor out);

  Work allGatherAsync(Tensor in, Tensor out);

  /** Rank r receives the reduction of slice r (count c) of every rank's {@code in} (count size*c). */
  void reduceScatter(Tensor in, Tensor out, ReduceOp op);

  Work reduceScatterAsync(Tensor in, Tensor out, ReduceOp op);

  /** Slice j (count c) of rank i's {@code in} lands in slice i of rank j's {@code out}; both count size*c. */
  void allToAll(Tensor in, Tensor out);

  Work allToAllAsync(Tensor in, Tensor out);

  /** Copies root's {@code in} into every rank's {@code out} (the root's too). Non-roots' {@code in} is ignored. */
  void broadcast(Tensor in, Tensor out, int root);

  default void broadcast(Tensor inout, int root) { broadcast(inout, inout, root); }

  Work broadcastAsync(Tensor in, Tensor out, int root);

  /** Returns once every rank has entered the barrier. */
  void barrier();

  Work barrierAsync();

  /**
   * Marks the communicator failed on every rank: pending and later calls raise
   * {@link CommAbortedException} with {@code reason}. Idempotent; never blocks on peers.
   */
  void abort(String reason);

  boolean isAborted();

  /** Statistics of the calls made so far (counts, bytes and time per algorithm). */
  CommStats stats();

  /** Releases the communicator's memory; later calls raise {@link IllegalStateException}. Idempotent. */
  @Override
  void close();
}
