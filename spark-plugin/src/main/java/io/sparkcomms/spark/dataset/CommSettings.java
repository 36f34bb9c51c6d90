package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.spark.BarrierComms;
import io.sparkcomms.spark.plugin.SparkCommsConf;
import java.io.Serializable;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.SparkEnv;

/**
 * Which communicator options the helpers' barrier tasks use: by default the Spark configuration's
 * {@code spark.sparkcomms.*} keys ({@link SparkCommsConf}), optionally overridden per job by keys
 * given here ({@link #with}, {@link #lowPrecision}) or replaced by a serializable
 * {@link CommOptions} factory ({@link #of(OptionsFactory)}). Immutable and serializable: it travels to
 * the executors, where {@link #communicator()} resolves it (CommOptions itself is not serializable).
 */
public final class CommSettings implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Builds the options on the executor. */
  @FunctionalInterface
  public interface OptionsFactory extends Serializable {
    CommOptions create();
  }

  private static final CommSettings FROM_CONF = new CommSettings(Map.of(), null);

  private final Map<String, String> overrides;
  private final OptionsFactory factory;

  private CommSettings(Map<String, String> overrides, OptionsFactory factory) {
    this.overrides = overrides;
    this.factory = factory;
  }

  /** The Spark configuration as it is (the default). */
  public static CommSettings fromSparkConf() { return FROM_CONF; }

  /** Options built by {@code factory} on each executor, ignoring the Spark configuration. */
  public static CommSettings of(OptionsFactory factory) {
    if (factory == null) throw new IllegalArgumentException("factory is null");
    return new CommSettings(Map.of(), factory);
  }

  /**
   * These settings with one {@code spark.sparkcomms.*} key overridden; {@code key} may omit the
   * prefix ({@code "lowPrecision"} or {@code "spark.sparkcomms.lowPrecision"}).
   */
  public CommSettings with(String key, String value) {
    String k = key.startsWith(SparkCommsConf.PREFIX) ? key : SparkCommsConf.PREFIX + key;
    if (SparkCommsConf.find(k).isEmpty()) {
      throw new IllegalArgumentException("unknown sparkcomms key " + k + " (see docs/configuration.md)");
    }
    Map<String, String> m = new LinkedHashMap<>(overrides);
    m.put(k, value);
    return new CommSettings(Collections.unmodifiableMap(m), factory);
  }

  /**
   * FP8 low-precision allReduce on or off ({@code spark.sparkcomms.lowPrecision}); when on, also
   * from {@code minBytes} bytes on ({@code spark.sparkcomms.lpMinBytes}; the default 16M would leave
   * small models' gradients in full precision).
   */
  public CommSettings lowPrecision(boolean on, long minBytes) {
    CommSettings s = with("lowPrecision", Boolean.toString(on));
    return on ? s.with("lpMinBytes", Long.toString(minBytes)) : s;
  }

  /** FP8 low precision on or off, other keys (lpMinBytes included) from the Spark configuration. */
  public CommSettings lowPrecision(boolean on) { return with("lowPrecision", Boolean.toString(on)); }

  /** The overridden keys. */
  public Map<String, String> overrides() { return overrides; }

  /** The options on this executor: the factory's, or the Spark configuration with the overrides. */
  public CommOptions resolve() {
    if (factory != null) return factory.create();
    Map<String, String> conf = SparkEnv.get() == null ? new LinkedHashMap<>()
        : SparkCommsConf.toMap(SparkEnv.get().conf());
    conf.putAll(overrides);
    return SparkCommsConf.of(conf).commOptions();
  }

  /** The barrier task's communicator ({@link BarrierComms}) with these settings. */
  public Communicator communicator() {
    return factory == null && overrides.isEmpty() ? BarrierComms.get() : BarrierComms.get(resolve());
  }

  @Override public String toString() {
    return factory != null ? "CommSettings{factory}" : "CommSettings" + overrides;
  }
}
