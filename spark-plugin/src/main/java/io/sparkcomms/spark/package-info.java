/**
 * The Spark layer's entry points, the classes applications name: {@link io.sparkcomms.spark.SparkCommsPlugin}
 * ({@code spark.plugins=io.sparkcomms.spark.SparkCommsPlugin}), {@link io.sparkcomms.spark.BarrierComms}
 * (the communicator of a barrier task, and object collectives on it), {@link io.sparkcomms.spark.SparkKryoCodec}
 * (their codec: Spark's Kryo settings), {@link io.sparkcomms.spark.CommAccumulators} (what the
 * collectives cost, on the Spark UI's stage page) and {@link io.sparkcomms.spark.GpuDiscoveryPlugin}
 * ({@code spark.resources.discoveryPlugin}).
 *
 * <p>Sub-packages, by concern: {@code dataset} (Dataset and JavaRDD helpers built on
 * {@code BarrierComms}), {@code plugin} (the driver and executor plugins, the typed configuration,
 * metrics, the plugin's message encoding), {@code gpu} (the executor's GPU: discovery, pinning,
 * claims, NUMA affinity), {@code rendezvous} (how the tasks of a barrier stage meet, which node each
 * runs on) and {@code net} (the transport between nodes, over Spark's network library). Dependencies
 * point one way: {@code gpu}, {@code rendezvous} and {@code net} use no other package of this layer,
 * {@code plugin} uses the first two, this package uses {@code plugin}, and {@code dataset} uses this
 * package and {@code plugin}.
 */
package io.sparkcomms.spark;
