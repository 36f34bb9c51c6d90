package io.sparkcomms.collectives;

import io.sparkcomms.collectives.observe.CallHook;
import io.sparkcomms.collectives.observe.CallRecord;
import io.sparkcomms.collectives.observe.RemovableHandle;
import java.util.List;
import java.util.function.Supplier;

/**
 * {@link Communicator#withOptions}: the same communicator (same calls, order, sequence numbers,
 * statistics and one-caller rule), each call made with {@link CallOptions}. Only the calls take the
 * options; everything else is the communicator's own. Closing the view closes nothing.
 */
final class WithOptions implements Communicator {
  private final AbstractCommunicator c;
  private final CallOptions o;

  @Override public Communicator base() { return c; }

  WithOptions(AbstractCommunicator c, CallOptions o) {
    this.c = c;
    this.o = o;
  }

  private void call(Runnable r) {
    c.callWith(o, () -> {
      r.run();
      return null;
    });
  }

  private <T> T get(Supplier<T> s) { return c.callWith(o, s); }

  @Override public int rank() { return c.rank(); }
  @Override public int size() { return c.size(); }
  @Override public String backendName() { return c.backendName(); }
  @Override public CommOptions options() { return c.options(); }

  @Override public void allReduce(Tensor in, Tensor out, ReduceOp op) { call(() -> c.allReduce(in, out, op)); }
  @Override public Work allReduceAsync(Tensor in, Tensor out, ReduceOp op) { return get(() -> c.allReduceAsync(in, out, op)); }
  @Override public void allGather(Tensor in, Tensor out) { call(() -> c.allGather(in, out)); }
  @Override public Work allGatherAsync(Tensor in, Tensor out) { return get(() -> c.allGatherAsync(in, out)); }
  @Override public void reduceScatter(Tensor in, Tensor out, ReduceOp op) { call(() -> c.reduceScatter(in, out, op)); }
  @Override public Work reduceScatterAsync(Tensor in, Tensor out, ReduceOp op) { return get(() -> c.reduceScatterAsync(in, out, op)); }
  @Override public void allToAll(Tensor in, Tensor out) { call(() -> c.allToAll(in, out)); }
  @Override public Work allToAllAsync(Tensor in, Tensor out) { return get(() -> c.allToAllAsync(in, out)); }
  @Override public void allToAllV(Tensor in, Tensor sc, Tensor out, Tensor rc) { call(() -> c.allToAllV(in, sc, out, rc)); }
  @Override public Work allToAllVAsync(Tensor in, Tensor sc, Tensor out, Tensor rc) { return get(() -> c.allToAllVAsync(in, sc, out, rc)); }
  @Override public void allToAllV(Tensor in, Tensor sc, Tensor so, Tensor out, Tensor rc, Tensor ro) {
    call(() -> c.allToAllV(in, sc, so, out, rc, ro));
  }
  @Override public Work allToAllVAsync(Tensor in, Tensor sc, Tensor so, Tensor out, Tensor rc, Tensor ro) {
    return get(() -> c.allToAllVAsync(in, sc, so, out, rc, ro));
  }
  @Override public void broadcast(Tensor in, Tensor out, int root) { call(() -> c.broadcast(in, out, root)); }
  @Override public Work broadcastAsync(Tensor in, Tensor out, int root) { return get(() -> c.broadcastAsync(in, out, root)); }
  @Override public void reduce(Tensor in, Tensor out, ReduceOp op, int root) { call(() -> c.reduce(in, out, op, root)); }
  @Override public Work reduceAsync(Tensor in, Tensor out, ReduceOp op, int root) { return get(() -> c.reduceAsync(in, out, op, root)); }
  @Override public void gather(Tensor in, Tensor out, int root) { call(() -> c.gather(in, out, root)); }
  @Override public Work gatherAsync(Tensor in, Tensor out, int root) { return get(() -> c.gatherAsync(in, out, root)); }
  @Override public void scatter(Tensor in, Tensor out, int root) { call(() -> c.scatter(in, out, root)); }
  @Override public Work scatterAsync(Tensor in, Tensor out, int root) { return get(() -> c.scatterAsync(in, out, root)); }
  @Override public void allGatherV(Tensor in, Tensor out, long[] counts) { call(() -> c.allGatherV(in, out, counts)); }
  @Override public Work allGatherVAsync(Tensor in, Tensor out, long[] counts) { return get(() -> c.allGatherVAsync(in, out, counts)); }
  @Override public void reduceScatterV(Tensor in, Tensor out, long[] counts, ReduceOp op) { call(() -> c.reduceScatterV(in, out, counts, op)); }
  @Override public Work reduceScatterVAsync(Tensor in, Tensor out, long[] counts, ReduceOp op) {
    return get(() -> c.reduceScatterVAsync(in, out, counts, op));
  }
  @Override public void send(Tensor t, int peer) { call(() -> c.send(t, peer)); }
  @Override public void recv(Tensor t, int peer) { call(() -> c.recv(t, peer)); }
  @Override public Work sendAsync(Tensor t, int peer) { return get(() -> c.sendAsync(t, peer)); }
  @Override public Work recvAsync(Tensor t, int peer) { return get(() -> c.recvAsync(t, peer)); }
  /** The batch is issued with these options (whenever {@link BatchSendRecv#issue()} is called). */
  @Override public BatchSendRecv batch() {
    c.ensureOpen();
    return new BatchSendRecv(ops -> c.callWith(o, () -> c.issueBatch(ops)));
  }
  @Override public void barrier() { call(c::barrier); }
  @Override public Work barrierAsync() { return get(c::barrierAsync); }

  /** split is one call of the parent with the parent's options (the child gets them too). */
  @Override public Communicator split(int[] ranks) { return c.split(ranks); }
  @Override public Communicator split(int color, int key) { return c.split(color, key); }
  @Override public void abort(String reason) { c.abort(reason); }
  @Override public boolean isAborted() { return c.isAborted(); }
  @Override public CommStats stats() { return c.stats(); }
  /** Closes nothing: the communicator's owner closes it. */
  @Override public void close() {}
  @Override public RemovableHandle addHook(CallHook hook) { return c.addHook(hook); }
  @Override public List<CallRecord> flightRecord() { return c.flightRecord(); }

  /** These options, then {@code more}'s where it sets them. */
  @Override public Communicator withOptions(CallOptions more) {
    CallOptions m = o;
    if (more.timeout() != null) m = m.withTimeout(more.timeout());
    if (more.algorithm() != null) m = m.withAlgorithm(more.algorithm());
    return new WithOptions(c, m);
  }
}
