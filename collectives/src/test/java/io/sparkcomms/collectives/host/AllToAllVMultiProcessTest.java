package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** allToAllV with ranks in separate JVM processes ({@link AllToAllVProcessMain}). */
class AllToAllVMultiProcessTest {
  private Path dir;
  private final List<Process> procs = new ArrayList<>();

  @BeforeEach void setUp() { dir = FileRendezvous.createDirectory(); }

  @AfterEach void tearDown() throws IOException {
    procs.forEach(Process::destroyForcibly);
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  @ParameterizedTest(name = "{0} processes")
  @ValueSource(ints = {2, 4})
  void skewedAllToAllVAcrossProcesses(int n) throws Exception {
    long seed = System.nanoTime();
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<CompletableFuture<List<String>>> outs = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      ProcessBuilder pb = new ProcessBuilder(java, "-Xmx256m", "-cp", System.getProperty("java.class.path"),
          AllToAllVProcessMain.class.getName(), dir.toString(), "" + r, "" + n, "" + seed, "30000");
      pb.redirectErrorStream(true);
      Process p = pb.start();
      procs.add(p);
      outs.add(MultiProcessTest.lines(p, null));
    }
    for (int r = 0; r < n; r++) {
      assertTrue(procs.get(r).waitFor(120, TimeUnit.SECONDS), "rank " + r + " did not finish");
      List<String> out = outs.get(r).get();
      assertEquals(0, procs.get(r).exitValue(), "rank " + r + " (seed " + seed + "): " + String.join("\n", out));
      assertTrue(out.contains("OK allToAllV"), out.toString());
    }
  }
}
