package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.AbstractCommunicator;
import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.liveness.PeerWatch;
import io.sparkcomms.collectives.liveness.ProcessId;
import io.sparkcomms.collectives.plan.AllToAllVPlan;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.nativeapi.SparkCommsNative;
import io.sparkcomms.nativeapi.SparkCommsNative.sc_comm;
import java.time.Duration;
import java.util.ArrayDeque;
import org.bytedeco.javacpp.Pointer;

/**
 * The GPU backend: the native library's collectives, whose protocol (DDA one-shot variants, two-shot,
 * FP8, the vendor library) the library decides for each call ({@link GpuLaunch}). Calls are ordered
 * on one stream (the communicator's, or the caller's with {@link #useStream(long)}). Synchronous
 * calls wait for the stream; async calls return a {@link Work} on a device event ({@link EventWork}).
 * Device-side waits time out (the kernel reports it; {@code sc_comm_check} raises it here), so no
 * call hangs. Built by {@link GpuSetup}.
 *
 * <p>Host tensors work too ({@link HostStaging}: through pinned memory and device scratch owned by
 * the communicator), so code written for {@code HostTensor}s (the Spark Dataset helpers) runs
 * unchanged on GPU executors; device tensors avoid the copies.
 *
 * <p>Unlike the host backend, ranks do not exchange call descriptors (that would cost a host
 * round-trip per call): a rank with invalid arguments raises locally and its peers' kernels time out.
 *
 * <p>A peer process that exits is noticed by a {@link PeerWatch} (peers whose process is visible
 * here: same host and PID namespace): the communicator is aborted, so the ranks still waiting for it
 * raise {@link CommAbortedException} naming it within about {@link PeerWatch#PERIOD_MILLIS} instead
 * of at the timeout.
 */
public final class GpuCommunicator extends AbstractCommunicator {
  private static final int MAX_PENDING = 256;
  private static final Work COMPLETED = new Work() {
    @Override public boolean isCompleted() { return true; }
    @Override public void waitFor() {}
    @Override public boolean waitFor(Duration timeout) { return true; }
  };

  private final int device;
  private final sc_comm comm;
  private final GpuLaunch launcher;
  private final HostStaging staging;
  private final Pointer ownStream;
  private volatile Pointer stream;
  private final boolean vendor;
  private volatile boolean aborted;
  /** Async calls whose event has not been seen complete yet; bounded, drained by synchronize(). */
  private final ArrayDeque<EventWork> pending = new ArrayDeque<>();
  /** Watches the peers' processes (null: none visible from here); stopped at release. */
  private volatile PeerWatch.Watch peerWatch;
  /** Why the peer watch aborted this communicator (null: it did not). */
  private volatile String peerGone;
  /** The last asynchronous allToAllV, until its size verdict has been read. */
  private volatile EventWork lastAllToAllV;
  /** reduce, gather, scatter, allGatherV and reduceScatterV, built from the native collectives. */
  private final GpuComposed composed;

  GpuCommunicator(int rank, int size, CommOptions o, int device, sc_comm comm, Pointer stream, boolean vendor,
                  io.sparkcomms.collectives.rendezvous.PairDirectory pairs) {
    super(rank, size, o, new BackendOffer(BackendOffer.Memory.DEVICE, device, vendor, true, true), pairs);
    this.device = device;
    this.comm = comm;
    this.launcher = new GpuLaunch(comm);
    this.staging = new HostStaging(rank, size, device);
    this.ownStream = stream;
    this.stream = stream;
    this.vendor = vendor;
    this.callTimeout = o.timeout();
    this.composed = new GpuComposed(planner(), o, rank, size, device);
  }

  /** Collective over the rendezvous: every rank calls it with its own device ({@link GpuSetup}). */
  public static GpuCommunicator create(Rendezvous rv, CommOptions o, int device) {
    return GpuSetup.create(rv, o, device);
  }

  /** Starts watching the peers' processes (index = rank; null = not watched). */
  void watchPeers(ProcessId[] watched) {
    peerWatch = PeerWatch.watch(watched, "rank " + rank + " aborted its GPU communicator", this::abortForPeer);
  }

  @Override public String backendName() { return "gpu"; }
  public int device() { return device; }
  /** Whether the vendor library (NCCL / RCCL) is initialized in this communicator (for VENDOR). */
  public boolean vendorLoaded() { return vendor; }

  /**
   * A setting of the native communicator as it is in effect ({@code sc_comm_get_option}): a key of
   * the native parameter table, e.g. {@code "flat_max_bytes"}, {@code "lp_block_size"},
   * {@code "staging_bytes"}.
   */
  public long option(String key) {
    long[] v = new long[1];
    Native.check(SparkCommsNative.sc_comm_get_option(comm, key, v), "sc_comm_get_option(" + key + ")");
    return v[0];
  }

  private final java.util.concurrent.atomic.AtomicLong stagedCalls = new java.util.concurrent.atomic.AtomicLong();

  /**
   * Calls (and parts of composed calls) so far whose tensors were host memory, each copied through
   * pinned staging to the device and back: 0 for a job whose tensors never leave the GPU.
   */
  public long hostStagedCalls() { return stagedCalls.get(); }

  /** Runs later calls on the caller's stream ({@code cudaStream_t} / {@code hipStream_t}); 0 = the communicator's own. */
  public synchronized void useStream(long streamAddress) {
    stream = streamAddress == 0 ? ownStream : new AddressPointer(streamAddress);
  }

  /** The stream calls run on, as an address. */
  public long streamAddress() { return stream.address(); }

  // ---------------------------------------------------------------- the call-downs

  // Each call reads the stream once: its copies, launch and wait must all be on the same stream even
  // if useStream runs meanwhile.

  @Override protected Protocol execute(PlannedCall c) {
    Pointer s = stream;
    if (GpuComposed.composes(c.kind())) return runComposed(c, s);
    if (c.in() instanceof HostTensor) return executeStaged(c, s);
    if (c.kind() == Collective.ALL_TO_ALL_V) finishPreviousAllToAllV();
    Protocol p = launch(c, s);
    finish(c, s);
    if (c.kind() == Collective.ALL_TO_ALL_V) {
      RuntimeException e = allToAllVVerdict();
      if (e != null) throw e;
    }
    return p;
  }

  @Override protected Started enqueue(PlannedCall c) {
    Pointer s = stream;
    if (GpuComposed.composes(c.kind())) return new Started(runComposed(c, s), COMPLETED);  // synchronous: GpuComposed
    if (c.in() instanceof HostTensor) return new Started(executeStaged(c, s), COMPLETED); // host memory: synchronous
    boolean v = c.kind() == Collective.ALL_TO_ALL_V;
    if (v) finishPreviousAllToAllV();
    Protocol p = launch(c, s);
    Pointer ev = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_event_create(ev), "sc_event_create");
    int rec = SparkCommsNative.sc_event_record(ev, s);
    if (rec != SparkCommsNative.SC_OK) {
      String err = SparkCommsNative.sc_last_error();
      SparkCommsNative.sc_event_destroy(ev);
      Native.check(rec, "sc_event_record (" + err + ")");
    }
    String name = c.kind().apiName();
    // kernels run in stream order: this one's bound starts when the ones queued ahead must have ended
    long now = System.nanoTime();
    streamDeadline = Math.max(streamDeadline, now) + callTimeout.multipliedBy(2).toNanos();
    EventWork w = new EventWork(ev, name, Duration.ofNanos(streamDeadline - now), done -> completed(done, name, v));
    if (v) lastAllToAllV = w;
    synchronized (pending) {
      pending.removeIf(EventWork::poll);  // housekeeping: a failure stays with its own Work
      // The oldest leave only once complete: a Work that is not may still run its completion, which
      // reads this communicator, so release() must see it (it stays, and the list grows past the cap).
      while (pending.size() >= MAX_PENDING) {
        EventWork old = pending.peekFirst();
        old.settle();
        if (!old.poll()) break;
        pending.pollFirst();
      }
      pending.addLast(w);
    }
    return new Started(p, w);
  }

  /** A composed call ({@link GpuComposed}), synchronous; a local problem is told to the peers first. */
  private Protocol runComposed(PlannedCall c, Pointer s) {
    refuseIfBroken(c, s);
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    return composed.run(c, new GpuComposed.Calls() {
      @Override public Protocol start(PlannedCall sub) {
        return sub.in() instanceof HostTensor ? executeStaged(sub, s) : launch(sub, s);
      }
      @Override public Protocol plan(PlannedCall sub) { return launcher.plan(sub); }
      @Override public void agree(long[] mine, long[] all) { agreeRound(c, mine, all, s); }
      @Override public void finish(PlannedCall call) { GpuCommunicator.this.finish(call, s); }
      @Override public void broken(PlannedCall call, RuntimeException e) {
        if (!aborted) abort(call.kind().apiName() + " failed on rank " + rank + ": " + e);
      }
    }, s);
  }

  /** Device words of the agreement round: this rank's, then every rank's; grown, kept. */
  private DeviceBuffer agreeWords;

  /** {@code sc_agree} of {@code mine} into {@code all} (host arrays), completed when it returns. */
  private void agreeRound(PlannedCall c, long[] mine, long[] all, Pointer s) {
    long need = (long) mine.length * (size + 1);
    if (agreeWords == null || agreeWords.count() < need) {
      if (agreeWords != null) agreeWords.close();  // the previous round completed (synchronous)
      agreeWords = null;
      agreeWords = DeviceBuffer.allocate(io.sparkcomms.collectives.DataType.INT64, need, device);
    }
    DeviceTensor in = agreeWords.view(0, mine.length), out = agreeWords.view(mine.length, (long) mine.length * size);
    in.copyFrom(HostTensor.of(mine));
    String name = c.kind().apiName() + " (agreement round)";
    int st = SparkCommsNative.sc_agree(comm, in.pointer(), out.pointer(), mine.length, GpuComposed.AGREE_TAG, s);
    try {
      check(st, name);
    } catch (CommException e) {
      aborted = true;  // a launch that failed: peers may be inside the round already
      throw e;
    }
    check(SparkCommsNative.sc_stream_synchronize(s), "sc_stream_synchronize");
    check(SparkCommsNative.sc_comm_check(comm), name);
    out.copyTo(HostTensor.of(all));
  }

  /** A host-tensor call: staged through pinned memory, synchronous. */
  private Protocol executeStaged(PlannedCall c, Pointer s) {
    stagedCalls.incrementAndGet();
    if (c.kind() == Collective.ALL_TO_ALL_V) finishPreviousAllToAllV();
    Protocol[] ran = new Protocol[1];
    refuseIfBroken(c, s);
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");  // the copies come before the launch
    staging.run(c, s, new HostStaging.Device() {
      @Override public void launch(PlannedCall onDevice) { ran[0] = GpuCommunicator.this.launch(onDevice, s); }
      @Override public void finish(PlannedCall call) { GpuCommunicator.this.finish(call, s); }
      @Override public RuntimeException allToAllVVerdict() { return GpuCommunicator.this.allToAllVVerdict(); }
    });
    return ran[0];
  }

  /**
   * Raises when the communicator is aborted, or when this rank's arguments are invalid; then it first
   * tells the peers ({@link #refuse}).
   */
  private void refuseIfBroken(PlannedCall c, Pointer s) {
    if (aborted) {
      String why = peerGone;
      throw new CommAbortedException("communicator aborted on rank " + rank + (why != null ? ": " + why : ""));
    }
    if (c.problem() != null) refuse(c, s);
  }

  /**
   * This rank's arguments are invalid: its peers, which make the call, must not wait for it until
   * their timeout. {@code sc_comm_refuse} runs a barrier whose call header says "refused", so their
   * kernels fail with a mismatch at once (the communicator is unusable afterwards on every rank).
   */
  private void refuse(PlannedCall c, Pointer s) {
    SparkCommsNative.sc_set_device(device);
    SparkCommsNative.sc_comm_refuse(comm, GpuLaunch.collectiveCode(c.kind()), s);
    throw new IllegalArgumentException(c.problem());
  }

  /**
   * Plans (the native library decides the protocol) and enqueues {@code c} on the stream; returns
   * the protocol. A launch that fails marks the communicator aborted: its peers may be inside the
   * collective already.
   */
  private Protocol launch(PlannedCall c, Pointer s) {
    refuseIfBroken(c, s);
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    Protocol p = launcher.plan(c);
    int st = launcher.start(c, p, s);
    try {
      check(st, c.kind().apiName() + "(" + p + ")");
    } catch (CommException e) {
      aborted = true;
      throw e;
    }
    return p;
  }

  /** Waits for the stream; raises a device-side timeout or abort. */
  private void finish(PlannedCall c, Pointer s) {
    check(SparkCommsNative.sc_stream_synchronize(s), "sc_stream_synchronize");
    check(SparkCommsNative.sc_comm_check(comm), c.kind().apiName());
  }

  /**
   * The allToAllV size verdict the kernel recorded (host-mapped memory, read after the stream work
   * completed), as the exception to raise, or null. Every rank's kernel reached the same verdict from
   * the same size matrix, so every rank raises it at the same call. The record is one per
   * communicator, so at most one allToAllV is in flight from here ({@link #finishPreviousAllToAllV}).
   */
  private RuntimeException allToAllVVerdict() {
    long[] st = new long[5];
    Native.check(SparkCommsNative.sc_alltoallv_status(comm, st), "sc_alltoallv_status");
    AllToAllVPlan.Verdict v = AllToAllVPlan.Verdict.fromStatusWords(st, size);
    return v == null ? null : v.exception(Collective.ALL_TO_ALL_V.apiName());
  }

  /** The outcome of an async call whose event completed: a device-side failure, or its allToAllV verdict. */
  private RuntimeException completed(EventWork w, String name, boolean allToAllV) {
    try {
      check(SparkCommsNative.sc_comm_check(comm), name);
      return allToAllV ? allToAllVVerdict() : null;  // this call's verdict: the only allToAllV in flight
    } catch (RuntimeException e) {
      return e;
    } finally {
      if (lastAllToAllV == w) lastAllToAllV = null;
    }
  }

  /**
   * Waits for the previous asynchronous allToAllV (its verdict goes to its own Work, raised by that
   * Work's waitFor), so that the single status record belongs to the call about to be launched.
   */
  private void finishPreviousAllToAllV() {
    EventWork w = lastAllToAllV;
    lastAllToAllV = null;
    if (w != null) w.settle();
  }

  // ---------------------------------------------------------------- stream-ordered API

  /**
   * Stream-ordered allReduce, the form GPU code uses (as with NCCL): enqueues on this communicator's
   * stream and returns at once, with no event and no wait. Kernel errors (a peer's timeout) surface
   * at the next {@link #synchronize()} or synchronous call. {@code algo} is normalized as every
   * request is (an LP request the dtype or op cannot take falls through to full precision); AUTO
   * lets the native library decide. Returns the protocol that runs.
   */
  public Protocol allReduceOnStream(DeviceTensor in, DeviceTensor out, ReduceOp op, Algorithm algo) {
    ensureOpen();
    PlannedCall c = planner().plan(Collective.ALL_REDUCE, in, out, op, 0, algo);
    if (c.problem() != null) refuse(c, stream);
    Protocol p = launch(c, stream);
    stats().record(c.kind(), p, c.messageBytes(), 0);
    return p;
  }

  /** Enqueues a device-side busy wait (benchmarks: the host queues work behind it). */
  public void delayStream(double microseconds) {
    Native.check(SparkCommsNative.sc_stream_delay(stream, microseconds), "sc_stream_delay");
  }

  /** The timeout of the kernels launched now: the communicator's, or the running call's own. */
  private volatile Duration callTimeout;
  /** When the kernels enqueued so far must have ended (System.nanoTime), each bounded by its own timeout. */
  private long streamDeadline = System.nanoTime();

  /** Kernels take the bound at launch (sc_comm_set_timeout): calls queued before keep theirs. */
  @Override protected void useCallTimeout(Duration t) {
    Duration d = t == null ? options.timeout() : t;
    Native.check(SparkCommsNative.sc_comm_set_timeout(comm, GpuSetup.nativeSeconds(d)), "sc_comm_set_timeout");
    callTimeout = d;
  }

  /** Point-to-point transfers run on the channels' streams: this stream's earlier work finishes first. */
  @Override protected void settle() { synchronize(); }

  /** Blocks until every call issued so far finished; raises a device-side timeout or abort. */
  public void synchronize() {
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    check(SparkCommsNative.sc_stream_synchronize(stream), "sc_stream_synchronize");
    synchronized (pending) {
      pending.forEach(EventWork::poll); // all done now: releases their events; failures stay with their Work
      pending.clear();
    }
    finishPreviousAllToAllV();
    check(SparkCommsNative.sc_comm_check(comm), "collective");
  }

  /**
   * FOR FAULT-INJECTION TESTS ONLY (package-private: tests reach it through
   * {@code io.sparkcomms.collectives.gpu.GpuFaultHooks} of the integration-tests module). Overwrites with
   * {@code value} the barrier flags that rank {@code peer} reads for this rank's arrivals
   * ({@code sc_debug_corrupt_flag}: a plain copy into the peer's signal buffer, on a stream of its
   * own), as a corrupted word would; the communicator is broken on purpose. Takes no lock, so it
   * may run on another thread while a collective of this communicator is in flight; the caller
   * must keep it from running concurrently with or after {@link #close()}.
   */
  void debugCorruptFlag(int peer, long value) {
    if (isClosed()) throw new IllegalStateException("communicator closed");
    Native.check(SparkCommsNative.sc_debug_corrupt_flag(comm, peer, value), "sc_debug_corrupt_flag");
  }

  // ---------------------------------------------------------------- failure and lifecycle

  /** The peer watch's callback (its thread): aborts, so that device-side waits end now. */
  private void abortForPeer(String why) {
    peerGone = why;
    aborted = true;
    SparkCommsNative.sc_comm_abort(comm);  // release() stops the watch before it destroys comm
  }

  /** Native.check, naming the exited peer when the peer watch aborted this communicator. */
  private void check(int status, String what) {
    try {
      Native.check(status, what);
    } catch (CommException e) {
      String why = peerGone;
      if (why != null) throw new CommAbortedException(what + ": " + why + " (" + e.getMessage() + ")");
      throw e;
    }
  }

  @Override public void abort(String reason) {
    aborted = true;
    if (!isClosed()) SparkCommsNative.sc_comm_abort(comm);
    abortChildren(reason);
  }

  @Override protected GpuCommunicator createChild(Rendezvous rv) { return GpuSetup.create(rv, options, device); }

  @Override public boolean isAborted() { return aborted; }

  @Override protected void release() {
    if (peerWatch != null) peerWatch.close();  // waits for a running check: no abort after this
    SparkCommsNative.sc_set_device(device);
    SparkCommsNative.sc_stream_synchronize(ownStream);
    Pointer s = stream;
    if (s != ownStream) SparkCommsNative.sc_stream_synchronize(s);
    synchronized (pending) {
      for (EventWork w : pending) {
        // releases the events; failures are reported to whoever waits. One still pending now (its
        // stream could not be synchronized) is failed: its completion must not read a freed communicator.
        if (!w.poll()) w.abandon("the communicator (rank " + rank + ") was closed before this call completed");
      }
      pending.clear();
    }
    SparkCommsNative.sc_comm_destroy(comm);
    SparkCommsNative.sc_stream_destroy(ownStream);
    staging.close();
    composed.close();
    if (agreeWords != null) agreeWords.close();
  }
}
