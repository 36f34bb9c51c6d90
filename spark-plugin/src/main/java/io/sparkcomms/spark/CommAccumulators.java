package io.sparkcomms.spark;

import io.sparkcomms.collectives.CommStats;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.spark.plugin.SparkCommsConf;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.util.DoubleAccumulator;
import org.apache.spark.util.LongAccumulator;

/**
 * Named Spark accumulators of what barrier tasks spent in collectives, shown on the Spark UI's stage
 * page per task and in total (the names start with {@value #PREFIX}, so they sort together there):
 *
 * <ul>
 *   <li>{@code sparkcomms: calls}: collective calls;</li>
 *   <li>{@code sparkcomms: calls <protocol>}: calls that ran each {@link Protocol} (lamport, ll, flat,
 *       tree, lp, vendor);</li>
 *   <li>{@code sparkcomms: bytes}: bytes of those calls (each call's larger of input and output);</li>
 *   <li>{@code sparkcomms: time (ms)}: time in them, as {@link CommStats} measures it (async GPU
 *       calls, which are only enqueued, add none).</li>
 * </ul>
 *
 * <p>Registered on the driver ({@link #register}) before the job, carried to the tasks in its
 * closure, and fed in each task by {@link #add} once per communicator when the task ends:
 * {@link BarrierComms#addStatsTo} arranges that for the task's communicator and for those it tied to
 * the task ({@link BarrierComms#split}, {@link BarrierComms#closeWithTask}). {@code BarrierDatasets} (and so
 * every class of {@code io.sparkcomms.spark.dataset}) does both unless {@code spark.sparkcomms.accumulators.enabled} is false ({@link #registerIfEnabled}).
 * Spark counts the updates of successful tasks only (the accumulators do not count failed values),
 * so a retried stage adds its successful attempt once.
 *
 * <p>Read the totals on the driver after the job ({@link #calls()}, {@link #bytes()},
 * {@link #millis()}); every further job the same holder goes to adds to them.
 */
public final class CommAccumulators implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The prefix of every name. */
  public static final String PREFIX = "sparkcomms: ";
  /** The name of the calls accumulator. */
  public static final String CALLS = PREFIX + "calls";
  /** The name of the bytes accumulator. */
  public static final String BYTES = PREFIX + "bytes";
  /** The name of the time accumulator, in milliseconds. */
  public static final String TIME_MS = PREFIX + "time (ms)";

  private final LongAccumulator calls;
  private final LongAccumulator bytes;
  private final DoubleAccumulator millis;
  private final EnumMap<Protocol, LongAccumulator> protocolCalls;

  private CommAccumulators(LongAccumulator calls, LongAccumulator bytes, DoubleAccumulator millis,
      EnumMap<Protocol, LongAccumulator> protocolCalls) {
    this.calls = calls;
    this.bytes = bytes;
    this.millis = millis;
    this.protocolCalls = protocolCalls;
  }

  /** A fresh set of the accumulators, registered with {@code sc} under their names. Driver only. */
  public static CommAccumulators register(SparkContext sc) {
    if (sc == null) throw new IllegalArgumentException("SparkContext is null");
    EnumMap<Protocol, LongAccumulator> perProtocol = new EnumMap<>(Protocol.class);
    for (Protocol p : Protocol.values()) perProtocol.put(p, sc.longAccumulator(protocolCallsName(p)));
    return new CommAccumulators(sc.longAccumulator(CALLS), sc.longAccumulator(BYTES), sc.doubleAccumulator(TIME_MS),
        perProtocol);
  }

  /** {@link #register(SparkContext)} with {@code spark}'s context. */
  public static CommAccumulators register(SparkSession spark) {
    if (spark == null) throw new IllegalArgumentException("SparkSession is null");
    return register(spark.sparkContext());
  }

  /**
   * {@link #register(SparkContext)} when {@code spark.sparkcomms.accumulators.enabled} is true in
   * {@code sc}'s configuration (the default), else null: no accumulator is registered.
   *
   * @throws IllegalArgumentException when the key's value is not a switch
   */
  public static CommAccumulators registerIfEnabled(SparkContext sc) {
    if (sc == null) throw new IllegalArgumentException("SparkContext is null");
    return SparkCommsConf.of(sc.getConf()).accumulatorsEnabled() ? register(sc) : null;
  }

  /** The name of the accumulator of the calls that ran {@code p}: {@code "sparkcomms: calls flat"} and so on. */
  public static String protocolCallsName(Protocol p) { return CALLS + " " + p.name().toLowerCase(Locale.ROOT); }

  /** Every accumulator name, in the order of the class comment. */
  public static List<String> names() {
    List<String> out = new ArrayList<>();
    out.add(CALLS);
    for (Protocol p : Protocol.values()) out.add(protocolCallsName(p));
    out.add(BYTES);
    out.add(TIME_MS);
    return Collections.unmodifiableList(out);
  }

  /**
   * Adds one communicator's statistics: its calls, bytes and time over every protocol, and its calls
   * per protocol (an accumulator of a protocol that did not run is left untouched, so the task's row
   * on the stage page lists only those that did). Called in the task, on the copies Spark sends back.
   */
  public void add(CommStats stats) {
    if (stats == null) return;
    long n = 0;
    long b = 0;
    long ns = 0;
    for (Protocol p : Protocol.values()) {
      long c = stats.calls(p);
      if (c == 0) continue;
      protocolCalls.get(p).add(c);
      n += c;
      b += stats.bytes(p);
      ns += stats.nanos(p);
    }
    calls.add(n);
    bytes.add(b);
    millis.add(ns / 1e6);
  }

  /** Calls added so far (on the driver: by the successful tasks whose updates arrived). */
  public long calls() { return calls.value(); }

  /** Calls added so far that ran {@code p}. */
  public long calls(Protocol p) { return protocolCalls.get(p).value(); }

  /** Calls added so far per protocol that ran at least once. */
  public Map<Protocol, Long> callsByProtocol() {
    Map<Protocol, Long> m = new EnumMap<>(Protocol.class);
    protocolCalls.forEach((p, a) -> { if (a.value() > 0) m.put(p, a.value()); });
    return m;
  }

  /** Bytes added so far. */
  public long bytes() { return bytes.value(); }

  /** Milliseconds added so far. */
  public double millis() { return millis.value(); }

  @Override public String toString() {
    return "CommAccumulators{calls=" + calls() + ", bytes=" + bytes() + ", ms=" + millis() + ", " + callsByProtocol() + "}";
  }
}
