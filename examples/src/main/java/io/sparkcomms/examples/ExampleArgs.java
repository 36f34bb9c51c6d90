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
      if (!a.startsWith("--") || !ok.contains(a.substring(2)) || i + 1 >= args.length) {
        System.err.println("unknown or incomplete argument '" + a + "'\n" + usage);
        System.exit(2);
      }
      values.put(a.substring(2), args[++i]);
    }
  }

  String get(String key, String def) { return values.getOrDefault(key, def); }

  int getInt(String key, int def) { return Integer.parseInt(get(key, Integer.toString(def))); }

  double getDouble(String key, double def) { return Double.parseDouble(get(key, Double.toString(def))); }

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
