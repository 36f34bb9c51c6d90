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
    tryParse(out, sc::rendezvous);
    return out;
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
