package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HalfFloats;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Sizes;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.bytedeco.javacpp.Pointer;

/**
 * GPU allReduce benchmark from Java: one process per rank (rank r on GPU r % GPUs), DDA (flat,
 * tree, AUTO) and NCCL/RCCL (VENDOR, default settings; only with a GPU per rank) on the same
 * buffers, stream and run. GPU time per op is the CUDA/HIP event time over back-to-back
 * launches queued behind a device-side delay (so the host's launch rate is not what is timed: the
 * delay is sized from the measured launch time); the Java launch cost per call is reported
 * separately ({@code launch_us}). The slower rank's time is reported; up to 16 MB, the median of
 * three timed runs. The last result of every row is checked against a float64 reference
 * ({@code wrong}, {@code max_rel_err}). {@code bin/sparkcomms-bench --backend gpu --timing device}
 * runs it.
 *
 * <pre>java -cp ... io.sparkcomms.collectives.gpu.GpuBench [--ranks 2] [-b 1K] [-e 1G] [-f 2]
 *      [-d float32,bfloat16] [--staging BYTES] [--md FILE] [--csv FILE]</pre>
 */
public final class GpuBench {
  private static final Algorithm[] ALGOS = {Algorithm.FLAT, Algorithm.TREE, Algorithm.AUTO, Algorithm.VENDOR};

  public static void main(String[] args) throws Exception {
    if (args.length > 0 && args[0].equals("--rank-worker")) {
      worker(args);
      return;
    }
    System.exit(run(args));
  }

  /**
   * Runs the benchmark in {@code --ranks} child processes (rank 0's output goes to this process's
   * standard output) and returns the exit status: 0 all ranks finished, 1 one failed or timed out,
   * 2 no GPU library.
   */
  public static int run(String[] args) throws Exception {
    GpuLibrary.Status st = GpuLibrary.status();
    if (!st.available()) {
      System.err.println(st.reason());
      return 2;
    }
    int ranks = 2;
    List<String> pass = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--ranks")) ranks = Integer.parseInt(args[++i]);
      else pass.add(args[i]);
    }
    Path dir = FileRendezvous.createDirectory();
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<Process> ps = new ArrayList<>();
    int rc = 0;
    try {
      for (int r = 0; r < ranks; r++) {
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"), GpuBench.class.getName(),
            "--rank-worker", dir.toString(), "" + r, "" + ranks));
        cmd.addAll(pass);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.redirectOutput(r == 0 ? ProcessBuilder.Redirect.INHERIT : ProcessBuilder.Redirect.DISCARD);
        ps.add(pb.start());
      }
      for (Process p : ps) {
        if (!p.waitFor(1200, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          rc = 1;
        } else if (p.exitValue() != 0) rc = 1;
      }
    } finally {
      ps.forEach(Process::destroyForcibly);
      try (Stream<Path> s = Files.walk(dir)) {
        s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
    return rc;
  }

  /** Input element i of rank r: uniform in [-1, 1), a pure function so every rank knows every input. */
  static float value(int rank, long i, long seed) {
    long z = seed + rank * 0x9E3779B97F4A7C15L + i * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    z ^= z >>> 31;
    return (float) ((z >>> 11) * 0x1.0p-53 * 2 - 1);
  }

  private static void worker(String[] a) throws IOException {
    Path dir = Paths.get(a[1]);
    int rank = Integer.parseInt(a[2]), n = Integer.parseInt(a[3]);
    long minB = 1024, maxB = 1L << 30, factor = 2, staging = 0;  // 0: the GPU library's default
    String dtypes = "float32,bfloat16", md = null, csv = null;
    for (int i = 4; i < a.length; i++) {
      switch (a[i]) {
        case "-b": minB = Sizes.parseBytes(a[++i]); break;
        case "-e": maxB = Sizes.parseBytes(a[++i]); break;
        case "-f": factor = Long.parseLong(a[++i]); break;
        case "-d": dtypes = a[++i]; break;
        case "--staging": staging = Sizes.parseBytes(a[++i]); break;
        case "--md": md = a[++i]; break;
        case "--csv": csv = a[++i]; break;
        default: throw new IllegalArgumentException("unknown option " + a[i]);
      }
    }
    // Rank r on device r % devices. The vendor library needs a device of its own per rank, so it is
    // left out (no nccl rows) when ranks share devices.
    int devices = Math.max(1, GpuLibrary.deviceCount());
    int device = rank % devices;
    boolean shared = n > devices;
    CommOptions.Builder ob = CommOptions.builder().backend(CommOptions.Backend.GPU).timeout(Duration.ofSeconds(60)).vendor(!shared);
    if (staging > 0) ob.stagingBytes(staging);
    CommOptions o = ob.build();
    long seed = 42;
    List<String> rows = new ArrayList<>();
    try (GpuCommunicator g = GpuCommunicator.create(new FileRendezvous(dir, rank, n), o, device)) {
      if (rank == 0) {
        byte[] info = new byte[256];
        SparkCommsNative.sc_runtime_info(info, info.length);
        int[] v = new int[1];
        SparkCommsNative.sc_vendor_version(v);
        System.out.println("# sparkcomms GPU allReduce benchmark: " + n + " ranks, "
            + (shared ? "one process each on " + devices + " GPU(s), vendor library off" : "one process per GPU") + ", "
            + GpuLibrary.cString(info) + ", vendor library version " + v[0] + ", staging " + Sizes.format(g.option("staging_bytes")));
        System.out.println("# time_us: device-event time per op over back-to-back launches (slower rank; median of " + REPEATS + " runs up to "
            + Sizes.format(REPEAT_MAX_BYTES) + "); launch_us: Java host time per call");
        System.out.println("| size | count | type | redop | algo | time_us | algbw_GBps | busbw_GBps | wrong | max_rel_err | launch_us | vs_vendor |");
        System.out.println("|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
      }
      for (String dn : dtypes.split(",")) {
        DataType dt = DataType.valueOf(dn.trim().toUpperCase(Locale.ROOT));
        for (long bytes = minB; bytes <= maxB; bytes *= factor) {
          long count = bytes / dt.size();
          try (DeviceBuffer inBuf = DeviceBuffer.allocate(dt, count, device); DeviceBuffer outBuf = DeviceBuffer.allocate(dt, count, device)) {
            DeviceTensor in = inBuf.view(), out = outBuf.view();
            HostTensor h = HostTensor.allocate(dt, Math.toIntExact(count));
            fillInput(h, rank, seed);
            in.copyFrom(h);
            double vendorUs = Double.NaN;
            List<String[]> pending = new ArrayList<>();
            for (Algorithm algo : ALGOS) {
              if (algo == Algorithm.VENDOR && !g.vendorLoaded()) continue;
              if (algo == Algorithm.FLAT && bytes > (256L << 20)) continue; // one-shot traffic is O(n^2): pointless beyond
              double[] r = timeOne(g, in, out, algo, bytes);
              out.copyTo(h);
              double[] check = check(h, n, seed);
              if (algo == Algorithm.VENDOR) vendorUs = r[0];
              // the request and the protocol that ran (sc_plan's answer, recorded by allReduceOnStream)
              String ran = Protocol.values()[(int) r[2]].name().toLowerCase(Locale.ROOT);
              String name = algo == Algorithm.VENDOR ? "nccl" : algo.name().toLowerCase(Locale.ROOT) + "(" + ran + ")";
              double algbw = bytes / r[0] / 1e3;
              pending.add(new String[] {Sizes.format(bytes), "" + count, dt.name().toLowerCase(Locale.ROOT), "sum", name,
                  String.format(Locale.ROOT, "%.2f", r[0]), String.format(Locale.ROOT, "%.1f", algbw),
                  String.format(Locale.ROOT, "%.1f", algbw * 2.0 * (n - 1) / n), String.format(Locale.ROOT, "%.0f", check[0]),
                  String.format(Locale.ROOT, "%.2e", check[1]), String.format(Locale.ROOT, "%.2f", r[1]), "" + r[0]});
            }
            for (String[] p : pending) {
              double t = Double.parseDouble(p[11]);
              p[11] = Double.isNaN(vendorUs) ? "-" : String.format(Locale.ROOT, "%.2fx", vendorUs / t);
              String row = "| " + String.join(" | ", p) + " |";
              rows.add(String.join(",", p));
              if (rank == 0) System.out.println(row);
            }
          }
        }
      }
    }
    if (rank == 0 && csv != null) {
      List<String> lines = new ArrayList<>();
      lines.add("size,count,type,redop,algo,time_us,algbw_GBps,busbw_GBps,wrong,max_rel_err,launch_us,vs_vendor");
      lines.addAll(rows);
      Files.write(Paths.get(csv), lines);
    }
    System.exit(0);
  }

  private static void fillInput(HostTensor h, int rank, long seed) {
    for (long i = 0; i < h.count(); i++) h.setDouble(i, value(rank, i, seed));
  }

  /** Timed runs per row up to this size; the row reports their median (one host stall spoils one run, not the row). */
  private static final long REPEAT_MAX_BYTES = 16L << 20;
  private static final int REPEATS = 3;

  /**
   * Returns {device us per op (max over ranks; the median of {@link #REPEATS} runs up to
   * {@link #REPEAT_MAX_BYTES}), Java launch us per call (same run), algorithm code used}.
   */
  private static double[] timeOne(GpuCommunicator g, DeviceTensor in, DeviceTensor out, Algorithm algo, long bytes) {
    out.fillBytes(0xFF);
    Protocol used = Protocol.FLAT;
    for (int i = 0; i < 5; i++) used = g.allReduceOnStream(in, out, ReduceOp.SUM, algo);
    g.synchronize();
    // estimates: the host's launch time per call (queued, no wait) and the time per call with a wait
    long t0 = System.nanoTime();
    for (int i = 0; i < 5; i++) g.allReduceOnStream(in, out, ReduceOp.SUM, algo);
    double hostUs = (System.nanoTime() - t0) / 1e3 / 5;
    g.synchronize();
    double estUs = (System.nanoTime() - t0) / 1e3 / 5;
    // ~50 ms of GPU time (10..500 calls), and no more than the device-side delay can cover at
    // twice the slowest rank's launch time per call: every host must finish queueing before the
    // delay ends, else its device waits for launches and the host's speed is what gets timed. All
    // ranks agree (max over ranks) on the time per call first, then on the count, then cap it.
    double perCall = maxOverRanks(g, Math.max(5, 2 * hostUs));
    int iters = (int) maxOverRanks(g, Math.max(10, Math.min(500, 50_000 / Math.max(estUs, 1))));
    iters = (int) Math.max(10, Math.min(iters, (MAX_DELAY_US - 500) / perCall));
    double delayUs = Math.min(MAX_DELAY_US, iters * perCall + 500);
    int runs = bytes <= REPEAT_MAX_BYTES ? REPEATS : 1;
    double[][] r = new double[runs][];
    for (int k = 0; k < runs; k++) r[k] = timedRun(g, in, out, algo, iters, delayUs);
    Arrays.sort(r, Comparator.comparingDouble((double[] x) -> x[0]));
    double[] mid = r[runs / 2];
    return new double[] {mid[0], mid[1], used.ordinal()};
  }

  private static final double MAX_DELAY_US = 20_000;

  /** One timed run: {device us per op, max over ranks; this rank's Java launch us per call}. */
  private static double[] timedRun(GpuCommunicator g, DeviceTensor in, DeviceTensor out, Algorithm algo, int iters, double delayUs) {
    g.barrier();
    Pointer start = new Pointer((Pointer) null), end = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_event_create(start), "sc_event_create");
    Native.check(SparkCommsNative.sc_event_create(end), "sc_event_create");
    try {
      // A device-side barrier right before the delay: the delays then start together on every GPU.
      // After a host-side wait alone they would start as far apart as the ranks' threads resume,
      // and the earlier rank's first call would wait that long for its peer, inside the timed run.
      Work aligned = g.barrierAsync();
      g.delayStream(delayUs);
      Pointer s = new AddressPointer(g.streamAddress());
      Native.check(SparkCommsNative.sc_event_record(start, s), "sc_event_record");
      long h0 = System.nanoTime();
      for (int i = 0; i < iters; i++) g.allReduceOnStream(in, out, ReduceOp.SUM, algo);
      long h1 = System.nanoTime();
      Native.check(SparkCommsNative.sc_event_record(end, s), "sc_event_record");
      g.synchronize();
      aligned.waitFor();
      float[] ms = new float[1];
      Native.check(SparkCommsNative.sc_event_elapsed_ms(start, end, ms), "sc_event_elapsed_ms");
      return new double[] {maxOverRanks(g, ms[0] * 1000.0 / iters), (h1 - h0) / 1e3 / iters};
    } finally {
      SparkCommsNative.sc_event_destroy(start);
      SparkCommsNative.sc_event_destroy(end);
    }
  }

  private static double maxOverRanks(GpuCommunicator g, double v) {
    try (DeviceBuffer b = DeviceBuffer.allocate(DataType.FLOAT64, 1, g.device())) {
      DeviceTensor t = b.view();
      double[] x = {v};
      t.copyFrom(HostTensor.of(x));
      g.allReduce(t, ReduceOp.MAX);
      t.copyTo(HostTensor.of(x));
      return x[0];
    }
  }

  /** {wrong elements, max relative error} of the allReduce SUM result against a float64 reference. */
  private static double[] check(HostTensor out, int n, long seed) {
    DataType dt = out.dtype();
    double eps = dt == DataType.BFLOAT16 ? 0x1p-8 : dt == DataType.FLOAT16 ? 0x1p-11 : 0x1p-24;
    long wrong = 0;
    double maxRel = 0;
    for (long i = 0; i < out.count(); i++) {
      double ref = 0, mag = 0;
      for (int r = 0; r < n; r++) {
        double x = dt == DataType.BFLOAT16 ? HalfFloats.bf16ToFloat(HalfFloats.floatToBf16(value(r, i, seed)))
            : dt == DataType.FLOAT16 ? HalfFloats.fp16ToFloat(HalfFloats.floatToFp16(value(r, i, seed))) : value(r, i, seed);
        ref += x;
        mag += Math.abs(x);
      }
      double got = out.getDouble(i);
      double err = Math.abs(got - ref);
      // FP32 accumulation (n roundings) or, for the vendor library, accumulation in the dtype
      if (!(err <= (n + 1) * eps * mag + 1e-30)) wrong++;
      if (mag > 0) maxRel = Math.max(maxRel, err / mag);
    }
    return new double[] {wrong, maxRel};
  }
}
