package io.sparkcomms.benchmarks;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Sizes;
import io.sparkcomms.collectives.algo.Thresholds;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The launcher: prints the header, starts one JVM per rank on a private rendezvous directory, copies
 * rank 0's output to its own, waits (bounded), and cleans up: children are killed when one fails, when
 * the run times out, or when the launcher is interrupted; the directory is always removed.
 */
final class BenchLauncher {
  /** Seconds the other ranks get to stop on their own after one failed, before they are killed. */
  private static final long FAILURE_GRACE_SECONDS = 10;

  private final BenchConfig cfg;
  private final String[] originalArgs;
  private final PrintStream out;
  private final PrintStream err;
  private final List<Process> procs = new ArrayList<>();

  BenchLauncher(BenchConfig cfg, String[] originalArgs, PrintStream out, PrintStream err) {
    this.cfg = cfg;
    this.originalArgs = originalArgs;
    this.out = out;
    this.err = err;
  }

  int run() {
    if (cfg.backend == CommOptions.Backend.GPU) {
      String why = gpuUnavailableReason();
      if (why != null) {
        err.println("GPU backend unavailable: " + why);
        return 2;
      }
      int devices = GpuLibrary.deviceCount();
      if (cfg.baseline == BenchConfig.Baseline.VENDOR && devices < cfg.ranks) {
        err.println("sparkcomms-bench: --baseline vendor needs a GPU per rank (" + cfg.ranks + " ranks, " + devices + " GPUs)");
        return 2;
      }
    }
    if (cfg.seed == null) cfg.seed = System.nanoTime() ^ ProcessHandle.current().pid() << 32;
    header();

    Path dir = FileRendezvous.createDirectory();
    Thread hook = new Thread(() -> {
      killAll();
      deleteTree(dir);
    }, "sparkcomms-bench-cleanup");
    Runtime.getRuntime().addShutdownHook(hook);
    List<Thread> pumps = new ArrayList<>();
    int rc;
    try {
      for (int r = 0; r < cfg.ranks; r++) {
        ProcessBuilder pb = new ProcessBuilder(childCommand(r, dir));
        if (r != 0) pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
        Process p = pb.start();
        procs.add(p);
        if (r == 0) pumps.add(pump(p.getInputStream(), out, ""));
        pumps.add(pump(p.getErrorStream(), err, "[rank " + r + "] "));
      }
      rc = await();
    } catch (IOException e) {
      err.println("sparkcomms-bench: cannot start the rank processes: " + e);
      rc = 1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      err.println("sparkcomms-bench: interrupted, stopping the ranks");
      rc = 130;
    } finally {
      killAll();
      for (Thread t : pumps) {
        try {
          t.join(5_000);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      deleteTree(dir);
      try {
        Runtime.getRuntime().removeShutdownHook(hook);
      } catch (IllegalStateException ignored) {
        // shutting down: the hook runs anyway
      }
    }
    out.flush();
    err.flush();
    return rc;
  }

  /** Waits for every rank; 0 when all exited 0. Kills the rest when one fails or time runs out. */
  private int await() throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(cfg.timeoutSeconds);
    long failedAt = 0;
    int rc = 0;
    while (true) {
      boolean running = false;
      for (int r = 0; r < procs.size(); r++) {
        Process p = procs.get(r);
        if (p.isAlive()) {
          running = true;
        } else if (p.exitValue() != 0 && rc == 0) {
          rc = 1;
          failedAt = System.nanoTime();
          err.println("sparkcomms-bench: rank " + r + " exited with status " + p.exitValue());
        }
      }
      if (!running) return rc;
      long now = System.nanoTime();
      if (rc != 0 && now - failedAt > TimeUnit.SECONDS.toNanos(FAILURE_GRACE_SECONDS)) {
        err.println("sparkcomms-bench: stopping the remaining ranks");
        return rc;
      }
      if (now - deadline > 0) {
        err.println("sparkcomms-bench: timed out after " + cfg.timeoutSeconds + " s (--timeout), stopping the ranks");
        return 1;
      }
      Thread.sleep(50);
    }
  }

  private void killAll() {
    for (Process p : procs) {
      if (p.isAlive()) p.destroyForcibly();
    }
    for (Process p : procs) {
      try {
        p.waitFor(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  private List<String> childCommand(int rank, Path dir) {
    List<String> cmd = new ArrayList<>();
    String java = ProcessHandle.current().info().command()
        .orElse(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add(java);
    for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
      if (a.startsWith("-Xmx") || a.startsWith("-Xms") || a.startsWith("-Xss") || a.startsWith("-XX:")
          || a.startsWith("--add-opens=") || a.startsWith("--add-exports=") || a.startsWith("-Dsparkcomms.")) {
        cmd.add(a);
      }
    }
    cmd.add("-cp");
    cmd.add(System.getProperty("java.class.path"));
    cmd.add(BenchMain.class.getName());
    cmd.add(BenchMain.WORKER_FLAG);
    cmd.add(Integer.toString(rank));
    cmd.add(dir.toString());
    cmd.add(BenchMain.PARENT_FLAG);
    cmd.add(Long.toString(ProcessHandle.current().pid()));
    cmd.addAll(cfg.toArgs());
    return cmd;
  }

  private static Thread pump(InputStream in, PrintStream to, String prefix) {
    Thread t = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
        for (String line; (line = r.readLine()) != null; ) {
          synchronized (to) {
            to.println(prefix + line);
            to.flush();
          }
        }
      } catch (IOException ignored) {
        // the process is gone
      }
    }, "sparkcomms-bench-pump");
    t.setDaemon(true);
    t.start();
    return t;
  }

  /** Null when the GPU library loads here, else why not. */
  static String gpuUnavailableReason() {
    try {
      GpuLibrary.Status st = GpuLibrary.status();
      if (st.available()) return null;
      String m = st.reason() != null ? st.reason() : "no GPU library";
      return m.startsWith("GPU backend unavailable: ") ? m.substring("GPU backend unavailable: ".length()) : m;
    } catch (RuntimeException | LinkageError e) {
      return e.toString();
    }
  }

  private void header() {
    CommOptions o = cfg.options(Algorithm.AUTO, System.getenv());
    int n = cfg.ranks;
    boolean gpu = cfg.backend == CommOptions.Backend.GPU;
    String bus = BenchConfig.busFactorFormula(cfg.collective);
    out.println("# sparkcomms-bench: " + cfg.collectiveName() + " on the " + cfg.backend.name().toLowerCase()
        + " backend, " + n + " rank processes");
    out.println("# command: " + commandLine());
    out.println("# date: " + ZonedDateTime.now().truncatedTo(ChronoUnit.SECONDS).format(DateTimeFormatter.ISO_OFFSET_DATE_TIME));
    out.println("# host: " + HostInfo.hostname() + ", nproc " + HostInfo.cores() + ", CPU: " + HostInfo.cpuModel()
        + ", memory " + HostInfo.memory() + ", load average " + HostInfo.loadAverage());
    out.println("# software: " + HostInfo.java() + ", " + HostInfo.os());
    out.println("# backend: " + (cfg.backend == CommOptions.Backend.HOST ? "host (shared memory, /dev/shm)" : "gpu")
        + ", ranks: " + n + ", collective: " + cfg.collectiveName()
        + (cfg.collective.isRooted() ? ", root: " + cfg.root : "") + ", dtype: " + cfg.typeName() + ", op: " + cfg.opName());
    out.println("# algorithms: " + cfg.algoList() + ", baseline: " + cfg.baseline.name().toLowerCase());
    if (gpu) {
      // the GPU library's own defaults (docs/configuration.md) apply to whatever is not set here
      out.println("# options: " + o + " (unset: the GPU library's defaults)");
    } else {
      out.println("# options: staging " + Sizes.format(Thresholds.stagingBytes(o)) + " per rank, lp block "
          + Thresholds.lpBlockSize(o) + ", fp8 " + Thresholds.fp8Format(o) + ", auto thresholds: flat max "
          + bytes(Thresholds.flatMaxBytes(o)) + ", tree max " + bytes(o.treeMaxBytes() == CommOptions.BACKEND_DEFAULT ? Long.MAX_VALUE : o.treeMaxBytes())
          + ", low precision under auto: " + o.lowPrecision() + " (min " + Sizes.format(Thresholds.lpMinBytes(o))
          + "), timeout " + o.timeout().toSeconds() + " s");
    }
    out.println("# sizes: " + Sizes.format(cfg.minBytes) + " to " + Sizes.format(cfg.maxBytes) + ", factor " + cfg.factor
        + "; warm-up: at least " + cfg.warmup + " calls and " + cfg.warmupSeconds + " s per row; timed iterations: "
        + (cfg.iters > 0 ? Integer.toString(cfg.iters)
            : "auto (ceil(" + cfg.targetSeconds + " s / median warm-up call), " + cfg.minIters + ".." + cfg.maxIters + ")")
        + "; seed " + cfg.seed);
    out.println("# size: " + sizeMeaning() + "; count: elements of that buffer");
    out.println("# time_us: max over ranks of the mean wall time per call; algbw = size / time; busbw = algbw * " + bus
        + " (nccl-tests)"
        + "; median_us, p99_us: max over ranks of each rank's median and 99th percentile of its calls' wall times");
    out.println("# wrong: elements outside the bound vs a float64 reference, all ranks; max_rel_err: max |out - ref| / max(|ref|, mean_r |x_r|)");
    out.flush();
  }

  /** What the size column measures for the collective (nccl-tests: the call's largest buffer). */
  private String sizeMeaning() {
    switch (cfg.collective) {
      case ALL_REDUCE: case BROADCAST: case REDUCE: return "a rank's input";
      case ALL_GATHER: case GATHER: return "the output, n times a rank's input";
      case REDUCE_SCATTER: case SCATTER: return "the input, n times a rank's output";
      case ALL_TO_ALL: return "a rank's input (and output), n slices";
      case BATCH: return "what a rank sends to rank+1 (and receives from rank-1)";
      case ALL_GATHER_V: case REDUCE_SCATTER_V: return "the total of the per-rank counts (rank r's share proportional to r+1)";
      default: throw new IllegalArgumentException(cfg.collectiveName());
    }
  }

  private static String bytes(long b) { return b == Long.MAX_VALUE ? "unlimited" : Sizes.format(b); }

  private String commandLine() {
    StringBuilder s = new StringBuilder(System.getProperty("sparkcomms.bench.argv0", "sparkcomms-bench"));
    for (String a : originalArgs) s.append(' ').append(shellQuote(a));
    return s.toString();
  }

  static String shellQuote(String a) {
    if (!a.isEmpty() && a.matches("[A-Za-z0-9_./:=,+@%-]+")) return a;
    return "'" + a.replace("'", "'\\''") + "'";
  }

  static void deleteTree(Path dir) {
    if (dir == null || !Files.exists(dir)) return;
    try (Stream<Path> s = Files.walk(dir)) {
      s.sorted(Comparator.reverseOrder()).forEach(p -> {
        try {
          Files.deleteIfExists(p);
        } catch (IOException ignored) {
          // best effort
        }
      });
    } catch (IOException ignored) {
      // best effort
    }
  }
}
