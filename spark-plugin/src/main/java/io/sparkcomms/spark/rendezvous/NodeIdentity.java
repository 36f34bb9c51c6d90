package io.sparkcomms.spark.rendezvous;

import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * Which node an executor runs on, for communicators that span nodes (the setting
 * {@code spark.sparkcomms.node.names}, parsed by the plugin's configuration and passed here as
 * executor id to node): the setting's entry for this executor, else the
 * {@code SPARKCOMMS_NODE} environment variable, else {@code NODE_NAME} (Kubernetes' downward API;
 * executor pods of one machine have hostnames of their own), else the executor's host.
 */
public final class NodeIdentity {
  private NodeIdentity() {}

  /** This executor's node name. */
  public static String of(Map<String, String> nodeNames, String executorId, String host, Map<String, String> env) {
    String named = nodeNames.get(executorId);
    if (named != null && !named.isEmpty()) return named;
    String e = env.get("SPARKCOMMS_NODE");
    if (e != null && !e.isBlank()) return e.trim();
    e = env.get("NODE_NAME");
    if (e != null && !e.isBlank()) return e.trim();
    return host;
  }

  /** The executor host of every task of barrier task {@code ctx}'s stage, by partition (known to every task without a sync). */
  public static String[] hostsOf(org.apache.spark.BarrierTaskContext ctx) {
    org.apache.spark.BarrierTaskInfo[] infos = ctx.getTaskInfos();
    String[] hosts = new String[infos.length];
    for (int i = 0; i < infos.length; i++) hosts[i] = SparkBarrierRendezvous.hostOf(infos[i].address());
    return hosts;
  }

  /**
   * Whether a stage on {@code hosts} (the tasks' hosts, known to every task alike) builds a
   * communicator that spans nodes: when its tasks run on more than one host or the node names are set.
   * Every task decides alike, so they all take the same rendezvous path.
   */
  public static boolean acrossNodes(Map<String, String> nodeNames, String[] hosts) {
    Set<String> distinct = new HashSet<>(java.util.Arrays.asList(hosts));
    return distinct.size() > 1 || !nodeNames.isEmpty();
  }
}
