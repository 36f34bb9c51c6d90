package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.spark.gpu.ExecutorGpu;
import java.io.Serializable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * One worker with four (fake) GPUs and four executors of one core and one GPU each
 * ({@code local-cluster[1,4,1024]}, 256 MiB per executor: the worker's 1024 MiB split four ways): each
 * executor JVM owns a distinct GPU address, and a 4-rank barrier allReduce across the four executor
 * processes (host backend) matches a float64 reference.
 */
class FourGpuLocalClusterTest {
  static final int RANKS = 4;
  static final int N = 300_000;          // 1.2 MB of float32: tree algorithm, in chunks of the 1 MiB staging
  @TempDir static Path dir;

  @BeforeAll static void setUp() {
    LocalClusters.setSystemProperties(dir);
  }

  /** What one rank reports: its GPU, its process, and its reduced arrays. */
  record RankResult(int rank, int size, String address, int ordinal, int boundDevice, long pid, String executorId,
      String backend, float[] sum, double[] small) implements Serializable {}

  /** Rank r's input: N floats, seeded by r (the driver regenerates them for the reference). */
  static float[] input(int rank) {
    Random r = new Random(1000 + rank);
    float[] x = new float[N];
    for (int i = 0; i < N; i++) x[i] = (float) (r.nextGaussian() * Math.pow(10, r.nextInt(5) - 2));
    return x;
  }

  @Test @Timeout(600) void fourExecutorsOwnDistinctGpusAndAllReduceAcrossTheirProcesses() throws Exception {
    Path discovery = dir.resolve("four-gpus.sh");
    Files.writeString(discovery, "#!/usr/bin/env bash\necho '{\"name\":\"gpu\",\"addresses\":[\"0\",\"1\",\"2\",\"3\"]}'\n");
    assertTrue(discovery.toFile().setExecutable(true));
    SparkConf conf = LocalClusters.conf("local-cluster[1,4,1024]", RANKS, "sparkcomms-four-gpus")
        .set("spark.executor.memory", "256m")    // spark.testing: no 450 MiB minimum
        .set("spark.worker.resource.gpu.amount", "4")
        .set("spark.worker.resource.gpu.discoveryScript", discovery.toString())
        .set("spark.executor.cores", "1")
        .set("spark.executor.resource.gpu.amount", "1")
        .set("spark.task.resource.gpu.amount", "1")
        .set("spark.sparkcomms.backend", "host");
    List<RankResult> out;
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      out = BarrierJobs.collect(sc.parallelize(List.of(0, 1, 2, 3), RANKS), RankResult.class, it -> {
        int p = it.next();
        String address = TaskContext.get().resources().get("gpu").get().addresses()[0];
        ExecutorGpu gpu = ExecutorGpu.current().orElseThrow();
        Communicator comm = BarrierComms.get();
        float[] x = input(p);
        comm.allReduce(HostTensor.of(x), ReduceOp.SUM);
        double[] small = {p, 1, Math.scalb(1.0, p)};           // flat algorithm, float64
        comm.allReduce(HostTensor.of(small), ReduceOp.SUM);
        return List.of(new RankResult(comm.rank(), comm.size(), address, gpu.ordinal(),
            ExecutorGpu.boundDevice().getAsInt(), ProcessHandle.current().pid(), SparkEnv.get().executorId(),
            comm.backendName(), x, small)).iterator();
      });
    }
    assertEquals(RANKS, out.size());

    Set<String> addresses = new HashSet<>();
    Set<Long> pids = new HashSet<>();
    Set<String> executors = new HashSet<>();
    for (int r = 0; r < RANKS; r++) {
      RankResult res = out.get(r);
      String who = "rank " + r + " (executor " + res.executorId() + ", GPU " + res.address() + ", pid " + res.pid() + ")";
      assertEquals(r, res.rank(), who);
      assertEquals(RANKS, res.size(), who);
      assertEquals("host", res.backend(), who);
      assertEquals(res.address(), Integer.toString(res.ordinal()), "ExecutorGpu matches the task's resource: " + who);
      assertEquals(res.ordinal(), res.boundDevice(), "the GPU is bound on the task thread: " + who);
      assertNotEquals(ProcessHandle.current().pid(), res.pid(), "tasks run in executor JVMs: " + who);
      addresses.add(res.address());
      pids.add(res.pid());
      executors.add(res.executorId());
      assertArrayEquals(new double[] {6, 4, 15}, res.small(), 0, "float64 allReduce: " + who);
    }
    assertEquals(Set.of("0", "1", "2", "3"), addresses, "each executor owns a distinct GPU");
    assertEquals(RANKS, pids.size(), "four executor processes: " + pids);
    assertEquals(RANKS, executors.size(), "four executors: " + executors);

    // float64 reference; float32 accumulation of four terms errs by at most ~4 ulps of the sum of magnitudes.
    float[][] in = new float[RANKS][];
    for (int r = 0; r < RANKS; r++) in[r] = input(r);
    float[] result0 = out.get(0).sum();
    double worst = 0;
    for (int i = 0; i < N; i++) {
      double ref = 0;
      double mag = 0;
      for (int r = 0; r < RANKS; r++) {
        ref += in[r][i];
        mag += Math.abs(in[r][i]);
      }
      double err = Math.abs(result0[i] - ref);
      double bound = 4 * Math.ulp((float) mag);
      if (err > bound) {
        throw new AssertionError("element " + i + ": allReduce " + result0[i] + " vs float64 reference " + ref
            + " (error " + err + " > bound " + bound + ")");
      }
      worst = Math.max(worst, err / Math.max(mag, Double.MIN_NORMAL));
    }
    for (int r = 1; r < RANKS; r++) {
      assertArrayEquals(result0, out.get(r).sum(), 0f, "rank " + r + " has rank 0's result bit for bit");
    }
    System.out.println("fourExecutors: max relative error vs float64 " + worst + ", executors " + executors
        + ", pids " + pids);
  }
}
