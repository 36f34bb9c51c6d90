package io.sparkcomms.benchmarks;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HalfFloats;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;

/**
 * The baseline: the path a Spark user has today without collectives. Every rank serializes its array
 * and sends it to rank 0 over a loopback TCP socket; rank 0 reduces them in rank order (float64
 * accumulation for floating types, 64-bit for integers, rounded once) and sends the result back to
 * every rank, one after the other. Connections are opened once, before timing (kinder to the
 * baseline than a real driver round trip, which also pays task scheduling).
 */
final class TcpBaseline implements AutoCloseable {
  private final int rank;
  private final int size;
  private final Socket[] sockets;          // rank 0: index = peer rank (0 unused); others: index 0
  private final DataInputStream[] ins;
  private final OutputStream[] outs;
  private byte[] wire = new byte[0];
  private byte[] recv = new byte[0];
  private double[] dacc = new double[0];
  private double[] dtmp = new double[0];
  private long[] lacc = new long[0];
  private long[] ltmp = new long[0];

  private TcpBaseline(int rank, int size, Socket[] sockets) throws IOException {
    this.rank = rank;
    this.size = size;
    this.sockets = sockets;
    this.ins = new DataInputStream[sockets.length];
    this.outs = new OutputStream[sockets.length];
    for (int i = 0; i < sockets.length; i++) {
      if (sockets[i] == null) continue;
      ins[i] = new DataInputStream(sockets[i].getInputStream());
      outs[i] = sockets[i].getOutputStream();
    }
  }

  /** Connects every rank to rank 0 (collective over {@code ctrl}, which carries rank 0's port). */
  static TcpBaseline connect(Communicator ctrl, Duration timeout) {
    int rank = ctrl.rank(), n = ctrl.size();
    int ms = (int) Math.min(Integer.MAX_VALUE, timeout.toMillis());
    ServerSocket ss = null;
    int[] port = {-1};
    String problem = null;
    if (rank == 0) {
      try {
        ss = new ServerSocket(0, Math.max(50, n), InetAddress.getLoopbackAddress());
        ss.setSoTimeout(ms);
        port[0] = ss.getLocalPort();
      } catch (IOException e) {
        problem = e.toString();
      }
    }
    ctrl.broadcast(HostTensor.of(port), 0);
    Socket[] sockets = new Socket[rank == 0 ? n : 1];
    try {
      if (port[0] < 0) throw new IOException("rank 0 could not listen on loopback" + (problem != null ? ": " + problem : ""));
      if (rank == 0) {
        for (int k = 1; k < n; k++) {
          Socket s = ss.accept();
          configure(s, ms);
          int peer = new DataInputStream(s.getInputStream()).readInt();
          if (peer < 1 || peer >= n || sockets[peer] != null) {
            s.close();
            throw new IOException("unexpected hello from rank " + peer);
          }
          sockets[peer] = s;
        }
      } else {
        Socket s = new Socket();
        s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port[0]), ms);
        configure(s, ms);
        DataOutputStream d = new DataOutputStream(s.getOutputStream());
        d.writeInt(rank);
        d.flush();
        sockets[0] = s;
      }
      TcpBaseline t = new TcpBaseline(rank, n, sockets);
      ctrl.barrier();
      return t;
    } catch (IOException e) {
      for (Socket s : sockets) closeQuietly(s);
      throw new UncheckedIOException("TCP baseline setup failed on rank " + rank, e);
    } finally {
      if (ss != null) {
        try {
          ss.close();
        } catch (IOException ignored) {
          // nothing to do
        }
      }
    }
  }

  private static void configure(Socket s, int timeoutMs) throws IOException {
    s.setTcpNoDelay(true);
    s.setSoTimeout(timeoutMs);
  }

  /** allReduce of {@code in} into {@code out} through rank 0. */
  void allReduce(HostTensor in, HostTensor out, ReduceOp op) {
    DataType dt = in.dtype();
    int count = Math.toIntExact(in.count());
    int nbytes = Math.multiplyExact(count, dt.size());
    if (wire.length < nbytes) wire = new byte[nbytes];
    ByteBuffer wb = ByteBuffer.wrap(wire).order(ByteOrder.nativeOrder());
    in.copyTo(0, count, wb, 0);
    try {
      if (rank != 0) {
        outs[0].write(wire, 0, nbytes);
        outs[0].flush();
        ins[0].readFully(wire, 0, nbytes);
        out.copyFrom(wb, 0, 0, count);
        return;
      }
      if (recv.length < nbytes && size > 1) recv = new byte[nbytes];
      ByteBuffer rb = ByteBuffer.wrap(recv).order(ByteOrder.nativeOrder());
      if (dt.isFloating()) {
        if (dacc.length < count) {
          dacc = new double[count];
          dtmp = new double[count];
        }
        decode(dt, wb, count, dacc);
        double f = op.factor();
        if (op.kind() == ReduceOp.Kind.PREMUL_SUM) for (int i = 0; i < count; i++) dacc[i] *= f;
        for (int p = 1; p < size; p++) {
          ins[p].readFully(recv, 0, nbytes);
          decode(dt, rb, count, dtmp);
          combine(op, dacc, dtmp, count);
        }
        if (op.kind() == ReduceOp.Kind.AVG) for (int i = 0; i < count; i++) dacc[i] /= size;
        encode(dt, dacc, count, wb);
      } else {
        if (lacc.length < count) {
          lacc = new long[count];
          ltmp = new long[count];
        }
        decode(dt, wb, count, lacc);
        for (int p = 1; p < size; p++) {
          ins[p].readFully(recv, 0, nbytes);
          decode(dt, rb, count, ltmp);
          combine(op, lacc, ltmp, count);
        }
        if (op.kind() == ReduceOp.Kind.AVG) for (int i = 0; i < count; i++) lacc[i] /= size;
        encode(dt, lacc, count, wb);
      }
      for (int p = 1; p < size; p++) {
        outs[p].write(wire, 0, nbytes);
        outs[p].flush();
      }
      out.copyFrom(wb, 0, 0, count);
    } catch (IOException e) {
      throw new UncheckedIOException("TCP baseline allReduce failed on rank " + rank, e);
    }
  }

  private static void decode(DataType dt, ByteBuffer b, int n, double[] dst) {
    switch (dt) {
      case FLOAT32: { var v = b.asFloatBuffer(); for (int i = 0; i < n; i++) dst[i] = v.get(i); break; }
      case FLOAT64: b.asDoubleBuffer().get(0, dst, 0, n); break;
      case BFLOAT16: { var v = b.asShortBuffer(); for (int i = 0; i < n; i++) dst[i] = HalfFloats.bf16ToFloat(v.get(i)); break; }
      case FLOAT16: { var v = b.asShortBuffer(); for (int i = 0; i < n; i++) dst[i] = HalfFloats.fp16ToFloat(v.get(i)); break; }
      default: throw new AssertionError(dt);
    }
  }

  private static void decode(DataType dt, ByteBuffer b, int n, long[] dst) {
    if (dt == DataType.INT64) {
      b.asLongBuffer().get(0, dst, 0, n);
    } else {
      var v = b.asIntBuffer();
      for (int i = 0; i < n; i++) dst[i] = v.get(i);
    }
  }

  private static void encode(DataType dt, double[] src, int n, ByteBuffer b) {
    switch (dt) {
      case FLOAT32: { var v = b.asFloatBuffer(); for (int i = 0; i < n; i++) v.put(i, (float) src[i]); break; }
      case FLOAT64: b.asDoubleBuffer().put(0, src, 0, n); break;
      case BFLOAT16: { var v = b.asShortBuffer(); for (int i = 0; i < n; i++) v.put(i, HalfFloats.floatToBf16((float) src[i])); break; }
      case FLOAT16: { var v = b.asShortBuffer(); for (int i = 0; i < n; i++) v.put(i, HalfFloats.floatToFp16((float) src[i])); break; }
      default: throw new AssertionError(dt);
    }
  }

  private static void encode(DataType dt, long[] src, int n, ByteBuffer b) {
    if (dt == DataType.INT64) {
      b.asLongBuffer().put(0, src, 0, n);
    } else {
      var v = b.asIntBuffer();
      for (int i = 0; i < n; i++) v.put(i, (int) src[i]);
    }
  }

  private static void combine(ReduceOp op, double[] acc, double[] x, int n) {
    double f = op.factor();
    switch (op.kind()) {
      case SUM: case AVG: for (int i = 0; i < n; i++) acc[i] += x[i]; break;
      case PREMUL_SUM: for (int i = 0; i < n; i++) acc[i] += f * x[i]; break;
      case PRODUCT: for (int i = 0; i < n; i++) acc[i] *= x[i]; break;
      case MIN: for (int i = 0; i < n; i++) acc[i] = Math.min(acc[i], x[i]); break;
      case MAX: for (int i = 0; i < n; i++) acc[i] = Math.max(acc[i], x[i]); break;
      default: throw new AssertionError(op);
    }
  }

  private static void combine(ReduceOp op, long[] acc, long[] x, int n) {
    switch (op.kind()) {
      case SUM: case AVG: for (int i = 0; i < n; i++) acc[i] += x[i]; break;
      case PRODUCT: for (int i = 0; i < n; i++) acc[i] *= x[i]; break;
      case MIN: for (int i = 0; i < n; i++) acc[i] = Math.min(acc[i], x[i]); break;
      case MAX: for (int i = 0; i < n; i++) acc[i] = Math.max(acc[i], x[i]); break;
      default: throw new AssertionError(op);
    }
  }

  private static void closeQuietly(Socket s) {
    if (s == null) return;
    try {
      s.close();
    } catch (IOException ignored) {
      // nothing to do
    }
  }

  @Override public void close() {
    for (Socket s : sockets) closeQuietly(s);
  }
}
