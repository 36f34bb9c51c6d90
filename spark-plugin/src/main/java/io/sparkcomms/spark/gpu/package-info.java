/**
 * The executor's GPU: discovery ({@link io.sparkcomms.spark.gpu.GpuInventory}, the same result as
 * {@code discover-gpus.sh}), the executor's one GPU and its binding to task threads
 * ({@link io.sparkcomms.spark.gpu.ExecutorGpu}, {@link io.sparkcomms.spark.gpu.DeviceBinder}), the
 * driver-side claims that stop two executors of a host from sharing a GPU, and NUMA affinity.
 *
 * <p>For applications: {@link io.sparkcomms.spark.gpu.ExecutorGpu#current()} (which GPU this
 * executor owns) and {@link io.sparkcomms.spark.gpu.DeviceBinder} (the hook a GPU backend provides).
 * The lifecycle methods of {@code ExecutorGpu}, the claim protocol, the watchdog and the NUMA binding
 * are public for the executor and driver plugins, not for applications to call. Uses no other
 * package of the Spark layer.
 */
package io.sparkcomms.spark.gpu;
