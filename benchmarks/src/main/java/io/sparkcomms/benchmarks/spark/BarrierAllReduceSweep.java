package io.sparkcomms.benchmarks.spark;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.gpu.DeviceBuffer;
import io.sparkcomms.spark.BarrierComms;
import io.sparkcomms.spark.gpu.ExecutorGpu;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.SparkSession;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Barrier-stage allReduce sweep inside Spark: {@code bin/sparkcomms-bench --spark} runs it on this
 * machine, {@code dev/gpu-host/gpu-node-run DEST sweep} on a GPU host.
 *
 * <p>One barrier task per task slot ({@code --ranks}, default: every slot). Each task takes its
 * communicator from {@link BarrierComms#get()} (GPU backend on the executor's GPU when available,
 * else host), reports its executor, GPU ordinal, PCI bus id (nvidia-smi) and backend, then for every
 * size from {@code --min} to {@code --max} (doubling, float32 SUM, out of place, tensors on the GPU
 * when the backend is gpu) runs {@code --warmup} calls, then times {@code iters} synchronous
 * {@code allReduce} calls one by one, and checks the result. The driver prints, per size, the
 * median and mean time per collective (the maximum over ranks), algbw/busbw, and the time of one
 * Spark {@code BarrierTaskContext.barrier()} for reference.
 *
 * <pre>BarrierAllReduceSweep [--min 8K] [--max 256M] [--iters 0 (auto: clamp(1G/size, 5, 200))]
 *   [--warmup 3] [--ranks N] [--csv PATH]</pre>
 * The nccl-tests spellings {@code -b}, {@code -e}, {@code -n}, {@code -w} stand for
 * {@code --min}, {@code --max}, {@code --iters}, {@code --warmup}.
 */
public final class BarrierAllReduceSweep {
  private BarrierAllReduceSweep() {}

  public static void main(String[] args) throws Exception {
    Map<String, String> a;
    long min, max;
    int iters, warmup;
    try {
      a = parse(args);
      min = bytes(a, "min", "8K");
      max = bytes(a, "max", "256M");
      iters = count(a, "iters", "0", 0);
      warmup = count(a, "warmup", "3", 0);
      if (a.containsKey("ranks")) count(a, "ranks", "1", 1);
      if (min < 1 || max < min) throw new IllegalArgumentException("need 1 <= -b <= -e, got -b " + min + " -e " + max);
    } catch (IllegalArgumentException e) {
      System.err.println("sparkcomms-bench --spark: " + e.getMessage() + " (-h for the options)");
      System.exit(2);
      return;
    }
    SparkSession spark = SparkSession.builder().appName("sparkcomms-barrier-allreduce-sweep").getOrCreate();
    int ok = 1;
    try {
      JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
      int ranks = Integer.parseInt(a.getOrDefault("ranks", Integer.toString(jsc.defaultParallelism())));
      List<Integer> ids = new ArrayList<>();
      for (int i = 0; i < ranks; i++) ids.add(i);
      ClassTag<String> tag = ClassTag$.MODULE$.apply(String.class);
      long t0 = System.nanoTime();
      RDD<String> out = jsc.parallelize(ids, ranks).rdd().barrier()
          .mapPartitions(new Task(min, max, iters, warmup), false, tag);
      List<String> lines = new ArrayList<>(Arrays.asList((String[]) out.collect()));
      double stageS = (System.nanoTime() - t0) / 1e9;
      ok = report(lines, ranks, stageS, a.get("csv"));
    } finally {
      spark.stop();
    }
    System.exit(ok == 0 ? 0 : 1);
  }

  /** Prints the per-rank lines and the table; returns 0 when every check passed. */
  static int report(List<String> lines, int ranks, double stageS, String csv) throws Exception {
    // size -> per-rank rows "SIZE bytes iters median mean ok"
    TreeMap<Long, List<String[]>> bySize = new TreeMap<>();
    List<String> barrierUs = new ArrayList<>();
    for (String l : lines) {
      if (l.startsWith("RANK ")) System.out.println("SWEEP " + l);
      else if (l.startsWith("SIZE ")) {
        String[] f = l.split(" ");
        bySize.computeIfAbsent(Long.parseLong(f[1]), k -> new ArrayList<>()).add(f);
      } else if (l.startsWith("SPARKBARRIER ")) barrierUs.add(l.split(" ")[2]);
    }
    StringBuilder t = new StringBuilder();
    t.append("| size | bytes | ranks | iters | median_us | mean_us | algbw_GBps | busbw_GBps | backend | check |\n");
    t.append("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
    StringBuilder c = new StringBuilder("size_bytes,ranks,iters,median_us,mean_us,algbw_GBps,busbw_GBps,backend,check\n");
    int bad = 0;
    for (Map.Entry<Long, List<String[]>> e : bySize.entrySet()) {
      double med = 0, mean = 0; boolean good = e.getValue().size() == ranks; String iters = "?", backend = "?";
      for (String[] f : e.getValue()) {
        iters = f[2]; med = Math.max(med, Double.parseDouble(f[3])); mean = Math.max(mean, Double.parseDouble(f[4]));
        good &= f[5].equals("ok"); backend = f[6];
      }
      if (!good) bad++;
      long b = e.getKey();
      double algbw = b / (med * 1e-6) / 1e9, busbw = algbw * 2.0 * (ranks - 1) / ranks;
      t.append(String.format("| %s | %d | %d | %s | %.2f | %.2f | %.2f | %.2f | %s | %s |%n", human(b), b, ranks, iters, med, mean,
          algbw, busbw, backend, good ? "ok" : "WRONG"));
      c.append(String.format("%d,%d,%s,%.3f,%.3f,%.3f,%.3f,%s,%s%n", b, ranks, iters, med, mean, algbw, busbw, backend, good ? "ok" : "WRONG"));
    }
    System.out.println("SWEEP Spark BarrierTaskContext.barrier() us per rank: " + barrierUs);
    System.out.printf("SWEEP barrier stage wall time: %.2f s%n", stageS);
    System.out.println("SWEEP allReduce float32 SUM, time per collective = max over ranks:");
    System.out.print(t);
    if (csv != null) Files.writeString(Path.of(csv), c.toString(), StandardCharsets.UTF_8);
    if (bad > 0) System.out.println("SWEEP FAILED: " + bad + " size(s) with a wrong result or a missing rank");
    return bad;
  }

  /** The barrier task: one rank. */
  static final class Task extends AbstractFunction1<scala.collection.Iterator<Integer>, scala.collection.Iterator<String>>
      implements Serializable {
    private final long min, max; private final int iters, warmup;

    Task(long min, long max, int iters, int warmup) { this.min = min; this.max = max; this.iters = iters; this.warmup = warmup; }

    @Override public scala.collection.Iterator<String> apply(scala.collection.Iterator<Integer> ignored) {
      BarrierTaskContext ctx = BarrierTaskContext.get();
      List<String> out = new ArrayList<>();
      long s0 = System.nanoTime();
      Communicator comm = BarrierComms.get();
      double setupMs = (System.nanoTime() - s0) / 1e6;
      int rank = comm.rank(), n = comm.size();
      String backend = comm.backendName();
      int ordinal = ExecutorGpu.currentOrdinal();
      String execId = SparkEnv.get().executorId();
      out.add(String.format("RANK %d/%d executor=%s host=%s pid=%d gpu_ordinal=%d pci_bus_id=%s CUDA_VISIBLE_DEVICES=%s backend=%s setup_ms=%.1f",
          rank, n, execId, hostName(), ProcessHandle.current().pid(), ordinal, busId(ordinal),
          System.getenv("CUDA_VISIBLE_DEVICES"), backend, setupMs));
      // Spark's own barrier, for reference.
      // (Spark polls for the barrier's answer once a second, so this is ~1 s: 1 warm-up + 3 timed calls.)
      ctx.barrier();
      long b0 = System.nanoTime();
      for (int i = 0; i < 3; i++) ctx.barrier();
      out.add(String.format("SPARKBARRIER %d %.1f", rank, (System.nanoTime() - b0) / 1e3 / 3));
      boolean gpu = backend.equals("gpu");
      float expect = n * (n + 1) / 2f;
      for (long bytes = min; bytes <= max; bytes *= 2) {
        int count = (int) (bytes / 4);
        int it = iters > 0 ? iters : (int) Math.max(5, Math.min(200, (1L << 30) / bytes));
        float[] hin = new float[count];
        Arrays.fill(hin, rank + 1);
        Tensor in, res; DeviceBuffer din = null, dout = null;
        if (gpu) {
          din = DeviceBuffer.allocate(DataType.FLOAT32, count, ordinal < 0 ? 0 : ordinal);
          dout = DeviceBuffer.allocate(DataType.FLOAT32, count, ordinal < 0 ? 0 : ordinal);
          din.view().copyFrom(HostTensor.of(hin));
          in = din.view(); res = dout.view();
        } else {
          in = HostTensor.of(hin); res = HostTensor.of(new float[count]);
        }
        try {
          for (int i = 0; i < warmup; i++) comm.allReduce(in, res, ReduceOp.SUM);
          comm.barrier();
          double[] us = new double[it];
          for (int i = 0; i < it; i++) {
            long t = System.nanoTime();
            comm.allReduce(in, res, ReduceOp.SUM);
            us[i] = (System.nanoTime() - t) / 1e3;
          }
          double mean = Arrays.stream(us).average().orElse(0);
          Arrays.sort(us);
          float[] check;
          if (gpu) { check = new float[count]; dout.view().copyTo(HostTensor.of(check)); } else check = (float[]) ((HostTensor) res).array();
          boolean good = check[0] == expect && check[count - 1] == expect && check[count / 2] == expect;
          out.add(String.format("SIZE %d %d %.3f %.3f %s %s", bytes, it, us[it / 2], mean, good ? "ok" : "wrong", backend));
        } finally {
          if (din != null) din.close();
          if (dout != null) dout.close();
        }
      }
      return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }
  }

  static String hostName() {
    try { return java.net.InetAddress.getLocalHost().getHostName(); } catch (Exception e) { return "?"; }
  }

  /** The PCI bus id of physical GPU {@code ordinal} from nvidia-smi (SPARKCOMMS_NVIDIA_SMI overrides the path). */
  static String busId(int ordinal) {
    if (ordinal < 0) return "none";
    String smi = System.getenv().getOrDefault("SPARKCOMMS_NVIDIA_SMI", "nvidia-smi");
    try {
      Process p = new ProcessBuilder(smi, "--query-gpu=index,pci.bus_id", "--format=csv,noheader").redirectErrorStream(true).start();
      String o = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!p.waitFor(20, TimeUnit.SECONDS)) { p.destroyForcibly(); return "timeout"; }
      String vis = System.getenv("CUDA_VISIBLE_DEVICES");
      String phys = vis == null || vis.isBlank() ? Integer.toString(ordinal) : vis.split(",")[ordinal].trim();
      for (String l : o.split("\n")) {
        String[] f = l.split(",");
        if (f.length >= 2 && f[0].trim().equals(phys)) return f[1].trim();
      }
      return "unknown(" + o.trim().replace('\n', ';') + ")";
    } catch (Exception e) {
      return "n/a(" + e.getClass().getSimpleName() + ")";
    }
  }

  /** The options this sweep takes, and the nccl-tests spelling of some of them. */
  private static final List<String> KEYS = List.of("min", "max", "iters", "warmup", "ranks", "csv");
  private static final Map<String, String> ALIASES = Map.of("-b", "min", "-e", "max", "-n", "iters", "-w", "warmup",
      "--minbytes", "min", "--maxbytes", "max", "--warmup_iters", "warmup");

  static Map<String, String> parse(String[] args) {
    Map<String, String> m = new TreeMap<>();
    for (int i = 0; i < args.length; i++) {
      String key = ALIASES.getOrDefault(args[i], args[i].startsWith("--") ? args[i].substring(2) : null);
      if (key == null || !KEYS.contains(key)) throw new IllegalArgumentException("unknown option " + args[i]);
      if (i + 1 >= args.length) throw new IllegalArgumentException(args[i] + " needs a value");
      m.put(key, args[++i]);
    }
    return m;
  }

  /** Option {@code key} (or {@code def}) as a size with an optional K/M/G suffix. */
  static long bytes(Map<String, String> a, String key, String def) {
    String v = a.getOrDefault(key, def);
    try {
      return bytes(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--" + key + " needs a size such as 64K or 1M, got '" + v + "'");
    }
  }

  /** Option {@code key} (or {@code def}) as a whole number of at least {@code least}. */
  static int count(Map<String, String> a, String key, String def, int least) {
    String v = a.getOrDefault(key, def);
    int n;
    try {
      n = Integer.parseInt(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--" + key + " needs a whole number, got '" + v + "'");
    }
    if (n < least) throw new IllegalArgumentException("--" + key + " must be at least " + least + ", got " + n);
    return n;
  }

  static long bytes(String s) {
    s = s.trim().toUpperCase();
    long mul = s.endsWith("K") ? 1L << 10 : s.endsWith("M") ? 1L << 20 : s.endsWith("G") ? 1L << 30 : 1;
    return Long.parseLong(mul == 1 ? s : s.substring(0, s.length() - 1)) * mul;
  }

  static String human(long b) {
    return b >= 1 << 20 ? (b >> 20) + "M" : b >= 1 << 10 ? (b >> 10) + "K" : Long.toString(b);
  }
}
