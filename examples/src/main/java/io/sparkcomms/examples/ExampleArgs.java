package io.sparkcomms.examples;

import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.SparkSession;

/** {@code --key value} arguments and the SparkSession of the examples. */
final class ExampleArgs {
  private final Map<String, String> values = new HashMap<>();

  ExampleArgs(String usage, String[] args, String... known) {
    java.util.Set<String> ok = new java.util.HashSet<>(java.util.Arrays.asList(known));
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      if (a.equals("-h") || a.equals("--help")) {
        System.out.println(usage);
        System.exit(0);
      }
      if (!a.startsWith("--") || !ok.contains(a.substring(2))) throw usageError("unknown option '" + a + "'");
      if (i + 1 >= args.length) throw usageError(a + " needs a value");
      values.put(a.substring(2), args[++i]);
    }
  }

  String get(String key, String def) { return values.getOrDefault(key, def); }

  int getInt(String key, int def) {
    String v = values.get(key);
    if (v == null) return def;
    try {
      return Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw usageError("--" + key + " needs a whole number, got '" + v + "'");
    }
  }

  double getDouble(String key, double def) {
    String v = values.get(key);
    if (v == null) return def;
    try {
      return Double.parseDouble(v.trim());
    } catch (NumberFormatException e) {
      throw usageError("--" + key + " needs a number, got '" + v + "'");
    }
  }

  /**
   * Exits with status 2 and a one-line message unless every one of {@code keys} that was given is a
   * whole number of at least 1; called before the SparkSession starts, so a typo costs no Spark start.
   */
  ExampleArgs requirePositive(String... keys) {
    for (String k : keys) {
      if (values.containsKey(k) && getInt(k, 1) < 1) throw usageError("--" + k + " must be at least 1, got " + values.get(k));
    }
    return this;
  }

  /** Prints {@code message} on one line and exits with status 2 (a usage error). */
  static RuntimeException usageError(String message) {
    System.err.println("sparkcomms-example: " + message + " (-h for the options)");
    System.exit(2);
    return new IllegalStateException(message);
  }

  /**
   * The session: the master comes from spark-submit (bin/sparkcomms-example sets it); run without
   * one (an IDE, a notebook) it is {@code local[2]} with the plugin set.
   */
  static SparkSession session(String app) {
    SparkSession.Builder b = SparkSession.builder().appName(app);
    if (System.getProperty("spark.master") == null) {
      b.master("local[2]").config("spark.plugins", "io.sparkcomms.spark.SparkCommsPlugin").config("spark.ui.enabled", "false");
    }
    return b.getOrCreate();
  }

  /** Number of barrier ranks to use by default: every task slot of the application. */
  static int slots(SparkSession spark) { return spark.sparkContext().defaultParallelism(); }
}
