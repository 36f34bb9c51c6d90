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

  /**
   * All-to-all with per-peer sizes that may live on the device (AllToAllvDynamic): rank i sends
   * {@code sendCounts[j]} elements of {@code in} to rank j, and {@code recvCounts[i]} on rank j is
   * written with that count by the collective. {@code sendCounts} and {@code recvCounts} are INT64
   * tensors of {@link #size()} elements in the memory of {@code in}/{@code out} (device tensors on the
   * GPU backend, so the counts a kernel produced are used without a copy to the host).
   *
   * <p>Packed layout: rank i's block for peer j starts at the exclusive prefix sum of its sendCounts;
   * blocks received land in {@code out} in source-rank order, packed from element 0. Counts may be 0
   * and need not be equal. When a rank would receive more than {@code out} holds, or a count is
   * negative or runs past {@code in}, no rank writes any {@code out} (recvCounts are still written) and
   * every rank raises {@link CommCapacityException} naming the receiver, sender, count and capacity;
   * the communicator stays usable. Nothing is ever written outside {@code out} and {@code recvCounts}.
   *
   * <p>In place ({@code in} and {@code out} the same memory) works on the host backend; the GPU backend
   * refuses overlapping {@code in}/{@code out} and a {@code recvCounts} that overlaps another argument
   * ({@link IllegalArgumentException}). As for every GPU collective, a rank whose arguments are refused
   * locally raises at once and its peers time out, while size problems found by the kernel (above) are
   * raised on every rank.
   */
  void allToAllV(Tensor in, Tensor sendCounts, Tensor out, Tensor recvCounts);

  Work allToAllVAsync(Tensor in, Tensor sendCounts, Tensor out, Tensor recvCounts);

  /**
   * {@link #allToAllV(Tensor, Tensor, Tensor, Tensor)} with per-peer offsets (INT64, {@link #size()}
   * elements, same memory as the counts): rank i's block for peer j is
   * {@code in[sendOffsets[j] .. sendOffsets[j] + sendCounts[j])}, and the block from peer i lands at
   * {@code out[recvOffsets[i] ..]}. The receive slot of peer i holds
   * {@code recvOffsets[i+1] - recvOffsets[i]} elements ({@code out.count() - recvOffsets[size-1]} for
   * the last), so recvOffsets must be non-decreasing and within {@code out}: the fixed per-expert
   * capacity of a mixture-of-experts dispatch. A block larger than its slot, a send block outside
   * {@code in}, or recvOffsets out of order raise {@link CommCapacityException} on every rank, with no
   * {@code out} written.
   */
  void allToAllV(Tensor in, Tensor sendCounts, Tensor sendOffsets, Tensor out, Tensor recvCounts, Tensor recvOffsets);

  Work allToAllVAsync(Tensor in, Tensor sendCounts, Tensor sendOffsets, Tensor out, Tensor recvCounts, Tensor recvOffsets);

  /** Copies root's {@code in} into every rank's {@code out} (the root's too). Non-roots' {@code in} is ignored. */
  void broadcast(Tensor in, Tensor out, int root);

  default void broadcast(Tensor inout, int root) { broadcast(inout, inout, root); }

  Work broadcastAsync(Tensor in, Tensor out, int root);

  /**
   * Element-wise reduction of every rank's {@code in} into the root's {@code out} (same dtype, at
   * least the input's count). A non-root's {@code out} is neither read nor written and may be null.
   * In place on the root: pass {@code in} twice. On the GPU backend this call and gather, scatter,
   * allGatherV and reduceScatterV are composed from the other collectives and complete before they
   * return, their {@code ...Async} forms too (the returned {@link Work} is already complete).
   */
  void reduce(Tensor in, Tensor out, ReduceOp op, int root);

  default void reduce(Tensor inout, ReduceOp op, int root) { reduce(inout, inout, op, root); }

  Work reduceAsync(Tensor in, Tensor out, ReduceOp op, int root);

  /**
   * Every rank's {@code in} (count c) into the root's {@code out} (count at least size*c), rank r's at
   * element r*c. A non-root's {@code out} is neither read nor written and may be null.
   */
  void gather(Tensor in, Tensor out, int root);

  Work gatherAsync(Tensor in, Tensor out, int root);

  /**
   * Slice r (count c) of the root's {@code in} (count at least size*c) into rank r's {@code out}
   * (count c). A non-root's {@code in} is neither read nor written and may be null.
   */
  void scatter(Tensor in, Tensor out, int root);

  Work scatterAsync(Tensor in, Tensor out, int root);

  /**
   * allGather with a count per rank: rank r's {@code in} has exactly {@code counts[r]} elements, and
   * every rank's {@code out} (at least the sum of the counts) receives the ranks' inputs back to back
   * in rank order, rank r's from element {@code counts[0] + ... + counts[r-1]}. Counts may be 0. Every
   * rank must pass the same counts: ranks that differ fail the call on every rank with
   * {@link CommMismatchException}. {@code in} and {@code out} must not overlap.
   */
  void allGatherV(Tensor in, Tensor out, long[] counts);

  Work allGatherVAsync(Tensor in, Tensor out, long[] counts);

  /**
   * reduceScatter with a count per rank: every rank's {@code in} holds at least the sum of the counts,
   * and rank r's {@code out} (at least {@code counts[r]} elements) receives the reduction over all
   * ranks of the block of {@code counts[r]} elements that starts at element
   * {@code counts[0] + ... + counts[r-1]}. Every rank must pass the same counts (as for
   * {@link #allGatherV}).
   */
  void reduceScatterV(Tensor in, Tensor out, long[] counts, ReduceOp op);

  Work reduceScatterVAsync(Tensor in, Tensor out, long[] counts, ReduceOp op);

  /**
   * A sub-communicator of the ranks listed, in that order (child rank i is parent rank
   * {@code ranks[i]}), as torchcomms' split. Collective over this communicator: every rank calls it
   * with the same list, listed or not; a rank not listed gets null. Ranks that pass different lists,
   * or a list with a rank outside 0..size-1 or listed twice, fail on every rank
   * ({@link CommMismatchException}; {@link IllegalArgumentException} on a rank whose own list is
   * invalid) before anything is created. The child has this communicator's options and backend, its
   * own memory, sequence numbers and abort; aborting this communicator aborts its children. Children
   * are closed by their owner (closing this one does not close them).
   */
  Communicator split(int[] ranks);

  /**
   * A sub-communicator of the ranks that pass the same {@code color} (NCCL's ncclCommSplit, MPI's
   * MPI_Comm_split), ordered by {@code key}, then by rank here; a negative color gets null. Collective
   * over this communicator, as {@link #split(int[])}.
   */
  Communicator split(int color, int key);

  /**
   * Sends {@code tensor} to rank {@code peer}, whose matching {@link #recv} takes the same dtype and
   * count (a difference, or both ranks sending, fails on both with {@link CommMismatchException}).
   * Only the two ranks take part. Sends and receives between two ranks are matched in the order they
   * are made; a send whose receive never comes times out ({@link CommTimeoutException}). The first
   * transfer between two ranks builds their channel (both must make it within the timeout). Blocking
   * transfers in a cycle deadlock as in MPI or NCCL (each rank waiting in its send, until the timeout):
   * use {@link #batch()} for an exchange with several peers (async transfers run one after another,
   * in call order, as every async call does, so they do not break such a cycle). A transfer that fails
   * leaves the channel between the two ranks as a failed call leaves a communicator of the backend (a
   * timeout aborts it: later transfers between them raise {@link CommAbortedException}). On the GPU backend, the transfer waits for
   * this communicator's stream first and is complete when it returns (its async form too).
   */
  void send(Tensor tensor, int peer);

  /** Receives into {@code tensor} what rank {@code peer} sends with {@link #send} (same dtype and count). */
  void recv(Tensor tensor, int peer);

  Work sendAsync(Tensor tensor, int peer);

  Work recvAsync(Tensor tensor, int peer);

  /** A new, empty set of sends and receives to issue together ({@link BatchSendRecv}). */
  BatchSendRecv batch();

  /**
   * This communicator with {@code options} for each call made through the returned view (a timeout
   * of its own, a forced algorithm: {@link CallOptions}), as torchcomms takes them per call:
   * {@code comm.withOptions(CallOptions.timeout(Duration.ofSeconds(5))).allReduce(t, ReduceOp.SUM)}.
   * The view is the same communicator (same order, numbering, statistics, one caller at a time);
   * closing it closes nothing.
   */
  Communicator withOptions(CallOptions options);

  /** The communicator itself, or for a {@link #withOptions} view the communicator it is a view of. */
  default Communicator base() { return this; }

  /** Returns once every rank has entered the barrier. */
  void barrier();

  Work barrierAsync();

  /**
   * Marks the communicator failed on every rank: pending and later calls raise
   * {@link CommAbortedException} with {@code reason}. Idempotent; never blocks on peers.
   */
  void abort(String reason);

  boolean isAborted();

  /** Statistics of the calls made so far (counts, bytes and time per {@link Protocol} that ran). */
  CommStats stats();

  /** Releases the communicator's memory; later calls raise {@link IllegalStateException}. Idempotent. */
  @Override
  void close();

  /**
   * Adds a hook that sees every later call of this communicator before and after it runs (where
   * each callback runs, sync and async: {@link io.sparkcomms.collectives.observe.CallHook}). A hook
   * that throws is logged once and ignored: the call and the peers go on. The handle's
   * {@code close()} removes the hook.
   */
  io.sparkcomms.collectives.observe.RemovableHandle addHook(io.sparkcomms.collectives.observe.CallHook hook);

  /**
   * This rank's last calls ({@link CommOptions#flightRecorderSize()}, 64 by default), oldest first,
   * as an immutable snapshot: each with its number, collective, dtype, count, bytes, protocol,
   * start, duration and outcome (ok, the exception, or in progress). When a call fails with
   * {@link CommTimeoutException}, {@link CommMismatchException} or {@link CommAbortedException}, this
   * record as text, the failing call marked, is logged at WARNING and attached to the exception as a
   * suppressed {@link io.sparkcomms.collectives.observe.FlightRecordDump}.
   */
  java.util.List<io.sparkcomms.collectives.observe.CallRecord> flightRecord();
}
