package io.sparkcomms.collectives;

import io.sparkcomms.collectives.algo.AlgorithmSelector;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The backend-independent half of a communicator: argument checks, algorithm selection, ordering of
 * sync and async calls, statistics. A backend implements {@link #execute(CollectiveCall, String)}.
 */
public abstract class AbstractCommunicator implements Communicator {
  protected final int rank;
  protected final int size;
  protected final CommOptions options;
  private final CommStats stats = new CommStats();
  private final Object callLock = new Object();
  private volatile boolean closed;
  private ExecutorService asyncExecutor;          // created on first async call
  private CompletableFuture<Void> lastAsync = CompletableFuture.completedFuture(null);

  protected AbstractCommunicator(int rank, int size, CommOptions options) {
    this.rank = rank;
    this.size = size;
    this.options = Objects.requireNonNull(options, "options");
  }

  @Override public int rank() { return rank; }
  @Override public int size() { return size; }
  @Override public CommOptions options() { return options; }
  @Override public CommStats stats() { return stats; }

  /** Whether {@link Algorithm#VENDOR} can run on this communicator. */
  protected boolean vendorAvailable() { return false; }

  /** Whether this is a GPU backend (selects the GPU threshold defaults). */
  protected boolean isGpu() { return false; }

  /** Whether this backend has the FP8 (LP) algorithms; without them LP requests fall through. */
  protected boolean lowPrecisionAvailable() { return true; }

  /**
   * Backends whose calls are naturally asynchronous (GPU streams) return true and implement
   * {@link #enqueue}: async calls then need no helper thread.
   */
  protected boolean enqueues() { return false; }

  /** Starts the call and returns its Work without waiting (only when {@link #enqueues()}). */
  protected Work enqueue(CollectiveCall call, String localProblem) {
    throw new UnsupportedOperationException("enqueue");
  }

  /**
   * Runs one collective. {@code localProblem} is non-null when this rank's arguments are invalid: the
   * backend should make every rank fail the call (e.g. by telling peers before raising), then raise
   * {@link IllegalArgumentException} here with that text.
   */
  protected abstract void execute(CollectiveCall call, String localProblem);

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

  // ---------------------------------------------------------------- planning

  /** A call plus the local problem with its arguments, if any. */
  private record Planned(CollectiveCall call, String problem) {}

  private Planned plan(Collective kind, Tensor in, Tensor out, ReduceOp op, int root) {
    if (closed) throw new IllegalStateException("communicator (rank " + rank + ") is closed");
    String problem = check(kind, in, out, op, root);
    DataType dtype = in != null ? in.dtype() : out != null ? out.dtype() : DataType.FLOAT32;
    long count = 0;
    long bytes = 0;
    Algorithm algo = Algorithm.FLAT;
    if (problem == null && kind != Collective.BARRIER) {
      count = switch (kind) {
        case ALL_REDUCE, BROADCAST, ALL_GATHER -> in.count();
        case REDUCE_SCATTER -> out.count();
        case ALL_TO_ALL -> in.count() / size;
        default -> 0;
      };
      bytes = Math.max(in.bytes(), out.bytes());
      try {
        algo = AlgorithmSelector.choose(kind, bytes, size, dtype, op, options,
            new AlgorithmSelector.Backend(isGpu(), vendorAvailable(), lowPrecisionAvailable()));
      } catch (IllegalArgumentException e) {
        problem = e.getMessage();
      }
    }
    return new Planned(new CollectiveCall(kind, in, out, op, root, dtype, count, algo, bytes), problem);
  }

  /**
   * Plans an allToAllV. Only the shapes are checked here: the count and offset values may live on the
   * device, so the backend checks them (on every rank, before any data moves).
   */
  private Planned planV(Tensor in, Tensor out, Splits sp, boolean offsetsForm) {
    if (closed) throw new IllegalStateException("communicator (rank " + rank + ") is closed");
    String problem = checkV(in, out, sp, offsetsForm);
    DataType dtype = in != null ? in.dtype() : out != null ? out.dtype() : DataType.FLOAT32;
    long bytes = problem == null ? Math.max(in.bytes(), out.bytes()) : 0;
    return new Planned(new CollectiveCall(Collective.ALL_TO_ALL_V, in, out, null, 0, dtype, 0, Algorithm.FLAT, bytes, sp), problem);
  }

  private String checkV(Tensor in, Tensor out, Splits sp, boolean offsetsForm) {
    String name = "allToAllV";
    // The offsets select the slot layout: in the six-argument form both must be given (a null would
    // silently mean "packed"); reported like any invalid argument, so every rank raises.
    if (offsetsForm && (sp.sendOffsets() == null || sp.recvOffsets() == null)) {
      return name + ": " + (sp.sendOffsets() == null ? "sendOffsets" : "recvOffsets")
          + " is null (use the four-argument form for the packed layout)";
    }
    if (in == null || out == null) return name + ": " + (in == null ? "input" : "output") + " tensor is null";
    if (in.dtype() != out.dtype()) return name + ": input dtype " + in.dtype() + " differs from output dtype " + out.dtype();
    String[] names = {"sendCounts", "sendOffsets", "recvCounts", "recvOffsets"};
    Tensor[] t = {sp.sendCounts(), sp.sendOffsets(), sp.recvCounts(), sp.recvOffsets()};
    for (int i = 0; i < t.length; i++) {
      if (t[i] == null) {
        if (i == 1 || i == 3) continue;  // packed layout
        return name + ": " + names[i] + " is null";
      }
      if (t[i].dtype() != DataType.INT64) return name + ": " + names[i] + " must be INT64, got " + t[i].dtype();
      if (t[i].count() != size) return name + ": " + names[i] + " has " + t[i].count() + " elements, needs one per rank (" + size + ")";
      if (t[i].isDevice() != in.isDevice()) {
        return name + ": " + names[i] + " must be in the same memory as the data (" + (in.isDevice() ? "device" : "host") + ")";
      }
    }
    if (out instanceof HostTensor h && !h.isWritable()) return name + ": the output buffer is read-only";
    if (sp.recvCounts() instanceof HostTensor h && !h.isWritable()) return name + ": recvCounts is read-only";
    String p = checkTensors(Collective.ALL_TO_ALL_V, in, out);
    if (p == null) p = checkTensors(Collective.ALL_TO_ALL_V, sp.sendCounts(), sp.recvCounts());
    if (p == null && sp.hasOffsets()) p = checkTensors(Collective.ALL_TO_ALL_V, sp.sendOffsets(), sp.recvOffsets());
    return p;
  }

  /** Local argument checks; returns a message or null. */
  private String check(Collective kind, Tensor in, Tensor out, ReduceOp op, int root) {
    if (kind == Collective.BARRIER) return null;
    String name = kind.apiName();
    if (in == null || out == null) return name + ": " + (in == null ? "input" : "output") + " tensor is null";
    if (in.dtype() != out.dtype()) return name + ": input dtype " + in.dtype() + " differs from output dtype " + out.dtype();
    if (kind == Collective.ALL_REDUCE || kind == Collective.REDUCE_SCATTER) {
      if (op == null) return name + ": reduce op is null";
      if (!op.supports(in.dtype())) return name + ": " + op + " is not defined for " + in.dtype();
    }
    long n = size;
    switch (kind) {
      case ALL_REDUCE:
      case BROADCAST:
        if (out.count() < in.count()) return name + ": output holds " + out.count() + " elements, input has " + in.count();
        if (kind == Collective.BROADCAST && (root < 0 || root >= size)) return name + ": root " + root + " outside 0.." + (size - 1);
        break;
      case ALL_GATHER:
        if (out.count() < n * in.count()) return name + ": output holds " + out.count() + " elements, needs size*input = " + n * in.count();
        break;
      case REDUCE_SCATTER:
        if (in.count() < n * out.count()) return name + ": input holds " + in.count() + " elements, needs size*output = " + n * out.count();
        break;
      case ALL_TO_ALL:
        if (in.count() % n != 0) return name + ": input count " + in.count() + " is not a multiple of size " + n;
        if (out.count() < in.count()) return name + ": output holds " + out.count() + " elements, input has " + in.count();
        break;
      default:
        break;
    }
    if (out instanceof HostTensor h && !h.isWritable()) return name + ": the output buffer is read-only";
    return checkTensors(kind, in, out);
  }

  /** Backend-specific tensor checks (host vs device memory); returns a message or null. */
  protected String checkTensors(Collective kind, Tensor in, Tensor out) { return null; }

  // ---------------------------------------------------------------- execution and ordering

  private void run(Planned p) {
    synchronized (callLock) {
      drainAsync();
      timed(p);
    }
  }

  private void timed(Planned p) {
    if (closed) throw new IllegalStateException("communicator (rank " + rank + ") is closed");
    long t0 = System.nanoTime();
    execute(p.call(), p.problem());
    stats.record(p.call().algorithm(), p.call().messageBytes(), System.nanoTime() - t0);
  }

  private Work submit(Planned p) {
    synchronized (callLock) {
      if (enqueues()) {
        if (closed) throw new IllegalStateException("communicator (rank " + rank + ") is closed");
        drainAsync();
        stats.record(p.call().algorithm(), p.call().messageBytes(), 0);
        return enqueue(p.call(), p.problem());
      }
      if (asyncExecutor == null) {
        asyncExecutor = Executors.newSingleThreadExecutor(r -> {
          Thread t = new Thread(r, "sparkcomms-async-rank-" + rank);
          t.setDaemon(true);
          return t;
        });
      }
      CompletableFuture<Void> f = CompletableFuture.runAsync(() -> timed(p), asyncExecutor);
      lastAsync = f;
      return new FutureWork(f, options.timeout());
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
          if (!asyncExecutor.awaitTermination(options.timeout().toMillis() * 4 + 10_000, TimeUnit.MILLISECONDS)) {
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
      release();
    }
  }

  /** Frees the backend's memory. Called once, under the call lock, after the last call finished. */
  protected abstract void release();

  /** {@link Work} over a future. */
  private static final class FutureWork implements Work {
    private final CompletableFuture<Void> f;
    private final Duration bound;

    FutureWork(CompletableFuture<Void> f, Duration commTimeout) {
      this.f = f;
      this.bound = commTimeout;
    }

    @Override public boolean isCompleted() { return f.isDone(); }

    @Override public void waitFor() {
      // Every wait inside the backend is bounded by the timeout; allow for queued calls ahead of this one.
      if (!waitFor(bound.multipliedBy(4).plusSeconds(10))) {
        throw new CommTimeoutException("async collective did not finish within " + bound.multipliedBy(4).plusSeconds(10));
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
