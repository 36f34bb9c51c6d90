package io.sparkcomms.collectives.math;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Tensor;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/** A {@link Matrix} in a direct host buffer of {@link HostMath}. */
public final class HostMatrix extends Matrix {
  final ByteBuffer bytes;   // the whole allocation, native order
  final FloatBuffer data;   // the same, as floats

  HostMatrix(DenseMath owner, ByteBuffer bytes, int rows, int cols, long offset) {
    super(owner, rows, cols, offset);
    this.bytes = bytes;
    this.data = bytes.asFloatBuffer();
  }

  static HostMatrix allocate(DenseMath owner, int rows, int cols) {
    long n = (long) rows * cols;
    if (n > Integer.MAX_VALUE / 4) throw new IllegalArgumentException(rows + " x " + cols + " floats exceed a host buffer (2 GiB)");
    return new HostMatrix(owner, ByteBuffer.allocateDirect((int) Math.max(1, n * 4)).order(ByteOrder.nativeOrder()), rows, cols, 0);
  }

  @Override long capacity() { return data.capacity(); }

  @Override Matrix viewAt(long offset, int rows, int cols) { return new HostMatrix(owner, bytes, rows, cols, offset); }

  @Override Object allocation() { return bytes; }

  /** Element {@code i} (row-major) of this matrix. */
  float get(long i) { return data.get((int) (offset + i)); }

  void set(long i, float v) { data.put((int) (offset + i), v); }

  @Override public Tensor tensor() {
    ByteBuffer b = bytes.duplicate().order(ByteOrder.nativeOrder());
    b.position((int) (offset * 4)).limit((int) ((offset + count()) * 4));
    return HostTensor.wrap(b, DataType.FLOAT32);
  }
}
