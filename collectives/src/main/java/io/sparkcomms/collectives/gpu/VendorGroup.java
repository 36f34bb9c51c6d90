package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import io.sparkcomms.nativeapi.SparkCommsNative.sc_vgroup;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * A vendor communicator (NCCL / RCCL) over any ranks, with no DDA part ({@code sc_vgroup_*}): the
 * rail of one local rank across nodes, or the whole world of a communicator across nodes. Calls
 * enqueue on the stream they are given; {@link #await} waits for that stream with a bound and turns
 * a peer's failure (the vendor library's asynchronous error) or the bound into an exception after
 * aborting the group, so no wait on a group outlasts its timeout. Made by one member's
 * {@link #uniqueId()}, passed to the others over a rendezvous.
 */
public final class VendorGroup implements AutoCloseable {
  private final sc_vgroup group;
  private final int rank;
  private final int size;
  private final int device;
  private volatile boolean aborted;
  private boolean closed;

  private VendorGroup(sc_vgroup group, int rank, int size, int device) {
    this.group = group;
    this.rank = rank;
    this.size = size;
    this.device = device;
  }

  /** Bytes of a unique id ({@code sc_vendor_unique_id_size}). */
  public static int idLength() {
    GpuLibrary.require();
    return SparkCommsNative.sc_vendor_unique_id_size();
  }

  /** A fresh unique id for a group this rank is the first member of. */
  public static byte[] uniqueId() {
    int n = idLength();
    BytePointer p = new BytePointer(n);
    Native.check(SparkCommsNative.sc_vendor_unique_id(p, n), "sc_vendor_unique_id");
    byte[] id = new byte[n];
    p.get(id);
    return id;
  }

  /** Whether the vendor library loads (its reason otherwise is in the exception {@link #create} raises). */
  public static boolean available() {
    return GpuLibrary.available() && SparkCommsNative.sc_vendor_available() == 1;
  }

  /** Collective over the group's members, each with its own rank; waits at most {@code timeout}. */
  public static VendorGroup create(int rank, int size, int device, byte[] id, Duration timeout) {
    GpuLibrary.require();
    sc_vgroup g = new sc_vgroup();
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device(" + device + ")");
    Native.check(SparkCommsNative.sc_vgroup_create(rank, size, device, new BytePointer(id), id.length, GpuSetup.nativeSeconds(timeout), g),
        "sc_vgroup_create(rank " + rank + " of " + size + ")");
    return new VendorGroup(g, rank, size, device);
  }

  public int rank() { return rank; }
  public int size() { return size; }

  public void allReduce(DeviceTensor in, DeviceTensor out, ReduceOp op, long stream) {
    check(SparkCommsNative.sc_vgroup_allreduce(group, in.pointer(), out.pointer(), in.count(), in.dtype().code(), op.kind().code(),
        op.factor(), new AddressPointer(stream)), "allReduce");
  }

  /** {@code in} holds this rank's block; {@code out} every rank's, in rank order. */
  public void allGather(DeviceTensor in, DeviceTensor out, long stream) {
    check(SparkCommsNative.sc_vgroup_allgather(group, in.pointer(), out.pointer(), in.count(), in.dtype().code(),
        new AddressPointer(stream)), "allGather");
  }

  /** {@code out} receives this rank's block of the reduction of {@code in} ({@code out.count()} elements a rank). */
  public void reduceScatter(DeviceTensor in, DeviceTensor out, ReduceOp op, long stream) {
    check(SparkCommsNative.sc_vgroup_reducescatter(group, in.pointer(), out.pointer(), out.count(), out.dtype().code(),
        op.kind().code(), op.factor(), new AddressPointer(stream)), "reduceScatter");
  }

  /** {@code in}: the root's data (ignored elsewhere); {@code out.count()} elements. */
  public void broadcast(DeviceTensor in, DeviceTensor out, int root, long stream) {
    check(SparkCommsNative.sc_vgroup_broadcast(group, in == null ? null : in.pointer(), out.pointer(), out.count(), out.dtype().code(), root,
        new AddressPointer(stream)), "broadcast");
  }

  /** Block j of {@code in} goes to rank j; block i of {@code out} comes from rank i ({@code out.count() / size} elements each). */
  public void allToAll(DeviceTensor in, DeviceTensor out, long stream) {
    check(SparkCommsNative.sc_vgroup_alltoall(group, in.pointer(), out.pointer(), out.count() / size, out.dtype().code(),
        new AddressPointer(stream)), "allToAll");
  }

  /**
   * Point-to-point operations issued together: operation i sends ({@code sends[i]}) or receives
   * {@code bytes[i]} bytes at device address {@code addresses[i]} to or from member {@code peers[i]};
   * between two members the k-th send of one matches the k-th receive of the other.
   */
  public void batch(boolean[] sends, int[] peers, long[] addresses, long[] bytes, long stream) {
    int[] kinds = new int[sends.length];
    for (int i = 0; i < kinds.length; i++) kinds[i] = sends[i] ? 0 : 1;
    check(SparkCommsNative.sc_vgroup_batch(group, kinds.length, kinds, peers, addresses, bytes, new AddressPointer(stream)), "send/recv");
  }

  /**
   * Waits until the work enqueued on {@code stream} so far completed. A peer that failed or is gone
   * (the vendor library's asynchronous error), {@code stillOk} answering false (this rank's other
   * communicators aborted), or {@code bound} passing aborts the group, which ends its kernels, and
   * raises.
   */
  public void await(long stream, Duration bound, String what, java.util.function.BooleanSupplier stillOk) {
    Pointer ev = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_event_create(ev), "sc_event_create");
    try {
      Native.check(SparkCommsNative.sc_event_record(ev, new AddressPointer(stream)), "sc_event_record");
      long start = System.nanoTime(), deadline = start + bound.toNanos();
      int[] done = new int[1];
      for (int polls = 0; ; polls++) {
        Native.check(SparkCommsNative.sc_event_query(ev, done), "sc_event_query");
        if (done[0] == 1) break;
        int st = SparkCommsNative.sc_vgroup_check(group);
        if (st != SparkCommsNative.SC_OK) {
          String err = SparkCommsNative.sc_last_error();
          abort();
          throw new CommAbortedException("rank " + rank + ": " + what + " failed in the vendor library: " + err);
        }
        if (!stillOk.getAsBoolean()) {
          abort();
          throw new CommAbortedException("rank " + rank + ": " + what + ": the communicator was aborted");
        }
        if (System.nanoTime() > deadline) {
          abort();
          throw new CommTimeoutException("rank " + rank + ": " + what + " did not complete within " + bound
              + " (a peer did not take part?)");
        }
        // spin first (a collective on a fast link completes in microseconds), then sleep briefly
        if (polls > 2000) LockSupport.parkNanos(polls > 20000 ? 200_000 : 20_000);
        else Thread.onSpinWait();
      }
    } finally {
      SparkCommsNative.sc_event_destroy(ev);
    }
  }

  /** Immediate: ends this rank's kernels of the group; every later call fails. */
  public void abort() {
    aborted = true;
    synchronized (this) {
      if (!closed) SparkCommsNative.sc_vgroup_abort(group);
    }
  }

  public boolean isAborted() { return aborted; }

  private void check(int status, String what) {
    if (status == SparkCommsNative.SC_OK) return;
    String msg = "rank " + rank + ": " + what + " on its vendor group failed: " + SparkCommsNative.sc_status_name(status) + ": "
        + SparkCommsNative.sc_last_error();
    abort();
    if (status == SparkCommsNative.SC_ERR_INVALID_ARG) throw new IllegalArgumentException(msg);
    if (status == SparkCommsNative.SC_ERR_TIMEOUT) throw new CommTimeoutException(msg);
    throw new CommException(msg);
  }

  /** Collective unless aborted (the finalize waits for the other members, at most the group's timeout). */
  @Override public synchronized void close() {
    if (closed) return;
    closed = true;
    SparkCommsNative.sc_set_device(device);
    int st = SparkCommsNative.sc_vgroup_destroy(group);
    if (st != SparkCommsNative.SC_OK && !aborted) {
      System.getLogger(VendorGroup.class.getName()).log(System.Logger.Level.WARNING,
          "rank " + rank + ": closing its vendor group: " + SparkCommsNative.sc_last_error());
    }
  }
}
