package io.sparkcomms.collectives;

/**
 * A flat run of elements that a collective reads or writes. Host tensors ({@link HostTensor}) view Java
 * arrays or direct buffers and never own memory; device tensors (GPU backend) may own device memory and
 * say so in their type.
 */
public interface Tensor {
  DataType dtype();

  /** Number of elements. */
  long count();

  default long bytes() { return count() * dtype().size(); }

  /** True when the elements live in GPU memory. */
  boolean isDevice();
}
