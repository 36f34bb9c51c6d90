package io.sparkcomms.examples;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The quick-start job: N JVM processes on this machine allReduce a vector over the shared-memory
 * backend, like N Spark executors of one node would. The parent starts the ranks and prints what rank
 * 0 reports.
 *
 * <pre>bin/sparkcomms-demo [--ranks N] [--count ELEMENTS]</pre>
 */
public final class HostAllReduceDemo {
  static final int MAX_RANKS = 64;
  /** 1 GiB of floats per rank. */
  static final int MAX_COUNT = 1 << 28;
  static final String USAGE = String.join("\n",
      "usage: bin/sparkcomms-demo [--ranks N] [--count ELEMENTS]",
      "  --ranks N          rank processes to start on this machine, 1.." + MAX_RANKS + " (default 4)",
      "  --count ELEMENTS   floats each rank contributes, 1.." + MAX_COUNT + " (default 1048576)",
      "  -h, --help         this text");

  /** The parsed command line: ranks and count, or help. */
  record Args(int ranks, int count, boolean help) {}

  /** A command-line error: its message is one line, printed before exit status 2. */
  static final class UsageException extends RuntimeException {
    UsageException(String message) { super(message); }
  }

  static Args parse(String[] args) {
    int ranks = 4;
    int count = 1 << 20;
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "-h": case "--help": return new Args(ranks, count, true);
        case "--ranks": ranks = intValue(args, ++i, a, MAX_RANKS); break;
        case "--count": count = intValue(args, ++i, a, MAX_COUNT); break;
        default: throw new UsageException("unknown option " + a);
      }
    }
    return new Args(ranks, count, false);
  }

  private static int intValue(String[] args, int i, String option, int max) {
    if (i >= args.length) throw new UsageException(option + " needs a value");
    int v;
    try {
      v = Integer.parseInt(args[i].trim());
    } catch (NumberFormatException e) {
      throw new UsageException(option + " needs a whole number, got '" + args[i] + "'");
    }
    if (v < 1 || v > max) throw new UsageException(option + " must be in 1.." + max + ", got " + v);
    return v;
  }

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("--rank-worker")) {
      worker(Paths.get(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]), Integer.parseInt(args[4]));
      return;
    }
    Args parsed;
    try {
      parsed = parse(args);
    } catch (UsageException e) {
      System.err.println("sparkcomms-demo: " + e.getMessage() + " (-h for the options)");
      System.exit(2);
      return;
    }
    if (parsed.help()) {
      System.out.println(USAGE);
      return;
    }
    int ranks = parsed.ranks();
    int count = parsed.count();
    Path dir = FileRendezvous.createDirectory();
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<Process> procs = new ArrayList<>();
    try {
      for (int r = 0; r < ranks; r++) {
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
            HostAllReduceDemo.class.getName(), "--rank-worker", dir.toString(), "" + r, "" + ranks, "" + count);
        pb.redirectErrorStream(true);
        if (r == 0) pb.redirectOutput(ProcessBuilder.Redirect.INHERIT);
        else pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
        procs.add(pb.start());
      }
      int failed = 0;
      for (int r = 0; r < ranks; r++) {
        Process p = procs.get(r);
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          failed++;
        } else if (p.exitValue() != 0) {
          failed++;
        }
      }
      System.out.println(failed == 0 ? "demo OK: " + ranks + " processes" : "demo FAILED on " + failed + " rank(s)");
      System.exit(failed == 0 ? 0 : 1);
    } finally {
      procs.forEach(Process::destroyForcibly);
      try (Stream<Path> s = Files.walk(dir)) {
        s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  private static void worker(Path dir, int rank, int ranks, int count) {
    CommOptions options = CommOptions.fromEnvironment();
    try (Communicator comm = Comms.create(new FileRendezvous(dir, rank, ranks), options)) {
      // every rank contributes (rank + 1) * (i % 7); the sum is known in closed form
      float[] x = new float[count];
      for (int i = 0; i < count; i++) x[i] = (rank + 1) * (i % 7);
      long t0 = System.nanoTime();
      comm.allReduce(HostTensor.of(x), ReduceOp.SUM);
      long first = System.nanoTime() - t0;
      float tri = ranks * (ranks + 1) / 2f;
      int wrong = 0;
      for (int i = 0; i < count; i++) if (x[i] != tri * (i % 7)) wrong++;
      int iters = 20;
      t0 = System.nanoTime();
      for (int it = 0; it < iters; it++) comm.allReduce(HostTensor.of(x), ReduceOp.AVG);
      double us = (System.nanoTime() - t0) / 1e3 / iters;
      if (rank == 0) {
        System.out.printf("rank 0 of %d (%s backend): allReduce SUM of %d floats (%.1f MB): %d wrong elements, first call %.0f us%n",
            ranks, comm.backendName(), count, count * 4 / 1e6, wrong, first / 1e3);
        System.out.printf("steady state: %.0f us per allReduce, algorithm use %s%n", us, comm.stats());
      }
      if (wrong != 0) System.exit(1);
    }
  }
}
