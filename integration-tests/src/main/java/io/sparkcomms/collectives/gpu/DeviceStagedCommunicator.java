package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.BatchSendRecv;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommStats;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.Work;
import java.util.ArrayList;
import java.util.List;

/**
 * Test adapter: runs host-tensor calls on a GPU communicator by copying inputs and (poisoned)
 * outputs to the device, running the collective there, and copying the output back — so the
 * host-side {@code CollectiveChecker} checks GPU kernels, unwritten elements included.
 */
final class DeviceStagedCommunicator implements Communicator {
  private final GpuCommunicator g;

  DeviceStagedCommunicator(GpuCommunicator g) { this.g = g; }

  GpuCommunicator gpu() { return g; }

  /** A device buffer holding a copy of host tensor {@code t}. */
  private DeviceBuffer up(Tensor t) {
    HostTensor h = (HostTensor) t;
    DeviceBuffer d = DeviceBuffer.allocate(h.dtype(), h.count(), g.device());
    d.view().copyFrom(h);
    return d;
  }

  private static DeviceTensor view(DeviceBuffer b) { return b == null ? null : b.view(); }

  private interface Call { void run(DeviceTensor in, DeviceTensor out); }

  /**
   * Copies up, runs, copies back the output and (out of place) the input, so that the checker sees
   * what the device call did to both. A null tensor (a rooted call's unused one) stays null.
   */
  private void staged(Tensor in, Tensor out, Call c) {
    try (DeviceBuffer din = in == null ? null : up(in); DeviceBuffer dout = out == null || in == out ? null : up(out)) {
      DeviceTensor i = view(din);
      DeviceTensor o = out == null ? null : in == out ? i : dout.view();
      c.run(i, o);
      if (o != null) o.copyTo((HostTensor) out);
      if (i != null && in != out) i.copyTo((HostTensor) in);
    }
  }

  @Override public int rank() { return g.rank(); }
  @Override public int size() { return g.size(); }
  @Override public String backendName() { return g.backendName(); }
  @Override public CommOptions options() { return g.options(); }
  @Override public void allReduce(Tensor in, Tensor out, ReduceOp op) { staged(in, out, (i, o) -> g.allReduce(i, o, op)); }
  @Override public void allGather(Tensor in, Tensor out) { staged(in, out, g::allGather); }
  @Override public void reduceScatter(Tensor in, Tensor out, ReduceOp op) { staged(in, out, (i, o) -> g.reduceScatter(i, o, op)); }
  @Override public void allToAll(Tensor in, Tensor out) { staged(in, out, g::allToAll); }
  @Override public void broadcast(Tensor in, Tensor out, int root) { staged(in, out, (i, o) -> g.broadcast(i, o, root)); }
  @Override public void allToAllV(Tensor in, Tensor sendCounts, Tensor out, Tensor recvCounts) {
    allToAllV(in, sendCounts, null, out, recvCounts, null);
  }
  /** Every tensor copied to the device (outputs and recvCounts with their poison), the call, both copied back. */
  @Override public void allToAllV(Tensor in, Tensor sendCounts, Tensor sendOffsets, Tensor out, Tensor recvCounts, Tensor recvOffsets) {
    try (DeviceBuffer din = up(in); DeviceBuffer dout = up(out); DeviceBuffer dsc = up(sendCounts); DeviceBuffer drc = up(recvCounts);
         DeviceBuffer dso = sendOffsets == null ? null : up(sendOffsets); DeviceBuffer dro = recvOffsets == null ? null : up(recvOffsets)) {
      try {
        if (dso == null) g.allToAllV(din.view(), dsc.view(), dout.view(), drc.view());
        else g.allToAllV(din.view(), dsc.view(), view(dso), dout.view(), drc.view(), view(dro));
      } finally {
        drc.view().copyTo((HostTensor) recvCounts);
        dout.view().copyTo((HostTensor) out);
      }
    }
  }
  @Override public void reduce(Tensor in, Tensor out, ReduceOp op, int root) { staged(in, out, (i, o) -> g.reduce(i, o, op, root)); }
  @Override public void gather(Tensor in, Tensor out, int root) { staged(in, out, (i, o) -> g.gather(i, o, root)); }
  @Override public void scatter(Tensor in, Tensor out, int root) { staged(in, out, (i, o) -> g.scatter(i, o, root)); }
  @Override public void allGatherV(Tensor in, Tensor out, long[] counts) { staged(in, out, (i, o) -> g.allGatherV(i, o, counts)); }
  @Override public void reduceScatterV(Tensor in, Tensor out, long[] counts, ReduceOp op) {
    staged(in, out, (i, o) -> g.reduceScatterV(i, o, counts, op));
  }
  @Override public Work reduceAsync(Tensor in, Tensor out, ReduceOp op, int root) { throw new UnsupportedOperationException(); }
  @Override public Work gatherAsync(Tensor in, Tensor out, int root) { throw new UnsupportedOperationException(); }
  @Override public Work scatterAsync(Tensor in, Tensor out, int root) { throw new UnsupportedOperationException(); }
  @Override public Work allGatherVAsync(Tensor in, Tensor out, long[] counts) { throw new UnsupportedOperationException(); }
  @Override public Work reduceScatterVAsync(Tensor in, Tensor out, long[] counts, ReduceOp op) { throw new UnsupportedOperationException(); }
  @Override public void send(Tensor t, int peer) {
    try (DeviceBuffer d = up(t)) {
      g.send(d.view(), peer);
    }
  }
  @Override public void recv(Tensor t, int peer) {
    try (DeviceBuffer d = up(t)) {
      g.recv(d.view(), peer);
      d.view().copyTo((HostTensor) t);
    }
  }
  /** Synchronous here (the copy back needs the transfer done): a Work that is complete. */
  @Override public Work sendAsync(Tensor t, int peer) {
    send(t, peer);
    return Work.completed();
  }
  @Override public Work recvAsync(Tensor t, int peer) {
    recv(t, peer);
    return Work.completed();
  }
  /** Every tensor copied up, the GPU batch run to completion, every received one copied back. */
  @Override public BatchSendRecv batch() {
    return new BatchSendRecv(ts -> {
      List<DeviceBuffer> bufs = new ArrayList<>();
      try {
        BatchSendRecv b = g.batch();
        for (BatchSendRecv.Transfer t : ts) {
          DeviceBuffer d = up(t.tensor());
          bufs.add(d);
          if (t.send()) b.send(d.view(), t.peer());
          else b.recv(d.view(), t.peer());
        }
        b.issue().waitFor();
        for (int i = 0; i < ts.size(); i++) if (!ts.get(i).send()) bufs.get(i).view().copyTo((HostTensor) ts.get(i).tensor());
        return Work.completed();
      } finally {
        bufs.forEach(DeviceBuffer::close);
      }
    });
  }
  /** Not staged: the GPU communicator's own view (device tensors). */
  @Override public Communicator withOptions(io.sparkcomms.collectives.CallOptions o) { return g.withOptions(o); }
  @Override public Communicator split(int[] ranks) { return g.split(ranks); }
  @Override public Communicator split(int color, int key) { return g.split(color, key); }
  @Override public void barrier() { g.barrier(); }
  @Override public Work allReduceAsync(Tensor in, Tensor out, ReduceOp op) { throw new UnsupportedOperationException(); }
  @Override public Work allGatherAsync(Tensor in, Tensor out) { throw new UnsupportedOperationException(); }
  @Override public Work reduceScatterAsync(Tensor in, Tensor out, ReduceOp op) { throw new UnsupportedOperationException(); }
  @Override public Work allToAllAsync(Tensor in, Tensor out) { throw new UnsupportedOperationException(); }
  @Override public Work broadcastAsync(Tensor in, Tensor out, int root) { throw new UnsupportedOperationException(); }
  @Override public Work allToAllVAsync(Tensor in, Tensor sc, Tensor out, Tensor rc) { throw new UnsupportedOperationException(); }
  @Override public Work allToAllVAsync(Tensor in, Tensor sc, Tensor so, Tensor out, Tensor rc, Tensor ro) { throw new UnsupportedOperationException(); }
  @Override public Work barrierAsync() { return g.barrierAsync(); }
  @Override public void abort(String reason) { g.abort(reason); }
  @Override public boolean isAborted() { return g.isAborted(); }
  @Override public CommStats stats() { return g.stats(); }
  @Override public void close() { g.close(); }
  @Override public io.sparkcomms.collectives.observe.RemovableHandle addHook(io.sparkcomms.collectives.observe.CallHook hook) { return g.addHook(hook); }
  @Override public java.util.List<io.sparkcomms.collectives.observe.CallRecord> flightRecord() { return g.flightRecord(); }
}
