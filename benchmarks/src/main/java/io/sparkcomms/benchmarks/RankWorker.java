package io.sparkcomms.benchmarks;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommStats;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Sizes;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.algo.AlgorithmSelector;
import io.sparkcomms.collectives.gpu.DeviceBuffer;
import io.sparkcomms.collectives.gpu.DeviceTensor;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.CallPlanner;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import java.io.PrintStream;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * One rank process of the benchmark. Creates one communicator per requested algorithm (options are
 * fixed per communicator), then for every size and algorithm: fresh inputs, warm-up, a barrier, the
 * timed calls, and a check of the last call's output. The time of a row is the maximum over ranks of
 * each rank's mean wall time per call; wrong counts and errors are combined over ranks, so every rank
 * knows the totals and exits with the same status.
 */
final class RankWorker {
  private final BenchConfig cfg;
  private final int rank;
  private final int n;
  private final PrintStream out;
  private final PrintStream err;
  private final ReduceOp op;        // null for collectives without a reduction
  private final Map<String, Communicator> comms = new LinkedHashMap<>();
  private Communicator ctrl;
  private TcpBaseline tcp;
  private long rowId;

  RankWorker(BenchConfig cfg, int rank, PrintStream out, PrintStream err) {
    this.cfg = cfg;
    this.rank = rank;
    this.n = cfg.ranks;
    this.out = out;
    this.err = err;
    this.op = cfg.reduces() ? cfg.op : null;
  }

  /** Watches the launcher: a rank whose launcher vanished (killed) stops at once. */
  static void watchParent(long parentPid) {
    if (parentPid <= 0) return;
    Optional<ProcessHandle> parent = ProcessHandle.of(parentPid);
    Thread t = new Thread(() -> {
      while (true) {
        if (parent.isEmpty() || !parent.get().isAlive()) Runtime.getRuntime().halt(4);
        try {
          Thread.sleep(500);
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "sparkcomms-bench-parent-watch");
    t.setDaemon(true);
    t.start();
  }

  /** Runs the whole benchmark on this rank; returns the exit status (same on every rank). */
  int run(Path dir) {
    ResultWriter w = null;
    try {
      FileRendezvous rv = new FileRendezvous(dir, rank, n);
      // Control traffic (barriers, port exchange, gathering times and checks) always runs on a small
      // host communicator of its own, whatever the backend under test.
      ctrl = HostCommunicator.create(rv, cfg.options(Algorithm.AUTO, System.getenv()).toBuilder()
          .backend(CommOptions.Backend.HOST).stagingBytes(64 << 10).build());
      comms.put("CONTROL", ctrl);
      for (Algorithm a : cfg.algorithms) comms.put(a.name(), create(rv, cfg.options(a, System.getenv())));
      if (cfg.baseline == BenchConfig.Baseline.VENDOR) {
        comms.put("VENDOR_BASELINE", create(rv, cfg.options(Algorithm.VENDOR, System.getenv())));
      }
      if (cfg.baseline == BenchConfig.Baseline.TCP) tcp = TcpBaseline.connect(ctrl, ctrl.options().timeout());
      if (rank == 0) {
        w = new ResultWriter(out, cfg.csv);
        notes();
        w.header();
      }
      long totalWrong = 0;
      BenchData.Layout first = BenchData.Layout.of(cfg.collective, cfg.minBytes, cfg.dtype, n, rank, cfg.root);
      if (first != null && cfg.warmupSeconds > 0) {
        if (rank == 0) {
          out.println("# JIT warm-up: every communicator under test" + (tcp != null ? " and tcp" : "") + " runs the "
              + Sizes.format(cfg.minBytes) + " call " + JIT_CALLS + " times, at least 1 s and until the JIT is quiet (at most 10 s), before the table");
          out.flush();
        }
        jitWarmUp(first);
      }
      for (long size : cfg.sizes()) {
        BenchData.Layout l = BenchData.Layout.of(cfg.collective, size, cfg.dtype, n, rank, cfg.root);
        if (l == null) {
          if (rank == 0) out.println("# size " + size + ": too small for " + n + " ranks of " + cfg.typeName() + ", skipped");
          continue;
        }
        try (Buffers b = new Buffers(l)) {
          Set<Protocol> seen = new HashSet<>();
          for (Algorithm a : cfg.algorithms) {
            Communicator comm = comms.get(a.name());
            Protocol predicted = predict(comm, l, a);
            if (cfg.algorithms.size() > 1 && predicted != null && !seen.add(predicted)) continue;
            totalWrong += row(w, l, b, comm, predicted, null);
          }
          if (tcp != null) totalWrong += row(w, l, b, null, null, "tcp");
          if (cfg.baseline == BenchConfig.Baseline.VENDOR) {
            totalWrong += row(w, l, b, comms.get("VENDOR_BASELINE"), Protocol.VENDOR, null);
          }
        }
      }
      ctrl.barrier();
      if (rank == 0) {
        out.println("# load average at the end: " + HostInfo.loadAverage() + " (" + HostInfo.cores() + " cores)");
        out.println("# rows: " + w.rows() + ", wrong elements: " + totalWrong + (totalWrong == 0 ? " (all results within bounds)" : " (FAILED)"));
        out.flush();
      }
      return totalWrong == 0 ? 0 : 1;
    } catch (RuntimeException | Error e) {
      err.println("rank " + rank + " failed: " + e);
      e.printStackTrace(err);
      err.flush();
      for (Communicator c : comms.values()) {
        try {
          c.abort("benchmark rank " + rank + " failed: " + e);
        } catch (RuntimeException ignored) {
          // best effort
        }
      }
      return 1;
    } finally {
      if (w != null) w.close();
      if (tcp != null) tcp.close();
      for (Communicator c : comms.values()) {
        try {
          c.close();
        } catch (RuntimeException ignored) {
          // best effort
        }
      }
    }
  }

  private Communicator create(FileRendezvous rv, CommOptions o) {
    if (!gpu()) return Comms.create(rv, o);
    // The vendor library needs a device of its own per rank: off when ranks share devices.
    return Comms.create(rv, devices() < n ? o.toBuilder().vendor(false).build() : o, device());
  }

  /** GPUs visible to this process (at least 1, so that {@link #device()} is defined). */
  private static int devices() { return Math.max(1, GpuLibrary.deviceCount()); }

  /** This rank's GPU: rank r on device r % devices, so more ranks than GPUs share them. */
  private int device() { return rank % devices(); }

  private boolean gpu() { return cfg.backend == CommOptions.Backend.GPU; }

  /**
   * A row's buffers: host arrays (inputs are made and results checked there) and, on the GPU
   * backend, device copies that the collective runs on. The TCP baseline always uses the host arrays.
   */
  private final class Buffers implements AutoCloseable {
    final HostTensor in;
    final HostTensor res;
    final DeviceBuffer dinBuf;
    final DeviceBuffer dresBuf;
    final DeviceTensor din;
    final DeviceTensor dres;

    Buffers(BenchData.Layout l) {
      in = HostTensor.allocate(cfg.dtype, l.inCount());
      res = HostTensor.allocate(cfg.dtype, l.outCount());
      dinBuf = gpu() ? DeviceBuffer.allocate(cfg.dtype, l.inCount(), device()) : null;
      dresBuf = gpu() ? DeviceBuffer.allocate(cfg.dtype, l.outCount(), device()) : null;
      din = dinBuf != null ? dinBuf.view() : null;
      dres = dresBuf != null ? dresBuf.view() : null;
    }

    /** After the host arrays were filled: copy them to the device. */
    void upload() {
      if (din != null) {
        din.copyFrom(in);
        dres.copyFrom(res);
      }
    }

    /** Before the check: the device result into the host array. */
    void download() {
      if (dres != null) dres.copyTo(res);
    }

    @Override public void close() {
      if (dinBuf != null) dinBuf.close();
      if (dresBuf != null) dresBuf.close();
    }
  }

  /**
   * The protocol the host policy will pick for request {@code a} after the planner's normalization
   * (used to skip duplicate rows; the row reports what ran). On the GPU the native library decides
   * per call: null, no row is skipped.
   */
  private Protocol predict(Communicator comm, BenchData.Layout l, Algorithm a) {
    if (gpu()) return null;
    try {
      Algorithm req = new CallPlanner(n, comm.options(), BackendOffer.HOST).normalize(cfg.collective, cfg.dtype, op, a);
      return AlgorithmSelector.choose(cfg.collective, l.bytes(), n, cfg.dtype, op, req, comm.options());
    } catch (IllegalArgumentException e) {
      return null;
    }
  }

  private void notes() {
    List<String> notes = new ArrayList<>();
    boolean multi = cfg.algorithms.size() > 1;
    if (cfg.collective != Collective.ALL_REDUCE && cfg.algorithms.contains(Algorithm.TREE)) {
      notes.add("tree is an allreduce algorithm; " + cfg.collectiveName() + " runs its direct (flat) algorithm"
          + (multi ? ", duplicate rows are skipped" : ""));
    }
    if (!cfg.collective.hasLowPrecision() && cfg.algorithms.contains(Algorithm.LP)) {
      notes.add(cfg.collectiveName() + " has no lp (FP8) form; it runs its direct (flat) algorithm"
          + (multi ? ", duplicate rows are skipped" : ""));
    } else if (cfg.algorithms.contains(Algorithm.LP) && !CallPlanner.lowPrecisionEligible(cfg.collective, cfg.dtype, op)) {
      notes.add("lp needs float32/bfloat16" + (cfg.reduces() ? " and sum/avg" : "") + " on " + cfg.collectiveName()
          + "; this configuration falls back to the exact path" + (multi ? ", duplicate rows are skipped" : ""));
    }
    if (n > HostInfo.cores()) {
      notes.add(n + " ranks on " + HostInfo.cores() + " cores: ranks time-share cores, expect pessimistic numbers");
    }
    for (String s : notes) out.println("# note: " + s);
    out.println("# collective: " + cfg.collectiveName() + ", out-of-place, " + n + " ranks" + layoutNote()
        + "; algo = the protocol that ran (from the communicator's stats), tcp = the naive baseline");
  }

  /** The root, or the per-rank counts of the first row, as the collective has them; "" otherwise. */
  private String layoutNote() {
    if (cfg.collective.isRooted()) {
      String unused = cfg.collective == Collective.SCATTER ? "input" : cfg.collective == Collective.BROADCAST ? null : "output";
      return ", root " + cfg.root + (unused != null ? " (the other ranks pass a null " + unused + ")" : "");
    }
    if (cfg.collective.hasPerRankCounts()) {
      BenchData.Layout l = BenchData.Layout.of(cfg.collective, cfg.minBytes, cfg.dtype, n, rank, cfg.root);
      return ", per-rank counts: rank r's share of the total proportional to r+1 (-h)"
          + (l != null ? ", " + Sizes.format(cfg.minBytes) + ": " + l.counts() : "");
    }
    return "";
  }

  private static final Protocol[] PROTOCOLS = Protocol.values();

  /** One row: fresh inputs, warm-up, timed calls, check. Returns the wrong count (all ranks). */
  private long row(ResultWriter w, BenchData.Layout l, Buffers b, Communicator comm, Protocol predicted, String label) {
    long seed = BenchData.mix((cfg.seed == null ? 0 : cfg.seed) + 0x5851F42D4C957F2DL * ++rowId);
    HostTensor in = b.in, res = b.res;
    BenchData.fill(in, seed, rank, op);
    BenchData.poison(res);
    Runnable call;
    if (comm == null) {
      call = () -> tcp.allReduce(in, res, op);
    } else if (b.din != null) {
      b.upload();
      call = call(comm, b.din, b.dres, l);
    } else {
      call = call(comm, in, res, l);
    }

    long[] warm = warmUp(call, cfg.warmup, cfg.warmupSeconds, Double.MAX_VALUE);
    double[] e = new double[1];
    int iters = cfg.iters;
    if (iters == 0) {
      // median call of the last warm-up round, the slowest rank's: every rank gets the same count
      java.util.Arrays.sort(warm);
      e[0] = warm[warm.length / 2] / 1e9;
      ctrl.allReduce(HostTensor.of(e), ReduceOp.MAX);
      double want = Math.ceil(cfg.targetSeconds / Math.max(e[0], 1e-9));
      iters = (int) Math.max(cfg.minIters, Math.min(cfg.maxIters, want));
    }

    ctrl.barrier();
    long[] before = comm == null ? null : snapshot(comm.stats());
    long[] each = new long[iters];  // per-call wall times: nanoTime costs ~25 ns, under 3% of the fastest call
    long t0 = System.nanoTime();
    long prev = t0;
    for (int i = 0; i < iters; i++) {
      call.run();
      long t = System.nanoTime();
      each[i] = t - prev;
      prev = t;
    }
    long elapsed = prev - t0;
    java.util.Arrays.sort(each);
    String algo = label != null ? label : ran(comm.stats(), before, iters, predicted);
    if (comm != null) b.download();

    boolean lp = "lp".equals(algo);
    BenchData.Check c = BenchData.check(cfg.collective, res, l, seed, rank, n, cfg.dtype, op, lp, cfg.root);
    if (c.wrong() > 0) {
      err.println("rank " + rank + ": " + cfg.collectiveName() + " size " + l.bytes() + " algo " + algo + ": "
          + c.wrong() + " wrong elements, first: " + c.firstWrong());
      err.flush();
    }
    double[] mine = {elapsed / 1e9 / iters, c.wrong(), c.maxRelErr(), percentile(each, 0.5) / 1e9, percentile(each, 0.99) / 1e9};
    int k = mine.length;
    double[] all = new double[k * n];
    ctrl.allGather(HostTensor.of(mine), HostTensor.of(all));
    double time = 0, maxRel = 0, median = 0, p99 = 0;
    long wrong = 0;
    for (int r = 0; r < n; r++) {
      time = Math.max(time, all[k * r]);
      wrong += (long) all[k * r + 1];
      maxRel = Math.max(maxRel, all[k * r + 2]);
      median = Math.max(median, all[k * r + 3]);
      p99 = Math.max(p99, all[k * r + 4]);
    }
    if (w != null) {
      double algbw = l.bytes() / time / 1e9;
      w.row(new ResultWriter.Row(l.bytes(), l.totalCount(), cfg.typeName(), cfg.opName(), algo, time * 1e6,
          algbw, algbw * BenchConfig.busFactor(cfg.collective, n), wrong, maxRel, iters, median * 1e6, p99 * 1e6));
    }
    return wrong;
  }

  /**
   * Warm-up in rounds of doubling call counts until at least {@code minCalls} calls and
   * {@code minSeconds} on the slowest rank, or {@code maxSeconds}; every rank makes the same calls
   * (the time spent is agreed after each round). Returns the per-call times of the last round.
   */
  private long[] warmUp(Runnable call, int minCalls, double minSeconds, double maxSeconds) {
    return warmUp(call, minCalls, minSeconds, maxSeconds, false);
  }

  /**
   * Runs {@code call} in growing batches until at least {@code minCalls} calls and {@code minSeconds}
   * have passed (and, with {@code compilerQuiet}, no rank's JIT compiled anything during the last
   * batch), or {@code maxSeconds}; the ranks agree on each batch's time and compilation through the
   * control communicator. Returns the last batch's call times.
   */
  private long[] warmUp(Runnable call, int minCalls, double minSeconds, double maxSeconds, boolean compilerQuiet) {
    CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
    boolean measurable = compilerQuiet && jit != null && jit.isCompilationTimeMonitoringSupported();
    long[] warm = new long[0];
    double[] e = new double[2];  // seconds of the batch, milliseconds the JIT compiled during it
    double spent = 0;
    long done = 0;
    for (int k = Math.max(1, Math.min(minCalls, 64)); ; k = Math.min(2 * k, 1 << 20)) {
      boolean quiet = !compilerQuiet || (done > 0 && e[1] == 0);  // agreed values only: every rank makes the same calls
      if (done > 0 && ((done >= minCalls && spent >= minSeconds && quiet) || spent >= maxSeconds)) break;
      warm = new long[k];
      long c0 = measurable ? jit.getTotalCompilationTime() : 0;
      long t0 = System.nanoTime();
      for (int i = 0; i < k; i++) {
        long s0 = System.nanoTime();
        call.run();
        warm[i] = System.nanoTime() - s0;
      }
      e[0] = (System.nanoTime() - t0) / 1e9;
      e[1] = measurable ? jit.getTotalCompilationTime() - c0 : 0;
      ctrl.allReduce(HostTensor.of(e), ReduceOp.MAX);
      spent += e[0];
      done += k;
      if (compilerQuiet && e[1] > 0) k = Math.max(32, k / 2);  // batches of about the same length until a quiet one
    }
    return warm;
  }

  /**
   * Before the first row: every communicator under test (and the TCP baseline) runs its smallest
   * call until the JIT has compiled the call path: at least {@link #JIT_CALLS} calls and 1 s, and
   * until a batch of calls passes in which no rank's JIT compiled anything, at most 10 s. Without it the first rows time the interpreter and the compiler threads, which take the
   * cores the ranks wait on (1 KB host allReduce, 2 ranks on 2 cores: median 300-560 us over the
   * first 1,000 calls, 2.9 us over 20,000).
   */
  private void jitWarmUp(BenchData.Layout l) {
    try (Buffers b = new Buffers(l)) {
      BenchData.fill(b.in, 1, rank, op);
      b.upload();
      for (Map.Entry<String, Communicator> c : comms.entrySet()) {
        if (c.getKey().equals("CONTROL")) continue;
        warmUp(b.din != null ? call(c.getValue(), b.din, b.dres, l) : call(c.getValue(), b.in, b.res, l), JIT_CALLS, 1.0, 10.0, true);
      }
      if (tcp != null) warmUp(() -> tcp.allReduce(b.in, b.res, op), JIT_CALLS, 1.0, 10.0, true);
    }
  }

  /** Calls before the JIT has compiled a host call path (C2's invocation threshold is about 10,000). */
  static final int JIT_CALLS = 20_000;

  /** The value at quantile {@code q} of sorted {@code v} (nearest rank). */
  static long percentile(long[] v, double q) {
    int i = (int) Math.ceil(q * v.length) - 1;
    return v[Math.max(0, Math.min(v.length - 1, i))];
  }

  /**
   * One call of the collective under test on this rank's tensors (host or device, the same API).
   * Rooted calls: a non-root passes null for the tensor it does not use (reduce and gather: the
   * output, scatter: the input), as the API allows; per-rank-count calls: the layout's counts.
   */
  private Runnable call(Communicator comm, Tensor in, Tensor res, BenchData.Layout l) {
    int root = cfg.root;
    boolean isRoot = rank == root;
    switch (cfg.collective) {
      case ALL_REDUCE: return () -> comm.allReduce(in, res, op);
      case ALL_GATHER: return () -> comm.allGather(in, res);
      case REDUCE_SCATTER: return () -> comm.reduceScatter(in, res, op);
      case ALL_TO_ALL: return () -> comm.allToAll(in, res);
      case BROADCAST: return () -> comm.broadcast(in, res, root);
      case REDUCE: {
        Tensor o = isRoot ? res : null;
        return () -> comm.reduce(in, o, op, root);
      }
      case GATHER: {
        Tensor o = isRoot ? res : null;
        return () -> comm.gather(in, o, root);
      }
      case SCATTER: {
        Tensor i = isRoot ? in : null;
        return () -> comm.scatter(i, res, root);
      }
      case ALL_GATHER_V: {
        long[] counts = l.counts().toArray();
        return () -> comm.allGatherV(in, res, counts);
      }
      case REDUCE_SCATTER_V: {
        long[] counts = l.counts().toArray();
        return () -> comm.reduceScatterV(in, res, counts, op);
      }
      case BATCH: {
        int right = (rank + 1) % comm.size(), left = (rank - 1 + comm.size()) % comm.size();
        return () -> comm.batch().send(in, right).recv(res, left).issue().waitFor();
      }
      default: throw new IllegalArgumentException(cfg.collectiveName());
    }
  }

  private static long[] snapshot(CommStats s) {
    long[] v = new long[PROTOCOLS.length];
    for (int i = 0; i < PROTOCOLS.length; i++) v[i] = s.calls(PROTOCOLS[i]);
    return v;
  }

  /** The algorithm the timed calls ran with, from the stats; the prediction if the stats are unclear. */
  private static String ran(CommStats s, long[] before, int iters, Protocol predicted) {
    Protocol best = null;
    for (int i = 0; i < PROTOCOLS.length; i++) {
      if (s.calls(PROTOCOLS[i]) - before[i] == iters) best = PROTOCOLS[i];
    }
    if (best == null) return predicted != null ? predicted.name().toLowerCase(Locale.ROOT) : "auto";
    return best.name().toLowerCase(Locale.ROOT);
  }
}
