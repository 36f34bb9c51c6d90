package io.sparkcomms.collectives;

import io.sparkcomms.collectives.observe.CallHook;
import io.sparkcomms.collectives.observe.CallObserver;
import io.sparkcomms.collectives.observe.CallRecord;
import io.sparkcomms.collectives.observe.NanCheck;
import io.sparkcomms.collectives.observe.RemovableHandle;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.CallPlanner;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The backend-independent half of a communicator: planning ({@link CallPlanner}: argument checks,
 * request normalization, count and bytes), ordering of sync and async calls, statistics, closing.
 * Each collective calls down into the backend exactly once: {@link #execute} (or {@link #enqueue} for
 * a backend whose calls are stream-ordered), which returns the {@link Protocol} that ran; that is what
 * the statistics record. Every call is also numbered, recorded and shown to the hooks
 * ({@link CallObserver}: around {@link #execute} and {@link #enqueue}), and with
 * {@link CommOptions#nanCheck()} its input is checked at planning ({@link NanCheck}).
 */
public abstract class AbstractCommunicator implements Communicator {
  protected final int rank;
  protected final int size;
  protected final CommOptions options;
  private final CallPlanner planner;
  private final CommStats stats = new CommStats();
  private final Object callLock = new Object();
  /** The thread inside a call (run / submit), or null: one caller at a time, see {@link #enter}. */
  private final AtomicReference<Thread> caller = new AtomicReference<>();
  private volatile boolean closed;
  private ExecutorService asyncExecutor;          // created on first async call
  private CompletableFuture<Void> lastAsync = CompletableFuture.completedFuture(null);
  /**
   * When the async calls queued so far must have finished (System.nanoTime), each bounded by its own
   * timeout after the ones ahead of it: what Work.waitFor and close wait for at most (under callLock).
   */
  private long asyncDeadline = System.nanoTime();
  private final CallObserver observer;
  private final NanCheck nanCheck;
  private final PointToPoint p2p;
  /** The options of the call this thread is making through {@link #withOptions} (null: none). */
  private final ThreadLocal<CallOptions> callOptions = new ThreadLocal<>();
  /** Whether this backend carries transfers itself ({@link #transfer}) instead of pair channels. */
  private final boolean direct;
  /** The protocol of the last call that completed (what a point-to-point channel reports to its parent). */
  private volatile Protocol lastProtocol;

  /**
   * {@code pairs}: where two ranks build their point-to-point channel ({@link PointToPoint}), the
   * same on every rank (rank 0's, from the creation messages).
   */
  protected AbstractCommunicator(int rank, int size, CommOptions options, BackendOffer offer, PairDirectory pairs) {
    this(rank, size, options, offer, pairs, false);
  }

  /**
   * As above; with {@code directTransfers} send, recv and batches run through {@link #transfer}
   * (in call order, under this communicator's call lock) and {@code pairs} is not used.
   */
  protected AbstractCommunicator(int rank, int size, CommOptions options, BackendOffer offer, PairDirectory pairs, boolean directTransfers) {
    this.direct = directTransfers;
    this.rank = rank;
    this.size = size;
    this.options = Objects.requireNonNull(options, "options");
    this.planner = new CallPlanner(size, options, Objects.requireNonNull(offer, "offer"));
    this.observer = new CallObserver(rank, size, this::backendName, options.flightRecorderSize());
    this.nanCheck = options.nanCheck() ? new NanCheck(rank) : null;
    this.p2p = new PointToPoint(rank, size, options.timeout(), Objects.requireNonNull(pairs, "pairs"), this::createChild);
  }

  @Override public int rank() { return rank; }
  @Override public int size() { return size; }
  @Override public CommOptions options() { return options; }
  @Override public CommStats stats() { return stats; }

  /** The planning step of this communicator (for backend-specific entry points). */
  protected final CallPlanner planner() { return planner; }

  /**
   * Runs one call to completion and returns the protocol that ran. When {@code call.problem()} is
   * non-null this rank's arguments are invalid: the backend makes every rank fail the call where it
   * can (e.g. by telling peers before raising), then raises {@link IllegalArgumentException} with
   * that text.
   */
  protected abstract Protocol execute(PlannedCall call);

  /** A call started by {@link #enqueue}: the protocol it runs and its Work. */
  protected record Started(Protocol protocol, Work work) {
    public Started {}  // constructible by backends in other packages
  }

  /**
   * Starts the call and returns without waiting (only for a backend whose {@link BackendOffer#enqueues()}
   * is true); same contract as {@link #execute} otherwise.
   */
  protected Started enqueue(PlannedCall call) {
    throw new UnsupportedOperationException("enqueue");
  }

  // ---------------------------------------------------------------- public API

  @Override public void allReduce(Tensor in, Tensor out, ReduceOp op) { run(plan(Collective.ALL_REDUCE, in, out, op, 0)); }
  @Override public Work allReduceAsync(Tensor in, Tensor out, ReduceOp op) { return submit(plan(Collective.ALL_REDUCE, in, out, op, 0)); }
  @Override public void allGather(Tensor in, Tensor out) { run(plan(Collective.ALL_GATHER, in, out, null, 0)); }
  @Override public Work allGatherAsync(Tensor in, Tensor out) { return submit(plan(Collective.ALL_GATHER, in, out, null, 0)); }
  @Override public void reduceScatter(Tensor in, Tensor out, ReduceOp op) { run(plan(Collective.REDUCE_SCATTER, in, out, op, 0)); }
  @Override public Work reduceScatterAsync(Tensor in, Tensor out, ReduceOp op) { return submit(plan(Collective.REDUCE_SCATTER, in, out, op, 0)); }
  @Override public void allToAll(Tensor in, Tensor out) { run(plan(Collective.ALL_TO_ALL, in, out, null, 0)); }
  @Override public Work allToAllAsync(Tensor in, Tensor out) { return submit(plan(Collective.ALL_TO_ALL, in, out, null, 0)); }
  @Override public void allToAllV(Tensor in, Tensor sendCounts, Tensor out, Tensor recvCounts) {
    run(planV(in, out, new Splits(sendCounts, null, recvCounts, null), false));
  }
  @Override public Work allToAllVAsync(Tensor in, Tensor sendCounts, Tensor out, Tensor recvCounts) {
    return submit(planV(in, out, new Splits(sendCounts, null, recvCounts, null), false));
  }
  @Override public void allToAllV(Tensor in, Tensor sendCounts, Tensor sendOffsets, Tensor out, Tensor recvCounts, Tensor recvOffsets) {
    run(planV(in, out, new Splits(sendCounts, sendOffsets, recvCounts, recvOffsets), true));
  }
  @Override public Work allToAllVAsync(Tensor in, Tensor sendCounts, Tensor sendOffsets, Tensor out, Tensor recvCounts, Tensor recvOffsets) {
    return submit(planV(in, out, new Splits(sendCounts, sendOffsets, recvCounts, recvOffsets), true));
  }
  @Override public void broadcast(Tensor in, Tensor out, int root) { run(plan(Collective.BROADCAST, in, out, null, root)); }
  @Override public Work broadcastAsync(Tensor in, Tensor out, int root) { return submit(plan(Collective.BROADCAST, in, out, null, root)); }
  @Override public void barrier() { run(plan(Collective.BARRIER, null, null, null, 0)); }
  @Override public Work barrierAsync() { return submit(plan(Collective.BARRIER, null, null, null, 0)); }

  @Override public void reduce(Tensor in, Tensor out, ReduceOp op, int root) { run(planRooted(Collective.REDUCE, in, out, op, root)); }
  @Override public Work reduceAsync(Tensor in, Tensor out, ReduceOp op, int root) { return submit(planRooted(Collective.REDUCE, in, out, op, root)); }
  @Override public void gather(Tensor in, Tensor out, int root) { run(planRooted(Collective.GATHER, in, out, null, root)); }
  @Override public Work gatherAsync(Tensor in, Tensor out, int root) { return submit(planRooted(Collective.GATHER, in, out, null, root)); }
  @Override public void scatter(Tensor in, Tensor out, int root) { run(planRooted(Collective.SCATTER, in, out, null, root)); }
  @Override public Work scatterAsync(Tensor in, Tensor out, int root) { return submit(planRooted(Collective.SCATTER, in, out, null, root)); }
  @Override public void allGatherV(Tensor in, Tensor out, long[] counts) { run(planPerRank(Collective.ALL_GATHER_V, in, out, counts, null)); }
  @Override public Work allGatherVAsync(Tensor in, Tensor out, long[] counts) {
    return submit(planPerRank(Collective.ALL_GATHER_V, in, out, counts, null));
  }
  @Override public void reduceScatterV(Tensor in, Tensor out, long[] counts, ReduceOp op) {
    run(planPerRank(Collective.REDUCE_SCATTER_V, in, out, counts, op));
  }
  @Override public Work reduceScatterVAsync(Tensor in, Tensor out, long[] counts, ReduceOp op) {
    return submit(planPerRank(Collective.REDUCE_SCATTER_V, in, out, counts, op));
  }

  @Override public void send(Tensor tensor, int peer) { runP2P(new BatchSendRecv.Transfer(true, tensor, peer)); }
  @Override public void recv(Tensor tensor, int peer) { runP2P(new BatchSendRecv.Transfer(false, tensor, peer)); }
  @Override public Work sendAsync(Tensor tensor, int peer) { return submitP2P(new BatchSendRecv.Transfer(true, tensor, peer)); }
  @Override public Work recvAsync(Tensor tensor, int peer) { return submitP2P(new BatchSendRecv.Transfer(false, tensor, peer)); }
  @Override public BatchSendRecv batch() {
    ensureOpen();
    return new BatchSendRecv(this::issueBatch);
  }

  private void runP2P(BatchSendRecv.Transfer op) {
    PlannedCall p = planP2P(op);
    Duration t = callTimeout();
    // the channels take t themselves: this communicator's own bound stays as it is (on the GPU another
    // thread may be launching stream-ordered calls with it)
    runUnwrapped(p, () -> {
      refuseTransferIfAborted();
      settle();
      return direct ? transfer(List.of(op), t) : p2p.run(op, t);
    });
  }

  private Work submitP2P(BatchSendRecv.Transfer op) {
    PlannedCall p = planP2P(op);
    Duration t = callTimeout();
    return submitUnwrapped(p, () -> {
      refuseTransferIfAborted();
      settle();
      return direct ? transfer(List.of(op), t) : p2p.run(op, t);
    });
  }

  /**
   * Runs {@code ops} (one transfer, or a batch) with timeout {@code t} on a backend that carries
   * transfers itself rather than on pair channels (constructed with {@code directTransfers}); called in call order, as
   * one call of this communicator. Returns the protocol that ran.
   */
  protected Protocol transfer(List<BatchSendRecv.Transfer> ops, Duration t) {
    throw new UnsupportedOperationException("transfer");
  }

  /** Runs a batch's transfers as one call (its {@link BatchSendRecv#issue()}). */
  final Work issueBatch(List<BatchSendRecv.Transfer> ops) {
    ensureOpen();
    long count = 0, bytes = 0;
    for (BatchSendRecv.Transfer op : ops) {
      PlannedCall p = planP2P(op);
      count += p.count();
      bytes += p.messageBytes();
    }
    if (ops.isEmpty()) return Work.completed();
    PlannedCall batch = new PlannedCall(Collective.BATCH, null, null, null, -1, null, count, Algorithm.FLAT, bytes, null, null, null);
    Duration t = callTimeout();
    return submitUnwrapped(batch, () -> {
      refuseTransferIfAborted();
      settle();
      // a stream-ordered (GPU) backend runs the peers one after the other: see PointToPoint
      return direct ? transfer(ops, t) : p2p.runBatch(ops, !planner.offer().enqueues(), t);
    });
  }

  /** A transfer's call record; a peer that is no other rank of this communicator raises here (no peer is involved). */
  private PlannedCall planP2P(BatchSendRecv.Transfer op) {
    ensureOpen();
    String name = op.send() ? "send" : "recv";
    if (op.peer() < 0 || op.peer() >= size) throw new IllegalArgumentException(name + ": peer " + op.peer() + " outside 0.." + (size - 1));
    if (op.peer() == rank) throw new IllegalArgumentException(name + ": peer " + op.peer() + " is this rank (rank " + rank + ")");
    Tensor t = op.tensor();
    // a null or unusable tensor is the channel's to refuse: its broadcast makes the peer fail too
    DataType dtype = t == null ? null : t.dtype();
    long count = t == null ? 0 : t.count();
    return new PlannedCall(op.send() ? Collective.SEND : Collective.RECV, op.send() ? t : null, op.send() ? null : t, null,
        op.peer(), dtype, count, Algorithm.FLAT, dtype == null ? 0 : count * dtype.size(), null, null, null);
  }

  // ---------------------------------------------------------------- per-call options

  @Override public Communicator withOptions(CallOptions o) {
    ensureOpen();
    return new WithOptions(this, java.util.Objects.requireNonNull(o, "options"));
  }

  /** Runs {@code call} (one call of this communicator, made by this thread) with the options {@code o}. */
  final <T> T callWith(CallOptions o, java.util.function.Supplier<T> call) {
    CallOptions before = callOptions.get();
    callOptions.set(o);
    try {
      return call.get();
    } finally {
      callOptions.set(before);
    }
  }

  /** The timeout of the call this thread is making: its own, else the communicator's. */
  private Duration callTimeout() {
    CallOptions co = callOptions.get();
    return co == null ? options.timeout() : co.timeoutOr(options.timeout());
  }

  /**
   * {@code body} with the call's own timeout (if it has one) in force while it runs, on whichever
   * thread runs it (the caller's, or the async thread: calls run one at a time, so the bound is
   * the running call's).
   */
  private java.util.function.Supplier<Protocol> withCallTimeout(java.util.function.Supplier<Protocol> body) {
    CallOptions co = callOptions.get();
    Duration t = co == null ? null : co.timeout();
    if (t == null) return body;
    return () -> {
      useCallTimeout(t);
      try {
        return body.get();
      } finally {
        useCallTimeout(null);
      }
    };
  }

  /**
   * Bounds the waits of the backend's calls from now on by {@code t}, or by the communicator's
   * timeout again (null). Called around one call, under the call order (never two at once).
   */
  protected abstract void useCallTimeout(Duration t);

  /**
   * Makes this communicator's earlier work visible to another communicator's calls (the point-to-point
   * channels): the GPU backend waits for its stream. Runs in the call, before the transfer.
   */
  protected void settle() {}

  /** A transfer of a communicator that a peer (or this rank) aborted raises, as its collectives do. */
  private void refuseTransferIfAborted() {
    p2p.refuseIfAborted();  // this rank's own abort, with its reason
    if (isAborted()) throw new CommAbortedException("rank " + rank + ": communicator aborted: " + abortReason());
  }

  /** Why the communicator aborted, as far as this rank knows (for messages). */
  protected String abortReason() { return "a rank aborted it, or a call failed"; }

  /** The protocol of the last call that completed on this communicator, or null. */
  final Protocol lastProtocol() { return lastProtocol; }

  private PlannedCall planRooted(Collective kind, Tensor in, Tensor out, ReduceOp op, int root) {
    ensureOpen();
    return checked(planner.planRooted(kind, in, out, op, root, rank));
  }

  private PlannedCall planPerRank(Collective kind, Tensor in, Tensor out, long[] counts, ReduceOp op) {
    ensureOpen();
    return checked(planner.planPerRank(kind, in, out, counts, op, rank));
  }

  private PlannedCall plan(Collective kind, Tensor in, Tensor out, ReduceOp op, int root) {
    ensureOpen();
    CallOptions co = callOptions.get();
    Algorithm requested = co != null && co.algorithm() != null ? co.algorithm() : options.algorithm();
    return checked(planner.plan(kind, in, out, op, root, requested));
  }

  private PlannedCall planV(Tensor in, Tensor out, Splits sp, boolean offsetsForm) {
    ensureOpen();
    return planner.planAllToAllV(in, out, sp, offsetsForm);
  }

  /** Raises {@link IllegalStateException} once the communicator is closed. */
  protected final void ensureOpen() {
    if (closed) throw new IllegalStateException("communicator (rank " + rank + ") is closed");
  }

  // ---------------------------------------------------------------- sub-communicators

  /** Children from split, for abort; closed ones are dropped at the next split. */
  private final java.util.List<AbstractCommunicator> children = new java.util.concurrent.CopyOnWriteArrayList<>();

  @Override public final Communicator split(int[] ranks) { return split(s -> s.byList(ranks)); }

  @Override public final Communicator split(int color, int key) { return split(s -> s.byColor(color, key)); }

  /** Runs a split as one call of this communicator (one caller at a time, after earlier async calls). */
  private Communicator split(java.util.function.Function<CommSplit, AbstractCommunicator> how) {
    ensureOpen();
    PlannedCall marker = planner.plan(Collective.BARRIER, null, null, null, 0);
    enter(marker);
    try {
      synchronized (callLock) {
        drainAsync();
        ensureOpen();
        AbstractCommunicator child = how.apply(new CommSplit(rank, size, this::allGatherWords, this::createChild));
        children.removeIf(AbstractCommunicator::isClosed);
        if (child != null) children.add(child);
        return child;
      }
    } finally {
      caller.set(null);
    }
  }

  /** Every rank's {@code mine} (same length on every rank), by one allGather of this communicator; under the call lock. */
  private long[] allGatherWords(long[] mine) {
    long[] all = new long[mine.length * size];
    PlannedCall p = planner.plan(Collective.ALL_GATHER, HostTensor.of(mine), HostTensor.of(all), null, 0);
    timed(p, observer.begin(p, false), () -> execute(p));
    return all;
  }

  /**
   * A communicator of this backend over {@code rv} with these options (collective over the ranks of
   * {@code rv}): the child of a split.
   */
  protected abstract AbstractCommunicator createChild(io.sparkcomms.collectives.rendezvous.Rendezvous rv);

  /** Aborts every child with {@code reason} (a backend's {@link #abort} calls it). */
  protected final void abortChildren(String reason) {
    p2p.abort("parent communicator (rank " + rank + ") aborted: " + reason);
    for (AbstractCommunicator c : children) {
      try {
        c.abort("parent communicator (rank " + rank + ") aborted: " + reason);
      } catch (RuntimeException e) {
        // a child that cannot be aborted (closed meanwhile) has nothing left to stop
      }
    }
  }

  // ---------------------------------------------------------------- execution and ordering

  private void run(PlannedCall p) { run(p, () -> execute(p)); }

  private void run(PlannedCall p, java.util.function.Supplier<Protocol> body) { runUnwrapped(p, withCallTimeout(body)); }

  /** Runs {@code withTimeout} as the call (it applies the call's own timeout itself, if it needs one). */
  private void runUnwrapped(PlannedCall p, java.util.function.Supplier<Protocol> withTimeout) {
    enter(p);
    try {
      synchronized (callLock) {
        drainAsync();
        timed(p, observer.begin(p, false), withTimeout);
      }
    } finally {
      caller.set(null);
    }
  }

  /**
   * One caller at a time. Every rank must make the same calls in the same order; two threads that
   * call one communicator at once run in an order that differs from rank to rank, which pairs one
   * thread's call here with the other thread's call on a peer. So a second thread that calls while a
   * call is in progress fails at once instead of waiting its turn. Calls from different threads one
   * after another are fine (the caller orders them).
   */
  private void enter(PlannedCall p) {
    Thread me = Thread.currentThread();
    Thread other = caller.compareAndExchange(null, me);
    if (other != null) {
      throw new IllegalStateException("rank " + rank + ": " + p.kind() + " called from thread \"" + me.getName()
          + "\" while thread \"" + other.getName() + "\" is in a call of this communicator: a communicator takes one"
          + " caller at a time (the ranks would pair different threads' calls); order the calls, or give each thread"
          + " its own communicator");
    }
  }

  private void timed(PlannedCall p, CallObserver.Call call, java.util.function.Supplier<Protocol> body) {
    Protocol ran = null;
    Throwable failed = null;
    try {
      ensureOpen();
      long t0 = System.nanoTime();
      ran = body.get();
      lastProtocol = ran;
      if (ran != null) stats.record(p.kind(), ran, p.messageBytes(), System.nanoTime() - t0);
    } catch (RuntimeException | Error e) {
      failed = e;
      throw e;
    } finally {
      call.end(ran, failed);
    }
  }

  private Work submit(PlannedCall p) { return submit(p, () -> execute(p)); }

  /** {@code body} runs the call: {@link #execute} for a collective, the channels for a transfer (never enqueued). */
  private Work submit(PlannedCall p, java.util.function.Supplier<Protocol> body) { return submitUnwrapped(p, withCallTimeout(body)); }

  /** Submits {@code withTimeout} as the call (it applies the call's own timeout itself, if it needs one). */
  private Work submitUnwrapped(PlannedCall p, java.util.function.Supplier<Protocol> withTimeout) {
    enter(p);
    try {
      return submitLocked(p, withTimeout, callTimeout());
    } finally {
      caller.set(null);
    }
  }

  private Work submitLocked(PlannedCall p, java.util.function.Supplier<Protocol> body, Duration timeout) {
    synchronized (callLock) {
      if (planner.offer().enqueues() && !p.kind().isPointToPoint()) {
        ensureOpen();
        drainAsync();
        CallObserver.Call call = observer.begin(p, true);
        Started s;
        try {
          Duration t = callOptions.get() != null ? callOptions.get().timeout() : null;
          if (t != null) useCallTimeout(t);  // kernels take it at launch
          try {
            s = enqueue(p);
          } finally {
            if (t != null) useCallTimeout(null);
          }
        } catch (RuntimeException | Error e) {
          call.end(null, e);
          throw e;
        }
        stats.record(p.kind(), s.protocol(), p.messageBytes(), 0);  // enqueued: its time is the device's
        return call.observe(s.work(), s.protocol());
      }
      if (asyncExecutor == null) {
        asyncExecutor = Executors.newSingleThreadExecutor(r -> {
          Thread t = new Thread(r, "sparkcomms-async-rank-" + rank);
          t.setDaemon(true);
          return t;
        });
      }
      CallObserver.Call call = observer.begin(p, true);
      CompletableFuture<Void> f;
      try {
        f = CompletableFuture.runAsync(() -> timed(p, call, body), asyncExecutor);
      } catch (RuntimeException e) {
        call.end(null, e);
        throw e;
      }
      lastAsync = f;
      // this call may wait behind the ones ahead of it: its bound starts when they must have ended
      asyncDeadline = Math.max(asyncDeadline, System.nanoTime()) + timeout.multipliedBy(4).plusSeconds(10).toNanos();
      return new FutureWork(f, asyncDeadline);
    }
  }

  /** Waits for earlier async calls; their failures were reported through their Work. */
  private void drainAsync() {
    try {
      lastAsync.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new CommException("interrupted while waiting for earlier async collectives", e);
    } catch (ExecutionException e) {
      // reported by that call's Work; the backend rejects this call too if the communicator aborted
    }
  }

  protected boolean isClosed() { return closed; }

  /**
   * Closes the communicator: no new call starts, the async thread finishes what it runs, then
   * {@link #release()} frees the backend's memory while no call can be using it. Idempotent.
   */
  @Override public final void close() {
    synchronized (callLock) {
      if (closed) return;
      closed = true;
      if (asyncExecutor != null) {
        asyncExecutor.shutdown();
        try {
          long wait = Math.max(asyncDeadline - System.nanoTime(), options.timeout().multipliedBy(4).plusSeconds(10).toNanos());
          if (!asyncExecutor.awaitTermination(wait, TimeUnit.NANOSECONDS)) {
            // A call is still running: abort it and leave the memory to the garbage collector rather
            // than free it under the running call.
            abort("closed while a collective was still running");
            return;
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          abort("interrupted while closing");
          return;
        }
      }
      p2p.close();
      release();
    }
  }

  /** Frees the backend's memory. Called once, under the call lock, after the last call finished. */
  protected abstract void release();

  // ---------------------------------------------------------------- hooks, flight record, NaN check

  @Override public RemovableHandle addHook(CallHook hook) { return observer.addHook(hook); }

  @Override public List<CallRecord> flightRecord() { return observer.flightRecord(); }

  /** {@code p} after the NaN check when {@link CommOptions#nanCheck()} is on: a NaN becomes this rank's problem. */
  private PlannedCall checked(PlannedCall p) { return nanCheck == null ? p : nanCheck.check(p); }

  /** {@link Work} over a future. */
  private static final class FutureWork implements Work {
    private final CompletableFuture<Void> f;
    /** System.nanoTime by which the call must have ended: every wait inside it, and in the calls queued ahead of it, is bounded. */
    private final long deadline;

    FutureWork(CompletableFuture<Void> f, long deadline) {
      this.f = f;
      this.deadline = deadline;
    }

    @Override public boolean isCompleted() { return f.isDone(); }

    @Override public void waitFor() {
      Duration left = Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
      if (!waitFor(left)) {
        throw new CommTimeoutException("async collective did not finish by its deadline (its timeout and the timeouts of the calls queued"
            + " ahead of it, each four times plus 10 s)");
      }
    }

    @Override public boolean waitFor(Duration timeout) {
      try {
        f.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        return true;
      } catch (TimeoutException e) {
        return false;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new CommException("interrupted while waiting for a collective", e);
      } catch (ExecutionException e) {
        Throwable c = e.getCause();
        if (c instanceof RuntimeException re) {
          // rethrow with this thread's stack as context
          re.addSuppressed(new Exception("rethrown by Work.waitFor"));
          throw re;
        }
        throw new CommException("collective failed: " + c, c);
      }
    }
  }
}
