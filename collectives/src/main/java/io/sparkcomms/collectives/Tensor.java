package io.sparkcomms.collectives;

/**
 * A flat run of elements that a collective reads or writes. Tensors are views and never own memory:
 * host tensors ({@link HostTensor}) view Java arrays or direct buffers, device tensors
 * ({@code gpu.DeviceTensor}) view device memory that a {@code gpu.DeviceBuffer} (or another GPU
 * library) owns.
 */
public interface Tensor {
  DataType dtype();

  /** Number of elements. */
  long count();

  default long bytes() { return count() * dtype().size(); }

  /** True when the elements live in GPU memory. */
  boolean isDevice();
}
