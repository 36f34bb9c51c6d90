package io.sparkcomms.spark.rendezvous;

import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.collectives.rendezvous.RendezvousException;
import java.time.Duration;
import java.util.Base64;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.spark.BarrierTaskContext;

/**
 * A {@link Rendezvous} over Spark's {@link BarrierTaskContext#allGather(String)}: blobs travel as
 * Base64 strings, prefixed with the sender's host. Rank is the task's partition id, size the number
 * of tasks of the barrier stage.
 *
 * <p>The host of every task comes from {@link BarrierTaskContext#getTaskInfos()} (known to all tasks
 * without a sync); the host prefix of every blob is checked against it.
 *
 * <p>Each {@link #allGather} is one Spark barrier sync, so every task must call it the same number of
 * times. It runs on a helper thread so that {@code timeout} bounds it; after a timeout the
 * rendezvous is broken (the task fails, which fails the barrier stage). Lifecycle: created by
 * {@link io.sparkcomms.spark.BarrierComms} for one task attempt, closed when that task completes.
 */
public final class SparkBarrierRendezvous implements Rendezvous {
  private final BarrierTaskContext ctx;
  private final String host;
  private final String[] hosts;
  private final ExecutorService syncThread;
  private volatile String broken;

  /** The rendezvous of barrier task {@code ctx}. */
  public SparkBarrierRendezvous(BarrierTaskContext ctx) {
    this.ctx = ctx;
    this.hosts = NodeIdentity.hostsOf(ctx);
    this.host = hosts[ctx.partitionId()];
    this.syncThread = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "sparkcomms-rendezvous-stage" + ctx.stageId() + "-part" + ctx.partitionId());
      t.setDaemon(true);
      return t;
    });
  }

  @Override public int rank() { return ctx.partitionId(); }

  @Override public int size() { return hosts.length; }

  /** This task's host. */
  public String host() { return host; }

  @Override
  public byte[][] allGather(byte[] mine, Duration timeout) {
    if (broken != null) throw new RendezvousException(broken);
    String message = host + "\t" + Base64.getEncoder().encodeToString(mine);
    String[] all = syncWithin(message, timeout);
    if (all.length != hosts.length) {
      throw new RendezvousException(describe() + ": expected " + hosts.length + " messages, got " + all.length);
    }
    byte[][] out = new byte[all.length][];
    for (int r = 0; r < all.length; r++) {
      int tab = all[r].indexOf('\t');
      String from = tab < 0 ? "" : all[r].substring(0, tab);
      if (!from.equals(hosts[r])) {
        throw new RendezvousException(describe() + ": rank " + r + " reported host '" + from + "', expected '"
            + hosts[r] + "' (a task calls allGather outside BarrierComms?)");
      }
      out[r] = Base64.getDecoder().decode(all[r].substring(tab + 1));
    }
    return out;
  }

  @Override public String describe() {
    return "Spark barrier stage " + ctx.stageId() + " attempt " + ctx.stageAttemptNumber() + " (partition "
        + ctx.partitionId() + " of " + hosts.length + " on " + host + ")";
  }

  @Override public void close() { syncThread.shutdownNow(); }

  private String[] syncWithin(String message, Duration timeout) {
    Future<String[]> f = syncThread.submit(() -> ctx.allGather(message));
    try {
      return f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (TimeoutException e) {
      f.cancel(true);
      broken = describe() + ": not every task reached the rendezvous within " + timeout
          + " (a task is slow before BarrierComms.get(), died, or makes a different number of barrier calls)";
      throw new RendezvousException(broken);
    } catch (ExecutionException e) {
      broken = describe() + ": barrier allGather failed: " + e.getCause();
      throw new RendezvousException(broken, e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      f.cancel(true);
      broken = describe() + ": interrupted (the task was killed)";
      throw new RendezvousException(broken, e);
    }
  }

  /** {@code host:port}, {@code [v6]:port} or a bare host, to the host. */
  static String hostOf(String address) {
    String a = address.trim();
    if (a.startsWith("[")) {
      int end = a.indexOf(']');
      return end > 0 ? a.substring(1, end) : a;
    }
    int colon = a.lastIndexOf(':');
    return colon > 0 && a.indexOf(':') == colon ? a.substring(0, colon) : a;
  }



}
