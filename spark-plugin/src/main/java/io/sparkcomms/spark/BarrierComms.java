package io.sparkcomms.spark;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
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
 * the barrier stage (each must call it) through a {@link SparkBarrierRendezvous}, on this executor's
 * GPU when there is one and the GPU backend is available, else on the host backend. Later calls in
 * the same task return the same communicator. It is cached per (stage, stage attempt, partition):
 * a retried stage attempt gets a fresh one. When the task ends it is closed and its statistics go to
 * {@link SparkCommsMetrics}; when the task fails it is aborted first, so peers stop waiting at once.
 *
 * <p>Retries: Spark relaunches a failed barrier stage only when it is a shuffle map stage; a failed
 * barrier result stage aborts the job. End the barrier RDD with a shuffle (for example
 * {@code .repartition(1)}, as XGBoost does) when a failed collective should be retried.
 */
public final class BarrierComms {
  private static final Logger LOG = LoggerFactory.getLogger(BarrierComms.class);

  private record Key(int stageId, int stageAttempt, int partition) {}

  private static final Map<Key, Communicator> CACHE = new ConcurrentHashMap<>();

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

  /** Communicators currently open in this JVM (for tests and diagnostics). */
  static int openCount() { return CACHE.size(); }

  private static Communicator create(BarrierTaskContext ctx, CommOptions options) {
    Key key = key(ctx);
    long t0 = System.nanoTime();
    int device = ExecutorGpu.currentOrdinal();
    SparkBarrierRendezvous rv = new SparkBarrierRendezvous(ctx);
    Communicator comm;
    try {
      comm = Comms.create(rv, options, device);
    } catch (RuntimeException e) {
      rv.close();
      throw e;
    }
    long setup = System.nanoTime() - t0;
    CACHE.put(key, comm);
    SparkCommsMetrics.current().ifPresent(m -> m.recordSetup(setup));
    ctx.addTaskFailureListener((TaskFailureListener) (tc, error) -> comm.abort("barrier task " + key + " failed: " + error));
    ctx.addTaskCompletionListener((TaskCompletionListener) tc -> release(key, comm, rv));
    LOG.info("sparkcomms: {} communicator rank {}/{} for {} (device {}) built in {} ms", comm.backendName(),
        comm.rank(), comm.size(), rv.describe(), device, setup / 1_000_000);
    return comm;
  }

  private static void release(Key key, Communicator comm, SparkBarrierRendezvous rv) {
    CACHE.remove(key, comm);
    try {
      SparkCommsMetrics.current().ifPresent(m -> m.recordStats(comm.stats()));
      comm.close();
    } finally {
      rv.close();
    }
  }

  private static Key key(BarrierTaskContext ctx) {
    return new Key(ctx.stageId(), ctx.stageAttemptNumber(), ctx.partitionId());
  }

  private static BarrierTaskContext requireBarrierTask() {
    TaskContext tc = TaskContext.get();
    if (tc == null) {
      throw new IllegalStateException("BarrierComms.get() must be called inside a task of a barrier stage "
          + "(rdd.barrier().mapPartitions(...)); it was called outside any Spark task (on the driver?)");
    }
    if (!(tc instanceof BarrierTaskContext)) {
      throw new IllegalStateException("BarrierComms.get() must be called inside a task of a barrier stage "
          + "(rdd.barrier().mapPartitions(...)); stage " + tc.stageId() + " (partition " + tc.partitionId()
          + ") is not a barrier stage, so its tasks may not run together and a collective could hang");
    }
    return (BarrierTaskContext) tc;
  }
}
