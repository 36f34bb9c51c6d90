package io.sparkcomms.collectives.math;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.gpu.DeviceBuffer;
import io.sparkcomms.collectives.gpu.DeviceTensor;

/** A {@link Matrix} in a {@link DeviceBuffer} of {@link DeviceMath}. */
public final class DeviceMatrix extends Matrix {
  final DeviceBuffer buffer;

  DeviceMatrix(DenseMath owner, DeviceBuffer buffer, int rows, int cols, long offset) {
    super(owner, rows, cols, offset);
    this.buffer = buffer;
  }

  @Override long capacity() { return buffer.count(); }

  @Override Matrix viewAt(long offset, int rows, int cols) { return new DeviceMatrix(owner, buffer, rows, cols, offset); }

  @Override Object allocation() { return buffer; }

  /** The device address of element 0 (raises when the math that owns the memory was closed). */
  long address() { return buffer.view().address() + offset * 4; }

  @Override public Tensor tensor() { return deviceTensor(); }

  /** The same memory as a device tensor view. */
  public DeviceTensor deviceTensor() {
    if (buffer.dtype() != DataType.FLOAT32) throw new IllegalStateException("not a float32 buffer");
    return buffer.view(offset, count());
  }
}
