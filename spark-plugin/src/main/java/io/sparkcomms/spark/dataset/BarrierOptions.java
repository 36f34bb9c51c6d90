package io.sparkcomms.spark.dataset;

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
 * </ul>
 */
public final class BarrierOptions implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final BarrierOptions DEFAULTS = new BarrierOptions(0, false, CommSettings.fromSparkConf());

  private final int ranks;
  private final boolean retriable;
  private final CommSettings comm;

  private BarrierOptions(int ranks, boolean retriable, CommSettings comm) {
    if (ranks < 0) throw new IllegalArgumentException("ranks must be >= 0, got " + ranks);
    if (comm == null) throw new IllegalArgumentException("comm settings are null");
    this.ranks = ranks;
    this.retriable = retriable;
    this.comm = comm;
  }

  public static BarrierOptions defaults() { return DEFAULTS; }

  public BarrierOptions ranks(int n) { return new BarrierOptions(n, retriable, comm); }

  public BarrierOptions retriable(boolean on) { return new BarrierOptions(ranks, on, comm); }

  public BarrierOptions comm(CommSettings settings) { return new BarrierOptions(ranks, retriable, settings); }

  public int ranks() { return ranks; }

  public boolean retriable() { return retriable; }

  public CommSettings comm() { return comm; }

  @Override public String toString() {
    return "BarrierOptions{ranks=" + ranks + ", retriable=" + retriable + ", comm=" + comm + "}";
  }
}
