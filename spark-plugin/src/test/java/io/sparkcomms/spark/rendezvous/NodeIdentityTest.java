package io.sparkcomms.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.plugin.ConfigValidator;
import io.sparkcomms.spark.plugin.SparkCommsConf;
import java.util.Map;
import org.junit.jupiter.api.Test;

class NodeIdentityTest {
  private static final Map<String, String> NONE = Map.of();
  private static final Map<String, String> NAMED = SparkCommsConf.of(Map.of("spark.sparkcomms.node.names", "0=n0, 1=n0,2 = n1")).nodeNames();

  @Test void theSettingThenSparkcommsNodeThenNodeNameThenTheHost() {
    Map<String, String> env = Map.of("SPARKCOMMS_NODE", "explicit", "NODE_NAME", "k8s-node");
    assertEquals("n1", NodeIdentity.of(NAMED, "2", "host-a", env));
    assertEquals("explicit", NodeIdentity.of(NAMED, "7", "host-a", env));
    assertEquals("k8s-node", NodeIdentity.of(NONE, "7", "host-a", Map.of("NODE_NAME", "k8s-node")));
    assertEquals("host-a", NodeIdentity.of(NONE, "7", "host-a", Map.of("NODE_NAME", " ")));
  }

  @Test void aStageSpansNodesOnSeveralHostsOrWithNamesSet() {
    assertFalse(NodeIdentity.acrossNodes(NONE, new String[] {"h", "h"}));
    assertTrue(NodeIdentity.acrossNodes(NONE, new String[] {"h", "g"}));
    assertTrue(NodeIdentity.acrossNodes(NAMED, new String[] {"h", "h"}));
  }

  @Test void aMalformedPairIsAConfigurationProblemNamingTheKey() {
    Map<String, String> bad = Map.of("spark.sparkcomms.node.names", "0=n0,1");
    assertThrows(IllegalArgumentException.class, () -> SparkCommsConf.of(bad).nodeNames());
    assertTrue(ConfigValidator.problems(bad).stream().anyMatch(p -> p.contains("spark.sparkcomms.node.names") && p.contains("'1'")),
        ConfigValidator.problems(bad).toString());
  }
}
