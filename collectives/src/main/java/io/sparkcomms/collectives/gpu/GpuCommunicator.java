package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.AbstractCommunicator;
import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CollectiveCall;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.liveness.PeerWatch;
import io.sparkcomms.collectives.liveness.ProcessId;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import io.sparkcomms.nativeapi.SparkCommsNative.sc_comm;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * The GPU backend: DDA kernels through the native library, the vendor library (NCCL / RCCL) above
 * the DDA range. Calls are ordered on one stream (the communicator's, or the caller's with
 * {@link #useStream(long)}). Synchronous calls wait for the stream; async calls return a {@link Work}
 * on a device event. Device-side waits time out (the kernel reports it; {@code sc_comm_check}
 * raises it here), so no call hangs.
 *
 * <p>Host tensors work too: they are staged through device scratch buffers owned by the communicator
 * (copy in, collective, copy out), so code written for {@code HostTensor}s (the Spark Dataset
 * helpers) runs unchanged on GPU executors; device tensors avoid the copies.
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
  private final int device;
  private final sc_comm comm;
  private final Pointer ownStream;
  private Pointer stream;
  private final boolean vendor;
  /** Whether the native library took the LP options (it has the FP8 kernels for this block size). */
  private final boolean lowPrecision;
  private volatile boolean aborted;
  /** Async calls whose event has not been seen complete yet; bounded, drained by synchronize(). */
  private final java.util.ArrayDeque<EventWork> pending = new java.util.ArrayDeque<>();
  private static final int MAX_PENDING = 256;
  /** Watches the peers' processes (null: none visible from here); stopped at release. */
  private volatile PeerWatch.Watch peerWatch;
  /** Why the peer watch aborted this communicator (null: it did not). */
  private volatile String peerGone;
  /** Device scratch for host-tensor calls, grown on demand, freed at close. */
  private DeviceTensor scratchIn, scratchOut, scratchSplits;

  private GpuCommunicator(int rank, int size, CommOptions o, int device, sc_comm comm, Pointer stream, boolean vendor,
      boolean lowPrecision) {
    super(rank, size, o);
    this.lowPrecision = lowPrecision;
    this.device = device;
    this.comm = comm;
    this.ownStream = stream;
    this.stream = stream;
    this.vendor = vendor;
  }

  /** Collective over the rendezvous: every rank calls it with its own device. */
  public static GpuCommunicator create(Rendezvous rv, CommOptions o, int device) {
    GpuLibrary.require();
    int n = rv.size(), r = rv.rank();
    Duration t = o.timeout();
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device(" + device + ")");
    sc_comm comm = new sc_comm();
    Native.check(SparkCommsNative.sc_comm_create(r, n, device, o.stagingBytes(true), t.toMillis() / 1000.0, comm), "sc_comm_create");
    Pointer stream = null;
    try {
      // LP: the Java selector decides (lp_auto 0); block size and format from the options (agreed
      // across ranks by Comms.create). Set before the export: connect compares the ranks' kernel
      // settings, and these replace whatever each rank's environment said. A library without the FP8
      // kernels, or a block size they cannot take, refuses: LP then falls through.
      boolean lp = n > 1
          && SparkCommsNative.sc_comm_set_option(comm, "lp_auto", 0) == SparkCommsNative.SC_OK
          && SparkCommsNative.sc_comm_set_option(comm, "lp_block_size", o.lpBlockSize()) == SparkCommsNative.SC_OK
          && SparkCommsNative.sc_comm_set_option(comm, "lp_oneshot_max_ranks", o.lpOneShotMaxRanks()) == SparkCommsNative.SC_OK
          && (o.fp8Format() == null
              || SparkCommsNative.sc_comm_set_option(comm, "fp8_format", o.fp8Format().ordinal()) == SparkCommsNative.SC_OK);
      int blobLen = (int) SparkCommsNative.sc_comm_export_size();
      BytePointer mine = new BytePointer(blobLen);
      Native.check(SparkCommsNative.sc_comm_export(comm, mine, blobLen), "sc_comm_export");
      byte[] b = new byte[blobLen];
      mine.get(b);
      byte[][] all = rv.allGather(b, t);
      BytePointer blobs = new BytePointer((long) blobLen * n);
      for (int p = 0; p < n; p++) blobs.position((long) p * blobLen).put(all[p]);
      blobs.position(0);
      String err = statusOf(SparkCommsNative.sc_comm_connect(comm, blobs, blobLen), "sc_comm_connect");
      agree(rv, err, t, "connect to peers' GPU memory");
      boolean vendor = false;
      if (o.vendor() && n > 1 && SparkCommsNative.sc_vendor_available() == 1) {
        int idLen = SparkCommsNative.sc_vendor_unique_id_size();
        byte[] id = new byte[idLen];
        if (r == 0) {
          BytePointer idp = new BytePointer(idLen);
          Native.check(SparkCommsNative.sc_vendor_unique_id(idp, idLen), "sc_vendor_unique_id");
          idp.get(id);
        }
        byte[] root = rv.allGather(id, t)[0];
        err = statusOf(SparkCommsNative.sc_vendor_comm_init(comm, new BytePointer(root)), "sc_vendor_comm_init");
        agree(rv, err, t, "initialize the vendor communicator");
        vendor = true;
      }
      // every rank's process, for the peer watch (one more round; peers not visible here are not watched)
      ProcessId[] peers = n > 1 ? PeerWatch.watchable(rv.allGather(ProcessId.current().encode(), t), r) : new ProcessId[0];
      stream = new Pointer((Pointer) null);
      Native.check(SparkCommsNative.sc_stream_create(stream), "sc_stream_create");
      GpuCommunicator g = new GpuCommunicator(r, n, o, device, comm, stream, vendor, lp);
      g.peerWatch = PeerWatch.watch(peers, "rank " + r + " aborted its GPU communicator", g::abortForPeer);
      return g;
    } catch (RuntimeException e) {
      SparkCommsNative.sc_comm_abort(comm);
      SparkCommsNative.sc_comm_destroy(comm);
      throw e;
    }
  }

  private static String statusOf(int status, String what) {
    return status == SparkCommsNative.SC_OK ? null : what + ": " + SparkCommsNative.sc_last_error();
  }

  /** All ranks learn whether every rank succeeded a setup step, and all raise if one did not. */
  private static void agree(Rendezvous rv, String err, Duration t, String step) {
    byte[][] all = rv.allGather((err == null ? "" : err).getBytes(StandardCharsets.UTF_8), t);
    for (int p = 0; p < all.length; p++) {
      if (all[p].length > 0) throw new CommException("rank " + p + " could not " + step + ": " + new String(all[p], StandardCharsets.UTF_8));
    }
  }

  @Override public String backendName() { return "gpu"; }
  public int device() { return device; }

  /** Runs later calls on the caller's stream ({@code cudaStream_t} / {@code hipStream_t}); 0 = the communicator's own. */
  public synchronized void useStream(long streamAddress) {
    stream = streamAddress == 0 ? ownStream : new DevicePointer(streamAddress);
  }

  /** The stream calls run on, as an address. */
  public long streamAddress() { return stream.address(); }

  @Override protected boolean vendorAvailable() { return vendor; }
  @Override protected boolean isGpu() { return true; }
  @Override protected boolean lowPrecisionAvailable() { return lowPrecision; }
  @Override protected boolean enqueues() { return true; }

  @Override protected String checkTensors(Collective kind, Tensor in, Tensor out) {
    if (in instanceof HostTensor && out instanceof HostTensor) return null; // staged through the device
    if (!(in instanceof DeviceTensor) || !(out instanceof DeviceTensor)) {
      return kind.apiName() + ": inputs and outputs must be both DeviceTensors or both HostTensors, got "
          + in.getClass().getSimpleName() + " and " + out.getClass().getSimpleName();
    }
    if (((DeviceTensor) in).device() != device || ((DeviceTensor) out).device() != device) {
      return kind.apiName() + ": tensors must live on this rank's device " + device;
    }
    return null;
  }

  @Override protected void execute(CollectiveCall c, String problem) {
    if (c.in() instanceof HostTensor) {
      executeStaged(c, problem);
      return;
    }
    if (c.kind() == Collective.ALL_TO_ALL_V) finishPreviousAllToAllV();
    launchAndWait(c, problem);
    if (c.kind() == Collective.ALL_TO_ALL_V) {
      RuntimeException e = allToAllVProblem();
      if (e != null) throw e;
    }
  }

  /**
   * The allToAllV size problem the kernel recorded (host-mapped memory, read after the stream work
   * completed), as the exception to raise, or null. Every rank's kernel reached the same verdict from
   * the same size matrix, so every rank raises it at the same call. The record is one per
   * communicator, so at most one allToAllV is in flight from here ({@link #finishPreviousAllToAllV}).
   */
  private CommMismatchException allToAllVProblem() {
    long[] st = new long[5];
    Native.check(SparkCommsNative.sc_alltoallv_status(comm, st), "sc_alltoallv_status");
    if (st[0] == SparkCommsNative.SC_A2AV_OK) return null;
    String m = switch ((int) st[0]) {
      case SparkCommsNative.SC_A2AV_OVERFLOW -> "rank " + st[1] + " would receive " + st[3] + " elements from rank " + st[2]
          + " but has room for " + st[4];
      case SparkCommsNative.SC_A2AV_NEGATIVE -> "rank " + st[2] + " gave a negative count (" + st[3] + ") for rank " + st[1];
      case SparkCommsNative.SC_A2AV_SEND_RANGE -> "rank " + st[2] + "'s block of " + st[3] + " elements for rank " + st[1]
          + " runs past its input (" + st[4] + " elements from the block's offset to the end)";
      case SparkCommsNative.SC_A2AV_RECV_OFFSETS -> "rank " + st[1] + "'s receive offsets are out of order or outside its output"
          + " (slot of rank " + st[2] + ": " + st[3] + ".." + st[4] + ")";
      case SparkCommsNative.SC_A2AV_MISMATCH -> "ranks disagree on the dtype or the layout (rank " + st[1]
          + (st[3] != 0 ? " passed offsets" : " used the packed layout") + ")";
      default -> "status " + st[0];
    };
    if (st[0] == SparkCommsNative.SC_A2AV_MISMATCH) {
      return new CommMismatchException("allToAllV: " + m + "; no output was written (recvCounts were)");
    }
    return new CommCapacityException("allToAllV: " + m + "; no output was written (recvCounts were)");
  }

  /** The last asynchronous allToAllV, until its size verdict has been read. */
  private volatile EventWork lastAllToAllV;

  /**
   * Waits for the previous asynchronous allToAllV (its verdict goes to its own Work, raised by that
   * Work's waitFor), so that the single status record belongs to the call about to be launched.
   */
  private void finishPreviousAllToAllV() {
    EventWork w = lastAllToAllV;
    lastAllToAllV = null;
    if (w != null) w.settle();
  }

  @Override protected Work enqueue(CollectiveCall c, String problem) {
    if (c.in() instanceof HostTensor) {
      executeStaged(c, problem); // host memory: the copies make it synchronous
      return COMPLETED;
    }
    boolean v = c.kind() == Collective.ALL_TO_ALL_V;
    if (v) finishPreviousAllToAllV();
    launch(c, problem);
    Pointer ev = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_event_create(ev), "sc_event_create");
    Native.check(SparkCommsNative.sc_event_record(ev, stream), "sc_event_record");
    EventWork w = new EventWork(ev, c.kind().apiName(), v);
    if (v) lastAllToAllV = w;
    synchronized (pending) {
      pending.removeIf(EventWork::poll);  // housekeeping: a failure stays with its own Work
      while (pending.size() >= MAX_PENDING) pending.pollFirst().settle();
      pending.addLast(w);
    }
    return w;
  }

  private void launch(CollectiveCall c, String problem) {
    if (aborted) {
      String why = peerGone;
      throw new CommAbortedException("communicator aborted on rank " + rank + (why != null ? ": " + why : ""));
    }
    if (problem != null) throw new IllegalArgumentException(problem);
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    Pointer in = c.in() == null ? null : ((DeviceTensor) c.in()).pointer();
    Pointer out = c.out() == null ? null : ((DeviceTensor) c.out()).pointer();
    int dt = c.dtype().code();
    int op = c.op() == null ? 0 : c.op().kind().code();
    double f = c.op() == null ? 1 : c.op().factor();
    boolean v = c.algorithm() == Algorithm.VENDOR;
    boolean lp = c.algorithm() == Algorithm.LP;
    int st;
    switch (c.kind()) {
      case ALL_REDUCE: st = SparkCommsNative.sc_allreduce(comm, in, out, c.count(), dt, op, f, c.algorithm().code(), stream); break;
      case ALL_GATHER: st = v ? SparkCommsNative.sc_vendor_allgather(comm, in, out, c.count(), dt, stream)
          : lp ? SparkCommsNative.sc_allgather_lp(comm, in, out, c.count(), dt, stream)
          : SparkCommsNative.sc_allgather(comm, in, out, c.count(), dt, stream); break;
      case REDUCE_SCATTER: st = v ? SparkCommsNative.sc_vendor_reducescatter(comm, in, out, c.count(), dt, op, f, stream)
          : lp ? SparkCommsNative.sc_reducescatter_lp(comm, in, out, c.count(), dt, op, stream)
          : SparkCommsNative.sc_reducescatter(comm, in, out, c.count(), dt, op, f, stream); break;
      case ALL_TO_ALL: st = lp ? SparkCommsNative.sc_alltoall_lp(comm, in, out, c.count(), dt, stream)
          : SparkCommsNative.sc_alltoall(comm, in, out, c.count(), dt, stream); break; // no vendor all-to-all: direct
      case BROADCAST: st = v ? SparkCommsNative.sc_vendor_broadcast(comm, in, out, c.count(), dt, c.root(), stream)
          : SparkCommsNative.sc_broadcast(comm, in, out, c.count(), dt, c.root(), stream); break;
      case BARRIER: st = SparkCommsNative.sc_barrier(comm, stream); break;
      case ALL_TO_ALL_V: {
        Splits sp = c.splits();
        st = SparkCommsNative.sc_alltoallv(comm, in, c.in().count(), dev(sp.sendCounts()), dev(sp.sendOffsets()), out,
            c.out().count(), dev(sp.recvCounts()), dev(sp.recvOffsets()), dt, stream);
        break;
      }
      default: throw new AssertionError(c.kind());
    }
    try {
      check(st, c.kind().apiName() + "(" + c.algorithm() + ")");
    } catch (CommException e) {
      aborted = true;
      throw e;
    }
  }

  /** Launches the call and waits for the stream; raises a device-side timeout or abort. */
  private void launchAndWait(CollectiveCall c, String problem) {
    launch(c, problem);
    check(SparkCommsNative.sc_stream_synchronize(stream), "sc_stream_synchronize");
    check(SparkCommsNative.sc_comm_check(comm), c.kind().apiName());
  }

  private static Pointer dev(Tensor t) { return t == null ? null : ((DeviceTensor) t).pointer(); }

  private static final Work COMPLETED = new Work() {
    @Override public boolean isCompleted() { return true; }
    @Override public void waitFor() {}
    @Override public boolean waitFor(Duration timeout) { return true; }
  };

  /** Runs a host-tensor call on the device: copy in, collective, copy out (in place stays in place). */
  private void executeStaged(CollectiveCall c, String problem) {
    if (problem != null) throw new IllegalArgumentException(problem);
    if (c.kind() == Collective.ALL_TO_ALL_V) {
      executeStagedV(c);
      return;
    }
    HostTensor hin = (HostTensor) c.in(), hout = (HostTensor) c.out();
    scratchIn = grow(scratchIn, hin.bytes());
    DeviceTensor din = DeviceTensor.wrap(scratchIn.address(), hin.dtype(), hin.count(), device);
    din.copyFrom(hin);
    DeviceTensor dout = din;
    if (hout != hin) {
      scratchOut = grow(scratchOut, hout.bytes());
      dout = DeviceTensor.wrap(scratchOut.address(), hout.dtype(), hout.count(), device);
    }
    CollectiveCall dc = new CollectiveCall(c.kind(), din, dout, c.op(), c.root(), c.dtype(), c.count(), c.algorithm(), c.messageBytes());
    launchAndWait(dc, null);
    dout.copyTo(hout);
  }

  /** allToAllV on host tensors: data and sizes copied to device scratch, the kernel, copies back. */
  private void executeStagedV(CollectiveCall c) {
    finishPreviousAllToAllV();
    HostTensor hin = (HostTensor) c.in(), hout = (HostTensor) c.out();
    Splits sp = c.splits();
    scratchIn = grow(scratchIn, hin.bytes());
    scratchOut = grow(scratchOut, hout.bytes());
    scratchSplits = grow(scratchSplits, 4L * size * 8);
    DeviceTensor din = DeviceTensor.wrap(scratchIn.address(), hin.dtype(), hin.count(), device);
    DeviceTensor dout = DeviceTensor.wrap(scratchOut.address(), hout.dtype(), hout.count(), device);
    DeviceTensor[] d = new DeviceTensor[4];
    Tensor[] h = {sp.sendCounts(), sp.sendOffsets(), sp.recvCounts(), sp.recvOffsets()};
    for (int i = 0; i < 4; i++) {
      if (h[i] == null) continue;
      d[i] = DeviceTensor.wrap(scratchSplits.address() + (long) i * size * 8, io.sparkcomms.collectives.DataType.INT64, size, device);
      if (i != 2) d[i].copyFrom((HostTensor) h[i]);
    }
    din.copyFrom(hin);
    dout.copyFrom(hout); // what the collective does not write keeps the caller's values
    launchAndWait(new CollectiveCall(c.kind(), din, dout, null, 0, c.dtype(), 0, c.algorithm(), c.messageBytes(),
        new Splits(d[0], d[1], d[2], d[3])), null);
    d[2].copyTo((HostTensor) sp.recvCounts());
    RuntimeException problem = allToAllVProblem();
    if (problem != null) throw problem;
    dout.copyTo(hout);
  }

  /** A scratch buffer of at least {@code bytes} (8-byte words), reusing {@code t} when big enough. */
  private DeviceTensor grow(DeviceTensor t, long bytes) {
    long words = Math.max(1, (bytes + 7) / 8);
    if (t != null && t.count() >= words) return t;
    if (t != null) t.close();
    return DeviceTensor.allocate(io.sparkcomms.collectives.DataType.INT64, words, device);
  }

  /**
   * Stream-ordered allReduce, the form GPU code uses (as with NCCL): enqueues on this communicator's
   * stream and returns at once, with no event and no wait. Kernel errors (a peer's timeout) surface
   * at the next {@link #synchronize()} or synchronous call. {@code algo} AUTO lets the selector pick.
   * Returns the algorithm that runs.
   */
  public Algorithm allReduceOnStream(DeviceTensor in, DeviceTensor out, io.sparkcomms.collectives.ReduceOp op, Algorithm algo) {
    if (isClosed()) throw new IllegalStateException("communicator (rank " + rank + ") is closed");
    if (in.dtype() != out.dtype() || out.count() < in.count()) {
      throw new IllegalArgumentException("allReduce: output " + out + " cannot hold input " + in);
    }
    String problem = checkTensors(Collective.ALL_REDUCE, in, out);
    if (problem != null) throw new IllegalArgumentException(problem);
    if (!op.supports(in.dtype())) throw new IllegalArgumentException("allReduce: " + op + " is not defined for " + in.dtype());
    Algorithm a = algo;
    if (a == Algorithm.AUTO) {
      a = io.sparkcomms.collectives.algo.AlgorithmSelector.choose(Collective.ALL_REDUCE, in.bytes(), size, in.dtype(), op,
          options, new io.sparkcomms.collectives.algo.AlgorithmSelector.Backend(true, vendor, lowPrecision));
    } else if (a == Algorithm.VENDOR && !vendor) {
      throw new IllegalArgumentException("algorithm VENDOR: NCCL/RCCL is not loaded in this communicator");
    } else if (a == Algorithm.LP && !(lowPrecision && io.sparkcomms.collectives.algo.AlgorithmSelector.lowPrecisionEligible(
        Collective.ALL_REDUCE, in.dtype(), op))) {
      throw new IllegalArgumentException("algorithm LP: needs FLOAT32/BFLOAT16 with SUM/AVG and a native library with the FP8 kernels");
    }
    launch(new CollectiveCall(Collective.ALL_REDUCE, in, out, op, 0, in.dtype(), in.count(), a, in.bytes()), null);
    stats().record(a, in.bytes(), 0);
    return a;
  }

  /** Enqueues a device-side busy wait (benchmarks: the host queues work behind it). */
  public void delayStream(double microseconds) {
    Native.check(SparkCommsNative.sc_stream_delay(stream, microseconds), "sc_stream_delay");
  }

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
  }

  @Override public boolean isAborted() { return aborted; }

  @Override protected void release() {
    if (peerWatch != null) peerWatch.close();  // waits for a running check: no abort after this
    SparkCommsNative.sc_set_device(device);
    SparkCommsNative.sc_stream_synchronize(ownStream);
    if (stream != ownStream) SparkCommsNative.sc_stream_synchronize(stream);
    synchronized (pending) {
      for (EventWork w : pending) w.poll(); // releases the events; failures are reported to whoever waits
      pending.clear();
    }
    SparkCommsNative.sc_comm_destroy(comm);
    SparkCommsNative.sc_stream_destroy(ownStream);
    if (scratchIn != null) scratchIn.close();
    if (scratchOut != null) scratchOut.close();
    if (scratchSplits != null) scratchSplits.close();
  }

  /**
   * Work on a device event: completion is the event's; waiting polls it within the timeout. The
   * outcome (a device-side timeout or abort, an allToAllV size verdict) is recorded once when the event
   * completes and raised by this Work's {@link #isCompleted()} / {@link #waitFor()}, never by another
   * call's housekeeping.
   */
  private final class EventWork implements Work {
    private final Pointer event;
    private final String what;
    private final boolean allToAllV;
    private boolean done;
    private RuntimeException failure;

    EventWork(Pointer event, String what, boolean allToAllV) {
      this.event = event;
      this.what = what;
      this.allToAllV = allToAllV;
    }

    /** Whether the work completed (recording its outcome the first time); never throws its failure. */
    synchronized boolean poll() {
      if (done) return true;
      int[] d = new int[1];
      int st = SparkCommsNative.sc_event_query(event, d);
      if (st != SparkCommsNative.SC_OK) {
        failure = new CommException(what + ": sc_event_query failed: " + SparkCommsNative.sc_last_error());
        d[0] = 1;
      }
      if (d[0] == 1) {
        done = true;
        SparkCommsNative.sc_event_destroy(event);
        try {
          check(SparkCommsNative.sc_comm_check(comm), what); // a device-side timeout or abort
          if (allToAllV) {
            RuntimeException p = allToAllVProblem(); // this call's verdict: the only allToAllV in flight
            if (failure == null) failure = p;
          }
        } catch (RuntimeException e) {
          if (failure == null) failure = e;
        } finally {
          if (lastAllToAllV == this) lastAllToAllV = null;
        }
      }
      return done;
    }

    /** Blocks (bounded) until completed; the failure stays recorded for waitFor. */
    void settle() {
      long deadline = System.nanoTime() + options.timeout().multipliedBy(2).toNanos();
      while (!poll() && System.nanoTime() < deadline) Thread.onSpinWait();
    }

    @Override public boolean isCompleted() {
      boolean d = poll();
      if (d && failure != null) throw failure;
      return d;
    }

    @Override public void waitFor() {
      if (!waitFor(options.timeout().multipliedBy(2))) {
        throw new CommException(what + " did not complete within " + options.timeout().multipliedBy(2));
      }
    }

    @Override public boolean waitFor(Duration timeout) {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (!isCompleted()) {
        if (System.nanoTime() > deadline) return false;
        Thread.onSpinWait();
      }
      return true;
    }
  }
}
