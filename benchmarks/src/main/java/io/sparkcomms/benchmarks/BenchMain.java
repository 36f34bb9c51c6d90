package io.sparkcomms.benchmarks;

import io.sparkcomms.collectives.gpu.GpuBench;
import java.io.PrintStream;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;

/**
 * The benchmark CLI ({@code bin/sparkcomms-bench}), rccl-tests style: launches {@code --ranks} rank
 * processes on this host, times a collective over a range of sizes and algorithms (optionally against
 * a naive TCP baseline), and checks every result against a float64 reference. Run with {@code -h} for
 * the flags. With {@code --timing device} it runs {@link GpuBench} (the GPU allReduce table).
 *
 * <p>Hidden mode, used by the launcher for its children:
 * {@code --rank-worker RANK DIR --parent-pid PID <canonical flags>}.
 */
public final class BenchMain {
  static final String WORKER_FLAG = "--rank-worker";
  static final String PARENT_FLAG = "--parent-pid";

  private BenchMain() {}

  public static void main(String[] args) {
    int rc = run(args, System.out, System.err);
    System.out.flush();
    System.err.flush();
    System.exit(rc);
  }

  /** Runs the benchmark (launcher or rank worker) and returns the exit status. */
  public static int run(String[] args, PrintStream out, PrintStream err) {
    if (args.length >= 3 && args[0].equals(WORKER_FLAG)) return worker(args, out, err);
    BenchConfig cfg;
    try {
      cfg = BenchConfig.parse(args);
    } catch (BenchConfig.UsageException e) {
      err.println("sparkcomms-bench: " + e.getMessage() + " (-h for the options)");
      return 2;
    }
    if (cfg.help) {
      out.println(BenchConfig.usage());
      return 0;
    }
    if (cfg.timing == BenchConfig.Timing.DEVICE) return deviceTable(cfg, err);
    return new BenchLauncher(cfg, args, out, err).run();
  }

  /** {@code --timing device}: GpuBench's rank processes write to this JVM's standard output. */
  private static int deviceTable(BenchConfig cfg, PrintStream err) {
    String why = BenchLauncher.gpuUnavailableReason();
    if (why != null) {
      err.println("GPU backend unavailable: " + why);
      return 2;
    }
    try {
      return GpuBench.run(cfg.gpuBenchArgs().toArray(new String[0]));
    } catch (Exception e) {
      err.println("sparkcomms-bench: " + e);
      return 1;
    }
  }

  private static int worker(String[] args, PrintStream out, PrintStream err) {
    int rank = Integer.parseInt(args[1]);
    Path dir = Paths.get(args[2]);
    int from = 3;
    long parentPid = -1;
    if (args.length > 4 && args[3].equals(PARENT_FLAG)) {
      parentPid = Long.parseLong(args[4]);
      from = 5;
    }
    RankWorker.watchParent(parentPid);
    BenchConfig cfg;
    try {
      cfg = BenchConfig.parse(Arrays.copyOfRange(args, from, args.length));
    } catch (BenchConfig.UsageException e) {
      err.println("rank " + rank + ": " + e.getMessage());
      return 2;
    }
    return new RankWorker(cfg, rank, out, err).run(dir);
  }
}
