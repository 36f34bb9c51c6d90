package io.sparkcomms.examples.scaling;

import io.sparkcomms.examples.Plots;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Locale;

/**
 * Writes the cost model's predictions ({@link AllReduceCostModel}) for 1-64 nodes of 8 ranks and
 * 1 KB-1 GB into a folder: {@code cost-model.csv} (every algorithm's time per shape),
 * {@code speedup.png} (the better composition over the better flat algorithm, per node count) and
 * {@code time-by-nodes.png} (how each grows with the job at 1 MB and 256 MB), and prints the check of
 * the node-local part against the 2x H200 measurements it is fitted to.
 *
 * <pre>java -cp 'examples/target/sparkcomms-examples-VERSION.jar:examples/target/lib/*' io.sparkcomms.examples.scaling.ScalingReport OUT_DIR</pre>
 */
public final class ScalingReport {
  private ScalingReport() {}

  /** 2x H200 DDA allReduce fp32 (bench/README.md, GPU DDA allReduce from Java vs NCCL, AUTO column): two-shot rows. */
  static final double[] TWO_SHOT_BYTES = {8 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20};
  static final double[] TWO_SHOT_US = {31.89, 56.65, 113.15, 226.54, 452.40};
  /** The same table's one-shot rows of 1 KB to 16 KB (latency-bound). */
  static final double[] ONE_SHOT_US = {2.24, 2.25, 2.35, 2.38, 2.42};

  /**
   * The machine modelled: node-local one-shot latency the mean of the small rows above, bus bandwidth
   * fitted to the two-shot rows, two-shot latency twice the one-shot's (the fit's intercept is lower,
   * no small-message latency); across
   * nodes, assumed (not measured here): 8 NICs of 400 Gb/s (50 GB/s) per node, one per GPU, and 5 us
   * per message.
   */
  public static AllReduceCostModel h200Nodes() {
    double[] fit = AllReduceCostModel.fitTwoShot(TWO_SHOT_BYTES, TWO_SHOT_US);
    double oneShot = 0;
    for (double v : ONE_SHOT_US) oneShot += v / ONE_SHOT_US.length;
    // the fit's intercept (1.6 us) is no small-message latency: a two-shot makes two one-shot-like phases
    return new AllReduceCostModel(new AllReduceCostModel.Links(oneShot, Math.max(fit[0], 2 * oneShot), fit[1], 5.0, 50.0, 8));
  }

  static final int[] NODES = {1, 2, 4, 8, 16, 32, 64};
  static final int PER_NODE = 8;

  public static void main(String[] args) throws IOException {
    if (args.length != 1 || args[0].startsWith("-")) {
      System.err.println("usage: ScalingReport OUT_DIR  (writes cost-model.csv, speedup.png, time-by-nodes.png)");
      System.exit(args.length == 1 && (args[0].equals("-h") || args[0].equals("--help")) ? 0 : 2);
    }
    Path out = Files.createDirectories(Paths.get(args[0]));
    AllReduceCostModel m = h200Nodes();
    write(m, out, System.out);
  }

  /** Writes the three files into {@code out} and the summary to {@code log}. */
  static void write(AllReduceCostModel m, Path out, PrintStream log) throws IOException {
    AllReduceCostModel.Links l = m.links();
    log.printf(Locale.ROOT, "model: node-local one-shot %.2f us, two-shot %.2f us + bus %.1f GB/s per rank (fitted, 2x H200);"
        + " across nodes %.1f us per message, %d NICs x %.0f GB/s per node (assumed)%n", l.oneShotUs(), l.twoShotUs(), l.intraGBps(),
        l.interUs(), l.nicsPerNode(), l.nicGBps());
    log.println("check, node-local two-shot at 2 ranks (fitted rows): size, measured us, model us, model/measured");
    for (int i = 0; i < TWO_SHOT_BYTES.length; i++) {
      double pred = m.time(AllReduceCostModel.Algorithm.HIERARCHICAL, TWO_SHOT_BYTES[i], 1, 2);
      log.printf(Locale.ROOT, "  %6.0f MB  %8.2f  %8.2f  %.3f%n", TWO_SHOT_BYTES[i] / (1 << 20), TWO_SHOT_US[i], pred, pred / TWO_SHOT_US[i]);
    }
    int sizes = 21;  // 1 KB .. 1 GB, factor 2
    StringBuilder csv = new StringBuilder("nodes,ranks_per_node,bytes,flat_ring_us,flat_tree_us,hierarchical_us,leader_us,composed_choice,speedup_vs_flat\n");
    Plots speed = new Plots("allReduce, nodes of 8 GPUs: composed over flat (model)", "message size (bytes)",
        "speedup (x)").logX();
    for (int n : NODES) {
      double[] x = new double[sizes], y = new double[sizes];
      for (int k = 0; k < sizes; k++) {
        double b = 1024.0 * (1L << k);
        double flat = m.flat(b, n, PER_NODE), comp = m.composed(b, n, PER_NODE);
        x[k] = b;
        y[k] = flat / comp;
        csv.append(String.format(Locale.ROOT, "%d,%d,%.0f,%.3f,%.3f,%.3f,%.3f,%s,%.4f%n", n, PER_NODE, b,
            m.time(AllReduceCostModel.Algorithm.FLAT_RING, b, n, PER_NODE), m.time(AllReduceCostModel.Algorithm.FLAT_TREE, b, n, PER_NODE),
            m.time(AllReduceCostModel.Algorithm.HIERARCHICAL, b, n, PER_NODE), m.time(AllReduceCostModel.Algorithm.LEADER, b, n, PER_NODE),
            m.composedChoice(b, n, PER_NODE).name().toLowerCase(Locale.ROOT), y[k]));
      }
      if (n > 1) speed.line(n + " nodes", x, y);
    }
    Files.writeString(out.resolve("cost-model.csv"), csv, StandardCharsets.UTF_8);
    speed.writePng(out.resolve("speedup.png"));
    Plots grow = new Plots("allReduce time as the job grows (model, 8 GPUs a node)", "nodes", "us per call").logX().logY();
    double[] nx = new double[NODES.length];
    for (int i = 0; i < NODES.length; i++) nx[i] = NODES[i];
    for (double b : new double[] {1 << 20, 256 << 20}) {
      String sz = b >= (1 << 30) ? (int) (b / (1 << 30)) + " GB" : (int) (b / (1 << 20)) + " MB";
      double[] ring = new double[NODES.length], tree = new double[NODES.length], comp = new double[NODES.length];
      for (int i = 0; i < NODES.length; i++) {
        ring[i] = m.time(AllReduceCostModel.Algorithm.FLAT_RING, b, NODES[i], PER_NODE);
        tree[i] = m.time(AllReduceCostModel.Algorithm.FLAT_TREE, b, NODES[i], PER_NODE);
        comp[i] = m.composed(b, NODES[i], PER_NODE);
      }
      grow.line("ring " + sz, nx, ring).line("tree " + sz, nx, tree).line("composed " + sz, nx, comp);
    }
    grow.writePng(out.resolve("time-by-nodes.png"));
    log.println("sizes where the composition is at least 1.1x the better flat algorithm, by node count:");
    for (int n : NODES) {
      if (n == 1) continue;
      StringBuilder r = new StringBuilder();
      for (int k = 0; k < sizes; k++) {
        double b = 1024.0 * (1L << k);
        if (m.flat(b, n, PER_NODE) / m.composed(b, n, PER_NODE) >= 1.1) r.append(r.length() == 0 ? "" : " ").append(size(b));
      }
      log.printf(Locale.ROOT, "  %2d nodes: %s%n", n, r.length() == 0 ? "none" : r);
    }
    log.println("wrote " + out.resolve("cost-model.csv") + ", speedup.png, time-by-nodes.png");
  }

  static String size(double b) {
    if (b >= 1 << 30) return (long) (b / (1 << 30)) + "G";
    if (b >= 1 << 20) return (long) (b / (1 << 20)) + "M";
    return (long) (b / 1024) + "K";
  }
}
