package io.sparkcomms.benchmarks;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Runs the benchmark CLI for real (two rank processes) and checks its CSV; no timing assertions. */
class BenchMainTest {
  @TempDir Path tmp;

  private record Result(int rc, String out, String err) {}

  private static Result bench(String... args) {
    ByteArrayOutputStream o = new ByteArrayOutputStream(), e = new ByteArrayOutputStream();
    int rc;
    try (PrintStream po = new PrintStream(o, true, StandardCharsets.UTF_8);
         PrintStream pe = new PrintStream(e, true, StandardCharsets.UTF_8)) {
      rc = BenchMain.run(args, po, pe);
    }
    return new Result(rc, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8));
  }

  // Timeouts: a backstop against a hang only, never a timing check. Each case starts two rank JVMs
  // and warms the JIT for up to 10 s per communicator (RankWorker.JIT_CALLS): on 2 cores beside
  // another test suite, 6 such cases took more than 60 s.
  @Test
  @Timeout(value = 900, unit = TimeUnit.SECONDS)
  void allAlgorithmsAndTcpBaselineAreCorrect() throws Exception {
    Path csv = tmp.resolve("bench.csv");
    Result r = bench("--ranks", "2", "-b", "1K", "-e", "64K", "-f", "4", "-n", "3", "-w", "1", "--warmup-time", "0",
        "--algo", "all", "--baseline", "tcp", "--csv", csv.toString());
    String diag = "stdout:\n" + r.out + "\nstderr:\n" + r.err;
    assertEquals(0, r.rc, diag);
    assertTrue(r.out.contains("# host: "), diag);
    assertTrue(r.out.contains("# command: "), diag);

    List<String> lines = Files.readAllLines(csv);
    assertEquals("size,count,type,redop,algo,time_us,algbw_GBps,busbw_GBps,wrong,max_rel_err,median_us,p99_us", lines.get(0));
    List<String[]> rows = new ArrayList<>();
    for (String l : lines.subList(1, lines.size())) rows.add(l.split(","));
    // 1K, 4K, 16K, 64K x (flat, tree, lp, tcp)
    assertEquals(16, rows.size(), diag);
    Set<String> seen = new TreeSet<>();
    long[] sizes = {1024, 4096, 16384, 65536};
    String[] algos = {"flat", "tree", "lp", "tcp"};
    for (int i = 0; i < rows.size(); i++) {
      String[] c = rows.get(i);
      assertEquals(12, c.length, String.join(",", c));
      assertEquals(sizes[i / 4], Long.parseLong(c[0]), String.join(",", c));
      assertEquals(sizes[i / 4] / 4, Long.parseLong(c[1]));
      assertEquals("float32", c[2]);
      assertEquals("sum", c[3]);
      assertEquals(algos[i % 4], c[4], "algorithm order");
      assertTrue(Double.parseDouble(c[5]) > 0, "time_us");
      assertTrue(Double.parseDouble(c[6]) > 0 && Double.parseDouble(c[7]) > 0, "bandwidths");
      assertEquals(0, Long.parseLong(c[8]), "wrong elements in " + String.join(",", c));
      double rel = Double.parseDouble(c[9]);
      assertTrue(rel >= 0 && rel < (c[4].equals("lp") ? 0.5 : 1e-6), "max_rel_err " + rel);
      double median = Double.parseDouble(c[10]), p99 = Double.parseDouble(c[11]);
      assertTrue(median > 0 && p99 >= median, "median_us " + median + ", p99_us " + p99);
      seen.add(c[4]);
    }
    assertEquals(new TreeSet<>(List.of(algos)), seen);
  }

  @Test
  @Timeout(value = 900, unit = TimeUnit.SECONDS)
  void otherCollectivesAndTypesAreCorrect() throws Exception {
    String[][] cases = {
        {"-c", "reducescatter", "-d", "bfloat16", "-o", "avg", "--algo", "all"},
        {"-c", "allgather", "-d", "int64", "--algo", "flat"},
        {"-c", "alltoall", "-d", "float32", "--algo", "lp"},
        {"-c", "broadcast", "-d", "float16"},
        {"-c", "allreduce", "-d", "int32", "-o", "prod"},
        {"-c", "allreduce", "-d", "float64", "-o", "premul_sum(0.5)", "--algo", "tree"},
    };
    for (String[] extra : cases) {
      Path csv = tmp.resolve("case.csv");
      List<String> args = new ArrayList<>(List.of("--ranks", "2", "-b", "2K", "-e", "8K", "-n", "2", "-w", "1",
          "--csv", csv.toString()));
      args.addAll(List.of(extra));
      Result r = bench(args.toArray(new String[0]));
      String diag = String.join(" ", extra) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
      assertEquals(0, r.rc, diag);
      List<String> lines = Files.readAllLines(csv);
      assertTrue(lines.size() >= 3, diag);
      for (String l : lines.subList(1, lines.size())) assertEquals("0", l.split(",")[8], diag);
    }
  }

  /**
   * reduce, gather, scatter (root 1), allgatherv, reducescatterv and sendrecv, 2 ranks, tiny sizes: every row
   * correct, busbw = algbw times the nccl-tests factor. The per-rank-count rows start at 8 bytes,
   * where rank 0's share is 0 elements.
   */
  @Test
  @Timeout(value = 900, unit = TimeUnit.SECONDS)
  void rootedAndPerRankCountCollectivesAreCorrect() throws Exception {
    Object[][] cases = {
        // extra flags, busbw factor at 2 ranks, redop, sizes
        {new String[] {"-c", "reduce", "-o", "sum"}, 1.0, "sum", new long[] {1024, 2048, 4096}},
        {new String[] {"-c", "gather"}, 0.5, "none", new long[] {1024, 2048, 4096}},
        {new String[] {"-c", "scatter", "--root", "1"}, 0.5, "none", new long[] {1024, 2048, 4096}},
        {new String[] {"-c", "allgatherv"}, 0.5, "none", new long[] {8, 256, 8192}},
        {new String[] {"-c", "reducescatterv", "-o", "max"}, 0.5, "max", new long[] {8, 256, 8192}},
        {new String[] {"-c", "sendrecv"}, 1.0, "none", new long[] {1024, 2048, 4096}},
    };
    for (Object[] k : cases) {
      String[] extra = (String[]) k[0];
      double factor = (double) k[1];
      long[] sizes = (long[]) k[3];
      Path csv = tmp.resolve("rooted.csv");
      List<String> args = new ArrayList<>(List.of("--ranks", "2", "-b", Long.toString(sizes[0]),
          "-e", Long.toString(sizes[sizes.length - 1]), "-f", Long.toString(sizes[1] / sizes[0]), "-n", "3", "-w", "1",
          "--warmup-time", "0", "--csv", csv.toString()));
      args.addAll(List.of(extra));
      Result r = bench(args.toArray(new String[0]));
      String diag = String.join(" ", extra) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
      assertEquals(0, r.rc, diag);
      assertTrue(r.out.contains("# rows: " + sizes.length + ", wrong elements: 0 "), diag);
      if (extra[1].equals("sendrecv")) assertTrue(r.out.contains("# size: what a rank sends to rank+1"), diag);
      if (extra[1].equals("allgatherv") || extra[1].equals("reducescatterv")) {
        // 8 bytes of float32 at 2 ranks: shares 1/3 and 2/3 of 2 elements
        assertTrue(r.out.contains("per-rank counts: rank r's share of the total proportional to r+1 (-h), 8: [0, 2]"), diag);
      }
      List<String> lines = Files.readAllLines(csv);
      assertEquals(sizes.length + 1, lines.size(), diag);
      for (int i = 0; i < sizes.length; i++) {
        String[] c = lines.get(i + 1).split(",");
        String row = String.join(",", c) + "\n" + diag;
        assertEquals(sizes[i], Long.parseLong(c[0]), row);
        assertEquals(sizes[i] / 4, Long.parseLong(c[1]), row);
        assertEquals(k[2], c[3], row);
        assertEquals("flat", c[4], row);
        assertEquals(0, Long.parseLong(c[8]), row);
        double rel = Double.parseDouble(c[9]);
        assertTrue(rel >= 0 && rel < 1e-6, "max_rel_err " + rel + ": " + row);
        double algbw = Double.parseDouble(c[6]), busbw = Double.parseDouble(c[7]);
        // both printed with 6 decimals: the factor holds to 1e-6
        assertTrue(Math.abs(busbw - factor * algbw) <= 1e-6, "busbw " + busbw + " vs algbw " + algbw + ": " + row);
        if (sizes[i] >= 256) assertTrue(busbw > 0, row);
      }
    }
  }

  @Test
  void baselinesThatDoNotCoverTheCollectiveAreUsageErrors() {
    for (String c : new String[] {"gather", "reduce", "scatter", "allgatherv", "reducescatterv", "sendrecv"}) {
      Result r = bench("-c", c, "--baseline", "tcp");
      assertEquals(2, r.rc, r.err);
      assertTrue(r.err.contains("--baseline tcp covers allreduce only, not " + c + " "), r.err);
      Result v = bench("-c", c, "--backend", "gpu", "--baseline", "vendor");
      assertEquals(2, v.rc, v.err);
      assertTrue(v.err.contains("--baseline vendor covers allreduce, allgather, reducescatter and broadcast, not " + c + " "), v.err);
    }
    Result root = bench("-c", "gather", "--ranks", "2", "--root", "2");
    assertEquals(2, root.rc);
    assertTrue(root.err.contains("--root must be in 0..1"), root.err);
    Result unrooted = bench("-c", "allgatherv", "--root", "1");
    assertEquals(2, unrooted.rc);
    assertTrue(unrooted.err.contains("--root is for broadcast, reduce, gather and scatter, not allgatherv"), unrooted.err);
    Result alone = bench("-c", "sendrecv", "--ranks", "1");
    assertEquals(2, alone.rc);
    assertTrue(alone.err.contains("sendrecv needs two ranks or more"), alone.err);
    Result h = bench("-h");
    assertEquals(0, h.rc);
    assertTrue(h.out.contains("broadcast|reduce|gather|") && h.out.contains("scatter|allgatherv|reducescatterv")
        && h.out.contains("--root R") && h.out.contains("proportional to r+1"), h.out);
    BenchConfig c = BenchConfig.parse(new String[] {"-c", "scatter", "--ranks", "4", "--root", "3"});
    assertEquals(3, c.root);
    assertEquals(c.toArgs(), BenchConfig.parse(c.toArgs().toArray(new String[0])).toArgs());
    assertTrue(c.toArgs().contains("--root"));
  }

  @Test
  void usageErrorsExitWithTwo() {
    assertEquals(2, bench("--bogus").rc);
    assertEquals(2, bench("-c", "allgather", "--baseline", "tcp").rc);
    assertEquals(2, bench("-d", "int32", "-o", "premul_sum(2)").rc);
    assertEquals(2, bench("-b", "64K", "-e", "1K").rc);
    Result h = bench("-h");
    assertEquals(0, h.rc);
    assertTrue(h.out.contains("--baseline"));
  }

  @Test
  void deviceTimingHandsItsOptionsToTheGpuTable() {
    String csv = tmp.resolve("gpu.csv").toString();
    BenchConfig c = BenchConfig.parse(new String[] {"--backend", "gpu", "--timing", "device", "--ranks", "4", "-b", "1K",
        "-e", "1G", "-f", "2", "-d", "bf16", "-o", "sum", "--baseline", "vendor", "--staging", "32M", "--csv", csv});
    assertEquals(List.of("--ranks", "4", "-b", "1024", "-e", "1073741824", "-f", "2", "-d", "bfloat16",
        "--staging", "33554432", "--csv", csv), c.gpuBenchArgs());
  }

  @Test
  void deviceTimingRefusesWhatTheGpuTableDoesNotDo() {
    String[][] refused = {{"-n", "10"}, {"--iters", "10"}, {"-w", "2"}, {"--seed", "1"}, {"--timeout", "60"}, {"--lp-block", "64"},
        {"--algo", "flat"}, {"-c", "allgather"}, {"-o", "max"}, {"--baseline", "tcp"}};
    for (String[] extra : refused) {
      List<String> args = new ArrayList<>(List.of("--backend", "gpu", "--timing", "device"));
      args.addAll(List.of(extra));
      Result r = bench(args.toArray(new String[0]));
      assertEquals(2, r.rc, String.join(" ", args) + ": " + r.err);
      assertTrue(r.err.contains("--timing"), String.join(" ", args) + ": " + r.err);
    }
    Result host = bench("--timing", "device");
    assertEquals(2, host.rc);
    assertTrue(host.err.contains("--timing device needs --backend gpu"), host.err);
    assertEquals(2, bench("--spark").rc, "the Spark sweep runs through bin/sparkcomms-bench");
  }

  @Test
  void usageErrorsAreOneLineAndExitTwo() {
    String[][] cases = {{"--bogus"}, {"--bogus", "3"}, {"--bogus=3"}, {"--ranks", "0"}, {"--ranks", "x"}, {"--ranks"}, {"-n", "-1"}};
    String[] expected = {"unknown option --bogus", "unknown option --bogus", "unknown option --bogus", "--ranks must be in 1..64",
        "not a number", "--ranks needs a value", "-n must be >= 1"};
    for (int k = 0; k < cases.length; k++) {
      Result r = bench(cases[k]);
      String what = String.join(" ", cases[k]) + ": " + r.err;
      assertEquals(2, r.rc, what);
      assertTrue(r.err.startsWith("sparkcomms-bench: ") && r.err.contains(expected[k]), what);
      assertTrue(!r.err.contains("Exception") && !r.err.contains("\tat "), what);
      assertEquals("", r.out, what);
    }
    Result help = bench("-h");
    assertEquals(0, help.rc);
    assertTrue(help.out.startsWith("usage: sparkcomms-bench") && help.out.contains("(default 2)"), help.out);
  }

  @Test
  void sizesFollowTheFactor() {
    BenchConfig c = BenchConfig.parse(new String[] {"-b", "1K", "-e", "64M", "-f", "4"});
    assertEquals(List.of(1L << 10, 1L << 12, 1L << 14, 1L << 16, 1L << 18, 1L << 20, 1L << 22, 1L << 24, 1L << 26), c.sizes());
    BenchConfig d = BenchConfig.parse(c.toArgs().toArray(new String[0]));
    assertEquals(c.toArgs(), d.toArgs());
  }
}
