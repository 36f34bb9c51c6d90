package io.sparkcomms.spark.plugin;

import io.sparkcomms.spark.gpu.ExecutorGpu;
import io.sparkcomms.spark.gpu.ExecutorHost;
import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.gpu.GpuClaimWatchdog;
import io.sparkcomms.spark.gpu.NumaAffinity;
import io.sparkcomms.spark.rendezvous.PluginRendezvous;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.apache.spark.TaskFailedReason;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.PluginContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The executor side of {@link io.sparkcomms.spark.SparkCommsPlugin}. Lifecycle, one instance per executor JVM:
 *
 * <ol>
 *   <li>{@link #init}: installs {@link SparkCommsMetrics} and its {@link PluginContext} as this JVM's
 *       channel to the driver plugin (the RPC rendezvous of {@link io.sparkcomms.spark.BarrierComms} uses it,
 *       through {@link #driverRpc}), its messages sealed as this executor with the application's key that
 *       the driver plugin handed over in {@code extraConf} ({@link PluginAuth}; without it init fails);
 *       finds the executor's GPU in its resources
 *       (none: the host backend is used and nothing else happens); claims it with the driver, binds it
 *       once (an unusable or contested GPU throws, so the executor exits at start with the reason in
 *       its log instead of lingering); optionally binds the process to the GPU's NUMA-local CPUs;
 *       starts the {@link GpuClaimWatchdog}.</li>
 *   <li>{@link #onTaskStart}: binds the GPU on the task thread ({@link ExecutorGpu#bindCurrentThread}).</li>
 *   <li>{@link #shutdown}: stops the watchdog, releases the claim, uninstalls what init installed.</li>
 * </ol>
 */
public final class SparkCommsExecutorPlugin implements ExecutorPlugin {
  private static final Logger LOG = LoggerFactory.getLogger(SparkCommsExecutorPlugin.class);
  /** Exit status of an executor whose GPU another executor of its host also holds. */
  static final int EXIT_GPU_CONFLICT = 61;

  /** A plugin context and the sealer of this executor's messages. */
  private record Channel(PluginContext ctx, PluginAuth.Sender sender) {
    Object ask(Object message) throws Exception { return PluginWire.ask(ctx, sender, message); }
  }

  /** The executor plugin's channel of this JVM, for the RPC rendezvous; null without the plugin. */
  private static volatile Channel driverChannel;

  private PluginContext ctx;
  private Channel channel;
  private SparkCommsMetrics metrics;
  private ExecutorGpu gpu;
  private GpuClaimWatchdog watchdog;

  @Override
  public void init(PluginContext ctx, Map<String, String> extraConf) {
    this.ctx = ctx;
    Map<String, String> settings = new HashMap<>(extraConf);
    String key = settings.remove(PluginAuth.KEY_SETTING);
    if (key == null) {
      throw new IllegalStateException("sparkcomms: the driver plugin handed executor " + ctx.executorID()
          + " no message key (" + PluginAuth.KEY_SETTING + " in its extraConf); does the driver run the same "
          + "sparkcomms version, with the same spark.plugins?");
    }
    channel = new Channel(ctx, new PluginAuth.Sender(PluginAuth.decodeKey(key), ctx.executorID()));
    Map<String, String> all = new HashMap<>(SparkCommsConf.toMap(ctx.conf()));
    all.putAll(settings);
    SparkCommsConf conf = SparkCommsConf.of(all);
    metrics = SparkCommsMetrics.install(ctx.metricRegistry());
    driverChannel = channel;
    String host = ExecutorHost.of(ctx);
    Optional<ExecutorGpu> found = ExecutorGpu.fromResources(ctx.resources(), conf.resourceName(), host, ctx.executorID());
    if (found.isEmpty()) {
      LOG.info("sparkcomms: executor {} has no '{}' resource; collectives use the host backend", ctx.executorID(), conf.resourceName());
      return;
    }
    ExecutorGpu g = found.get();
    claim(g);
    ExecutorGpu.install(g);
    gpu = g;
    bindAtStart(g);
    if (conf.numaAffinity()) {
      LOG.info("sparkcomms: {}", NumaAffinity.bindProcess(g.ordinal(), ProcessHandle.current().pid()));
    }
    watchdog = new GpuClaimWatchdog(conf.gpuClaimCheckInterval(),
        () -> (GpuClaimProtocol.Reply) channel.ask(new GpuClaimProtocol.Check()), this::onConflict);
    watchdog.start();
    LOG.info("sparkcomms: executor {} owns {} (device binder: {})", ctx.executorID(), g,
        ExecutorGpu.binder().describe());
  }

  @Override
  public void onTaskStart() {
    if (gpu == null) return;
    try {
      gpu.bindCurrentThread();
    } catch (RuntimeException e) {
      // Spark ignores exceptions from onTaskStart; ExecutorGpu.current() raises the reason in the task.
      LOG.error("sparkcomms: could not bind {} on task thread {}: {}", gpu, Thread.currentThread().getName(), e.getMessage());
    }
  }

  @Override public void onTaskSucceeded() { ExecutorGpu.unbindCurrentThread(); }

  @Override public void onTaskFailed(TaskFailedReason reason) { ExecutorGpu.unbindCurrentThread(); }

  @Override
  public void shutdown() {
    if (watchdog != null) watchdog.close();
    if (gpu != null) {
      try {
        PluginWire.send(ctx, channel.sender(), new GpuClaimProtocol.Release());
      } catch (Exception e) {
        LOG.debug("sparkcomms: could not release the GPU claim: {}", e.toString());
      }
      ExecutorGpu.uninstall(gpu);
    }
    if (metrics != null) SparkCommsMetrics.uninstall(metrics);
    if (driverChannel == channel) driverChannel = null;
  }

  /**
   * The channel to the driver plugin of this executor JVM ({@code PluginContext.ask}, messages and
   * replies sealed by {@link PluginAuth} and encoded by {@link PluginWire}), when the plugin is loaded
   * (empty, for example, when {@code spark.plugins} does not name it).
   */
  public static Optional<PluginRendezvous.Rpc> driverRpc() {
    Channel c = driverChannel;
    return c == null ? Optional.empty() : Optional.of(c::ask);
  }

  private void claim(ExecutorGpu g) {
    GpuClaimProtocol.Reply reply;
    try {
      reply = (GpuClaimProtocol.Reply) channel.ask(new GpuClaimProtocol.Claim(g.host(), g.resourceName(), g.address()));
    } catch (Exception e) {
      throw new IllegalStateException("sparkcomms: executor " + g.executorId() + " could not claim " + g
          + " with the driver: " + e, e);
    }
    if (!reply.granted()) {
      LOG.error("sparkcomms: {}", reply.message());
      throw new IllegalStateException("sparkcomms: " + reply.message());
    }
  }

  private static void bindAtStart(ExecutorGpu g) {
    try {
      g.bindCurrentThread();
      ExecutorGpu.unbindCurrentThread();
    } catch (RuntimeException e) {
      String msg = "sparkcomms: " + g + " is unusable (" + ExecutorGpu.binder().describe() + "): " + e.getMessage()
          + "; the executor stops instead of running tasks on a broken GPU";
      LOG.error(msg, e);
      throw new IllegalStateException(msg, e);
    }
  }

  private void onConflict(String message) {
    gpu.markConflicted("sparkcomms: " + message);
    LOG.error("sparkcomms: {} Executor {} exits with status {}.", message, ctx.executorID(), EXIT_GPU_CONFLICT);
    System.exit(EXIT_GPU_CONFLICT);
  }
}
