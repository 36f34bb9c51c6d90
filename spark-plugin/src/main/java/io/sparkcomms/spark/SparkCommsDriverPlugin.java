package io.sparkcomms.spark;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver side of {@link SparkCommsPlugin}. Lifecycle, one instance per application:
 * {@link #init} validates the configuration ({@link ConfigValidator}; a bad one stops the
 * SparkContext from starting), listens for removed executors and returns the settings every
 * executor plugin receives; {@link #receive} answers the executors' GPU claim messages from its
 * {@link GpuClaimRegistry} until {@link #shutdown}.
 */
public final class SparkCommsDriverPlugin implements DriverPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(SparkCommsDriverPlugin.class);

  private final GpuClaimRegistry registry = new GpuClaimRegistry();

  @Override
  public Map<String, String> init(SparkContext sc, PluginContext ctx) {
    Map<String, String> conf = SparkCommsConf.toMap(sc.getConf());
    ConfigValidator.validate(conf);
    sc.addSparkListener(new ReleaseOnExecutorRemoved(registry));
    SparkCommsConf c = SparkCommsConf.of(conf);
    Map<String, String> toExecutors = new LinkedHashMap<>();
    toExecutors.put(SparkCommsConf.RESOURCE_NAME.key(), c.resourceName());
    toExecutors.put(SparkCommsConf.NUMA_AFFINITY.key(), Boolean.toString(c.numaAffinity()));
    toExecutors.put(SparkCommsConf.GPU_CLAIM_CHECK_INTERVAL.key(), c.gpuClaimCheckInterval().toMillis() + "ms");
    LOG.info("sparkcomms: driver plugin ready; executor settings {}", toExecutors);
    return toExecutors;
  }

  @Override
  public Object receive(Object message) {
    if (message instanceof GpuClaimProtocol.Claim claim) {
      GpuClaimProtocol.Reply reply = registry.claim(claim);
      if (reply.granted()) {
        LOG.info("sparkcomms: executor {} on {} claimed {} {}", claim.executorId(), claim.host(), claim.resourceName(), claim.address());
      } else {
        LOG.error("sparkcomms: {}", reply.message());
      }
      return reply;
    }
    if (message instanceof GpuClaimProtocol.Check check) return registry.check(check.executorId());
    if (message instanceof GpuClaimProtocol.Release release) {
      registry.release(release.executorId());
      return null;
    }
    throw new IllegalArgumentException("sparkcomms driver plugin: unexpected message " + message);
  }

  /** Ends the claims of executors the cluster manager removed (crashed, killed, or exited). */
  private static final class ReleaseOnExecutorRemoved extends SparkListener {
    private final GpuClaimRegistry registry;

    ReleaseOnExecutorRemoved(GpuClaimRegistry registry) { this.registry = registry; }

    @Override public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
      registry.release(removed.executorId());
    }
  }
}
