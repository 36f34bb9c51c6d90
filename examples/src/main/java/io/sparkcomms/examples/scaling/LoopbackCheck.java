package io.sparkcomms.examples.scaling;

import io.sparkcomms.examples.Plots;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The cost model against what one machine can measure: three barrier-stage allReduce sweeps of the
 * same ranks (the {@code --spark} benchmark's CSVs) on one node (shared memory only), on as many
 * simulated nodes as ranks (every byte over the network transport on loopback: flat) and on two
 * simulated nodes (the composition). The node-local parameters of {@link AllReduceCostModel} are
 * fitted to the first, the cross-node ones to the second; the third is predicted from them, not
 * fitted, and printed beside what was measured.
 *
 * <pre>LoopbackCheck ONE_NODE.csv FLAT.csv TWO_NODES.csv RANKS_PER_NODE OUT_DIR</pre>
 * writes {@code loopback-check.csv}, {@code loopback-check.png} and prints the table.
 */
public final class LoopbackCheck {
  private LoopbackCheck() {}

  record Row(double bytes, double medianUs) {}

  static List<Row> read(Path csv) throws IOException {
    List<Row> rows = new ArrayList<>();
    for (String line : Files.readAllLines(csv)) {
      if (line.startsWith("size_bytes")) continue;
      String[] f = line.split(",");
      if (!f[8].equals("ok")) throw new IllegalArgumentException(csv + ": a row with a wrong result: " + line);
      rows.add(new Row(Double.parseDouble(f[0]), Double.parseDouble(f[3])));
    }
    return rows;
  }

  /** {@link AllReduceCostModel#fitTwoShot} of the rows from {@code minBytes}: {latency us, GB/s}. */
  static double[] fit(List<Row> rows, double minBytes) {
    List<Row> r = rows.stream().filter(x -> x.bytes() >= minBytes).toList();
    return AllReduceCostModel.fitTwoShot(r.stream().mapToDouble(Row::bytes).toArray(), r.stream().mapToDouble(Row::medianUs).toArray());
  }


  static double smallMean(List<Row> rows, double maxBytes) {
    return rows.stream().filter(x -> x.bytes() <= maxBytes).mapToDouble(Row::medianUs).average().orElseThrow();
  }

  public static void main(String[] args) throws IOException {
    if (args.length != 5) {
      System.err.println("usage: LoopbackCheck ONE_NODE.csv FLAT.csv TWO_NODES.csv RANKS_PER_NODE OUT_DIR");
      System.exit(2);
    }
    List<Row> one = read(Paths.get(args[0])), flat = read(Paths.get(args[1])), two = read(Paths.get(args[2]));
    int g = Integer.parseInt(args[3]);
    Path out = Files.createDirectories(Paths.get(args[4]));
    write(one, flat, two, g, out, System.out);
  }

  static void write(List<Row> one, List<Row> flat, List<Row> two, int g, Path out, PrintStream log) throws IOException {
    int ranks = 2 * g;
    // node-local: the one-node sweep's small sizes (one-shot latency) and its large sizes (bus bandwidth)
    double oneShot = smallMean(one, 16 << 10);
    double[] intra = fit(one, 1 << 20);
    double intraGBps = 2.0 * (ranks - 1) / ranks * intra[1];
    // cross-node: the flat sweep, every rank a node of its own: the model's leader algorithm with one
    // rank per node is log2(ranks) rounds of (latency + bytes / link)
    double rounds = AllReduceCostModel.log2Ceil(ranks);
    double[] inter = fit(flat, 0);
    double interUs = Math.max(0, inter[0] / rounds), nicGBps = rounds * inter[1];
    AllReduceCostModel m = new AllReduceCostModel(new AllReduceCostModel.Links(oneShot, Math.max(2 * oneShot, intra[0]),
        intraGBps, interUs, nicGBps, 1));
    log.printf(Locale.ROOT, "fitted: node-local one-shot %.2f us, two-shot %.2f us, bus %.3f GB/s; cross-node %.2f us per message, "
        + "%.3f GB/s per node%n", m.links().oneShotUs(), m.links().twoShotUs(), intraGBps, interUs, nicGBps);
    StringBuilder csv = new StringBuilder("bytes,one_node_us,flat_us,two_nodes_us,model_flat_us,model_two_nodes_us,model_choice,"
        + "model_over_measured\n");
    log.println("| size | one node (measured) | flat over loopback (measured) | 2 nodes (measured) | 2 nodes (model) | model / measured |");
    log.println("|---:|---:|---:|---:|---:|---:|");
    int k = Math.min(one.size(), Math.min(flat.size(), two.size()));
    double[] x = new double[k], meas = new double[k], pred = new double[k], fl = new double[k];
    for (int i = 0; i < k; i++) {
      double b = two.get(i).bytes();
      if (one.get(i).bytes() != b || flat.get(i).bytes() != b) throw new IllegalArgumentException("the sweeps' sizes differ");
      double p = m.composed(b, 2, g);
      x[i] = b;
      meas[i] = two.get(i).medianUs();
      pred[i] = p;
      fl[i] = flat.get(i).medianUs();
      csv.append(String.format(Locale.ROOT, "%.0f,%.3f,%.3f,%.3f,%.3f,%.3f,%s,%.3f%n", b, one.get(i).medianUs(), fl[i], meas[i],
          m.flat(b, ranks, 1), p, m.composedChoice(b, 2, g).name().toLowerCase(Locale.ROOT), p / meas[i]));
      log.printf(Locale.ROOT, "| %s | %.1f | %.1f | %.1f | %.1f | %.2f |%n", human(b), one.get(i).medianUs(), fl[i], meas[i], p, p / meas[i]);
    }
    Files.writeString(out.resolve("loopback-check.csv"), csv, StandardCharsets.UTF_8);
    new Plots("allReduce, " + ranks + " ranks, loopback: 2 simulated nodes vs the model", "message size (bytes)", "us per call")
        .logX().logY().line("flat (every rank a node), measured", x, fl).line("2 nodes, measured", x, meas)
        .line("2 nodes, model", x, pred).writePng(out.resolve("loopback-check.png"));
  }

  static String human(double b) {
    return b >= 1 << 20 ? (long) (b / (1 << 20)) + " MB" : b >= 1 << 10 ? (long) (b / (1 << 10)) + " KB" : (long) b + " B";
  }
}
