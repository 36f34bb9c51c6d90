package io.sparkcomms.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.spark.SparkConf;

/**
 * {@code local-cluster} settings for running without a Spark distribution (ANCHORS.md, Spark
 * lessons; SPARK_TESTING and SPARK_SCALA_VERSION come from the surefire configuration): the master
 * and workers run in the test JVM, every executor in its own JVM with the test classpath.
 */
final class LocalClusters {
  private LocalClusters() {}

  /** Sets the system properties the in-process master and workers read; {@code dir} when sc.test.home is unset. */
  static void setSystemProperties(Path dir) {
    try {
      Path home = Path.of(System.getProperty("sc.test.home", dir.resolve("spark-home").toString()));
      Files.createDirectories(home);
      System.setProperty("spark.testing", "true");
      System.setProperty("spark.test.home", home.toString());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The configuration of a local-cluster application with {@code cores} executor cores, the plugin on. */
  static SparkConf conf(String master, int cores, String app) {
    String classpath = System.getProperty("java.class.path");
    return new SparkConf().setMaster(master).setAppName(app)
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.testing", "true")
        .set("spark.test.home", System.getProperty("spark.test.home"))
        .set("spark.cores.max", Integer.toString(cores))
        .set("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .set("spark.executor.extraClassPath", classpath)
        .set("spark.driver.extraClassPath", classpath)
        .set("spark.executor.extraJavaOptions", System.getProperty("sc.test.jvmArgs", ""))
        .set("spark.executor.memory", "512m")
        .set("spark.ui.enabled", "false")
        .set("spark.sparkcomms.timeout", "60s")
        .set("spark.sparkcomms.stagingBytes", "1M");
  }
}
