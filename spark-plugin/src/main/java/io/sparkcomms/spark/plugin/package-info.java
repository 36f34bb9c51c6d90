/**
 * The plugin's machinery: {@link io.sparkcomms.spark.plugin.SparkCommsDriverPlugin} and
 * {@link io.sparkcomms.spark.plugin.SparkCommsExecutorPlugin} (created by
 * {@link io.sparkcomms.spark.SparkCommsPlugin}), the driver's configuration checks
 * ({@link io.sparkcomms.spark.plugin.ConfigValidator}) and the executor-to-driver message encoding.
 *
 * <p>For applications: {@link io.sparkcomms.spark.plugin.SparkCommsConf} (every
 * {@code spark.sparkcomms.*} key, typed) and {@link io.sparkcomms.spark.plugin.SparkCommsMetrics}
 * (the executor's counters). The plugin classes are public because Spark and the other packages of
 * this layer reach them, not for applications to call.
 */
package io.sparkcomms.spark.plugin;
