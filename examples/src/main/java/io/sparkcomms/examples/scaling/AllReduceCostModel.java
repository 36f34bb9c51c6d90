package io.sparkcomms.examples.scaling;

/**
 * An alpha-beta model of allReduce across nodes: how long flat algorithms over every rank of the job
 * take against the hierarchical composition (the node-local DDA collectives plus one cross-node
 * "rail" allReduce per local rank), for N nodes of G ranks and a message of S bytes. Times in
 * microseconds; bandwidths in GB/s (10^9 bytes per second); latency per message step.
 *
 * <ul>
 *   <li>{@link Algorithm#FLAT_RING}: one ring over all P = N*G ranks (NCCL's ring, one ring per NIC
 *       in parallel): 2(P-1) steps of the slowest step's latency, and every rank's
 *       2(P-1)/P * S bytes through its NVLink share and, per node, through the node's NICs:
 *       {@code 2(P-1) a + 2(P-1)/P S max(1/Bl, 1/(R Bn))}.</li>
 *   <li>{@link Algorithm#FLAT_TREE}: a tree across the nodes (NCCL's double binary tree) with a chain
 *       inside each node, reduce then broadcast:
 *       {@code 2(ceil(log2 N) an + (G-1) al) + 2 S max(1/Bl, 1/(R Bn))}.</li>
 *   <li>{@link Algorithm#HIERARCHICAL}: node-local reduce-scatter, then each local rank's shard
 *       (S/G) allReduced by a ring over its rail (the same local rank on every node), all rails at
 *       once, each with R/G of the node's NICs, then a node-local allGather:
 *       {@code 2 (a2 + (G-1)/G S/Bl) + 2(N-1) an + 2(N-1)/N (S/G) / (R Bn / G)}.</li>
 *   <li>{@link Algorithm#LEADER}: for small messages, node-local reduce to one leader, recursive
 *       doubling between the N leaders (ceil(log2 N) exchanges of S over the NICs), node-local
 *       broadcast: {@code 2 (a1 + S/Bl) + ceil(log2 N) (an + S/(R Bn))}.</li>
 * </ul>
 * With one node the hierarchical form is the node-local two-shot and the leader form the one-shot
 * pair of a reduce and a broadcast; the flat forms then run inside the node too. The phases of a
 * composition run one after another (no pipelining of the node-local and cross-node legs, which
 * NCCL's ring gets for free), so at bandwidth-bound sizes the flat ring wins: the model says where
 * the size policy should hand over.
 */
public final class AllReduceCostModel {
  /** The algorithms compared. */
  public enum Algorithm { FLAT_RING, FLAT_TREE, HIERARCHICAL, LEADER }

  /**
   * The machine: node-local one-shot and two-shot latency (us) and bus bandwidth per rank (GB/s),
   * cross-node latency per message (us), bandwidth per NIC (GB/s) and NICs per node.
   */
  public record Links(double oneShotUs, double twoShotUs, double intraGBps, double interUs, double nicGBps, int nicsPerNode) {
    public Links {
      if (!(oneShotUs >= 0 && twoShotUs >= 0 && intraGBps > 0 && interUs >= 0 && nicGBps > 0 && nicsPerNode > 0)) {
        throw new IllegalArgumentException("links: latencies must be >= 0, bandwidths and NIC count > 0");
      }
    }
  }

  private final Links l;

  public AllReduceCostModel(Links links) { this.l = links; }

  public Links links() { return l; }

  /** Predicted time in us of {@code a} for {@code bytes} on {@code nodes} nodes of {@code perNode} ranks. */
  public double time(Algorithm a, double bytes, int nodes, int perNode) {
    if (nodes < 1 || perNode < 1 || bytes < 0) throw new IllegalArgumentException("nodes, ranks per node >= 1, bytes >= 0");
    int n = nodes, g = perNode, p = n * g;
    double s = bytes / 1e3;  // bytes / (GB/s) = ns; / 1e3 -> us
    double nicAll = l.nicGBps() * l.nicsPerNode();
    double bottleneck = n == 1 ? 1 / l.intraGBps() : Math.max(1 / l.intraGBps(), 1 / nicAll);
    switch (a) {
      case FLAT_RING: {
        if (p == 1) return 0;
        double step = n == 1 ? l.oneShotUs() : l.interUs();
        return 2.0 * (p - 1) * step + 2.0 * (p - 1) / p * s * bottleneck;
      }
      case FLAT_TREE: {
        if (p == 1) return 0;
        return 2 * (log2Ceil(n) * l.interUs() + (g - 1) * l.oneShotUs()) + 2 * s * bottleneck;
      }
      case HIERARCHICAL: {
        double local = g == 1 ? 0 : l.twoShotUs() + 2.0 * (g - 1) / g * s / l.intraGBps();
        double rail = n == 1 ? 0 : 2.0 * (n - 1) * l.interUs() + 2.0 * (n - 1) / n * (s / g) / (nicAll / g);
        return local + rail;
      }
      case LEADER: {
        double local = g == 1 ? 0 : 2 * (l.oneShotUs() + s / l.intraGBps());
        double leaders = n == 1 ? 0 : log2Ceil(n) * (l.interUs() + s / nicAll);
        return local + leaders;
      }
      default: throw new AssertionError(a);
    }
  }

  /** The faster flat algorithm's time. */
  public double flat(double bytes, int nodes, int perNode) {
    return Math.min(time(Algorithm.FLAT_RING, bytes, nodes, perNode), time(Algorithm.FLAT_TREE, bytes, nodes, perNode));
  }

  /** The faster of the two compositions (what a size policy between them would pick). */
  public double composed(double bytes, int nodes, int perNode) {
    return Math.min(time(Algorithm.HIERARCHICAL, bytes, nodes, perNode), time(Algorithm.LEADER, bytes, nodes, perNode));
  }

  /** The composition that {@link #composed} picks. */
  public Algorithm composedChoice(double bytes, int nodes, int perNode) {
    return time(Algorithm.LEADER, bytes, nodes, perNode) < time(Algorithm.HIERARCHICAL, bytes, nodes, perNode)
        ? Algorithm.LEADER : Algorithm.HIERARCHICAL;
  }

  static int log2Ceil(int n) { return n <= 1 ? 0 : 32 - Integer.numberOfLeadingZeros(n - 1); }

  /**
   * The node-local two-shot's latency (us) and bus bandwidth (GB/s) that fit {@code bytes} ->
   * {@code us} best (least squares of us = a + bytes / (1e3 B), 2 ranks, whose bus factor is 1).
   */
  public static double[] fitTwoShot(double[] bytes, double[] us) {
    int k = bytes.length;
    if (k < 2 || us.length != k) throw new IllegalArgumentException("need two or more points");
    double mx = 0, my = 0;
    for (int i = 0; i < k; i++) {
      mx += bytes[i] / k;
      my += us[i] / k;
    }
    double sxy = 0, sxx = 0;
    for (int i = 0; i < k; i++) {
      sxy += (bytes[i] - mx) * (us[i] - my);
      sxx += (bytes[i] - mx) * (bytes[i] - mx);
    }
    double slope = sxy / sxx;  // us per byte
    return new double[] {my - slope * mx, 1 / (slope * 1e3)};
  }
}
