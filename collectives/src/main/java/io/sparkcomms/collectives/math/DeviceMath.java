package io.sparkcomms.collectives.math;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.gpu.DeviceBuffer;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.Pointer;

/**
 * {@link DenseMath} on one GPU: matrices in {@link DeviceBuffer}s, GEMM/AXPY/SCAL through the vendor
 * BLAS (cuBLAS, hipBLAS) that the GPU library loads at run time, and the GPU library's element-wise
 * kernels, all queued on one stream. Only {@link #upload} and {@link #download} cross to the host;
 * they are counted ({@link #transfers()}).
 *
 * <p>One thread at a time; close it before the communicator whose stream it uses.
 *
 * <p>{@link #status()} says whether this machine can run it, and exactly why not: no GPU library,
 * no GPU, or no BLAS library (set {@code SPARKCOMMS_BLAS_LIB} to its path when it is not found).
 */
public final class DeviceMath implements DenseMath {
  /** Whether device math is available here, what runs it, or why it is not. */
  public record Status(boolean available, String description, String reason) {
    @Override public String toString() { return available ? "device math: " + description : reason; }
  }

  private static volatile Status status;

  private final int device;
  private final Pointer stream;      // not owned
  private final SparkCommsNative.sc_blas blas = new SparkCommsNative.sc_blas();
  private final List<DeviceBuffer> buffers = new ArrayList<>();
  private Transfers transfers = Transfers.NONE;
  private volatile boolean closed;

  private DeviceMath(int device, long streamAddress) {
    Status s = status();
    if (!s.available()) throw new IllegalStateException(s.reason());
    this.device = device;
    this.stream = new Address(streamAddress);
    check(SparkCommsNative.sc_set_device(device), "sc_set_device(" + device + ")");
    check(SparkCommsNative.sc_blas_create(stream, blas), "sc_blas_create");
  }

  /** Math on {@code comm}'s GPU and stream: its results are ordered before the communicator's later calls. */
  public static DeviceMath on(GpuCommunicator comm) { return new DeviceMath(comm.device(), comm.streamAddress()); }

  /** Math on {@code device}, queued on the stream at {@code streamAddress} (0: the default stream). */
  public static DeviceMath open(int device, long streamAddress) { return new DeviceMath(device, streamAddress); }

  /** Loads on first call; never throws. */
  public static Status status() {
    Status s = status;
    if (s == null) {
      synchronized (DeviceMath.class) {
        if (status == null) status = load();
        s = status;
      }
    }
    return s;
  }

  private static Status load() {
    GpuLibrary.Status g = GpuLibrary.status();
    if (!g.available()) return new Status(false, null, "device math unavailable: " + g.reason());
    if (SparkCommsNative.sc_blas_available() != 1) {
      return new Status(false, null, "device math unavailable: " + SparkCommsNative.sc_last_error());
    }
    return new Status(true, g.runtimeInfo(), null);
  }

  @Override public String description() { return "device " + device + " (" + status().description() + ")"; }

  @Override public boolean isDevice() { return true; }

  public int device() { return device; }

  @Override public synchronized Matrix zeros(int rows, int cols) {
    DeviceMatrix m = allocate(rows, cols);
    zero(m);
    return m;
  }

  private DeviceMatrix allocate(int rows, int cols) {
    if (closed) throw new IllegalStateException("DeviceMath is closed");
    if (rows < 0 || cols < 0) throw new IllegalArgumentException("matrix sizes must be >= 0, got " + rows + " x " + cols);
    DeviceBuffer b = DeviceBuffer.allocate(DataType.FLOAT32, (long) rows * cols, device);
    buffers.add(b);
    return new DeviceMatrix(this, b, rows, cols, 0);
  }

  @Override public synchronized Matrix upload(float[] data, int rows, int cols) {
    Shapes.data(data, rows, cols);
    DeviceMatrix m = allocate(rows, cols);
    upload(data, m);
    return m;
  }

  @Override public synchronized void upload(float[] data, Matrix m) {
    DeviceMatrix d = Shapes.own(this, DeviceMatrix.class, m, "matrix");
    Shapes.data(data, d.rows, d.cols);
    synchronize();                       // the stream's queued work may still read the old contents
    d.deviceTensor().copyFrom(HostTensor.of(data));
    transfers = transfers.plusUpload(4L * data.length);
  }

  @Override public synchronized float[] download(Matrix m) {
    DeviceMatrix d = Shapes.own(this, DeviceMatrix.class, m, "matrix");
    float[] out = new float[Shapes.intCount(d, "download")];
    synchronize();
    d.deviceTensor().copyTo(HostTensor.of(out));
    transfers = transfers.plusDownload(4L * out.length);
    return out;
  }

  @Override public void copy(Matrix src, Matrix dst) {
    begin();
    DeviceMatrix s = Shapes.own(this, DeviceMatrix.class, src, "src"), d = Shapes.own(this, DeviceMatrix.class, dst, "dst");
    Shapes.sameCount(s, d, "copy");
    Shapes.disjoint(d, s, "copy");
    if (s.count() == 0) return;
    check(SparkCommsNative.sc_memcpy_dtod(ptr(d), ptr(s), 4 * s.count(), stream), "sc_memcpy_dtod");
  }

  @Override public void zero(Matrix m) {
    begin();
    DeviceMatrix d = Shapes.own(this, DeviceMatrix.class, m, "matrix");
    if (d.count() == 0) return;
    check(SparkCommsNative.sc_memset(ptr(d), 0, 4 * d.count(), stream), "sc_memset");
  }

  /**
   * Row-major through column-major BLAS: a row-major matrix is its transpose column-major, so
   * {@code c = op(a) op(b)} is {@code c^T = op(b)^T op(a)^T}, i.e. sgemm with the operands swapped.
   */
  @Override public void gemm(float alpha, Matrix a, boolean transA, Matrix b, boolean transB, float beta, Matrix c) {
    begin();
    DeviceMatrix x = Shapes.own(this, DeviceMatrix.class, a, "a"), y = Shapes.own(this, DeviceMatrix.class, b, "b"), z = Shapes.own(this, DeviceMatrix.class, c, "c");
    Shapes.gemm(x, transA, y, transB, z);
    int k = transA ? x.rows : x.cols;
    check(SparkCommsNative.sc_blas_sgemm(blas, transB ? 1 : 0, transA ? 1 : 0, z.cols, z.rows, k, alpha, ptr(y),
        Math.max(1, y.cols), ptr(x), Math.max(1, x.cols), beta, ptr(z), Math.max(1, z.cols)), "sgemm");
  }

  @Override public void axpy(float alpha, Matrix x, Matrix y) {
    begin();
    DeviceMatrix s = Shapes.own(this, DeviceMatrix.class, x, "x"), d = Shapes.own(this, DeviceMatrix.class, y, "y");
    Shapes.sameCount(s, d, "axpy");
    check(SparkCommsNative.sc_blas_saxpy(blas, (int) s.count(), alpha, ptr(s), ptr(d)), "saxpy");
  }

  @Override public void scale(float alpha, Matrix x) {
    begin();
    DeviceMatrix d = Shapes.own(this, DeviceMatrix.class, x, "x");
    check(SparkCommsNative.sc_blas_sscal(blas, Shapes.intCount(d, "scale"), alpha, ptr(d)), "sscal");
  }

  @Override public void biasActivation(Matrix y, Matrix bias, Activation act) {
    begin();
    DeviceMatrix d = Shapes.own(this, DeviceMatrix.class, y, "y");
    DeviceMatrix b = bias == null ? null : Shapes.own(this, DeviceMatrix.class, bias, "bias");
    Shapes.bias(d, b);
    check(SparkCommsNative.sc_math_bias_activation(ptr(d), b == null ? null : ptr(b), d.rows, d.cols, act.ordinal(), stream),
        "sc_math_bias_activation");
  }

  @Override public void activationBackward(Matrix grad, Matrix out, Activation act) {
    begin();
    DeviceMatrix g = Shapes.own(this, DeviceMatrix.class, grad, "grad"), o = Shapes.own(this, DeviceMatrix.class, out, "out");
    Shapes.sameCount(g, o, "activationBackward");
    check(SparkCommsNative.sc_math_activation_backward(ptr(g), ptr(o), (int) g.count(), act.ordinal(), stream),
        "sc_math_activation_backward");
  }

  @Override public void columnSums(Matrix x, float alpha, Matrix out) {
    begin();
    DeviceMatrix d = Shapes.own(this, DeviceMatrix.class, x, "x"), o = Shapes.own(this, DeviceMatrix.class, out, "out");
    Shapes.columnSums(d, o);
    check(SparkCommsNative.sc_math_column_sums(ptr(d), d.rows, d.cols, alpha, ptr(o), stream), "sc_math_column_sums");
  }

  @Override public void sigmoidCrossEntropy(Matrix logits, Matrix labels, Matrix grad, Matrix loss) {
    begin();
    DeviceMatrix z = Shapes.own(this, DeviceMatrix.class, logits, "logits"), y = Shapes.own(this, DeviceMatrix.class, labels, "labels");
    DeviceMatrix g = Shapes.own(this, DeviceMatrix.class, grad, "grad"), l = Shapes.own(this, DeviceMatrix.class, loss, "loss");
    Shapes.crossEntropy(z, y, g, l);
    check(SparkCommsNative.sc_math_sigmoid_xent(ptr(z), ptr(y), (int) z.count(), ptr(g), ptr(l), stream), "sc_math_sigmoid_xent");
  }

  /** Device events on this math's stream, created once and recorded again at each mark. */
  @Override public synchronized Timeline timeline(int points) {
    if (closed) throw new IllegalStateException("DeviceMath is closed");
    Pointer[] ev = new Pointer[points];
    for (int i = 0; i < points; i++) {
      ev[i] = new Pointer((Pointer) null);
      check(SparkCommsNative.sc_event_create(ev[i]), "sc_event_create");
    }
    return new Timeline() {
      @Override public void mark(int i) { check(SparkCommsNative.sc_event_record(ev[i], stream), "sc_event_record"); }
      @Override public double millis(int from, int to) {
        check(SparkCommsNative.sc_event_synchronize(ev[to]), "sc_event_synchronize");
        float[] ms = new float[1];
        check(SparkCommsNative.sc_event_elapsed_ms(ev[from], ev[to], ms), "sc_event_elapsed_ms");
        return ms[0];
      }
      @Override public void close() {
        for (Pointer e : ev) SparkCommsNative.sc_event_destroy(e);
      }
    };
  }

  @Override public void synchronize() {
    check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    check(SparkCommsNative.sc_stream_synchronize(stream), "sc_stream_synchronize");
  }

  @Override public synchronized Transfers transfers() { return transfers; }

  /** Waits for the stream, then frees the BLAS handle and every matrix. Idempotent. */
  @Override public synchronized void close() {
    if (closed) return;
    closed = true;
    try {
      SparkCommsNative.sc_set_device(device);
      SparkCommsNative.sc_stream_synchronize(stream);
    } finally {
      SparkCommsNative.sc_blas_destroy(blas);
      blas.setNull();
      RuntimeException first = null;
      for (DeviceBuffer b : buffers) {
        try {
          b.close();
        } catch (RuntimeException e) {
          if (first == null) first = e;
        }
      }
      buffers.clear();
      if (first != null) throw first;
    }
  }

  /**
   * Every operation first: refuses a closed math (its BLAS handle is freed) and makes this math's
   * device current on the calling thread (kernels and BLAS calls run on the current device).
   */
  private void begin() {
    if (closed) throw new IllegalStateException("DeviceMath is closed");
    check(SparkCommsNative.sc_set_device(device), "sc_set_device(" + device + ")");
  }

  private static Pointer ptr(DeviceMatrix m) { return new Address(m.address()); }

  private static void check(int rc, String what) {
    if (rc != SparkCommsNative.SC_OK) {
      String msg = what + " failed: " + SparkCommsNative.sc_status_name(rc) + ": " + SparkCommsNative.sc_last_error();
      if (rc == SparkCommsNative.SC_ERR_INVALID_ARG) throw new IllegalArgumentException(msg);
      throw new IllegalStateException(msg);
    }
  }

  /** A pointer to an address this math does not own. */
  private static final class Address extends Pointer {
    Address(long address) { this.address = address; }
  }
}
