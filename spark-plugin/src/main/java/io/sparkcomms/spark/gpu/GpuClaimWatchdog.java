package io.sparkcomms.spark.gpu;

import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Re-checks an executor's GPU claim with the driver every interval and calls {@code onConflict}
 * once with the driver's message when another executor of the host claims the same GPU.
 * Lifecycle: {@link #start} in the executor plugin's {@code init}, {@link #close} in its
 * {@code shutdown}; one daemon thread in between. A failed check (driver busy or gone) is logged and
 * retried at the next interval.
 */
public final class GpuClaimWatchdog implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(GpuClaimWatchdog.class);

  private final Duration interval;
  private final Callable<GpuClaimProtocol.Reply> check;
  private final Consumer<String> onConflict;
  private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "sparkcomms-gpu-claim-watchdog");
    t.setDaemon(true);
    return t;
  });
  private volatile boolean fired;

  public GpuClaimWatchdog(Duration interval, Callable<GpuClaimProtocol.Reply> check, Consumer<String> onConflict) {
    this.interval = interval;
    this.check = check;
    this.onConflict = onConflict;
  }

  public void start() {
    long ms = Math.max(1, interval.toMillis());
    timer.scheduleWithFixedDelay(this::checkOnce, ms, ms, TimeUnit.MILLISECONDS);
  }

  void checkOnce() {
    if (fired) return;
    GpuClaimProtocol.Reply reply;
    try {
      reply = check.call();
    } catch (Exception e) {
      LOG.warn("sparkcomms: GPU claim check with the driver failed (retrying): {}", e.toString());
      return;
    }
    if (reply != null && !reply.granted()) {
      fired = true;
      onConflict.accept(reply.message());
    }
  }

  @Override public void close() { timer.shutdownNow(); }
}
