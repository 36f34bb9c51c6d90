package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.reliability.ShmProbe;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Ranks in separate JVM processes: the full matrix, and a rank that dies mid-run. The ranks keep
 * their segments in a directory of this test's own ({@link RankProcessMain#SEGMENT_DIR_PROPERTY}),
 * so every segment file found there is this test's, whatever other programs do in /dev/shm.
 */
class MultiProcessTest {
  private Path dir;
  private Path segmentDir;
  private final List<Process> procs = new ArrayList<>();

  @BeforeEach void setUp() {
    dir = FileRendezvous.createDirectory();
    segmentDir = ShmProbe.newSegmentDirectory("sc-multiprocess-");
  }

  @AfterEach void tearDown() throws IOException {
    procs.forEach(Process::destroyForcibly);
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
    ShmProbe.deleteTree(segmentDir);
  }

  private Process start(int rank, int size, String mode, long seed, long timeoutMs) throws IOException {
    return launch(RankProcessMain.class, "-Xmx1g", dir.toString(), "" + rank, "" + size, mode, "" + seed, "" + timeoutMs);
  }

  /** Starts {@code main} in a child JVM on this test's class path; torn down after the test. */
  private Process launch(Class<?> main, String xmx, String... args) throws IOException {
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<String> cmd = new ArrayList<>(List.of(java, xmx, "-D" + RankProcessMain.SEGMENT_DIR_PROPERTY + "=" + segmentDir,
        "-cp", System.getProperty("java.class.path"), main.getName()));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.redirectErrorStream(true);
    Process p = pb.start();
    procs.add(p);
    return p;
  }

  /** Collects a process's output lines asynchronously ({@code ready}, if given, completes at "READY"). */
  static CompletableFuture<List<String>> lines(Process p, CompletableFuture<Void> ready) {
    return CompletableFuture.supplyAsync(() -> {
      List<String> out = new ArrayList<>();
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        for (String l; (l = r.readLine()) != null; ) {
          out.add(l);
          if (l.equals("READY") && ready != null) ready.complete(null);
        }
      } catch (IOException e) {
        out.add("IO " + e);
      }
      return out;
    });
  }

  @ParameterizedTest(name = "{0} processes")
  @ValueSource(ints = {2, 4})
  void fullMatrixAcrossProcesses(int n) throws Exception {
    long seed = System.nanoTime();
    List<CompletableFuture<List<String>>> outs = new ArrayList<>();
    for (int r = 0; r < n; r++) outs.add(lines(start(r, n, "matrix", seed, 60_000), null));
    for (int r = 0; r < n; r++) {
      assertTrue(procs.get(r).waitFor(600, TimeUnit.SECONDS), "rank " + r + " did not finish");
      List<String> out = outs.get(r).get();
      assertEquals(0, procs.get(r).exitValue(), "rank " + r + " (seed " + seed + "): " + out);
      assertTrue(out.contains("OK matrix"), out.toString());
    }
  }

  /** Starts {@code n} ranks in {@code mode} and waits until each printed READY; returns their output lines. */
  private List<CompletableFuture<List<String>>> startReady(int n, String mode, long timeoutMs, long readySeconds) throws Exception {
    List<CompletableFuture<Void>> ready = new ArrayList<>();
    List<CompletableFuture<List<String>>> outs = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      CompletableFuture<Void> rd = new CompletableFuture<>();
      ready.add(rd);
      outs.add(lines(start(r, n, mode, 1, timeoutMs), rd));
    }
    for (CompletableFuture<Void> rd : ready) rd.get(readySeconds, TimeUnit.SECONDS);
    return outs;
  }

  /**
   * Kills rank 1 (kill -9) and asserts that ranks 0 and 2 exit with the failure status within the
   * timeout plus 10 s; returns their outputs, rank 0's first.
   */
  private List<String> killRank1(List<CompletableFuture<List<String>>> outs, long timeoutMs) throws Exception {
    Thread.sleep(200);
    procs.get(1).destroyForcibly();
    List<String> survivors = new ArrayList<>();
    for (int r : new int[] {0, 2}) {
      assertTrue(procs.get(r).waitFor(timeoutMs + 10_000, TimeUnit.MILLISECONDS), "rank " + r + " hangs after a peer died");
      String out = String.join("\n", outs.get(r).get());
      assertEquals(3, procs.get(r).exitValue(), out);
      survivors.add(out);
    }
    return survivors;
  }

  @Test
  void killedRankMakesTheOthersFailWithinTheTimeout() throws Exception {
    long timeoutMs = 20_000;
    List<CompletableFuture<List<String>>> outs = startReady(3, "loop", timeoutMs, 60);
    assertTrue(ShmProbe.segments(segmentDir).isEmpty(),
        "segment file must be unlinked once all ranks mapped it: " + ShmProbe.segments(segmentDir));
    // kill -9 in the middle of a stream of allReduces
    for (String out : killRank1(outs, timeoutMs)) {
      // noticed through the liveness check (pid + start time), not the timeout
      assertTrue(out.contains("CommAbortedException") && out.contains("rank 1 (pid " + procs.get(1).pid() + ") exited during"), out);
    }
  }

  /**
   * A rank killed while its peers are in batches with it (send to rank+1, receive from rank-1, over
   * point-to-point channels): both peers' batches fail with CommAbortedException naming the dead
   * process, noticed by the channels' liveness checks, within the timeout.
   */
  @Test
  void killedRankFailsItsPeersBatches() throws Exception {
    long timeoutMs = 20_000;
    List<CompletableFuture<List<String>>> outs = startReady(3, "batch-loop", timeoutMs, 120);
    // kill -9 in the middle of a stream of batches
    for (String out : killRank1(outs, timeoutMs)) {
      assertTrue(out.contains("CommAbortedException") && out.contains("(pid " + procs.get(1).pid() + ") exited during"), out);
    }
  }

  /** allToAllV with skewed counts, ranks in separate processes ({@link AllToAllVProcessMain}). */
  @ParameterizedTest(name = "allToAllV, {0} processes")
  @ValueSource(ints = {2, 4})
  void skewedAllToAllVAcrossProcesses(int n) throws Exception {
    long seed = System.nanoTime();
    List<CompletableFuture<List<String>>> outs = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      outs.add(lines(launch(AllToAllVProcessMain.class, "-Xmx256m", dir.toString(), "" + r, "" + n, "" + seed, "30000"), null));
    }
    for (int r = 0; r < n; r++) {
      assertTrue(procs.get(r).waitFor(120, TimeUnit.SECONDS), "rank " + r + " did not finish");
      List<String> out = outs.get(r).get();
      assertEquals(0, procs.get(r).exitValue(), "rank " + r + " (seed " + seed + "): " + String.join("\n", out));
      assertTrue(out.contains("OK allToAllV"), out.toString());
    }
  }
}
