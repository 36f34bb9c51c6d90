/**
 * How the tasks of a barrier stage meet to build a communicator: over the plugin's RPC channel
 * ({@link io.sparkcomms.spark.rendezvous.PluginRendezvous} on the executors,
 * {@link io.sparkcomms.spark.rendezvous.RendezvousRegistry} on the driver, messages in
 * {@link io.sparkcomms.spark.rendezvous.RendezvousProtocol}), or over Spark's
 * {@code BarrierTaskContext.allGather} ({@link io.sparkcomms.spark.rendezvous.SparkBarrierRendezvous}).
 * {@link io.sparkcomms.spark.rendezvous.NodeIdentity} says which node a task runs on.
 * {@link io.sparkcomms.spark.BarrierComms} chooses and builds them; applications get a communicator
 * from it rather than from these classes. Uses no other package of the Spark layer.
 */
package io.sparkcomms.spark.rendezvous;
