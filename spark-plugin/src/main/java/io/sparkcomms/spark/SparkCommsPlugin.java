package io.sparkcomms.spark;

import io.sparkcomms.spark.plugin.SparkCommsConf;
import io.sparkcomms.spark.plugin.SparkCommsDriverPlugin;
import io.sparkcomms.spark.plugin.SparkCommsExecutorPlugin;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * The sparkcomms Spark plugin: {@code --conf spark.plugins=io.sparkcomms.spark.SparkCommsPlugin}.
 * Spark creates one {@link SparkCommsDriverPlugin} in the driver and one
 * {@link SparkCommsExecutorPlugin} in every executor (local mode included) for the application's
 * lifetime. Settings: {@link SparkCommsConf}.
 */
public final class SparkCommsPlugin implements SparkPlugin {
  @Override public DriverPlugin driverPlugin() { return new SparkCommsDriverPlugin(); }

  @Override public ExecutorPlugin executorPlugin() { return new SparkCommsExecutorPlugin(); }
}
