package io.sparkcomms.spark.rendezvous;

import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.collectives.rendezvous.RendezvousException;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Abort;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Poll;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Reply;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.apache.spark.BarrierTaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Rendezvous} over the plugin's own RPC channel: each {@link #allGather} deposits this
 * rank's blob with the driver plugin ({@link RendezvousRegistry}) and polls until every rank's blob
 * is there, backing off from {@value #FIRST_BACKOFF_MICROS} µs to {@value #MAX_BACKOFF_MICROS} µs
 * between polls. A round costs a few milliseconds, where a {@link BarrierTaskContext#allGather}
 * costs about a second (Spark polls its barrier coordinator once a second). No Spark barrier sync
 * is made: rank and size come from the task's partition id and the stage's task infos, which also
 * give the hosts without a sync. Every message names the task attempt, and
 * the driver accepts a rank's messages only from the task that runs its partition; until its
 * SparkListener has reported that task, it answers {@link RendezvousProtocol.Status#UNVERIFIED} and
 * this rank sends its deposit again.
 *
 * <p>Failures raise {@link RendezvousException} within the timeout: a rank that never arrives
 * (naming the missing ranks), a peer that gave up ({@link Abort}), an ended stage attempt (the
 * driver's listener), a killed task. On a timeout this rank aborts the group, so its peers stop too.
 * Lifecycle: created by {@link io.sparkcomms.spark.BarrierComms} for one task attempt, closed when
 * that task completes.
 */
public final class PluginRendezvous implements Rendezvous {
  private static final Logger LOG = LoggerFactory.getLogger(PluginRendezvous.class);
  static final long FIRST_BACKOFF_MICROS = 500;
  static final long MAX_BACKOFF_MICROS = 20_000;

  /**
   * The executor-to-driver channel: asks the driver plugin and returns its reply. In an executor it is
   * {@code PluginContext.ask} with the plugin's wire encoding
   * ({@link io.sparkcomms.spark.plugin.SparkCommsExecutorPlugin#driverRpc}).
   */
  @FunctionalInterface
  public interface Rpc {
    Object ask(Object message) throws Exception;
  }

  private final Rpc rpc;
  private final int stageId;
  private final int stageAttempt;
  private final int group;
  private final int rank;
  private final int size;
  private final long taskId;
  private final String where;
  private final BooleanSupplier killed;
  private ExecutorService askThread;
  private int round;
  private volatile String broken;

  /**
   * Rank {@code rank} of {@code size} of the {@code group}-th communicator of stage attempt
   * ({@code stageId}, {@code stageAttempt}), spoken for by task attempt {@code taskId}; {@code where}
   * names the host in messages, {@code killed} says when the task was killed.
   */
  public PluginRendezvous(Rpc rpc, int stageId, int stageAttempt, int group, int rank, int size, long taskId,
      String where, BooleanSupplier killed) {
    this.rpc = rpc;
    this.stageId = stageId;
    this.stageAttempt = stageAttempt;
    this.group = group;
    this.rank = rank;
    this.size = size;
    this.taskId = taskId;
    this.where = where;
    this.killed = killed;
  }

  /**
   * The rendezvous of barrier task {@code ctx}'s {@code group}-th communicator, over {@code rpc}.
   */
  public static PluginRendezvous forTask(BarrierTaskContext ctx, Rpc rpc, int group) {
    String[] hosts = NodeIdentity.hostsOf(ctx);
    return new PluginRendezvous(rpc, ctx.stageId(), ctx.stageAttemptNumber(), group, ctx.partitionId(),
        hosts.length, ctx.taskAttemptId(), hosts[ctx.partitionId()], ctx::isInterrupted);
  }

  @Override public int rank() { return rank; }

  @Override public int size() { return size; }

  @Override
  public byte[][] allGather(byte[] mine, Duration timeout) {
    if (broken != null) throw new RendezvousException(broken);
    if (mine.length > RendezvousProtocol.MAX_BLOB_BYTES) {
      throw new RendezvousException(describe() + ": a blob of " + mine.length + " bytes; the plugin RPC rendezvous carries "
          + "at most " + RendezvousProtocol.MAX_BLOB_BYTES + " per rank and round");
    }
    long start = System.nanoTime();
    long deadline = start + timeout.toNanos();
    int polls = 0;
    Slot slot = slot();
    Deposit deposit = new Deposit(slot, mine, timeout.toMillis());
    Reply reply = ask(deposit, deadline, slot, null, timeout);
    long backoff = FIRST_BACKOFF_MICROS * 1000;
    while (reply.status() == RendezvousProtocol.Status.PENDING || reply.status() == RendezvousProtocol.Status.UNVERIFIED) {
      long left = deadline - System.nanoTime();
      if (left <= 0) throw giveUp(slot, waitedFor(timeout, reply));
      if (killed.getAsBoolean()) throw giveUp(slot, "the task was killed");
      LockSupport.parkNanos(Math.min(backoff, left));
      if (Thread.interrupted()) {
        Thread.currentThread().interrupt();
        throw giveUp(slot, "interrupted (the task was killed)");
      }
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MICROS * 1000);
      boolean unverified = reply.status() == RendezvousProtocol.Status.UNVERIFIED;
      reply = ask(unverified ? deposit : new Poll(slot), deadline, slot, reply, timeout);
      polls++;
    }
    if (reply.status() == RendezvousProtocol.Status.FAILED) {
      broken = describe() + ": " + reply.message();
      throw new RendezvousException(broken);
    }
    byte[][] all = reply.blobs();
    if (all == null || all.length != size) {
      throw giveUp(slot, "the driver answered " + (all == null ? 0 : all.length) + " blobs for " + size + " ranks");
    }
    byte[][] out = new byte[size][];
    for (int r = 0; r < size; r++) out[r] = all[r].clone();   // in local mode the reply is not copied
    if (LOG.isDebugEnabled()) {
      LOG.debug("sparkcomms: {} round {} took {} µs, {} polls", describe(), round, (System.nanoTime() - start) / 1000, polls);
    }
    round++;
    return out;
  }

  @Override public String describe() {
    return "Spark barrier stage " + stageId + " attempt " + stageAttempt + " (partition " + rank + " of " + size
        + " on " + where + ", plugin RPC rendezvous)";
  }

  /** Fails the group on the driver, so peers waiting for this rank stop at their next poll. */
  public void abort(String reason) {
    if (broken == null) broken = describe() + ": " + reason;
    tellDriver(slot(), reason);
  }

  @Override
  public synchronized void close() {
    if (askThread != null) askThread.shutdownNow();
  }

  private RendezvousException giveUp(Slot slot, String why) {
    broken = describe() + ": " + why;
    tellDriver(slot, why);
    return new RendezvousException(broken);
  }

  private void tellDriver(Slot slot, String why) {
    try {
      askThread().submit(() -> rpc.ask(new Abort(slot, why)));   // best effort; the reply is not awaited
    } catch (RuntimeException e) {
      // closed: the task is ending anyway
    }
  }

  private Slot slot() { return new Slot(stageId, stageAttempt, group, round, rank, size, taskId); }

  /** What this rank waited for in vain, from the driver's last answer {@code last}. */
  private static String waitedFor(Duration timeout, Reply last) {
    if (last.status() == RendezvousProtocol.Status.UNVERIFIED) {
      return "the driver could not attribute this rank's deposit to its task within " + timeout + ": " + last.message();
    }
    return "not every task reached the rendezvous within " + timeout + "; missing rank(s) "
        + Arrays.toString(last.missing())
        + " (a task is slow before BarrierComms.get(), died, or makes a different number of rendezvous calls)";
  }

  /**
   * {@code rpc.ask(message)} on a helper thread, so that the deadline (not Spark's ask timeout) bounds it.
   * {@code last}: the driver's last answer (null before the first).
   */
  private Reply ask(Object message, long deadline, Slot slot, Reply last, Duration timeout) {
    Future<Object> f = askThread().submit(() -> rpc.ask(message));
    try {
      long left = Math.max(1, deadline - System.nanoTime());
      Object r = f.get(left, TimeUnit.NANOSECONDS);
      if (!(r instanceof Reply reply)) throw giveUp(slot, "unexpected answer from the driver plugin: " + r);
      return reply;
    } catch (TimeoutException e) {
      f.cancel(true);
      throw giveUp(slot, last != null ? waitedFor(timeout, last)
          : "the driver plugin did not answer within " + timeout);
    } catch (ExecutionException e) {
      broken = describe() + ": the driver plugin could not be asked (is spark.plugins the same on the driver?): "
          + e.getCause();
      throw new RendezvousException(broken, e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      f.cancel(true);
      throw giveUp(slot, "interrupted (the task was killed)");
    }
  }

  private synchronized ExecutorService askThread() {
    if (askThread == null) {
      askThread = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "sparkcomms-rendezvous-stage" + stageId + "-part" + rank);
        t.setDaemon(true);
        return t;
      });
    }
    return askThread;
  }
}
