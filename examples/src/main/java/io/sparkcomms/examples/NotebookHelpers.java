package io.sparkcomms.examples;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/** What the notebooks call: compiled code, so the notebook cells stay short. */
public final class NotebookHelpers {
  private NotebookHelpers() {}

  /** One row of an allReduce sweep; {@code algorithm} is the protocol the timed calls ran (FLAT, TREE, ...). */
  public record Timing(long bytes, double microsPerOp, String algorithm) {}

  /**
   * allReduce SUM of float32 vectors over {@code ranks} threads of this JVM (host shared-memory
   * backend), from {@code minBytes} to {@code maxBytes} (x4 each step): median time per op of
   * {@code iters} ops after a warm-up, as rank 0 sees it.
   */
  public static List<Timing> allReduceSweep(int ranks, long minBytes, long maxBytes, int iters) throws Exception {
    InJvmRendezvous.Group group = InJvmRendezvous.group(ranks);
    ExecutorService pool = Executors.newFixedThreadPool(ranks);
    try {
      List<Future<List<Timing>>> fs = new ArrayList<>();
      for (int r = 0; r < ranks; r++) {
        int rank = r;
        fs.add(pool.submit(() -> {
          List<Timing> out = new ArrayList<>();
          try (Communicator comm = Comms.create(group.member(rank), CommOptions.builder().backend(CommOptions.Backend.HOST).build())) {
            for (long bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
              float[] v = new float[(int) (bytes / 4)];
              HostTensor t = HostTensor.of(v);
              for (int i = 0; i < 3; i++) comm.allReduce(t, ReduceOp.SUM);
              double[] times = new double[iters];
              long[] before = callsByProtocol(comm);
              for (int i = 0; i < iters; i++) {
                long t0 = System.nanoTime();
                comm.allReduce(t, ReduceOp.SUM);
                times[i] = (System.nanoTime() - t0) / 1e3;
              }
              java.util.Arrays.sort(times);
              out.add(new Timing(bytes, times[iters / 2], mostRun(comm, before)));
            }
          }
          return out;
        }));
      }
      List<Timing> rank0 = fs.get(0).get();
      for (Future<List<Timing>> f : fs) f.get();
      return rank0;
    } finally {
      pool.shutdownNow();
    }
  }

  private static long[] callsByProtocol(Communicator comm) {
    Protocol[] all = Protocol.values();
    long[] c = new long[all.length];
    for (int i = 0; i < all.length; i++) c[i] = comm.stats().calls(all[i]);
    return c;
  }

  /** The protocol most of the calls since {@code before} ran (from the communicator's statistics). */
  private static String mostRun(Communicator comm, long[] before) {
    Protocol best = null;
    long most = 0;
    for (Protocol p : Protocol.values()) {
      long d = comm.stats().calls(p) - before[p.ordinal()];
      if (d > most) {
        most = d;
        best = p;
      }
    }
    return best == null ? "none" : best.name();
  }

  /** The repository root, found upwards from the working directory (the folder with bin/sparkcomms-example). */
  public static Path repoRoot() {
    Path p = Path.of("").toAbsolutePath();
    while (p != null && !Files.isRegularFile(p.resolve("bin/sparkcomms-example"))) p = p.getParent();
    if (p == null) throw new IllegalStateException("bin/sparkcomms-example not found above " + Path.of("").toAbsolutePath());
    return p;
  }

  /** Runs {@code bin/sparkcomms-example args...}, printing its standard output; returns the exit code. */
  public static int runExample(String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(repoRoot().resolve("bin/sparkcomms-example").toString());
    cmd.addAll(List.of(args));
    try {
      Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream()))) {
        String line;
        while ((line = r.readLine()) != null) System.out.println(line);
      }
      return p.waitFor();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** Columns of a numeric CSV with a header line: result[c][row]. */
  public static double[][] readCsv(Path file) {
    try {
      List<String> lines = Files.readAllLines(file);
      int cols = lines.get(0).split(",").length;
      double[][] out = new double[cols][lines.size() - 1];
      for (int i = 1; i < lines.size(); i++) {
        String[] f = lines.get(i).split(",");
        for (int c = 0; c < cols; c++) out[c][i - 1] = Double.parseDouble(f[c]);
      }
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
