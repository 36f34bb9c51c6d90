package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.spark.gpu.ExecutorGpu;
import io.sparkcomms.spark.gpu.Fixtures;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
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
 * Real executor JVMs: {@code local-cluster} starts a master and workers in this JVM and every
 * executor as its own process, with the settings ANCHORS.md lists for running without a Spark
 * distribution (SPARK_TESTING and SPARK_SCALA_VERSION come from the surefire configuration).
 */
class LocalClusterTest {
  @TempDir static Path dir;
  static Fixtures fx;

  @BeforeAll static void setUp() {
    fx = Fixtures.copyTo(dir);
    LocalClusters.setSystemProperties(dir);
  }

  private static SparkConf cluster(String master, int cores, String app) {
    return LocalClusters.conf(master, cores, app);
  }

  @Test @Timeout(600) void allReduceAcrossTwoExecutorProcesses() {
    try (JavaSparkContext sc = new JavaSparkContext(cluster("local-cluster[2,1,1024]", 2, "sparkcomms-2-executors"))) {
      List<String> out = BarrierJobs.collect(sc.parallelize(List.of(0, 1), 2), String.class, it -> {
        int p = it.next();
        Communicator comm = BarrierComms.get();
        double[] v = new double[100_000];                        // 800 KB: tree algorithm
        Arrays.fill(v, p + 0.5);
        v[0] = p;
        comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
        return List.of(ProcessHandle.current().pid() + " " + SparkEnv.get().executorId() + " " + comm.rank() + "/"
            + comm.size() + " " + v[0] + " " + v[v.length - 1]).iterator();
      });
      assertEquals(2, out.size());
      Set<String> pids = new HashSet<>();
      for (int r = 0; r < 2; r++) {
        String[] f = out.get(r).split(" ");
        pids.add(f[0]);
        assertNotEquals(Long.toString(ProcessHandle.current().pid()), f[0], "tasks run in executor JVMs");
        assertEquals(r + "/2 1.0 2.0", f[2] + " " + f[3] + " " + f[4], out.get(r));
      }
      assertEquals(2, pids.size(), "two executor processes: " + out);
    }
  }

  /** The plugin RPC rendezvous between executor processes, over authenticated Spark RPC. */
  @Test @Timeout(600) void rpcRendezvousWithSparkAuthenticate() {
    SparkConf conf = cluster("local-cluster[3,1,1024]", 3, "sparkcomms-rpc-auth")
        .set("spark.authenticate", "true")
        .set("spark.authenticate.secret", "sparkcomms-test-secret");
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      for (int job = 0; job < 2; job++) {                        // two stages: the second meets a clean registry
        List<String> out = BarrierJobs.collect(sc.parallelize(List.of(0, 1, 2), 3), String.class, it -> {
          int p = it.next();
          long t0 = System.nanoTime();
          Communicator comm = BarrierComms.get();
          long ms = (System.nanoTime() - t0) / 1_000_000;
          double[] v = new double[100_000];
          Arrays.fill(v, p + 1);
          comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
          return List.of(comm.rank() + "/" + comm.size() + " " + v[0] + " " + v[v.length - 1] + " | "
              + BarrierComms.rendezvousOfCurrentTask().orElseThrow() + " | setup " + ms + " ms").iterator();
        });
        System.out.println("rpcRendezvousWithSparkAuthenticate: " + out);
        assertEquals(3, out.size());
        for (int r = 0; r < 3; r++) {
          assertTrue(out.get(r).startsWith(r + "/3 6.0 6.0 | "), out.get(r));
          assertTrue(out.get(r).contains("plugin RPC rendezvous"), out.get(r));
        }
      }
    }
  }

  @Test @Timeout(600) void eachExecutorOwnsADistinctGpu() throws Exception {
    Path discovery = dir.resolve("two-gpus.sh");
    Files.writeString(discovery, "#!/usr/bin/env bash\n"
        + "unset CUDA_VISIBLE_DEVICES HIP_VISIBLE_DEVICES ROCR_VISIBLE_DEVICES\n"
        + "export SPARKCOMMS_NVIDIA_SMI=" + fx.tool("nvidia-smi") + " SPARKCOMMS_AMD_SMI=/nonexistent"
        + " SPARKCOMMS_ROCM_SMI=/nonexistent SPARKCOMMS_SYSFS_ROOT=/nonexistent\n"
        + "exec bash " + fx.discoveryScript() + " gpu\n");
    discovery.toFile().setExecutable(true);
    Path tasksetLog = dir.resolve("taskset.log");
    SparkConf conf = cluster("local-cluster[1,2,1024]", 2, "sparkcomms-gpus")
        .set("spark.worker.resource.gpu.amount", "2")
        .set("spark.worker.resource.gpu.discoveryScript", discovery.toString())
        .set("spark.executor.cores", "1")
        .set("spark.executor.resource.gpu.amount", "1")
        .set("spark.task.resource.gpu.amount", "1")
        .set("spark.sparkcomms.numaAffinity", "true")
        .set("spark.executorEnv.SPARKCOMMS_NVIDIA_SMI", fx.tool("nvidia-smi").toString())
        .set("spark.executorEnv.SPARKCOMMS_AMD_SMI", "/nonexistent")
        .set("spark.executorEnv.SPARKCOMMS_ROCM_SMI", "/nonexistent")
        .set("spark.executorEnv.SPARKCOMMS_SYSFS_ROOT", fx.sysfs("sysfs-nvidia").toString())
        .set("spark.executorEnv.SPARKCOMMS_TASKSET", fx.tool("taskset").toString())
        .set("spark.executorEnv.FAKE_TASKSET_LOG", tasksetLog.toString());
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      List<String> out = BarrierJobs.collect(sc.parallelize(List.of(0, 1), 2), String.class, it -> {
        String address = TaskContext.get().resources().get("gpu").get().addresses()[0];
        ExecutorGpu gpu = ExecutorGpu.current().orElseThrow();
        double[] ordinal = {gpu.ordinal()};
        BarrierComms.get().allReduce(HostTensor.of(ordinal), ReduceOp.SUM);
        return List.of(address + " " + gpu.ordinal() + " " + ExecutorGpu.boundDevice().getAsInt() + " "
            + ordinal[0] + " " + ProcessHandle.current().pid()).iterator();
      });
      Set<String> addresses = new HashSet<>();
      String pidOfGpu0 = null;
      for (String line : out) {
        String[] f = line.split(" ");
        addresses.add(f[0]);
        assertEquals(f[0], f[1], "ExecutorGpu matches the task's resource: " + line);
        assertEquals(f[0], f[2], "onTaskStart bound the GPU on the task thread: " + line);
        assertEquals("1.0", f[3], "allReduce of the ordinals: " + line);
        if (f[0].equals("0")) pidOfGpu0 = f[4];
      }
      assertEquals(Set.of("0", "1"), addresses, out.toString());
      // GPU 0 is on NUMA node 0 (CPUs 0-15) in the fixture; GPU 1 has no NUMA node, so only one bind.
      assertEquals("-a -p -c 0-15 " + pidOfGpu0, Files.readString(tasksetLog).trim());
    }
  }
}
