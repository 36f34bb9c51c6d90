package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.SparkCommsPlugin;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.junit.jupiter.api.Test;

class ConfigValidatorTest {
  @Test void aGoodConfigurationHasNoProblems() {
    assertEquals(List.of(), ConfigValidator.problems(Map.of(
        "spark.executor.resource.gpu.amount", "1", "spark.task.resource.gpu.amount", "1",
        "spark.dynamicAllocation.enabled", "false", "spark.sparkcomms.algo", "flat")));
  }

  @Test void dynamicAllocationIsRejectedClearly() {
    List<String> p = ConfigValidator.problems(Map.of("spark.dynamicAllocation.enabled", "true"));
    assertEquals(1, p.size());
    assertTrue(p.get(0).contains("spark.dynamicAllocation.enabled=true is unsupported"), p.get(0));
    assertTrue(p.get(0).contains("barrier"), p.get(0));
  }

  @Test void gpuAmountsMustBeOnePerExecutorAndTask() {
    String two = ConfigValidator.problems(Map.of("spark.executor.resource.gpu.amount", "2")).get(0);
    assertTrue(two.contains("exactly one GPU per executor"), two);
    String half = ConfigValidator.problems(Map.of("spark.executor.resource.gpu.amount", "1",
        "spark.task.resource.gpu.amount", "0.5")).get(0);
    assertTrue(half.startsWith("spark.task.resource.gpu.amount=0.5: must be 1"), half);
    // A custom resource name is honored.
    String custom = ConfigValidator.problems(Map.of("spark.sparkcomms.resourceName", "amd",
        "spark.executor.resource.amd.amount", "8")).get(0);
    assertTrue(custom.startsWith("spark.executor.resource.amd.amount=8"), custom);
  }

  @Test void unknownKeysAndBadValuesAreListed() {
    List<String> p = ConfigValidator.problems(Map.of("spark.sparkcomms.flatMaxByte", "1M", "spark.sparkcomms.algo", "best"));
    assertEquals(2, p.size(), p.toString());
    assertTrue(p.stream().anyMatch(s -> s.contains("spark.sparkcomms.flatMaxByte is not a sparkcomms setting")), p.toString());
    assertTrue(p.stream().anyMatch(s -> s.contains("spark.sparkcomms.algo=best")), p.toString());
  }

  @Test void requireAuthenticateNeedsSparkAuthenticate() {
    for (Map<String, String> conf : List.of(Map.of("spark.sparkcomms.security.requireAuthenticate", "true"),
        Map.of("spark.sparkcomms.security.requireAuthenticate", "true", "spark.authenticate", "false"))) {
      List<String> p = ConfigValidator.problems(conf);
      assertEquals(1, p.size(), p.toString());
      assertTrue(p.get(0).startsWith("spark.sparkcomms.security.requireAuthenticate=true but spark.authenticate=false:"), p.get(0));
    }
    assertEquals(List.of(), ConfigValidator.problems(Map.of("spark.sparkcomms.security.requireAuthenticate", "true",
        "spark.authenticate", "true")));
    assertEquals(List.of(), ConfigValidator.problems(Map.of("spark.authenticate", "false")), "not required by default");
    List<String> bad = ConfigValidator.problems(Map.of("spark.sparkcomms.security.requireAuthenticate", "perhaps"));
    assertTrue(bad.size() == 1 && bad.get(0).contains("spark.sparkcomms.security.requireAuthenticate"), bad.toString());
  }

  @Test void theSecurityWarningNamesWhatIsOff() {
    String off = ConfigValidator.securityWarning(Map.of()).orElseThrow();
    assertTrue(off.startsWith("spark.authenticate is not true: any process that can reach the driver's RPC port"), off);
    assertTrue(off.contains("spark.sparkcomms.security.requireAuthenticate=true"), off);
    String clear = ConfigValidator.securityWarning(Map.of("spark.authenticate", "true")).orElseThrow();
    assertTrue(clear.startsWith("spark.authenticate=true but spark.network.crypto.enabled is not"), clear);
    assertTrue(ConfigValidator.securityWarning(Map.of("spark.authenticate", "true", "spark.network.crypto.enabled", "true")).isEmpty());
    assertTrue(ConfigValidator.securityWarning(Map.of("spark.authenticate", "TRUE",
        "spark.authenticate.enableSaslEncryption", "true")).isEmpty());
  }

  /** requireAuthenticate without spark.authenticate: the driver plugin stops the SparkContext at startup. */
  @Test void sparkContextWithoutAuthenticationFailsAtStartupWhenRequired() {
    SparkConf conf = new SparkConf().setMaster("local[1]").setAppName("sparkcomms-require-auth")
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.sparkcomms.security.requireAuthenticate", "true")
        .set("spark.ui.enabled", "false");
    Exception e = assertThrows(Exception.class, () -> new SparkContext(conf).stop());
    Throwable t = e;
    while (t.getCause() != null && !t.getMessage().contains("sparkcomms")) t = t.getCause();
    assertTrue(t.getMessage().contains("spark.sparkcomms.security.requireAuthenticate=true but spark.authenticate=false"),
        String.valueOf(e));
  }

  /** The driver plugin stops the SparkContext at startup with the message. */
  @Test void sparkContextWithDynamicAllocationFailsAtStartup() {
    SparkConf conf = new SparkConf().setMaster("local[2]").setAppName("sparkcomms-dynalloc")
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.dynamicAllocation.enabled", "true")
        .set("spark.ui.enabled", "false");
    Exception e = assertThrows(Exception.class, () -> new SparkContext(conf).stop());
    Throwable t = e;
    while (t.getCause() != null && !t.getMessage().contains("sparkcomms")) t = t.getCause();
    assertTrue(t.getMessage().contains("spark.dynamicAllocation.enabled=true is unsupported"), String.valueOf(e));
  }
}
