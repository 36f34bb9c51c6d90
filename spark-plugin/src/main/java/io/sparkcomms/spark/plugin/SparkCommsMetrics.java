package io.sparkcomms.spark.plugin;

import com.codahale.metrics.Counter;
import com.codahale.metrics.Histogram;
import com.codahale.metrics.MetricRegistry;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommStats;
import io.sparkcomms.collectives.Protocol;
import java.util.EnumMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The executor's sparkcomms metrics, in the plugin's metric registry (Spark reports them as
 * {@code plugin.io.sparkcomms.spark.SparkCommsPlugin.<name>}):
 *
 * <ul>
 *   <li>{@code communicators.created}: counter; {@code communicators.setupMillis}: histogram of the
 *       time {@code BarrierComms.get()} took to build a communicator (rendezvous included).</li>
 *   <li>{@code collectives.<protocol>.calls} and {@code collectives.<protocol>.bytes}: counters per
 *       {@link Protocol} that ran (lamport, ll, flat, tree, lp, vendor).</li>
 *   <li>{@code collectives.<protocol>.latencyMicros}: histogram; one sample per communicator and
 *       protocol, the mean latency of its calls ({@link CommStats} keeps totals, not single calls).</li>
 *   <li>{@code calls.<collective>.calls}, {@code calls.<collective>.bytes} and
 *       {@code calls.<collective>.micros}: counters per {@link Collective} (allreduce, reduce,
 *       gather, allgatherv, ...): how often each was called, what it moved and the time spent in it.</li>
 * </ul>
 *
 * <p>Lifecycle: the executor plugin {@link #install installs} one per JVM in {@code init} and
 * {@link #uninstall uninstalls} it in {@code shutdown}; {@code BarrierComms} feeds it when a
 * communicator is built and, from its {@link CommStats}, when the barrier task completes. Without the
 * plugin {@link #current()} is empty and nothing is recorded. Thread-safe.
 */
public final class SparkCommsMetrics {
  private static final AtomicReference<SparkCommsMetrics> CURRENT = new AtomicReference<>();

  private final Counter created;
  private final Histogram setupMillis;
  private final Map<Protocol, Counter> calls = new EnumMap<>(Protocol.class);
  private final Map<Protocol, Counter> bytes = new EnumMap<>(Protocol.class);
  private final Map<Protocol, Histogram> latency = new EnumMap<>(Protocol.class);
  private final Map<Collective, Counter> kindCalls = new EnumMap<>(Collective.class);
  private final Map<Collective, Counter> kindBytes = new EnumMap<>(Collective.class);
  private final Map<Collective, Counter> kindMicros = new EnumMap<>(Collective.class);

  SparkCommsMetrics(MetricRegistry registry) {
    created = registry.counter("communicators.created");
    setupMillis = registry.histogram("communicators.setupMillis");
    for (Protocol a : Protocol.values()) {
      String base = "collectives." + a.name().toLowerCase(java.util.Locale.ROOT);
      calls.put(a, registry.counter(base + ".calls"));
      bytes.put(a, registry.counter(base + ".bytes"));
      latency.put(a, registry.histogram(base + ".latencyMicros"));
    }
    for (Collective k : Collective.values()) {
      String base = "calls." + k.apiName().toLowerCase(java.util.Locale.ROOT);
      kindCalls.put(k, registry.counter(base + ".calls"));
      kindBytes.put(k, registry.counter(base + ".bytes"));
      kindMicros.put(k, registry.counter(base + ".micros"));
    }
  }

  /** The installed metrics of this JVM, if the executor plugin runs here. */
  public static Optional<SparkCommsMetrics> current() { return Optional.ofNullable(CURRENT.get()); }

  static SparkCommsMetrics install(MetricRegistry registry) {
    SparkCommsMetrics m = new SparkCommsMetrics(registry);
    CURRENT.set(m);
    return m;
  }

  static void uninstall(SparkCommsMetrics m) { CURRENT.compareAndSet(m, null); }

  /** A communicator was built in {@code nanos}. */
  public void recordSetup(long nanos) {
    created.inc();
    setupMillis.update(TimeUnit.NANOSECONDS.toMillis(nanos));
  }

  /** Adds a finished communicator's statistics. */
  public void recordStats(CommStats stats) {
    for (Map.Entry<Protocol, Counter> e : calls.entrySet()) {
      Protocol a = e.getKey();
      long n = stats.calls(a);
      if (n == 0) continue;
      e.getValue().inc(n);
      bytes.get(a).inc(stats.bytes(a));
      latency.get(a).update(TimeUnit.NANOSECONDS.toMicros(stats.nanos(a) / n));
    }
    for (Collective k : Collective.values()) {
      long n = stats.calls(k);
      if (n == 0) continue;
      kindCalls.get(k).inc(n);
      kindBytes.get(k).inc(stats.bytes(k));
      kindMicros.get(k).inc(TimeUnit.NANOSECONDS.toMicros(stats.nanos(k)));
    }
  }

  /** Calls of {@code kind} recorded so far. */
  public long calls(Collective kind) { return kindCalls.get(kind).getCount(); }

  /** Calls recorded so far that ran {@code p}. */
  public long calls(Protocol p) { return calls.get(p).getCount(); }

  /** Bytes recorded so far of calls that ran {@code p}. */
  public long bytes(Protocol p) { return bytes.get(p).getCount(); }

  /** Communicators built so far. */
  public long communicatorsCreated() { return created.getCount(); }
}
