package io.sparkcomms.spark;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommStats;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.objects.CommObjectException;
import io.sparkcomms.collectives.objects.ObjectCollectives;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.spark.gpu.ExecutorGpu;
import io.sparkcomms.spark.plugin.SparkCommsConf;
import io.sparkcomms.spark.plugin.SparkCommsExecutorPlugin;
import io.sparkcomms.spark.plugin.SparkCommsMetrics;
import io.sparkcomms.spark.net.SparkNetworkTransport;
import io.sparkcomms.spark.rendezvous.NodeIdentity;
import io.sparkcomms.spark.rendezvous.PluginRendezvous;
import io.sparkcomms.spark.rendezvous.SparkBarrierRendezvous;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.util.TaskFailureListener;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The communicator of the current barrier task:
 *
 * <pre>{@code
 * rdd.barrier().mapPartitions(it -> {
 *   Communicator comm = BarrierComms.get();
 *   comm.allReduce(HostTensor.of(gradients), ReduceOp.SUM);
 *   ...
 * });
 * }</pre>
 *
 * <p>Lifecycle: the first call in a task builds the communicator, collectively over every task of
 * the barrier stage (each must call it), on this executor's GPU when there is one and the GPU
 * backend is available, else on the host backend. The tasks meet through a {@link PluginRendezvous}
 * (the plugin's RPC channel to the driver, a few milliseconds per round, no Spark barrier sync) when
 * the executor runs {@link SparkCommsPlugin}, else through a {@link SparkBarrierRendezvous} (Spark's
 * {@code BarrierTaskContext.allGather}, about a second per round); {@code spark.sparkcomms.rendezvous}
 * chooses ({@link SparkCommsConf#RENDEZVOUS}). Later calls in
 * the same task return the same communicator. It is cached per (stage, stage attempt, partition):
 * a retried stage attempt gets a fresh one. When the task ends it is closed and its statistics go to
 * {@link SparkCommsMetrics} and, when the task asked for it ({@link #addStatsTo}), to the stage page's
 * {@link CommAccumulators}; when the task fails it is aborted first, so peers stop waiting at once.
 *
 * <p>Retries: Spark relaunches a failed barrier stage only when it is a shuffle map stage; a failed
 * barrier result stage aborts the job. End the barrier RDD with a shuffle (for example
 * {@code .repartition(1)}, as XGBoost does) when a failed collective should be retried.
 */
public final class BarrierComms {
  private static final Logger LOG = LoggerFactory.getLogger(BarrierComms.class);

  private record Key(int stageId, int stageAttempt, int partition) {}

  private static final Map<Key, Communicator> CACHE = new ConcurrentHashMap<>();
  /** Rendezvous built so far per task attempt: the group token of the next one (tasks build them in the same order). */
  private static final Map<Key, Integer> GROUPS = new ConcurrentHashMap<>();
  private static final AtomicBoolean WARNED_SLOW = new AtomicBoolean();
  private static final Map<Key, Rendezvous> RENDEZVOUS = new ConcurrentHashMap<>();
  /** Communicators tied to their tasks by {@link #closeWithTask} and not yet closed, with their task. */
  private static final Map<Communicator, Key> CHILDREN = new ConcurrentHashMap<>();
  /** The accumulators each task's communicators add their statistics to when the task ends ({@link #addStatsTo}). */
  private static final Map<Key, CommAccumulators> ACCUMULATORS = new ConcurrentHashMap<>();

  private BarrierComms() {}

  /** The barrier task's communicator with options from the Spark configuration ({@link SparkCommsConf}). */
  public static Communicator get() {
    BarrierTaskContext ctx = requireBarrierTask();
    Communicator c = CACHE.get(key(ctx));
    return c != null ? c : create(ctx, SparkCommsConf.of(SparkEnv.get().conf()).commOptions());
  }

  /**
   * The barrier task's communicator built with {@code options}. The first call of a task decides
   * the options; every task of the stage must pass equal options.
   */
  public static Communicator get(CommOptions options) {
    BarrierTaskContext ctx = requireBarrierTask();
    Communicator c = CACHE.get(key(ctx));
    return c != null ? c : create(ctx, options);
  }

  /**
   * Every barrier task's object, in rank order, serialized with Spark's Kryo settings
   * ({@link SparkKryoCodec#current()}) within {@link ObjectCollectives#DEFAULT_MAX_BYTES}, on
   * {@link #get()}'s communicator; {@link ObjectCollectives#allGatherObject(io.sparkcomms.collectives.Communicator,
   * Object, io.sparkcomms.collectives.objects.ObjectCodec, int)} says what fails where.
   *
   * @param o this task's object, may be null
   * @return an unmodifiable list of one object per task of the stage, by rank
   * @throws CommObjectException on every task when a task's object cannot be serialized or is over
   *     the limit; on this task only when it cannot deserialize what it received
   */
  public static List<Object> allGatherObject(Object o) {
    return ObjectCollectives.allGatherObject(get(), o, SparkKryoCodec.current(), ObjectCollectives.DEFAULT_MAX_BYTES);
  }

  /**
   * The root task's object on every barrier task, serialized with Spark's Kryo settings
   * ({@link SparkKryoCodec#current()}) within {@link ObjectCollectives#DEFAULT_MAX_BYTES}, on
   * {@link #get()}'s communicator.
   *
   * @param o the object on the root task (may be null); ignored on the others
   * @param root the rank whose object is sent, the same on every task
   * @return on the root, {@code o} itself; elsewhere a copy of the root's object
   * @throws CommObjectException on every task when the root's object cannot be serialized or is over
   *     the limit; on this task only when it cannot deserialize it
   */
  public static Object broadcastObject(Object o, int root) {
    return ObjectCollectives.broadcastObject(get(), o, root, SparkKryoCodec.current(), ObjectCollectives.DEFAULT_MAX_BYTES);
  }

  /**
   * Every barrier task's object on the root task, in rank order, serialized with Spark's Kryo
   * settings ({@link SparkKryoCodec#current()}) within {@link ObjectCollectives#DEFAULT_MAX_BYTES}, on
   * {@link #get()}'s communicator.
   *
   * @param o this task's object, may be null
   * @param root the rank that receives, the same on every task
   * @return on the root, an unmodifiable list of one object per task, by rank; null elsewhere
   * @throws CommObjectException on every task when a task's object cannot be serialized or is over
   *     the limit; on the root only when it cannot deserialize what it received
   */
  public static List<Object> gatherObject(Object o, int root) {
    return ObjectCollectives.gatherObject(get(), o, root, SparkKryoCodec.current(), ObjectCollectives.DEFAULT_MAX_BYTES);
  }

  /**
   * A sub-communicator of the ranks listed, in that order, built from {@link #get()}'s communicator
   * ({@link Communicator#split(int[])}), owned by this task ({@link #closeWithTask}). Collective over
   * every task of the stage: each calls it with the same list, listed or not. Several groups take one
   * call each:
   *
   * <pre>{@code
   * Communicator group = null;
   * for (int[] members : new int[][] {{0, 1}, {2, 3}}) {     // the same calls, in the same order, on every task
   *   Communicator c = BarrierComms.split(members);
   *   if (c != null) group = c;                               // this task's group
   * }
   * }</pre>
   *
   * @return the child, where child rank i is stage rank {@code ranks[i]}; null on a task not listed
   * @throws io.sparkcomms.collectives.CommMismatchException on every task when the tasks passed
   *     different lists; {@link IllegalArgumentException} on a task whose list is invalid (a rank out
   *     of range or listed twice), and the mismatch exception on the others
   */
  public static Communicator split(int[] ranks) {
    return closeWithTask(get().split(ranks));
  }

  /**
   * A sub-communicator of the tasks that pass the same {@code color}, ordered by {@code key} then by
   * rank, built from {@link #get()}'s communicator ({@link Communicator#split(int, int)}), owned by
   * this task ({@link #closeWithTask}). Collective over every task of the stage. Groups of {@code g}
   * consecutive ranks: {@code split(rank / g, rank)}.
   *
   * @return the child of this task's color; null for a negative color
   */
  public static Communicator split(int color, int key) {
    return closeWithTask(get().split(color, key));
  }

  /**
   * Ties a communicator this barrier task made (a child of its communicator, from
   * {@link Communicator#split}) to the task, as the task's own communicator is: aborted when the
   * task fails (so the child's peers stop waiting), its statistics recorded in
   * {@link SparkCommsMetrics} (and in the task's {@link CommAccumulators}, see {@link #addStatsTo})
   * and closed when the task ends, before the task's communicator is
   * (completion listeners run in the reverse order of their registration).
   *
   * @param child the communicator, or null (returned as is: a task outside a split's list gets null)
   * @return {@code child}
   * @throws IllegalStateException outside a barrier task
   */
  public static Communicator closeWithTask(Communicator child) {
    BarrierTaskContext ctx = requireBarrierTask();
    if (child == null) return null;
    Key key = key(ctx);
    CHILDREN.put(child, key);
    ctx.addTaskFailureListener((TaskFailureListener) (tc, error) -> child.abort("barrier task " + key + " failed: " + error));
    ctx.addTaskCompletionListener((TaskCompletionListener) tc -> {
      CHILDREN.remove(child);
      recordStats(key, child.stats());
      child.close();
    });
    return child;
  }

  /**
   * Has this barrier task add the statistics of its communicators to {@code accumulators} when it
   * ends ({@link CommAccumulators#add}, once per communicator): the one {@link #get()} builds and
   * every one tied to the task by {@link #closeWithTask} (the children of {@link #split}). Call it
   * before the task's first {@link #get()} or {@link #closeWithTask}: the statistics are added by the
   * listeners those register, which Spark runs before this one's (completion listeners run in the
   * reverse order of their registration), and this one forgets the registration. A second call
   * with the same holder does nothing; with another one, the later holder takes the statistics.
   *
   * @param accumulators a holder registered on the driver and carried in the task's closure
   * @throws IllegalStateException outside a barrier task, or when the task already built or tied a
   *     communicator (its statistics would reach no accumulator)
   * @throws IllegalArgumentException when {@code accumulators} is null
   */
  public static void addStatsTo(CommAccumulators accumulators) {
    BarrierTaskContext ctx = requireBarrierTask();
    if (accumulators == null) throw new IllegalArgumentException("accumulators are null");
    Key key = key(ctx);
    if (ACCUMULATORS.get(key) == accumulators) return;
    if (CACHE.containsKey(key) || CHILDREN.containsValue(key)) {
      throw new IllegalStateException("BarrierComms.addStatsTo: barrier task " + key + " already has a communicator; "
          + "call it before the task's first BarrierComms.get() or closeWithTask");
    }
    if (ACCUMULATORS.put(key, accumulators) == null) {
      ctx.addTaskCompletionListener((TaskCompletionListener) tc -> ACCUMULATORS.remove(key));
    }
  }

  /** Tasks in this JVM whose accumulators are registered and whose end has not yet come (tests). */
  static int accumulatorTaskCount() { return ACCUMULATORS.size(); }

  /** Communicators tied to their tasks by {@link #closeWithTask} and not yet closed, in this JVM (tests). */
  static int openChildCount() { return CHILDREN.size(); }

  /** Communicators currently open in this JVM (for tests and diagnostics). */
  static int openCount() { return CACHE.size(); }

  /** How the current barrier task's communicator was rendezvoused ({@link Rendezvous#describe}), if built (tests). */
  static Optional<String> rendezvousOfCurrentTask() {
    return Optional.ofNullable(RENDEZVOUS.get(key(requireBarrierTask()))).map(Rendezvous::describe);
  }

  private static Communicator create(BarrierTaskContext ctx, CommOptions options) {
    Key key = key(ctx);
    long t0 = System.nanoTime();
    int device = ExecutorGpu.currentOrdinal();
    Rendezvous rv = rendezvous(ctx, key);
    Communicator comm;
    try {
      SparkCommsConf conf = SparkCommsConf.of(SparkEnv.get().conf());
      String[] hosts = NodeIdentity.hostsOf(ctx);
      Map<String, String> nodeNames = conf.nodeNames();
      if (NodeIdentity.acrossNodes(nodeNames, hosts)) {
        String node = NodeIdentity.of(nodeNames, SparkEnv.get().executorId(), hosts[ctx.partitionId()], System.getenv());
        comm = Comms.createAcrossNodes(rv, node, SparkNetworkTransport.forExecutor(), options, device);
      } else {
        comm = Comms.create(rv, options, device);
      }
    } catch (RuntimeException e) {
      if (rv instanceof PluginRendezvous p) p.abort("building the communicator failed on this rank: " + e);
      rv.close();
      throw e;
    }
    long setup = System.nanoTime() - t0;
    CACHE.put(key, comm);
    RENDEZVOUS.put(key, rv);
    SparkCommsMetrics.current().ifPresent(m -> m.recordSetup(setup));
    ctx.addTaskFailureListener((TaskFailureListener) (tc, error) -> comm.abort("barrier task " + key + " failed: " + error));
    ctx.addTaskCompletionListener((TaskCompletionListener) tc -> release(key, comm, rv));
    LOG.info("sparkcomms: {} communicator rank {}/{} for {} (device {}) built in {} ms", comm.backendName(),
        comm.rank(), comm.size(), rv.describe(), device, setup / 1_000_000);
    return comm;
  }

  /** The plugin RPC rendezvous when the plugin runs in this executor (and the conf allows it), else the barrier one. */
  private static Rendezvous rendezvous(BarrierTaskContext ctx, Key key) {
    SparkCommsConf.RendezvousMode mode = SparkCommsConf.of(SparkEnv.get().conf()).rendezvous();
    Optional<PluginRendezvous.Rpc> channel = SparkCommsExecutorPlugin.driverRpc();
    if (mode != SparkCommsConf.RendezvousMode.BARRIER && channel.isPresent()) {
      boolean first = !GROUPS.containsKey(key);
      int group = GROUPS.merge(key, 1, Integer::sum) - 1;
      if (first) ctx.addTaskCompletionListener((TaskCompletionListener) tc -> GROUPS.remove(key));
      return PluginRendezvous.forTask(ctx, channel.get(), group);
    }
    if (mode == SparkCommsConf.RendezvousMode.RPC) {
      throw new IllegalStateException("BarrierComms: " + SparkCommsConf.RENDEZVOUS.key() + "=rpc needs the sparkcomms "
          + "plugin in this executor (spark.plugins=" + SparkCommsPlugin.class.getName() + ")");
    }
    if (mode == SparkCommsConf.RendezvousMode.AUTO && WARNED_SLOW.compareAndSet(false, true)) {
      LOG.warn("sparkcomms: the plugin is not loaded in this executor (spark.plugins={}), so communicators meet "
          + "through BarrierTaskContext.allGather, about a second per round instead of milliseconds. Add "
          + "spark.plugins={} for the fast rendezvous.", SparkEnv.get().conf().get("spark.plugins", ""),
          SparkCommsPlugin.class.getName());
    }
    return new SparkBarrierRendezvous(ctx);
  }

  private static void release(Key key, Communicator comm, Rendezvous rv) {
    CACHE.remove(key, comm);
    RENDEZVOUS.remove(key, rv);
    try {
      recordStats(key, comm.stats());
      comm.close();
    } finally {
      rv.close();
    }
  }

  /** The one place a finished communicator's statistics go: the executor's metrics and the task's accumulators. */
  private static void recordStats(Key key, CommStats stats) {
    SparkCommsMetrics.current().ifPresent(m -> m.recordStats(stats));
    CommAccumulators acc = ACCUMULATORS.get(key);
    if (acc != null) acc.add(stats);
  }

  private static Key key(BarrierTaskContext ctx) {
    return new Key(ctx.stageId(), ctx.stageAttemptNumber(), ctx.partitionId());
  }

  private static BarrierTaskContext requireBarrierTask() {
    TaskContext tc = TaskContext.get();
    if (tc == null) {
      throw new IllegalStateException("BarrierComms works only inside a task of a barrier stage "
          + "(rdd.barrier().mapPartitions(...)); it was called outside any Spark task (on the driver?)");
    }
    if (!(tc instanceof BarrierTaskContext)) {
      throw new IllegalStateException("BarrierComms works only inside a task of a barrier stage "
          + "(rdd.barrier().mapPartitions(...)); stage " + tc.stageId() + " (partition " + tc.partitionId()
          + ") is not a barrier stage, so its tasks may not run together and a collective could hang");
    }
    return (BarrierTaskContext) tc;
  }
}
