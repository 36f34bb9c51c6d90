package io.sparkcomms.examples.scaling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LoopbackCheckTest {
  @TempDir Path dir;

  /** Sweeps that follow the fitted forms exactly give back their parameters, and the prediction is the model's. */
  @Test void fitsTheParametersOfExactSweepsAndPredictsTheComposition() throws Exception {
    List<LoopbackCheck.Row> one = new ArrayList<>(), flat = new ArrayList<>(), two = new ArrayList<>();
    for (double b = 1024; b <= 16 << 20; b *= 2) {
      one.add(new LoopbackCheck.Row(b, b <= 16 << 10 ? 3.0 : 10 + b / 1e3));   // 1 GB/s per byte slope
      flat.add(new LoopbackCheck.Row(b, 2 * 40 + 2 * b / 500.0));             // 2 rounds of 40 us + b / 0.5 GB/s
      two.add(new LoopbackCheck.Row(b, 100));
    }
    ByteArrayOutputStream text = new ByteArrayOutputStream();
    LoopbackCheck.write(one, flat, two, 2, dir, new PrintStream(text, true, StandardCharsets.UTF_8));
    String log = text.toString(StandardCharsets.UTF_8);
    assertTrue(log.contains("one-shot 3.00 us, two-shot 10.00 us, bus 1.500 GB/s; cross-node 40.00 us per message, 0.500 GB/s"), log);
    List<String> csv = Files.readAllLines(dir.resolve("loopback-check.csv"));
    assertEquals(one.size() + 1, csv.size());
    AllReduceCostModel m = new AllReduceCostModel(new AllReduceCostModel.Links(3, 10, 1.5, 40, 0.5, 1));
    String[] last = csv.get(csv.size() - 1).split(",");
    assertEquals(m.composed(16 << 20, 2, 2), Double.parseDouble(last[5]), 1e-3);
    assertTrue(Files.size(dir.resolve("loopback-check.png")) > 0);
  }
}
