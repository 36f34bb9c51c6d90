package io.sparkcomms.examples.scaling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.examples.scaling.AllReduceCostModel.Algorithm;
import io.sparkcomms.examples.scaling.AllReduceCostModel.Links;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The cost model's formulas on hand-checked values, its limits, the fit, and the report's files. */
class AllReduceCostModelTest {
  @TempDir Path dir;

  /** 1 us one-shot, 2 us two-shot, 100 GB/s inside; 10 us, 2 NICs of 10 GB/s across. */
  private static final AllReduceCostModel M = new AllReduceCostModel(new Links(1, 2, 100, 10, 10, 2));

  @Test void formulasOnHandCheckedValues() {
    double s = 1e6;  // 1 MB: 1e6 / 1e3 = 1000 "us * GB/s"
    // 2 nodes x 2 ranks, P = 4: ring 2*3*10 + 2*3/4 * 1000 * max(1/100, 1/20) = 60 + 75
    assertEquals(135, M.time(Algorithm.FLAT_RING, s, 2, 2), 1e-9);
    // tree 2 (1*10 + 1*1) + 2 * 1000 / 20 = 22 + 100
    assertEquals(122, M.time(Algorithm.FLAT_TREE, s, 2, 2), 1e-9);
    // hierarchical 2 + 2*1/2*1000/100 + 2*1*10 + 2*1/2*(1000/2)/(20/2) = 2 + 10 + 20 + 50
    assertEquals(82, M.time(Algorithm.HIERARCHICAL, s, 2, 2), 1e-9);
    // leader 2 (1 + 1000/100) + 1 * (10 + 1000/20) = 22 + 60
    assertEquals(82, M.time(Algorithm.LEADER, s, 2, 2), 1e-9);
    assertEquals(122, M.flat(s, 2, 2), 1e-9);
    assertEquals(82, M.composed(s, 2, 2), 1e-9);
  }

  @Test void limitsAndMonotonicity() {
    assertEquals(0, M.time(Algorithm.FLAT_RING, 1e6, 1, 1));
    assertEquals(0, M.time(Algorithm.HIERARCHICAL, 1e6, 1, 1));
    assertEquals(0, AllReduceCostModel.log2Ceil(1));
    assertEquals(3, AllReduceCostModel.log2Ceil(5));
    for (Algorithm a : Algorithm.values()) {
      for (int n : new int[] {1, 2, 8, 64}) {
        double prev = -1;
        for (double b = 1024; b <= 1e9; b *= 2) {
          double t = M.time(a, b, n, 8);
          assertTrue(t >= prev, a + " at " + n + " nodes falls with size");
          prev = t;
        }
      }
      assertTrue(M.time(a, 1 << 20, 64, 8) >= M.time(a, 1 << 20, 2, 8), a + " cheaper on more nodes");
    }
    // small messages: a leader's few cross-node steps beat a flat ring's 2(P-1)
    assertTrue(M.composed(1024, 16, 8) < M.time(Algorithm.FLAT_RING, 1024, 16, 8));
    assertThrows(IllegalArgumentException.class, () -> M.time(Algorithm.LEADER, 1, 0, 8));
    assertThrows(IllegalArgumentException.class, () -> new Links(1, 2, 0, 10, 10, 2));
  }

  @Test void theFitRecoversALineAndTheH200FitMatchesItsRows() {
    double[] b = {1e6, 2e6, 4e6};
    double[] t = {3 + 1e6 / 1e3 / 50, 3 + 2e6 / 1e3 / 50, 3 + 4e6 / 1e3 / 50};  // 3 us + bytes at 50 GB/s
    double[] fit = AllReduceCostModel.fitTwoShot(b, t);
    assertEquals(3, fit[0], 1e-9);
    assertEquals(50, fit[1], 1e-9);
    AllReduceCostModel h = ScalingReport.h200Nodes();
    for (int i = 1; i < ScalingReport.TWO_SHOT_BYTES.length; i++) {  // 16 MB and up: within 10% of the measured rows
      double pred = h.time(Algorithm.HIERARCHICAL, ScalingReport.TWO_SHOT_BYTES[i], 1, 2);
      assertEquals(1, pred / ScalingReport.TWO_SHOT_US[i], 0.10, "row " + i);
    }
  }

  @Test void theReportWritesItsFiles() throws Exception {
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    ScalingReport.write(ScalingReport.h200Nodes(), dir, new PrintStream(o, true, StandardCharsets.UTF_8));
    List<String> csv = Files.readAllLines(dir.resolve("cost-model.csv"));
    assertEquals(1 + ScalingReport.NODES.length * 21, csv.size());
    assertTrue(Files.size(dir.resolve("speedup.png")) > 1000 && Files.size(dir.resolve("time-by-nodes.png")) > 1000);
    String text = o.toString(StandardCharsets.UTF_8);
    assertTrue(text.contains("64 nodes:") && text.contains("model/measured"), text);
  }
}
