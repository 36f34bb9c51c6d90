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
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.scheduler.TaskInfo;
import org.apache.spark.storage.RDDInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The driver side of {@link io.sparkcomms.spark.SparkCommsPlugin}. Lifecycle, one instance per application:
 * {@link #init} validates the configuration ({@link ConfigValidator}; a bad one, or
 * {@code spark.sparkcomms.security.requireAuthenticate} without {@code spark.authenticate}, stops
 * the SparkContext from starting; otherwise a weak security setup is logged once), makes the
 * application's message key ({@link PluginAuth}), listens for removed executors, barrier stages and
 * task starts, and returns the settings every executor plugin receives, the key among them.
 * {@link #receive} opens each executor message (only authentic, fresh {@code byte[]} messages pass),
 * answers GPU claim messages from its {@link GpuClaimRegistry} and rendezvous messages
 * ({@link RendezvousProtocol}) from its {@link RendezvousRegistry}, always for the executor that
 * sent the message, until {@link #shutdown}. {@code receive} runs on Spark's RPC dispatcher and never
 * waits: a rendezvous round that is not complete is answered "pending". A listener forgets the
 * rendezvous of every stage attempt that ends.
 */
public final class SparkCommsDriverPlugin implements DriverPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(SparkCommsDriverPlugin.class);

  private final GpuClaimRegistry registry = new GpuClaimRegistry();
  private final RendezvousRegistry rendezvous = new RendezvousRegistry();
  private volatile PluginAuth.Receiver receiver;

  @Override
  public Map<String, String> init(SparkContext sc, PluginContext ctx) {
    Map<String, String> toExecutors = start(SparkCommsConf.toMap(sc.getConf()));
    sc.addSparkListener(new DriverListener(registry, rendezvous));
    return toExecutors;
  }

  /**
   * {@link #init} without a SparkContext (tests): validates {@code conf}, makes the key and returns
   * the settings for the executors, the key under {@link PluginAuth#KEY_SETTING}.
   */
  Map<String, String> start(Map<String, String> conf) {
    ConfigValidator.validate(conf);
    ConfigValidator.securityWarning(conf).ifPresent(w -> LOG.warn("sparkcomms: {}", w));
    SparkCommsConf c = SparkCommsConf.of(conf);
    Map<String, String> toExecutors = new LinkedHashMap<>();
    toExecutors.put(SparkCommsConf.RESOURCE_NAME.key(), c.resourceName());
    toExecutors.put(SparkCommsConf.NUMA_AFFINITY.key(), Boolean.toString(c.numaAffinity()));
    toExecutors.put(SparkCommsConf.GPU_CLAIM_CHECK_INTERVAL.key(), c.gpuClaimCheckInterval().toMillis() + "ms");
    LOG.info("sparkcomms: driver plugin ready; executor settings {} and the application's message key", toExecutors);
    byte[] key = PluginAuth.newKey();
    receiver = new PluginAuth.Receiver(key);
    toExecutors.put(PluginAuth.KEY_SETTING, PluginAuth.encodeKey(key));
    return toExecutors;
  }

  /** The rendezvous state (tests). */
  RendezvousRegistry rendezvousRegistry() { return rendezvous; }

  /** The GPU claims (tests). */
  GpuClaimRegistry gpuClaims() { return registry; }

  /**
   * An executor's message: a {@code byte[]} sealed with the application's key ({@link PluginAuth}),
   * its payload encoded by {@link PluginWire}; the reply is sealed for that executor. Anything else
   * (another type, a bad or replayed message, a payload outside the limits) raises
   * {@link IllegalArgumentException} saying why, before any of it is decoded.
   */
  @Override
  public Object receive(Object message) {
    PluginAuth.Receiver r = receiver;
    if (r == null) throw new IllegalStateException("sparkcomms driver plugin: refused a message before init");
    PluginAuth.Opened opened = r.open(message);
    Object reply = handle(opened.sender(), PluginWire.decodeRequest(opened.payload()));
    return reply == null ? null : r.sealReply(opened, PluginWire.encodeReply(reply));
  }

  /** Answers {@code message} for executor {@code sender}, which the message's authentication proved. */
  private Object handle(String sender, Object message) {
    if (message instanceof RendezvousProtocol.Poll poll) return rendezvous.poll(sender, poll);
    if (message instanceof RendezvousProtocol.Deposit deposit) return rendezvous.deposit(sender, deposit);
    if (message instanceof RendezvousProtocol.Abort abort) {
      String refused = rendezvous.abort(sender, abort);
      if (refused == null) {
        LOG.warn("sparkcomms: {} gave up its rendezvous: {}", abort.slot(), abort.reason());
      } else {
        LOG.warn("sparkcomms: ignored an abort from executor {}: {}", sender, refused);
      }
      return null;
    }
    if (message instanceof GpuClaimProtocol.Claim claim) {
      GpuClaimProtocol.Reply reply = registry.claim(sender, claim);
      if (reply.granted()) {
        LOG.info("sparkcomms: executor {} on {} claimed {} {}", sender, claim.host(), claim.resourceName(), claim.address());
      } else {
        LOG.error("sparkcomms: {}", reply.message());
      }
      return reply;
    }
    if (message instanceof GpuClaimProtocol.Check) return registry.check(sender);
    if (message instanceof GpuClaimProtocol.Release) {
      registry.release(sender);
      return null;
    }
    throw new IllegalArgumentException("sparkcomms driver plugin: unexpected message " + message);
  }

  /**
   * Ends the claims of executors the cluster manager removed (crashed, killed, or exited); tells the
   * rendezvous which tasks run the partitions of barrier stages; forgets the rendezvous of stage
   * attempts that ended (succeeded, failed, or were cancelled). Spark delivers these events in order
   * on one thread: a stage's submission before its tasks' starts.
   */
  static final class DriverListener extends SparkListener {
    private final GpuClaimRegistry registry;
    private final RendezvousRegistry rendezvous;

    DriverListener(GpuClaimRegistry registry, RendezvousRegistry rendezvous) {
      this.registry = registry;
      this.rendezvous = rendezvous;
    }

    @Override public void onExecutorRemoved(SparkListenerExecutorRemoved removed) {
      registry.release(removed.executorId());
    }

    /** A stage is a barrier stage when one of its RDDs is (the stage's RDD is a barrier RDD or derives from one). */
    @Override public void onStageSubmitted(SparkListenerStageSubmitted submitted) {
      for (RDDInfo rdd : CollectionConverters.asJava(submitted.stageInfo().rddInfos())) {
        if (rdd.isBarrier()) {
          rendezvous.barrierStageSubmitted(submitted.stageInfo().stageId(), submitted.stageInfo().attemptNumber());
          return;
        }
      }
    }

    @Override public void onTaskStart(SparkListenerTaskStart start) {
      TaskInfo t = start.taskInfo();
      int partition = t.partitionId() >= 0 ? t.partitionId() : t.index();
      rendezvous.taskStarted(start.stageId(), start.stageAttemptId(), partition, t.executorId(), t.taskId());
    }

    @Override public void onStageCompleted(SparkListenerStageCompleted completed) {
      rendezvous.stageEnded(completed.stageInfo().stageId(), completed.stageInfo().attemptNumber());
    }
  }
}
