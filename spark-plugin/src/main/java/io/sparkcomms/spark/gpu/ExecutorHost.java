package io.sparkcomms.spark.gpu;

import java.net.InetAddress;
import java.net.UnknownHostException;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.plugin.PluginContext;

/**
 * The host name an executor is known by, for GPU claims. {@link PluginContext#hostname()} throws
 * on cluster executors in Spark 4.0 (it reads the executor's RPC server address, and executors run
 * their RPC environment in client mode, without one), so this falls back to the block manager's
 * host (the executor's {@code --hostname}, as the scheduler sees it), then to the local host name.
 */
public final class ExecutorHost {
  private ExecutorHost() {}

  /** The host name of the executor that {@code ctx} belongs to. */
  public static String of(PluginContext ctx) {
    try {
      String h = ctx.hostname();
      if (h != null && !h.isEmpty()) return h;
    } catch (RuntimeException e) {
      // Spark 4.0 executors: no RPC server address; fall through.
    }
    try {
      SparkEnv env = SparkEnv.get();
      if (env != null && env.blockManager() != null && env.blockManager().blockManagerId() != null) {
        return env.blockManager().blockManagerId().host();
      }
    } catch (RuntimeException e) {
      // block manager not initialized yet; fall through.
    }
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (UnknownHostException e) {
      return "unknown-host";
    }
  }
}
