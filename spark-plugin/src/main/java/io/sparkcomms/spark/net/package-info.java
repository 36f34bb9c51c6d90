/**
 * The transport between the nodes of a communicator that spans nodes:
 * {@link io.sparkcomms.spark.net.SparkNetworkTransport}, one server per executor over Spark's
 * network library, with the application's authentication and encryption. The framing, checks and
 * timeouts are the collectives module's ({@code io.sparkcomms.collectives.net.Mesh}). Uses no other
 * package of the Spark layer.
 */
package io.sparkcomms.spark.net;
