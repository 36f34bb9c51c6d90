package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.lp.Fp8Format;
import io.sparkcomms.spark.ConfigurationReference;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class SparkCommsConfTest {
  /** The generated section of docs/configuration.md that holds {@link SparkCommsConf#markdownTable()}. */
  static final String SECTION = "spark keys";

  @Test void defaultsMatchCommOptions() {
    SparkCommsConf c = SparkCommsConf.of(Map.of());
    CommOptions o = c.commOptions(Map.of());
    assertEquals(CommOptions.defaults().toString(), o.toString());
    assertEquals("gpu", c.resourceName());
    assertFalse(c.numaAffinity());
    assertEquals(Duration.ofSeconds(5), c.gpuClaimCheckInterval());
    assertFalse(c.requireAuthenticate());
    assertTrue(c.accumulatorsEnabled());
  }

  @Test void everyKeyIsRead() {
    Map<String, String> conf = Map.ofEntries(
        Map.entry("spark.sparkcomms.backend", "host"),
        Map.entry("spark.sparkcomms.algo", "tree"),
        Map.entry("spark.sparkcomms.flatMaxBytes", "64k"),
        Map.entry("spark.sparkcomms.treeMaxBytes", "8M"),
        Map.entry("spark.sparkcomms.timeout", "30s"),
        Map.entry("spark.sparkcomms.lowPrecision", "true"),
        Map.entry("spark.sparkcomms.lowPrecision.allGather", "false"),
        Map.entry("spark.sparkcomms.lpMinBytes", "1M"),
        Map.entry("spark.sparkcomms.fp8Format", "e4m3fnuz"),
        Map.entry("spark.sparkcomms.lpBlockSize", "64"),
        Map.entry("spark.sparkcomms.lpOneShotMaxRanks", "4"),
        Map.entry("spark.sparkcomms.stagingBytes", "4M"),
        Map.entry("spark.sparkcomms.nanCheck", "true"),
        Map.entry("spark.sparkcomms.flightRecorderSize", "256"),
        Map.entry("spark.sparkcomms.resourceName", "amd.com/gpu"),
        Map.entry("spark.sparkcomms.numaAffinity", "true"),
        Map.entry("spark.sparkcomms.gpuClaimCheckInterval", "250ms"),
        Map.entry("spark.sparkcomms.security.requireAuthenticate", "true"),
        Map.entry("spark.sparkcomms.accumulators.enabled", "off"));
    SparkCommsConf c = SparkCommsConf.of(conf);
    assertFalse(c.accumulatorsEnabled());
    CommOptions o = c.commOptions(Map.of());
    assertEquals(CommOptions.Backend.HOST, o.backend());
    assertEquals(Algorithm.TREE, o.algorithm());
    assertEquals(64 << 10, o.flatMaxBytes());
    assertEquals(8 << 20, o.treeMaxBytes());
    assertEquals(Duration.ofSeconds(30), o.timeout());
    assertTrue(o.lowPrecisionEnabled(Collective.ALL_REDUCE));
    assertFalse(o.lowPrecisionEnabled(Collective.ALL_GATHER));
    assertEquals(1 << 20, o.lpMinBytes());
    assertEquals(Fp8Format.E4M3FNUZ, o.fp8Format());
    assertEquals(64, o.lpBlockSize());
    assertEquals(4, o.lpOneShotMaxRanks());
    assertEquals(4 << 20, o.stagingBytes());
    assertTrue(o.nanCheck());
    assertEquals(256, o.flightRecorderSize());
    assertEquals("amd.com/gpu", c.resourceName());
    assertTrue(c.numaAffinity());
    assertEquals(Duration.ofMillis(250), c.gpuClaimCheckInterval());
    assertTrue(c.requireAuthenticate());
    assertTrue(c.unknownKeys().isEmpty());
  }

  @Test void layersSparkKeysOverExecutorEnvOverProcessEnv() {
    Map<String, String> processEnv = Map.of("RCCL_LOW_PRECISION_ENABLE", "1", "RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", "1024",
        "SPARKCOMMS_TIMEOUT_MS", "7000");
    Map<String, String> conf = Map.of("spark.executorEnv.RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", "2048",
        "spark.executorEnv.RCCL_LOW_PRECISION_ENABLE_ALLTOALL", "0", "spark.sparkcomms.timeout", "9s");
    CommOptions o = SparkCommsConf.of(conf).commOptions(processEnv);
    assertTrue(o.lowPrecision());                                   // process env
    assertFalse(o.lowPrecisionEnabled(Collective.ALL_TO_ALL));      // spark.executorEnv
    assertEquals(2048, o.flatMaxBytes());                           // spark.executorEnv over process env
    assertEquals(Duration.ofSeconds(9), o.timeout());               // spark.sparkcomms over both
  }

  @Test void malformedValuesNameTheKey() {
    for (String[] kv : new String[][] {{"spark.sparkcomms.algo", "fastest"}, {"spark.sparkcomms.flatMaxBytes", "lots"},
        {"spark.sparkcomms.lowPrecision", "maybe"}, {"spark.sparkcomms.timeout", "soon"}, {"spark.sparkcomms.stagingBytes", "1"}}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> SparkCommsConf.of(Map.of(kv[0], kv[1])).commOptions(Map.of()));
      assertTrue(e.getMessage().contains(kv[0]), e.getMessage());
    }
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> SparkCommsConf.of(Map.of("spark.sparkcomms.numaAffinity", "sometimes")).numaAffinity());
    assertTrue(e.getMessage().contains("spark.sparkcomms.numaAffinity"));
    IllegalArgumentException acc = assertThrows(IllegalArgumentException.class,
        () -> SparkCommsConf.of(Map.of("spark.sparkcomms.accumulators.enabled", "yes")).accumulatorsEnabled());
    assertTrue(acc.getMessage().contains("spark.sparkcomms.accumulators.enabled"), acc.getMessage());
    assertTrue(ConfigValidator.problems(Map.of("spark.sparkcomms.accumulators.enabled", "yes")).stream()
        .anyMatch(p -> p.contains("spark.sparkcomms.accumulators.enabled")), "the driver refuses it at startup");
  }

  /**
   * Every size and flag text of the shared case table means the same as a key and as its environment
   * variable: the same value, or an error naming the key (or variable).
   */
  @Test void keysAcceptTheTextOfTheirEnvironmentVariables() throws Exception {
    Path table = Path.of(System.getProperty("user.dir"), "..", "native", "src", "test", "resources", "setting-values.tsv");
    assertTrue(Files.isRegularFile(table), "case table missing: " + table.normalize());
    int rows = 0;
    for (String line : Files.readAllLines(table)) {
      if (line.isBlank() || line.startsWith("#")) continue;
      String[] f = line.split("\t", -1);
      String text = f[1].substring(1, f[1].length() - 1);
      boolean size = f[0].equals("size");
      String[][] pairs = size
          ? new String[][] {{"spark.sparkcomms.lpMinBytes", "SPARKCOMMS_LP_MIN_BYTES"}, {"spark.sparkcomms.flatMaxBytes", "RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES"}}
          : new String[][] {{"spark.sparkcomms.lowPrecision", "RCCL_LOW_PRECISION_ENABLE"}, {"spark.sparkcomms.lowPrecision.allReduce", "RCCL_LOW_PRECISION_ENABLE_ALLREDUCE"}};
      for (String[] p : pairs) {
        String viaKey = outcome(() -> SparkCommsConf.of(Map.of(p[0], text)).commOptions(Map.of()), p[0]);
        String viaEnv = outcome(() -> SparkCommsConf.of(Map.of()).commOptions(Map.of(p[1], text)), p[1]);
        assertEquals(viaEnv, viaKey, line);
        // well-formed sizes above the thresholds' range (2^48, the native table's too) are errors as well
        boolean outOfRange = size && !f[2].equals("ERROR") && !f[2].equals("DEFAULT")
            && Long.parseLong(f[2]) > io.sparkcomms.collectives.CommOptions.MAX_THRESHOLD_BYTES;
        assertEquals(f[2].equals("ERROR") || outOfRange, viaKey.equals("ERROR"), line + ": " + viaKey);
      }
      if (!size) {
        String numa = outcome(() -> SparkCommsConf.of(Map.of("spark.sparkcomms.numaAffinity", text)).numaAffinity(), "spark.sparkcomms.numaAffinity");
        assertEquals(f[2].equals("DEFAULT") ? "false" : f[2].equals("ERROR") ? "ERROR" : Boolean.toString(f[2].equals("1")), numa, line);
      }
      rows++;
    }
    assertTrue(rows > 0, "no rows in " + table);
  }

  /** The result of {@code s} as text, or "ERROR" when it throws an error naming {@code name}. */
  private static String outcome(java.util.function.Supplier<Object> s, String name) {
    try {
      return String.valueOf(s.get());
    } catch (IllegalArgumentException e) {
      assertTrue(e.getMessage().contains(name), e.getMessage());
      return "ERROR";
    }
  }

  @Test void keysAreUniqueDocumentedAndPrefixed() {
    Set<String> seen = new HashSet<>();
    for (SparkCommsConf.Entry e : SparkCommsConf.entries()) {
      assertTrue(e.key().startsWith(SparkCommsConf.PREFIX), e.key());
      assertTrue(seen.add(e.key()), "duplicate " + e.key());
      assertFalse(e.doc().isBlank(), e.key());
      assertFalse(e.defaultValue().isBlank(), e.key());
    }
  }

  /**
   * docs/configuration.md holds the generated table in its "spark keys" section. Run with
   * -Dsparkcomms.updateConfigDoc=true to rewrite it after changing {@link SparkCommsConf}.
   */
  @Test void configDocIsUpToDate() {
    String text = ConfigurationReference.read();
    String expected = ConfigurationReference.withGenerated(text, SECTION, SparkCommsConf.markdownTable());
    if (Boolean.getBoolean("sparkcomms.updateConfigDoc")) {
      ConfigurationReference.write(expected);
      return;
    }
    assertEquals(expected, text, "docs/configuration.md is stale: run SparkCommsConfTest with -Dsparkcomms.updateConfigDoc=true");
    for (SparkCommsConf.Entry entry : SparkCommsConf.entries()) assertTrue(text.contains("`" + entry.key() + "`"));
  }
}
