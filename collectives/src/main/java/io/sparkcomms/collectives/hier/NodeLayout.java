package io.sparkcomms.collectives.hier;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Which node each rank of a world runs on: nodes in the order of their lowest rank, the ranks of a
 * node in rank order (its local ranks), the first rank of each node its leader. World rank order is
 * the caller's (the Spark partition order); nodes may hold different numbers of ranks.
 */
public final class NodeLayout {
  private final String[] names;
  private final int[][] members;
  private final int[] nodeOf;
  private final int[] localRank;

  public NodeLayout(String[] nodeOfRank) {
    Map<String, List<Integer>> byNode = new LinkedHashMap<>();
    for (int r = 0; r < nodeOfRank.length; r++) byNode.computeIfAbsent(nodeOfRank[r], k -> new ArrayList<>()).add(r);
    names = byNode.keySet().toArray(new String[0]);
    members = new int[names.length][];
    nodeOf = new int[nodeOfRank.length];
    localRank = new int[nodeOfRank.length];
    int i = 0;
    for (List<Integer> m : byNode.values()) {
      members[i] = m.stream().mapToInt(Integer::intValue).toArray();
      for (int k = 0; k < members[i].length; k++) {
        nodeOf[members[i][k]] = i;
        localRank[members[i][k]] = k;
      }
      i++;
    }
  }

  public int worldSize() { return nodeOf.length; }

  public int nodeCount() { return names.length; }

  public String nodeName(int node) { return names[node]; }

  public int nodeOf(int rank) { return nodeOf[rank]; }

  public int localRank(int rank) { return localRank[rank]; }

  /** The world ranks of {@code node}, in local-rank order. */
  public int[] members(int node) { return members[node].clone(); }

  public int nodeSize(int node) { return members[node].length; }

  /** The leader (local rank 0) of every node, in node order. */
  public int[] leaders() {
    int[] l = new int[names.length];
    for (int i = 0; i < l.length; i++) l[i] = members[i][0];
    return l;
  }

  /** Whether every node holds the same number of ranks (the shard rails exist). */
  public boolean uniform() {
    for (int[] m : members) if (m.length != members[0].length) return false;
    return true;
  }

  /** The rank of local rank {@code local} on every node, in node order (a shard rail; uniform layouts). */
  public int[] rail(int local) {
    int[] r = new int[names.length];
    for (int i = 0; i < r.length; i++) r[i] = members[i][local];
    return r;
  }

  @Override public String toString() {
    StringBuilder sb = new StringBuilder();
    for (int i = 0; i < names.length; i++) sb.append(i == 0 ? "" : ", ").append(names[i]).append(Arrays.toString(members[i]));
    return sb.toString();
  }
}
