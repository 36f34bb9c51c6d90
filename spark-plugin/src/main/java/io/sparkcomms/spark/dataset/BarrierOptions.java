package io.sparkcomms.spark.dataset;

import io.sparkcomms.spark.CommAccumulators;
import java.io.Serializable;

/**
 * How a helper runs its barrier stage. Immutable; start from {@link #defaults()}.
 *
 * <ul>
 *   <li>{@code ranks}: number of tasks (= ranks) of the barrier stage. 0 (default) keeps the input's
 *       partitions, repartitioned to {@code defaultParallelism} when there are more (a barrier stage
 *       needs a free slot for every task at once). A positive value repartitions to exactly that many
 *       (a shuffle; a barrier stage may not contain a coalesce).</li>
 *   <li>{@code retriable}: Spark relaunches a failed barrier stage only when it is a shuffle map
 *       stage; a failed barrier result stage aborts the job. When true, the barrier stage's output
 *       goes through an identity shuffle (partition i to partition i, row order kept), so a failed
 *       collective (a lost executor, a timeout) reruns the whole stage with fresh communicators.</li>
 *   <li>{@code comm}: communicator options ({@link CommSettings}).</li>
 *   <li>{@code accumulators}: the {@link CommAccumulators} the stage's tasks add their collectives'
 *       calls, bytes and time to. Null (default): {@link BarrierDatasets#mapPartitions} registers a
 *       fresh set for each call when {@code spark.sparkcomms.accumulators.enabled} is true, none when
 *       it is false. A holder given here is used either way: it is how a job reads the totals on the
 *       driver.</li>
 * </ul>
 */
public final class BarrierOptions implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final BarrierOptions DEFAULTS = new BarrierOptions(0, false, CommSettings.fromSparkConf(), null);

  private final int ranks;
  private final boolean retriable;
  private final CommSettings comm;
  private final CommAccumulators accumulators;

  private BarrierOptions(int ranks, boolean retriable, CommSettings comm, CommAccumulators accumulators) {
    if (ranks < 0) throw new IllegalArgumentException("ranks must be >= 0, got " + ranks);
    if (comm == null) throw new IllegalArgumentException("comm settings are null");
    this.ranks = ranks;
    this.retriable = retriable;
    this.comm = comm;
    this.accumulators = accumulators;
  }

  /** Keep the input's partitions, not retriable, communicator options from the Spark configuration. */
  public static BarrierOptions defaults() { return DEFAULTS; }

  /** These options with {@code n} tasks (0: the input's partitions, see the class comment). */
  public BarrierOptions ranks(int n) { return new BarrierOptions(n, retriable, comm, accumulators); }

  /** These options with the output through an identity shuffle ({@code on}) or not. */
  public BarrierOptions retriable(boolean on) { return new BarrierOptions(ranks, on, comm, accumulators); }

  /** These options with communicator options {@code settings}. */
  public BarrierOptions comm(CommSettings settings) { return new BarrierOptions(ranks, retriable, settings, accumulators); }

  /**
   * These options with the tasks adding their statistics to {@code acc}, registered on the driver
   * ({@link CommAccumulators#register}); null: a fresh set for each call, as the class comment says.
   */
  public BarrierOptions accumulators(CommAccumulators acc) { return new BarrierOptions(ranks, retriable, comm, acc); }

  /** The number of tasks; 0: the input's partitions. */
  public int ranks() { return ranks; }

  /** Whether the output goes through an identity shuffle, so that Spark retries a failed stage. */
  public boolean retriable() { return retriable; }

  /** The communicator options. */
  public CommSettings comm() { return comm; }

  /** The accumulators given by {@link #accumulators(CommAccumulators)}, or null. */
  public CommAccumulators accumulators() { return accumulators; }

  @Override public String toString() {
    return "BarrierOptions{ranks=" + ranks + ", retriable=" + retriable + ", comm=" + comm
        + (accumulators == null ? "" : ", accumulators") + "}";
  }
}
