package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Runs host-tensor calls on the device: pinned host memory ({@code sc_malloc_host}) and device
 * scratch of the same layout, both kept and grown across calls. One synchronous call: copy the host
 * tensors into pinned memory, one asynchronous host-to-device copy on the communicator's stream, the
 * collective, one asynchronous device-to-host copy of what it writes, one stream synchronize and
 * communicator check ({@link Device#finish}), copy out. Pinned memory is what lets the copies run
 * asynchronously on the stream, and its reuse saves the allocation (and pinning) per call.
 *
 * <p>Layout of one call, in both memories: [input | output | allToAllV's four size tensors], each
 * region aligned to {@link #ALIGN}. In place (the same host tensor twice) the output is the input's
 * region. Only the elements the collective writes are copied back, so an output larger than that
 * keeps its tail. Not thread-safe: calls come one at a time (under the communicator's call lock).
 */
final class HostStaging implements AutoCloseable {
  private static final long ALIGN = 256;
  /** Largest Java view of pinned memory at once (ByteBuffer capacities are ints). */
  private static final int WINDOW = 1 << 30;

  /** What the staging needs of its communicator. */
  interface Device {
    /** Enqueues the call (now on device tensors) on the stream. */
    void launch(PlannedCall onDevice);

    /** Waits for the stream (one synchronize) and raises a device-side timeout or abort. */
    void finish(PlannedCall c);

    /** allToAllV's size verdict as the exception to raise, or null; read after {@link #finish}. */
    RuntimeException allToAllVVerdict();
  }

  private final int rank;
  private final int size;
  private final int device;
  private long pinned;             // address from sc_malloc_host; 0 = none
  private long pinnedBytes;
  private ByteBuffer pinnedView;   // the first min(pinnedBytes, WINDOW) bytes
  private DeviceBuffer scratch;    // INT64 words, at least pinnedBytes

  HostStaging(int rank, int size, int device) {
    this.rank = rank;
    this.size = size;
    this.device = device;
  }

  /** Runs {@code c} (host tensors) through {@code d} on {@code stream}. */
  void run(PlannedCall c, Pointer stream, Device d) {
    if (c.kind() == Collective.ALL_TO_ALL_V) {
      runAllToAllV(c, stream, d);
      return;
    }
    HostTensor hin = (HostTensor) c.in(), hout = (HostTensor) c.out();
    boolean inPlace = hin == hout;
    long written = written(c);
    long inBytes = hin.bytes(), outAt = inPlace ? 0 : align(inBytes);
    ensure(inPlace ? inBytes : outAt + written * c.dtype().size());
    DeviceTensor din = scratch.viewBytes(0, c.dtype(), hin.count());
    DeviceTensor dout = inPlace ? din : scratch.viewBytes(outAt, c.dtype(), written);
    // a broadcast's input matters on the root only
    boolean copyIn = c.kind() != Collective.BROADCAST || rank == c.root();
    if (copyIn && inBytes > 0) {
      toPinned(hin, 0);
      Native.check(SparkCommsNative.sc_memcpy_htod(din.pointer(), at(0), inBytes, stream), "sc_memcpy_htod");
    }
    d.launch(c.on(din, dout, null));
    long outBytes = written * c.dtype().size();
    if (outBytes > 0) {
      Native.check(SparkCommsNative.sc_memcpy_dtoh(at(outAt), dout.pointer(), outBytes, stream), "sc_memcpy_dtoh");
    }
    d.finish(c);
    fromPinned(hout, outAt, written);
  }

  /** Elements of the output the collective writes (from element 0). */
  private long written(PlannedCall c) {
    return switch (c.kind()) {
      case ALL_GATHER, ALL_TO_ALL -> c.count() * size;
      default -> c.count();
    };
  }

  /**
   * allToAllV: the input, the output (what the collective does not write keeps the caller's values)
   * and the size tensors go over in one copy; the output and recvCounts come back in one. recvCounts
   * are written even when the sizes do not fit; the output only when they do.
   */
  private void runAllToAllV(PlannedCall c, Pointer stream, Device d) {
    HostTensor hin = (HostTensor) c.in(), hout = (HostTensor) c.out();
    Splits sp = c.splits();
    DataType dt = c.dtype();
    long outAt = align(hin.bytes()), splitsAt = align(outAt + hout.bytes()), sizeBytes = 8L * size;
    long total = splitsAt + 4 * sizeBytes;
    ensure(total);
    Tensor[] h = {sp.sendCounts(), sp.sendOffsets(), sp.recvCounts(), sp.recvOffsets()};
    DeviceTensor[] dv = new DeviceTensor[4];
    for (int i = 0; i < 4; i++) {
      if (h[i] == null) continue;
      dv[i] = scratch.viewBytes(splitsAt + i * sizeBytes, DataType.INT64, size);
      if (i != 2) toPinned((HostTensor) h[i], splitsAt + i * sizeBytes);
    }
    DeviceTensor din = scratch.viewBytes(0, dt, hin.count());
    DeviceTensor dout = scratch.viewBytes(outAt, dt, hout.count());
    toPinned(hin, 0);
    toPinned(hout, outAt);
    Native.check(SparkCommsNative.sc_memcpy_htod(din.pointer(), at(0), total, stream), "sc_memcpy_htod");
    d.launch(c.on(din, dout, new Splits(dv[0], dv[1], dv[2], dv[3])));
    Native.check(SparkCommsNative.sc_memcpy_dtoh(at(outAt), dout.pointer(), total - outAt, stream), "sc_memcpy_dtoh");
    d.finish(c);
    fromPinned((HostTensor) sp.recvCounts(), splitsAt + 2 * sizeBytes, size);
    RuntimeException verdict = d.allToAllVVerdict();
    if (verdict != null) throw verdict;
    fromPinned(hout, outAt, hout.count());
  }

  private static long align(long bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

  /** Pinned memory and device scratch of at least {@code bytes}; earlier contents are not kept. */
  private void ensure(long bytes) {
    if (scratch != null && pinnedBytes >= bytes) return;
    long want = Math.max(align(Math.max(bytes, 1)), pinnedBytes + pinnedBytes / 2);
    close();
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    Pointer p = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_malloc_host(p, want), "sc_malloc_host(" + want + " bytes)");
    pinned = p.address();
    pinnedBytes = want;
    pinnedView = view(0, (int) Math.min(want, WINDOW));
    scratch = DeviceBuffer.allocate(DataType.INT64, (want + 7) / 8, device);
  }

  private Pointer at(long offset) { return new AddressPointer(pinned + offset); }

  private ByteBuffer view(long offset, int len) {
    return new BytePointer(new AddressPointer(pinned + offset)).capacity(len).asByteBuffer().order(ByteOrder.nativeOrder());
  }

  /** A view of [offset, offset + len) of pinned memory; a slice of the cached view where it lies inside. */
  private ByteBuffer window(long offset, int len) {
    if (offset + len <= pinnedView.capacity()) {
      return pinnedView.duplicate().position((int) offset).limit((int) offset + len).slice().order(ByteOrder.nativeOrder());
    }
    return view(offset, len);
  }

  /** Copies all of {@code t} into pinned memory at byte {@code offset}. */
  private void toPinned(HostTensor t, long offset) {
    int es = t.dtype().size(), per = WINDOW / es;
    for (long e = 0; e < t.count(); e += per) {
      int n = (int) Math.min(per, t.count() - e);
      t.copyTo(e, n, window(offset + e * es, n * es), 0);
    }
  }

  /** Copies {@code count} elements from pinned memory at byte {@code offset} into {@code t} from element 0. */
  private void fromPinned(HostTensor t, long offset, long count) {
    int es = t.dtype().size(), per = WINDOW / es;
    for (long e = 0; e < count; e += per) {
      int n = (int) Math.min(per, count - e);
      t.copyFrom(window(offset + e * es, n * es), 0, e, n);
    }
  }

  /** Frees both memories (the stream must be idle). Idempotent. */
  @Override public void close() {
    if (scratch != null) {
      scratch.close();
      scratch = null;
    }
    if (pinned != 0) {
      long a = pinned;
      pinned = 0;
      pinnedBytes = 0;
      pinnedView = null;
      Native.check(SparkCommsNative.sc_free_host(new AddressPointer(a)), "sc_free_host");
    }
  }
}
