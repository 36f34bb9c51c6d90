package io.sparkcomms.spark.plugin;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.gpu.GpuClaimRegistry;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousRegistry;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.SparkContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The driver side of {@link io.sparkcomms.spark.SparkCommsPlugin}. Lifecycle, one instance per application:
 * {@link #init} validates the configuration ({@link ConfigValidator}; a bad one stops the
 * SparkContext from starting), listens for removed executors and returns the settings every
 * executor plugin receives; {@link #receive} answers the executors' GPU claim messages from its
 * {@link GpuClaimRegistry} and the barrier tasks' rendezvous messages ({@link RendezvousProtocol})
 * from its {@link RendezvousRegistry} until {@link #shutdown}. {@code receive} runs on Spark's RPC
 * dispatcher and never waits: a rendezvous round that is not complete is answered "pending". A
 * listener forgets the rendezvous of every stage attempt that ends.
 */
public final class SparkCommsDriverPlugin implements DriverPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(SparkCommsDriverPlugin.class);

  private final GpuClaimRegistry registry = new GpuClaimRegistry();
  private final RendezvousRegistry rendezvous = new RendezvousRegistry();

  @Override
  public Map<String, String> init(SparkContext sc, PluginContext ctx) {
    Map<String, String> conf = SparkCommsConf.toMap(sc.getConf());
    ConfigValidator.validate(conf);
    sc.addSparkListener(new CleanupListener(registry, rendezvous));
    SparkCommsConf c = SparkCommsConf.of(conf);
    Map<String, String> toExecutors = new LinkedHashMap<>();
    toExecutors.put(SparkCommsConf.RESOURCE_NAME.key(), c.resourceName());
    toExecutors.put(SparkCommsConf.NUMA_AFFINITY.key(), Boolean.toString(c.numaAffinity()));
    toExecutors.put(SparkCommsConf.GPU_CLAIM_CHECK_INTERVAL.key(), c.gpuClaimCheckInterval().toMillis() + "ms");
    LOG.info("sparkcomms: driver plugin ready; executor settings {}", toExecutors);
    return toExecutors;
  }

  /** The rendezvous state (tests). */
  RendezvousRegistry rendezvousRegistry() { return rendezvous; }

  /**
   * An executor's message, encoded by {@link PluginWire} (the reply is encoded the same way); a
   * message object as such is handled too (in-process callers).
   */
  @Override
  public Object receive(Object message) {
    if (message instanceof byte[] wire) {
      Object reply = handle(PluginWire.decode(wire));
      return reply == null ? null : PluginWire.encode(reply);
    }
    return handle(message);
  }

  private Object handle(Object message) {
    if (message instanceof RendezvousProtocol.Poll poll) return rendezvous.poll(poll);
    if (message instanceof RendezvousProtocol.Deposit deposit) return rendezvous.deposit(deposit);
    if (message instanceof RendezvousProtocol.Abort abort) {
      LOG.warn("sparkcomms: {} gave up its rendezvous: {}", abort.slot(), abort.reason());
      rendezvous.abort(abort);
      return null;
    }
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

  /**
   * Ends the claims of executors the cluster manager removed (crashed, killed, or exited), and
   * forgets the rendezvous of stage attempts that ended (succeeded, failed, or were cancelled).
   */
  private static final class CleanupListener extends SparkListener {
    private final GpuClaimRegistry registry;
    private final RendezvousRegistry rendezvous;

    CleanupListener(GpuClaimRegistry registry, RendezvousRegistry rendezvous) {
      this.registry = registry;
      this.rendezvous = rendezvous;
    }

    @Override public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
      registry.release(removed.executorId());
    }

    @Override public void onStageCompleted(SparkListenerStageCompleted completed) {
      rendezvous.stageEnded(completed.stageInfo().stageId(), completed.stageInfo().attemptNumber());
    }
  }
}
