/**
 * Dense float32 math on host arrays or in GPU memory, for the models whose tensors the collectives
 * reduce: one {@link io.sparkcomms.collectives.math.DenseMath} API, a host implementation
 * ({@link io.sparkcomms.collectives.math.HostMath}, plain Java) and a device one
 * ({@link io.sparkcomms.collectives.math.DeviceMath}: the vendor BLAS and this project's element-wise
 * kernels through the GPU library, on the communicator's stream). Model code written once against
 * {@code DenseMath} runs on either; its {@link io.sparkcomms.collectives.math.Matrix} buffers are
 * tensors the communicator of the same place reduces in place.
 */
package io.sparkcomms.collectives.math;
