package io.sparkcomms.spark.plugin;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Driver-side checks of a Spark configuration for barrier-stage collectives. Stateless; the driver
 * plugin runs it once in {@code init}, so a bad configuration stops the application at startup
 * with every problem listed instead of failing later inside a barrier stage.
 */
public final class ConfigValidator {
  static final String DYNAMIC_ALLOCATION = "spark.dynamicAllocation.enabled";
  static final String AUTHENTICATE = "spark.authenticate";
  static final String NETWORK_CRYPTO = "spark.network.crypto.enabled";
  static final String SASL_ENCRYPTION = "spark.authenticate.enableSaslEncryption";

  private ConfigValidator() {}

  /** Throws {@link IllegalArgumentException} listing every problem of {@code conf}, if any. */
  public static void validate(Map<String, String> conf) {
    List<String> problems = problems(conf);
    if (!problems.isEmpty()) {
      throw new IllegalArgumentException("sparkcomms: invalid Spark configuration:\n  - "
          + String.join("\n  - ", problems));
    }
  }

  /** The problems of {@code conf}, one sentence each; empty when it is fine. */
  public static List<String> problems(Map<String, String> conf) {
    SparkCommsConf sc = SparkCommsConf.of(conf);
    List<String> out = new ArrayList<>();
    for (String k : sc.unknownKeys()) {
      out.add(k + " is not a sparkcomms setting (see docs/configuration.md for the keys)");
    }
    if (sc.sparkValue(DYNAMIC_ALLOCATION).map(v -> v.equalsIgnoreCase("true")).orElse(false)) {
      out.add(DYNAMIC_ALLOCATION + "=true is unsupported: barrier-stage collectives need a fixed set of "
          + "executors (Spark refuses barrier stages under dynamic allocation). Set "
          + DYNAMIC_ALLOCATION + "=false and size the application with spark.executor.instances.");
    }
    checkGpuAmounts(sc, out);
    tryParse(out, () -> sc.commOptions());
    tryParse(out, sc::numaAffinity);
    tryParse(out, sc::gpuClaimCheckInterval);
    tryParse(out, sc::accumulatorsEnabled);
    tryParse(out, sc::rendezvous);
    tryParse(out, sc::nodeNames);
    tryParse(out, () -> {
      if (sc.requireAuthenticate() && !isTrue(sc, AUTHENTICATE)) {
        out.add(SparkCommsConf.REQUIRE_AUTHENTICATE.key() + "=true but " + AUTHENTICATE + "="
            + sc.sparkValue(AUTHENTICATE).orElse("false") + ": without Spark's authentication any process that can "
            + "reach the driver's RPC port can send to the plugin's endpoint and read the application's configuration. "
            + "Set " + AUTHENTICATE + "=true (and " + NETWORK_CRYPTO + "=true, so that IPC handles and segment names "
            + "do not travel in clear), see docs/security.md");
      }
    });
    return out;
  }

  /**
   * The warning the driver logs once at start when Spark's RPC is not authenticated, or authenticated
   * but not encrypted; empty when both are on. The plugin's own message authentication keeps a
   * message from being forged or replayed by a process without the application's key, but only
   * Spark's authentication keeps such processes off the driver's RPC port (and away from the
   * configuration that carries the key), and only its encryption hides what the messages carry.
   */
  public static Optional<String> securityWarning(Map<String, String> conf) {
    SparkCommsConf sc = SparkCommsConf.of(conf);
    if (!isTrue(sc, AUTHENTICATE)) {
      return Optional.of(AUTHENTICATE + " is not true: any process that can reach the driver's RPC port can send "
          + "to the plugin's endpoint (Spark deserializes what it sends before the plugin sees it) and can read the "
          + "application's configuration, the plugin's message key among it; the plugin's messages, with CUDA IPC "
          + "handles and shared-memory segment names, travel in clear. Set " + AUTHENTICATE + "=true and "
          + NETWORK_CRYPTO + "=true, or " + SparkCommsConf.REQUIRE_AUTHENTICATE.key() + "=true to refuse to start "
          + "without authentication (docs/security.md).");
    }
    if (!isTrue(sc, NETWORK_CRYPTO) && !isTrue(sc, SASL_ENCRYPTION)) {
      return Optional.of(AUTHENTICATE + "=true but " + NETWORK_CRYPTO + " is not: Spark's RPC is authenticated, not "
          + "encrypted, so the plugin's messages (CUDA IPC handles, shared-memory segment names) and the message key "
          + "handed to executors travel in clear. Set " + NETWORK_CRYPTO + "=true (docs/security.md).");
    }
    return Optional.empty();
  }

  private static boolean isTrue(SparkCommsConf sc, String key) {
    return sc.sparkValue(key).map(v -> v.equalsIgnoreCase("true")).orElse(false);
  }

  private static void checkGpuAmounts(SparkCommsConf sc, List<String> out) {
    String name = sc.resourceName();
    String execKey = "spark.executor.resource." + name + ".amount";
    String taskKey = "spark.task.resource." + name + ".amount";
    Optional<Double> exec = number(sc, execKey, out);
    Optional<Double> task = number(sc, taskKey, out);
    if (exec.isPresent() && exec.get() > 1) {
      out.add(execKey + "=" + sc.sparkValue(execKey).get() + ": sparkcomms needs exactly one GPU per executor "
          + "(one executor per GPU); set " + execKey + "=1 and " + taskKey + "=1");
    }
    if (exec.isPresent() && exec.get() >= 1 && task.isPresent() && task.get() != 1.0) {
      out.add(taskKey + "=" + sc.sparkValue(taskKey).get() + ": must be 1 when executors have GPUs, so each "
          + "barrier task (one rank) owns its executor's GPU");
    }
  }

  private static Optional<Double> number(SparkCommsConf sc, String key, List<String> out) {
    Optional<String> v = sc.sparkValue(key);
    if (v.isEmpty()) return Optional.empty();
    try {
      return Optional.of(Double.parseDouble(v.get()));
    } catch (NumberFormatException e) {
      out.add(key + "=" + v.get() + ": not a number");
      return Optional.empty();
    }
  }

  private static void tryParse(List<String> out, Runnable parse) {
    try {
      parse.run();
    } catch (IllegalArgumentException e) {
      out.add(e.getMessage());
    }
  }
}
